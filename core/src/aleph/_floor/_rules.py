"""The built-in command-policy rules: hardline rules, cannot-prove-safe guards and the default tunable rules.

Each rule is a predicate over one analysed :class:`~aleph._floor._analysis.Command`; the knowledge of
what a program does with its arguments (what ``rm -r`` deletes, where ``dd of=`` or ``sort -o``
writes, which ``git -c`` keys run programs) lives here. :mod:`aleph._floor._policy` combines them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from aleph._floor._analysis import SHELLS, Arg, Command, resolve
from aleph._floor._wrappers import KNOWN_PROGRAMS, UNWRAPPED, argument_programs, is_interpreter

__all__ = ["DEFAULT_RULES", "GUARDS", "HARDLINE", "Builtin", "Env", "Tier"]

Tier = Literal["hardline", "guard", "tunable"]


@dataclass(frozen=True, slots=True)
class Builtin:
    """One built-in rule: a predicate over an analysed command, its tier and its action."""

    name: str
    tier: Tier
    action: Literal["block", "warn", "ask"]
    description: str
    check: Callable[[Command, Env], bool]
    programs: frozenset[str] | None = None  # None: look at every command


@dataclass(frozen=True, slots=True)
class Env:
    """What rules need besides the command: the home directory and the protected paths (absolute)."""

    home: str
    protected: tuple[str, ...]
    protected_names: tuple[str, ...] = ()  # their basenames: a cheap first test before resolving paths


_MKFS = re.compile(r"mkfs(\..+)?|mke2fs|mkswap|mkntfs|mkdosfs|mkexfatfs")
_BLOCK_DEVICE = re.compile(
    r"/dev/(sd|nvme|disk|hd|xvd|vd|mmcblk|loop|sr|pmem|dm-|md|mapper/|nbd|rbd|zd|zram|root|block/)"
)
_SYSTEM_DIRS = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/root",
    "/sbin",
    "/snap",
    "/srv",
    "/sys",
    "/usr",
    "/var",
    "/mnt",
    "/media",
)
_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
_RC_FILES = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".gitconfig",
    ".config/git/config",
    ".config/fish/config.fish",
    ".inputrc",
)
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "lwp-request", "GET", "xh", "wget2"})
_INTERPRETERS = re.compile(r"(?:python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|node|nodejs|php[0-9.]*|lua[0-9.]*)")
_LOADER_VARS = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PS4",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_EXTERNAL_DIFF",
        "GIT_EXEC_PATH",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "GIT_PROXY_COMMAND",
        "GIT_PAGER",
        "PAGER",
        "MANPAGER",
        "SYSTEMD_PAGER",
        "LESSOPEN",
        "LESSCLOSE",
        "PYTHONSTARTUP",
        "PYTHONINSPECT",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "RUBYOPT",
        "NODE_OPTIONS",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "BROWSER",
        "TAR_OPTIONS",
        "GIT_TEMPLATE_DIR",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
    }
)
_LOADER_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG", "BASH_FUNC_")
_EDITOR_VARS = frozenset({"EDITOR", "VISUAL", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "SUDO_EDITOR"})
_EDITOR_LAUNCHERS = frozenset(
    {
        "git",
        "crontab",
        "visudo",
        "sudoedit",
        "vipw",
        "vigr",
        "less",
        "more",
        "man",
        "fc",
        "hg",
        "svn",
        "mutt",
        "kubectl",
    }
    | {"systemctl", "sudo", "edquota", "virsh", "gh", "jj", "tig"}
)
_STATE_VARS = frozenset({"PATH", "IFS", "SHELLOPTS", "BASHOPTS", "CDPATH", "FPATH", "BASH_LOADABLES_PATH"})
_SAFE_SET = frozenset("euxvCfnabhmBHP")
_SAFE_SET_O = frozenset({"errexit", "nounset", "pipefail", "xtrace", "verbose", "noclobber", "noglob", "noexec"})
_SAFE_SHOPT = frozenset(
    {
        "nullglob",
        "failglob",
        "globstar",
        "extglob",
        "dotglob",
        "nocaseglob",
        "nocasematch",
        "lastpipe",
        "inherit_errexit",
    }
)
_GIT_EXEC_KEYS = re.compile(
    r"(core\.(fsmonitor|sshcommand|pager|editor|hookspath|gitproxy|askpass|alternaterefscommand|worktree)"
    r"|alias\.|diff\..*\.(textconv|command)|diff\.external|filter\.|merge\..*\.driver|credential\.|"
    r"sequence\.editor|uploadpack\.packobjectshook|protocol\..*allow|gpg\..*program|gpg\.program|"
    r"include\.path|includeif\.|pager\.|remote\..*\.(uploadpack|receivepack|vcs)|http\..*proxy|"
    r"receive\.procreceiverefs|sendemail\..*(cmd|smtpserver)|url\..*\.insteadof|mergetool\.|difftool\.)",
    re.IGNORECASE,
)


def _paths(args: Sequence[Arg]) -> list[Arg]:
    """Operands: the arguments that do not look like options."""
    out = []
    dashdash = False
    for a in args:
        if a.text == "--" and not dashdash:
            dashdash = True
            continue
        if not dashdash and a.text.startswith("-") and len(a.text) > 1:
            continue
        out.append(a)
    return out


def _flags(args: Sequence[Arg]) -> set[str]:
    """Every option spelling: ``-rf`` gives ``-r`` and ``-f``; long options stay whole (without ``=value``)."""
    out: set[str] = set()
    for a in args:
        t = a.text
        if t == "--":
            break
        if t.startswith("--"):
            out.add(t.split("=", 1)[0])
        elif t.startswith("-") and len(t) > 1:
            out.update(f"-{c}" for c in t[1:])
    return out


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _is_block_device(a: Arg, cmd: Command) -> bool:
    path = resolve(a.text, cmd.cwd) if a.literal else None
    return bool(_BLOCK_DEVICE.match(path or a.text))


_VARIABLE_DEFAULT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=]([^}$`]*)\}")
_VARIABLE_REQUIRED = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?\?[^}]*\}")  # ${x:?} is never empty
_VARIABLE = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$[@*#?$!0-9-]")
_BRACKET = re.compile(r"\[!?\]?[^\]]*\]")


def _covers(a: Arg, cmd: Command) -> list[str]:
    """The paths an operand can name as a whole, judged as the widest it can be (never by its literal text).

    A literal word is its path. A glob covers the directory it lists when its first wildcard
    component can match any name (``*``, ``.*``, ``[a-z]*``; any wildcard directly under ``/``):
    ``/[a-z]*`` and ``~/*`` cover ``/`` and the home directory. A word with variables is judged with
    each variable empty or at its default (``"$d"/*`` may be ``/*``, ``${x:-/}`` may be ``/``);
    command substitution cannot be known (the dynamic-target guard asks).
    """
    text = a.text
    glob = a.glob
    if not a.literal:
        if "$(" in text or "`" in text or "<(" in text:
            return []
        if cmd.cwd is not None:
            text = re.sub(r"\$\{PWD\}|\$PWD(?![A-Za-z0-9_])", lambda _: cmd.cwd or "", text)
        text = _VARIABLE_REQUIRED.sub("<set>", text)
        text = _VARIABLE.sub("", _VARIABLE_DEFAULT.sub(lambda m: m.group(1), text))
        if not text:
            return []
        glob = glob or any(c in text for c in "*?[")
    path = resolve(text, cmd.cwd)
    if path is None:
        return []
    if not glob:
        return [path]
    parts = path.split("/")
    for i, part in enumerate(parts):
        if any(c in part for c in "*?["):
            base = "/".join(parts[:i]) or "/"
            rest = _BRACKET.sub("", part).replace("*", "").replace("?", "")
            if base == "/" or (not rest.strip(".") and all(p in ("*", "") for p in parts[i + 1 :])):
                return [base]
            return []
    return [path]


def _root_or_home(a: Arg, cmd: Command, env: Env) -> bool:
    wide = ("/", "/home", env.home, "/root" if env.home == "/root" else "/home")
    return any(path in wide for path in _covers(a, cmd)) or any(
        path in wide for variant in _with_values(a, cmd) for path in _covers(variant, cmd)
    )


_NAMED_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _with_values(a: Arg, cmd: Command) -> list[Arg]:
    """The operand with each variable replaced by a literal value the text gives it (``x=/; rm -rf $x``)."""
    if a.literal or not cmd.values or "$" not in a.text:
        return []
    names = [m.group(1) or m.group(2) for m in _NAMED_VARIABLE.finditer(a.text)]
    if not any(n in cmd.values for n in names):
        return []
    variants = [a.text]
    for name in dict.fromkeys(names):
        values = sorted(cmd.values.get(name, ()))
        if not values:
            continue
        pattern = re.compile(r"\$\{" + name + r"\}|\$" + name + r"(?![A-Za-z0-9_])")
        variants = [pattern.sub(v.replace("\\", "\\\\"), t) for t in variants for v in values][:64]
    return [Arg(t, "$" not in t and "`" not in t, a.glob or any(c in t for c in "*?[")) for t in variants]


def _recursive_rm(cmd: Command) -> bool:
    flags = _flags(cmd.args)
    return bool(flags & {"-r", "-R", "--recursive"}) or any(not a.literal for a in cmd.args if a.text.startswith("-"))


def _rm_targets(cmd: Command) -> list[Arg]:
    if cmd.program == "rm" and _recursive_rm(cmd):
        return _paths(cmd.args)
    if cmd.program == "mv":  # moving a tree away deletes it from where it was
        target = _option_value(cmd.args, ("-t", "--target-directory"))
        operands = _paths(cmd.args)
        return [a for a in operands if a is not target] if target is not None else operands[:-1]
    if cmd.program == "find" and _find_deletes(cmd):
        return _find_roots(cmd)
    if cmd.program == "cmake":
        texts = [a.text for a in cmd.args]
        if "-E" in texts:
            at = texts.index("-E")
            if texts[at + 1 : at + 2] and texts[at + 1] in ("rm", "remove", "remove_directory", "rmdir"):
                return [a for a in cmd.args[at + 2 :] if not a.text.startswith("-")]
        return []
    if cmd.program in ("tar", "bsdtar", "gtar") and any(a.text == "--remove-files" for a in cmd.args):
        return _tar_members(cmd)
    if cmd.program == "rsync":
        texts = [a.text for a in cmd.args]
        operands = [a for a in _paths(cmd.args) if not a.text.startswith(("-", "+"))]
        out: list[Arg] = []
        if any(t.startswith(("--del", "--remove-source-files")) for t in texts) and operands:
            out.append(operands[-1])  # --delete makes the destination a copy of the source: judged as a delete
        if "--remove-source-files" in texts:
            out.extend(operands[:-1])
        return out
    return []


def _tar_members(cmd: Command) -> list[Arg]:
    """The files ``tar`` archives (and with ``--remove-files`` deletes): its operands, not option values."""
    out: list[Arg] = []
    args = list(cmd.args)
    i = 0
    valued_long = ("--file", "--directory", "--files-from", "--exclude-from", "--exclude", "--transform")
    while i < len(args):
        t = args[i].text
        if t == "--":
            out.extend(args[i + 1 :])
            break
        if t.startswith("--"):
            i += 2 if t in valued_long else 1
            continue
        if t.startswith("-") and len(t) > 1:
            takes = sum(1 for c in t[1:] if c in "fCTXbHIKLNVg")
            i += 1 + takes
            continue
        if i == 0 and not t.startswith("-") and re.fullmatch(r"[A-Za-z]+", t):
            takes = sum(1 for c in t if c in "fCTXb")  # old-style `tar cf x ...`
            i += 1 + takes
            continue
        out.append(args[i])
        i += 1
    if any(a.text.startswith(("-T", "--files-from")) for a in args):
        out.append(Arg("<files-from>", literal=False))
    return out


def _find_deletes(cmd: Command) -> bool:
    """``-delete``, or ``-exec rm``: find deletes what it finds (judged by its start points)."""
    texts = [a.text for a in cmd.args]
    for i, t in enumerate(texts):
        if t == "-delete":
            return True
        if t in ("-exec", "-execdir", "-ok", "-okdir") and i + 1 < len(texts):
            inner = texts[i + 1].rsplit("/", 1)[-1]
            if inner in ("rm", "shred", "unlink") or (inner in ("busybox", "sudo") and "rm" in texts[i + 2 : i + 3]):
                return True
    return False


_FIND_VALUED = frozenset(
    {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-type", "-xtype"}
    | {"-size", "-perm", "-user", "-group", "-uid", "-gid", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin"}
    | {"-newer", "-anewer", "-cnewer", "-maxdepth", "-mindepth", "-links", "-inum", "-samefile", "-fstype", "-lname"}
    | {"-ilname", "-printf", "-fprint", "-fprint0", "-fprintf", "-fls", "-used", "-context", "-regextype", "-D"}
    | {"-O", "-files0-from", "-newerXY"}
)


def _find_roots(cmd: Command) -> list[Arg]:
    """Where find starts: every bare operand that is not an option's value, and an unknown list for ``-files0-from``.

    GNU find also takes start points after ``-H/-L/-P/-D/-O`` and next to ``-files0-from``.
    """
    roots: list[Arg] = []
    args = list(cmd.args)
    skip = False
    in_exec = False
    for i, a in enumerate(args):
        t = a.text
        if skip:
            skip = False
            continue
        if in_exec:
            in_exec = t not in (";", "+")
            continue
        if t in ("-exec", "-execdir", "-ok", "-okdir"):
            in_exec = True
            continue
        if t in _FIND_VALUED:
            skip = True
            continue
        if t.startswith("-") or t in ("(", "!", ")", ",") or (i > 0 and args[i - 1].text in ("-o", "-a")):
            continue
        roots.append(a)
    if any(a.text == "-files0-from" for a in args):
        roots.append(Arg("<files0-from>", literal=False))
    return roots or [Arg(".")]


def _rm_rf_root(cmd: Command, env: Env) -> bool:
    return any(_root_or_home(a, cmd, env) for a in _rm_targets(cmd))


def _recursive_mode_root(cmd: Command, env: Env) -> bool:
    """``chmod -R``/``chown -R``/``chgrp -R``/``setfacl -R`` of /, home or /home (and what can be one of them)."""
    if not _flags(cmd.args) & {"-R", "--recursive"}:
        return False
    operands = _paths(cmd.args)[1:] if cmd.program != "setfacl" else _paths(cmd.args)
    return any(_root_or_home(a, cmd, env) for a in operands)


def _rm_no_preserve_root(cmd: Command, env: Env) -> bool:
    return any(a.text == "--no-preserve-root" for a in cmd.args)


def _system_path(a: Arg, cmd: Command) -> bool:
    if not a.literal or not a.text.startswith("/"):
        return False
    path = resolve(a.text, None) or ""
    if any(_under(path, s) for s in _SCRATCH) or (cmd.cwd and cmd.cwd != "/" and _under(path, cmd.cwd)):
        return False
    return any(_under(path, d) for d in _SYSTEM_DIRS)


def _rm_rf_system_path(cmd: Command, env: Env) -> bool:
    return any(_system_path(a, cmd) for a in _rm_targets(cmd))


def _dd_to_block_device(cmd: Command, env: Env) -> bool:
    return any(a.text.startswith("of=") and _is_block_device(Arg(a.text[3:], a.literal), cmd) for a in cmd.args)


def _mkfs_device(cmd: Command, env: Env) -> bool:
    if not _MKFS.fullmatch(cmd.program):
        return False
    return any(a.text.startswith("/dev/") or _is_block_device(a, cmd) for a in _paths(cmd.args))


_WIPE_TOOLS = frozenset({"wipefs", "blkdiscard", "shred", "sgdisk", "sfdisk", "badblocks", "fdisk", "gdisk", "cfdisk"})
_WIPE_TOOLS_SUB = {
    "hdparm": ("--security-erase", "--security-erase-enhanced", "--trim-sector-ranges", "--sanitize"),
    "nvme": ("format", "sanitize"),
    "cryptsetup": ("luksFormat", "erase", "luksErase", "format", "reencrypt"),
    "parted": ("mklabel", "mkpart", "rm", "resizepart", "mkpartfs"),
}


def _device_wipe(cmd: Command, env: Env) -> bool:
    if not any(_is_block_device(a, cmd) or _BLOCK_DEVICE.search(a.text) for a in cmd.args):
        return False
    texts = {a.text.split("=", 1)[0] for a in cmd.args}
    if cmd.program in _WIPE_TOOLS_SUB:
        return bool(texts & set(_WIPE_TOOLS_SUB[cmd.program]))
    if cmd.program in ("fdisk", "gdisk", "cfdisk", "sfdisk") and texts & {"-l", "--list", "-d", "--dump"}:
        return False
    if cmd.program == "badblocks":
        return bool(_flags(cmd.args) & {"-w", "-n"})
    return True


_SED_WRITE = re.compile(
    r"s(.)(?:\\.|(?!\1).)*\1(?:\\.|(?!\1).)*\1[gpiImMe0-9]*[wW]\s*([^;\n}]+)"
    r"|(?:^|[;\n{}])\s*(?:\d+|\$|/(?:\\.|[^/\n])*/)?(?:\s*,\s*(?:\d+|\$|/(?:\\.|[^/\n])*/))?\s*!?\s*[wW]\s*([^;\n}]+)"
)
_GIT_OUTPUT = frozenset({"archive", "format-patch", "bundle", "diff", "log", "show"})
_AWK_WRITE = re.compile(r"print[f]?\b[^;}>|\n]{0,256}>>?\s*\"([^\"]+)\"")
_WRITERS = frozenset(
    {
        "git",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "perl",
        "ruby",
        "tee",
        "cp",
        "mv",
        "install",
        "rsync",
        "scp",
        "ln",
        "link",
        "truncate",
        "chmod",
        "chown",
        "chgrp",
        "chattr",
    }
    | {"setfacl", "rm", "rmdir", "unlink", "shred", "dd", "sort", "curl", "wget", "sed", "find"}
)


def _write_targets(cmd: Command) -> list[Arg]:
    """Files this command writes or changes: redirections and the file operands of writing programs."""
    if not cmd.redirects and cmd.program not in _WRITERS:
        return []
    cached = cmd.memo.get("writes")
    if cached is None:
        cached = cmd.memo["writes"] = _compute_write_targets(cmd)
    return cached  # type: ignore[return-value]


def _compute_write_targets(cmd: Command) -> list[Arg]:
    out = [t for op, _, t in cmd.redirects if t is not None and op in (">", ">>", ">|", "&>", "&>>", "<>", ">&")]
    p = cmd.program
    args = cmd.args
    if p == "tee":
        out.extend(_paths(args))
    elif p == "mv":
        out.extend(_paths(args))  # the sources go away too
        out.extend(_landing(args))
    elif p in ("cp", "install", "rsync", "scp"):
        target = _option_value(args, ("-t", "--target-directory"))
        paths = [a for a in _paths(args) if ":" not in a.text or p not in ("rsync", "scp")]
        if target is not None:
            out.append(target)
        elif len(_paths(args)) >= 2 and paths and paths[-1] is _paths(args)[-1]:
            out.append(paths[-1])
        out.extend(_landing(args))
    elif p in ("ln", "link"):
        out.extend(_paths(args))
        out.extend(_landing(args))
    elif p in ("truncate", "chmod", "chown", "chgrp", "chattr", "setfacl", "rm", "rmdir", "unlink"):
        out.extend(_paths(args))
    elif p == "shred":
        out.extend(_paths(args))
    elif p == "dd":
        out.extend(Arg(a.text[3:], a.literal) for a in args if a.text.startswith("of="))
    elif p == "sort":
        value = _option_value(args, ("-o", "--output"))
        if value is not None:
            out.append(value)
    elif p in ("curl", "wget"):
        value = _option_value(args, ("-o", "--output") if p == "curl" else ("-O", "--output-document"))
        if value is not None and value.text != "-":
            out.append(value)
    elif p == "sed":
        if any(a.text.startswith("-i") or a.text.startswith("--in-place") for a in args):
            paths = _paths([a for a in args if not a.text.startswith("-i")])
            explicit_script = any(a.text in ("-e", "-f", "--expression", "--file") for a in args)
            out.extend(paths if explicit_script else paths[1:])
        scripts = [a for i, a in enumerate(args) if i > 0 and args[i - 1].text in ("-e", "--expression")]
        for script in scripts or [a for a in args if not a.text.startswith("-")][:1]:
            for m in _SED_WRITE.finditer(script.text):
                out.append(Arg((m.group(2) or m.group(3) or "").strip(), script.literal))
    elif p == "git":
        texts = [a.text for a in args]
        at, sub = _git_subcommand(texts)
        names = ("-f", "--file") if sub == "config" else ("-o", "--output") if sub in _GIT_OUTPUT else ("--output",)
        value = _option_value(args[at + 1 :], names)
        if value is not None:
            out.append(value)
    elif p in ("awk", "gawk", "mawk", "nawk"):
        program = next((a for a in args if not a.text.startswith("-")), None)
        if program is not None:
            out.extend(Arg(m.group(1), program.literal) for m in _AWK_WRITE.finditer(program.text))
    elif p in ("perl", "ruby") or re.fullmatch(r"perl[0-9.]*", p):
        if any(re.fullmatch(r"-[a-zA-Z]*i\S*", a.text) for a in args):
            skip = {i + 1 for i, a in enumerate(args) if a.text in ("-e", "-E")}
            out.extend(a for i, a in enumerate(args) if i not in skip and not a.text.startswith("-"))
    elif p == "find":
        for flag in ("-fprint", "-fprint0", "-fprintf", "-fls"):
            value = _option_value(args, (flag,))
            if value is not None:
                out.append(value)
        if any(a.text == "-delete" for a in args):
            out.extend(_find_roots(cmd))
    return out


def _landing(args: Sequence[Arg]) -> list[Arg]:
    """Where each source lands when the destination is a directory: ``cp .bashrc ~`` writes ``~/.bashrc``."""
    target = _option_value(args, ("-t", "--target-directory"))
    operands = [a for a in _paths(args) if a is not target and ":" not in a.text]
    if target is None:
        if len(operands) < 2:
            return []
        target, operands = operands[-1], operands[:-1]
    if not target.literal:
        return []
    out = []
    for source in operands[:64]:
        name = source.text.rstrip("/").rsplit("/", 1)[-1]
        if name and name not in (".", "..") and source.literal and not source.glob:
            out.append(Arg(f"{target.text.rstrip('/')}/{name}"))
    return out


def _option_value(args: Sequence[Arg], names: tuple[str, ...]) -> Arg | None:
    for i, a in enumerate(args):
        t = a.text
        for name in names:
            if t == name and i + 1 < len(args):
                return args[i + 1]
            if name.startswith("--") and t.startswith(name + "="):
                return Arg(t[len(name) + 1 :], a.literal)
            if not name.startswith("--") and len(name) == 2 and t.startswith(name) and len(t) > 2:
                return Arg(t[2:], a.literal)
    return None


def _protected(path: str, env: Env) -> bool:
    if any(_under(path, p) for p in env.protected):
        return True
    if "/.git/hooks/" in path + "/" or path.endswith("/.git/config"):
        return True
    if _under(path, f"{env.home}/.ssh"):
        return True
    return any(path == f"{env.home}/{rc}" for rc in _RC_FILES)


def _glob_hits_protected(pattern: str, env: Env) -> bool:
    """A glob target (``> ~/.bash*``, ``cp x ~/.ss?/``) that can name a protected file is judged as that file."""
    candidates = [*env.protected, *(f"{env.home}/{rc}" for rc in _RC_FILES), f"{env.home}/.ssh"]
    prefix = pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
    return any(c.startswith(prefix) and fnmatch.fnmatchcase(c, pattern) for c in candidates) or (
        "/.git/" in pattern and fnmatch.fnmatchcase(pattern.replace("*", "config"), pattern)
    )


def _relative_protected(text: str) -> bool:
    norm = "/" + os.path.normpath(text).lstrip("/")
    return "/.git/hooks/" in norm + "/" or norm.endswith("/.git/config")


def _write_protected(cmd: Command, env: Env) -> bool:
    for target in _write_targets(cmd):
        if not target.literal:
            continue
        path = resolve(target.text, cmd.cwd)
        if target.glob and path is not None and "find" not in cmd.via and _glob_hits_protected(path, env):
            return True
        if path is not None and _protected(path, env):
            return True
        if path is None and _relative_protected(target.text):
            return True
    # Deleting (or moving away) a tree deletes every protected file inside it: `rm -rf .` covers aleph.toml.
    for target in _rm_targets(cmd) if cmd.program in ("rm", "mv", "cmake") else ():
        path = resolve(target.text, cmd.cwd) if target.literal and not _root_or_home(target, cmd, env) else None
        if path is not None and any(_under(p, path) for p in env.protected):
            return True
    return False


def _redirect_to_block_device(cmd: Command, env: Env) -> bool:
    targets = _write_targets(cmd)
    if cmd.program == "dd" or cmd.program in _WIPE_TOOLS:
        # their operands are judged by dd_to_block_device and device_wipe_tools
        targets = [t for _, _, t in cmd.redirects if t is not None]
    return any(_is_block_device(t, cmd) for t in targets if cmd.program not in ("chmod", "chown", "chgrp"))


def _pipe_to_shell(cmd: Command, env: Env) -> bool:
    return bool(cmd.upstream) and not _DOWNLOADERS.isdisjoint(cmd.upstream) and _reads_code_from_stdin(cmd)


_STDIN_NAMES = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"})


def _reads_code_from_stdin(cmd: Command) -> bool:
    if cmd.program in SHELLS:
        if any(a.text.startswith("-") and not a.text.startswith("--") and "c" in a.text[1:] for a in cmd.args):
            return False
        operands = [a for a in cmd.args if not a.text.startswith(("-", "+"))]
        reads = any(a.text == "-" or (a.text.startswith("-") and "s" in a.text[1:]) for a in cmd.args)
        return reads or not operands or operands[0].text in _STDIN_NAMES
    if _INTERPRETERS.fullmatch(cmd.program):
        operands = _paths(cmd.args)
        return not operands or operands[0].text in _STDIN_NAMES
    return False


def _stdin_redirected_from_elsewhere(cmd: Command) -> bool:
    """Standard input comes from a descriptor or a computed file (``< <(...)``, ``<&3``)."""
    return any(
        fd in (None, "0") and (op == "<&" or (op in ("<", "<>") and target is not None and not target.literal))
        for op, fd, target in cmd.redirects
    )


def _shell_eval_download(cmd: Command, env: Env) -> bool:
    runs_code = cmd.program in SHELLS or cmd.program in ("eval", "source", ".") or _INTERPRETERS.fullmatch(cmd.program)
    return bool(runs_code) and bool(cmd.input_programs & _DOWNLOADERS)


# Options that make an otherwise harmless program run another one (a preprocessor, a pager, a filter).
_EXEC_OPTION_NAMES: dict[str, tuple[str, ...]] = {
    "rg": ("--pre",),
    "bat": ("--pager",),
    "batcat": ("--pager",),
    "sdiff": ("--diff-program",),
    "diff3": ("--diff-program",),
    "sort": ("--compress-program",),
    "split": ("--filter",),
    "go": ("-exec", "-toolexec"),
    "nano": ("--speller", "-s"),
}
_AWK_EXEC = re.compile(r"system\s{0,64}\(|\|\s{0,64}getline|\|&|printf?[^;}\n]{0,256}\|\s{0,64}\"")
_CHMOD_777 = re.compile(r"0?[0-7]?777|(?:a|ugo|o)?\+[rxX]{0,3}w[rwxX]{0,3}|a=rwx|ugo=rwx")


def _chmod_777_system(cmd: Command, env: Env) -> bool:
    args = [a for a in cmd.args if not (a.text.startswith("-") and not _CHMOD_777.fullmatch(a.text))]
    if not args or not _CHMOD_777.fullmatch(args[0].text):
        return False
    return any(a.literal and (resolve(a.text, cmd.cwd) == "/" or _system_path(a, cmd)) for a in args[1:])


def _write_sensitive_etc(cmd: Command, env: Env) -> bool:
    return any(
        t.literal and (resolve(t.text, cmd.cwd) or "").startswith("/etc/")
        for t in _write_targets(cmd)
        if cmd.program not in ("rm", "rmdir", "unlink")
    )


def _reverse_shell(cmd: Command, env: Env) -> bool:
    if any("/dev/tcp/" in t.text or "/dev/udp/" in t.text for _, _, t in cmd.redirects if t is not None):
        return True
    if any("/dev/tcp/" in a.text or "/dev/udp/" in a.text for a in cmd.args):
        return True
    if cmd.program in ("nc", "ncat", "netcat", "nc.traditional", "nc.openbsd"):
        return bool(_flags(cmd.args) & {"-e", "-c", "--exec", "--sh-exec", "--lua-exec"})
    if cmd.program == "socat":
        return any(re.match(r"(exec|system):", a.text, re.I) for a in cmd.args)
    return False


def _system_shutdown(cmd: Command, env: Env) -> bool:
    p = cmd.program
    texts = [a.text for a in cmd.args]
    if p in ("shutdown", "reboot", "halt", "poweroff"):
        return True
    if p in ("init", "telinit"):
        return bool(texts) and texts[0] in ("0", "6")
    if p in ("systemctl", "loginctl"):
        return any(t in ("poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "soft-reboot") for t in texts)
    if p in ("kill", "pkill"):
        return p == "kill" and ("-1" in texts[1:] or "1" in texts or texts[-2:] == ["--", "-1"])
    return False


def _sudo_stdin(cmd: Command, env: Env) -> bool:
    for a in cmd.args:
        t = a.text
        if not t.startswith("-") or t == "--":
            return False
        if t == "--stdin" or (not t.startswith("--") and "S" in t[1:]):
            return True
    return False


def _authorized_keys(cmd: Command, env: Env) -> bool:
    return any("authorized_keys" in t.text for t in _write_targets(cmd))


def _privilege(cmd: Command, env: Env) -> bool:
    return True


def _loader_variable(cmd: Command, env: Env) -> bool:
    if not cmd.assigns and cmd.program not in _DECLARE:
        return False
    for name, _value, _literal in _assignments(cmd):
        if name in _LOADER_VARS or name.startswith(_LOADER_PREFIXES):
            return True
        if name in _EDITOR_VARS and (not cmd.program or cmd.program in _EDITOR_LAUNCHERS or cmd.program in _DECLARE):
            return True
    return False


_DECLARE = frozenset({"export", "declare", "typeset", "local", "readonly"})


def _assignments(cmd: Command) -> list[tuple[str, str, bool]]:
    found = list(cmd.assigns)
    if cmd.program in _DECLARE:
        for a in cmd.args:
            m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)", a.text, re.S)
            if m:
                found.append((m.group(1), m.group(2), a.literal))
    return found


_STATE_PROGRAMS = frozenset({"alias", "trap", "source", ".", "enable", "hash", "set", "shopt"}) | _DECLARE


def _state_change(cmd: Command, env: Env) -> bool:
    if not cmd.assigns and cmd.program not in _STATE_PROGRAMS:
        return False
    if any(name in _STATE_VARS for name, _, _ in _assignments(cmd)):
        return True
    p = cmd.program
    texts = [a.text for a in cmd.args]
    if p in ("alias", "trap", "source", ".", "enable"):
        return bool(texts) and not (p in ("alias", "trap") and all(t in ("-p", "-l") for t in texts))
    if p == "hash":
        return "-p" in texts
    if p in _DECLARE and any(t.startswith("-") and "f" in t for t in texts) and p != "local":
        return p == "export"
    if p == "set":
        for i, t in enumerate(texts):
            if t in ("-o", "+o"):
                if i + 1 < len(texts) and texts[i + 1] not in _SAFE_SET_O:
                    return True
            elif t[:1] in ("-", "+") and t not in ("-", "--") and not set(t[1:]) <= _SAFE_SET | {"o"}:
                return True
        return False
    if p == "shopt":
        if not any(t in ("-s", "-u") for t in texts):
            return False
        return any(t not in _SAFE_SHOPT for t in texts if not t.startswith("-"))
    return False


def _git_exec_setting(key: str, value: str) -> bool:
    """A git setting that runs a program; ``alias.*`` only when it is a shell alias (``!cmd``)."""
    if key.lower().startswith("alias."):
        return value.startswith("!")
    return _GIT_EXEC_KEYS.match(key) is not None


def _git_subcommand(texts: list[str]) -> tuple[int, str]:
    """Index and name of git's subcommand, skipping global options and their values."""
    i = 0
    while i < len(texts):
        t = texts[i]
        if t in ("-c", "-C", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"):
            i += 2
        elif t.startswith("-"):
            i += 1
        else:
            return i, t
    return len(texts), ""


def _exec_flag(cmd: Command, env: Env) -> bool:
    p = cmd.program
    args = cmd.args
    texts = [a.text for a in args]
    if p == "git":
        for i, t in enumerate(texts):
            if (
                t in ("-c", "--config", "--config-env", "-C", "--exec-path")
                and i + 1 < len(args)
                and not args[i + 1].literal
            ):
                return True  # a setting or directory only known at run time
            setting = texts[i + 1] if t == "-c" and i + 1 < len(texts) else t[2:] if t.startswith("-c") else None
            if setting is not None and _git_exec_setting(*setting.partition("=")[::2]):
                return True
            if t.startswith(("--config-env", "--exec-path=", "--upload-pack", "--receive-pack", "--ext-diff")):
                return True
            if t in ("-u", "--upload-pack") and ("clone" in texts[:i] or "fetch" in texts[:i] or "pull" in texts):
                return True
            if t.startswith("ext::"):
                return True
            if t in ("--config", "--exec", "--open-files-in-pager") or t.startswith(("--exec=", "--extcmd")):
                if t != "--config" or (i + 1 < len(texts) and _git_exec_setting(*texts[i + 1].partition("=")[::2])):
                    return True
            if t.startswith("--config=") and _git_exec_setting(*t[9:].partition("=")[::2]):
                return True
            if t == "--template" or t.startswith("--template="):
                return True  # the template's hooks are copied into the new repository and run later
            if (
                t == "-C"
                and i + 1 < len(texts)
                and not (
                    args[i + 1].literal and resolve(texts[i + 1], cmd.cwd) in (cmd.cwd, None) and cmd.cwd is not None
                )
            ):
                return True  # a repository in another directory: its .git/config may run code (core.fsmonitor)
            if t in ("--git-dir", "--work-tree") or t.startswith(("--git-dir=", "--work-tree=")):
                gitdir = t.split("=", 1)[1] if "=" in t else (texts[i + 1] if i + 1 < len(texts) else "")
                path = resolve(gitdir, cmd.cwd) if args[i].literal else None
                if path is None or cmd.cwd is None or not _under(path, cmd.cwd):
                    return True  # a repository elsewhere: its config (core.pager, core.fsmonitor) may run code
        at, sub = _git_subcommand(texts)
        rest = texts[at + 1 :]
        if sub == "config":
            keys = [t for t in rest if not t.startswith("-")]
            if keys[:1] in (["set"], ["add"], ["replace-all"]):
                keys = keys[1:]  # `git config set KEY VALUE` (git 2.46+)
            reading = any(t in ("--get", "--get-all", "--list", "-l", "--get-regexp", "get", "list") for t in rest)
            if reading:
                return False
            if any(t in ("-f", "--file", "--blob") or t.startswith(("--file=", "-f")) for t in rest) and keys:
                return True  # writes a config file that could be a repository's (core.fsmonitor, hooksPath ...)
            return len(keys) >= 2 and _git_exec_setting(keys[0], keys[1])
        if sub == "grep" and any(t == "-O" or t.startswith(("-O", "--open-files-in-pager")) for t in rest):
            return True
        if sub in ("difftool", "mergetool") and any(t == "-x" or t.startswith(("-x", "--extcmd")) for t in rest):
            return True
        if sub == "help" and any(t in ("-w", "--web", "-b", "--browser") or t.startswith("--browser=") for t in rest):
            return True
        return sub in ("filter-branch", "send-email", "instaweb", "web--browse", "credential", "daemon")
    if p in ("make", "gmake"):
        for i, t in enumerate(texts):
            if t.startswith(("--eval", "-E")) or re.match(
                r"(SHELL|\.SHELLFLAGS|MAKESHELL|MAKEFLAGS|MFLAGS)\+?[:!?]?=", t
            ):
                return True
            value = texts[i + 1] if t in ("-f", "--file", "--makefile") and i + 1 < len(texts) else None
            if t.startswith(("--file=", "--makefile=")):
                value = t.split("=", 1)[1]
            elif t.startswith("-f") and len(t) > 2:
                value = t[2:]
            if value is not None and (value == "-" or value.startswith(("/dev/", "/proc/")) or not args[i].literal):
                return True  # recipes read from a descriptor or a computed file
            where = resolve(value, cmd.cwd) if value is not None else None
            if value is not None and value.startswith("/") and (cmd.cwd is None or not _under(where or "", cmd.cwd)):
                return True  # recipes from outside the working directory, which nothing here has seen
        return False
    if p in _EXEC_OPTION_NAMES:
        names = _EXEC_OPTION_NAMES[p]
        return any(t in names or t.startswith(tuple(n + "=" for n in names if n.startswith("--"))) for t in texts)
    if p == "cmake":
        # `cmake -E chdir d cmd`, `-E env ... cmd`, `-E time cmd` run a command; `-P script` runs CMake code
        return any(
            t == "-P" or (t == "-E" and i + 1 < len(texts) and texts[i + 1] in ("chdir", "env", "time"))
            for i, t in enumerate(texts)
        )
    if p in ("gdb", "lldb"):
        return any(
            t in ("-x", "--command", "-ix", "--init-command", "-s", "--source", "-S", "--source-before-file")
            or t.lstrip("-") in ("ex", "iex", "eval-command", "init-eval-command", "batch", "o", "O", "one-line")
            or t.startswith(("--eval-command=", "-ex=", "--command=", "-p", "--pid", "--one-line"))
            for t in texts
        )
    if p in ("vim", "vi", "nvim", "ex", "view", "vimdiff", "gvim", "emacs", "ed", "less", "more"):
        if p == "ed" or (p == "ex" and not texts):
            return bool(cmd.upstream) or cmd.stdin_known  # ed/ex run commands (`!cmd`) read on standard input
        if p in ("less", "more"):
            return any(t.startswith("+") and ("!" in t or "|" in t) for t in texts)
        return any(
            t in ("-c", "--cmd", "-S", "-s", "-u", "-es", "-Es", "-e", "--eval", "-l", "--load", "-f", "--funcall")
            or t.startswith(("+", "--eval=", "--load=", "--funcall=", "-x", "--script"))
            or (p != "emacs" and t.startswith("-") and not t.startswith("--") and bool(set(t[1:]) & set("es")))
            for t in texts
        )
    if p in ("tar", "bsdtar", "gtar"):
        return any(
            t.startswith(("--to-command", "--checkpoint-action", "--use-compress-program", "--rsh-command"))
            or t.startswith(("--info-script", "--new-volume-script", "-I", "-F"))
            for t in texts
        )
    if p == "rsync":
        return any(t in ("-e",) or t.startswith(("--rsh", "--rsync-path", "-e")) for t in texts)
    if p in ("ssh", "scp", "sftp", "autossh"):
        opts = " ".join(texts).lower()
        if re.search(r"(proxycommand|localcommand|permitlocalcommand|knownhostscommand|match\s+exec)", opts):
            return True
        return p == "scp" and "-S" in texts
    if p in ("awk", "gawk", "mawk", "nawk", "busybox"):
        program = next((t for t in texts if not t.startswith("-")), "")
        return bool(_AWK_EXEC.search(program))
    if p == "sed":
        scripts = [t for i, t in enumerate(texts) if i > 0 and texts[i - 1] in ("-e", "--expression")]
        scripts = scripts or [t for t in texts if not t.startswith("-")][:1]
        return any(re.search(r"(^|[;\n{}])\s*\d*e(\s|;|$)|/[gpimIM0-9w]*e[gpimIM0-9]*\s*(;|$|})", s) for s in scripts)
    if p in ("zip",):
        return any(t in ("-TT", "--unzip-command") or t.startswith("--unzip-command=") for t in texts)
    if p == "man":
        return any(t in ("-P", "--pager", "-H", "--html") or t.startswith(("--pager=", "--html=")) for t in texts)
    if p in ("crontab",):
        return not any(t in ("-l", "-e", "-r") for t in texts) and not (texts == [])
    if p in ("at", "batch"):
        return True
    return False


_READERS = frozenset(
    {"cat", "less", "more", "head", "tail", "grep", "egrep", "fgrep", "rg", "ls", "stat", "wc", "file", "du"}
    | {"sha256sum", "sha1sum", "md5sum", "b2sum", "tree", "diff", "cmp", "jq", "xxd", "hexdump", "od", "strings"}
    | {"aleph", "test", "[", "realpath", "readlink", "dirname", "basename", "echo", "printf", "cd", "pushd"}
)


def _touches_aleph_files(cmd: Command, env: Env) -> bool:
    """Any other program handed one of Aleph's own files (``sqlite3 events.sqlite3 'delete ...'``)."""
    if not env.protected or cmd.program in _READERS or (cmd.program == "find" and not _find_deletes(cmd)):
        return False
    inside = cmd.cwd is not None and any(_under(cmd.cwd, p) for p in env.protected)
    for a in cmd.args:
        if not inside and not any(name in a.text for name in env.protected_names):
            continue
        text = a.text.split("=", 1)[1] if a.text.startswith("-") and "=" in a.text else a.text
        path = resolve(text, cmd.cwd) if a.literal and text and not text.startswith("-") else None
        if path is not None and any(_under(path, p) for p in env.protected):
            return True
    return False


_SUBSCRIPT_CODE = re.compile(r"\[[^\]]{0,256}?(?:\$\(|`|\$\{)")


def _code_in_variable(cmd: Command, env: Env) -> bool:
    """``x='a[$(cmd)]'``: arithmetic on x later runs cmd, so code stored in a value is code."""
    if not cmd.assigns and cmd.program not in _DECLARE:
        return False
    return any(_SUBSCRIPT_CODE.search(value) for _, value, _ in _assignments(cmd))


def _code_from_pipe(cmd: Command, env: Env) -> bool:
    if cmd.stdin_known or not _DOWNLOADERS.isdisjoint(cmd.upstream) or not _DOWNLOADERS.isdisjoint(cmd.input_programs):
        return False
    if not cmd.upstream and not _stdin_redirected_from_elsewhere(cmd):
        return False
    return _reads_code_from_stdin(cmd)


def _dynamic_script(cmd: Command, env: Env) -> bool:
    """``bash <(...)``, ``source "$f"``: shell code from a file whose name or content is computed."""
    if cmd.program not in SHELLS and cmd.program not in ("source", "."):
        return False
    if cmd.input_programs & _DOWNLOADERS:
        return False  # judged by shell_eval_download
    operands = [a for a in cmd.args if not a.text.startswith(("-", "+")) or not a.literal]
    return (
        bool(operands)
        and not operands[0].literal
        and not any(a.text.startswith("-") and "c" in a.text for a in cmd.args)
    )


def _dynamic_delete(cmd: Command, env: Env) -> bool:
    return any(not a.literal for a in _rm_targets(cmd))


_TREE_WRITERS = frozenset({"tar", "bsdtar", "gtar", "unzip", "7z", "cpio", "bsdcpio", "cp", "rsync", "scp"})


def _tree_into_wide_dir(cmd: Command, env: Env) -> bool:
    """A tree of unknown file names (an archive, a recursive copy) written into /, home or a system directory.

    It may hold a protected file (``~/.bashrc``, ``~/.ssh/...``), so it cannot be proven safe.
    """
    p = cmd.program
    if p not in _TREE_WRITERS:
        return False
    texts = [a.text for a in cmd.args]
    dest: Arg | None = None
    if p in ("tar", "bsdtar", "gtar"):
        extracting = any(
            t in ("-x", "--extract", "--get") or re.fullmatch(r"-?[a-wyzA-Z]*x[A-Za-z]*", t) for t in texts[:3]
        )
        if not extracting:
            return False
        dest = _option_value(cmd.args, ("-C", "--directory")) or Arg(".")
    elif p in ("unzip", "7z", "cpio", "bsdcpio"):
        dest = _option_value(cmd.args, ("-d", "-o")) or Arg(".")
        if p in ("cpio", "bsdcpio") and not any("i" in t.lstrip("-") for t in texts if t.startswith("-")):
            return False
    elif p in ("cp", "rsync", "scp") and (
        _flags(cmd.args) & {"-r", "-R", "-a", "--recursive", "--archive"} or p == "rsync"
    ):
        operands = _paths(cmd.args)
        dest = _option_value(cmd.args, ("-t", "--target-directory")) or (operands[-1] if len(operands) >= 2 else None)
    if dest is None:
        return False
    wide = ("/", "/home", env.home, *_SYSTEM_DIRS)
    return any(path in wide for path in _covers(dest, cmd))


def _dynamic_write(cmd: Command, env: Env) -> bool:
    if _MKFS.fullmatch(cmd.program) or cmd.program in _WIPE_TOOLS or cmd.program in _WIPE_TOOLS_SUB:
        return any(not a.literal for a in _paths(cmd.args))
    if _tree_into_wide_dir(cmd, env):
        return True
    if cmd.program in ("rm", "rmdir", "unlink", "chmod", "chown", "chgrp"):
        return False
    targets = _write_targets(cmd)
    if cmd.program == "mv":  # a computed source is only moved; the destination is what gets written
        moved = {id(a) for a in _rm_targets(cmd)}
        targets = [t for t in targets if id(t) not in moved]
    return any(not t.literal for t in targets)


def _unknown_cwd_write(cmd: Command, env: Env) -> bool:
    if cmd.cwd is not None:
        return False
    names = {rc.rsplit("/", 1)[-1] for rc in _RC_FILES} | {"authorized_keys", "config"}
    for t in _write_targets(cmd):
        if t.literal and not t.text.startswith("/") and (t.text.rsplit("/", 1)[-1] in names or ".ssh" in t.text):
            return True
    return False


def _unknown_program(cmd: Command, env: Env) -> bool:
    """A program the floor does not know, given arguments that name a program or a wide target.

    Only programs whose options are understood (:data:`KNOWN_PROGRAMS`) or whose inner command the
    unwrapper finds are proven not to run what their arguments name (``eatmydata rm -rf /``,
    ``capsh -- -c '...'``); any other program might, so it cannot be proven safe.
    """
    p = cmd.program
    if not p or not cmd.args:
        return False
    head = cmd.argv[0].text
    system = "/" not in head or head.startswith(("/usr/", "/bin/", "/sbin/", "/opt/", "/nix/"))
    if system and (p in KNOWN_PROGRAMS or p in UNWRAPPED or is_interpreter(p)):
        return False  # a workspace file named `ls` or `git` is not the program the floor knows
    cached = cmd.memo.get("unknown_program")
    if cached is None:
        cached = cmd.memo["unknown_program"] = (
            bool(argument_programs(list(cmd.args)))
            or any(_wide_target(a, cmd, env) for a in cmd.args)
            or any(not a.literal and a.text.startswith(("$", "`", '"$')) for a in cmd.args)
        )
    return bool(cached)


def _wide_target(a: Arg, cmd: Command, env: Env) -> bool:
    text = a.text.split("=", 1)[1] if a.text.startswith("-") and "=" in a.text else a.text
    if not text or text.startswith("-"):
        return False
    arg = Arg(text, a.literal, a.glob)
    if _root_or_home(arg, cmd, env):
        return True
    return any(path in _SYSTEM_DIRS for path in _covers(arg, cmd))


_DELETERS = frozenset({"rm", "find", "mv", "tar", "bsdtar", "gtar", "rsync", "cmake"})

HARDLINE = (
    Builtin(
        "rm_no_preserve_root",
        "hardline",
        "block",
        "rm --no-preserve-root can delete the whole filesystem",
        _rm_no_preserve_root,
        frozenset({"rm"}),
    ),
    Builtin(
        "rm_rf_root",
        "hardline",
        "block",
        "recursive delete of /, the home directory or /home",
        _rm_rf_root,
        _DELETERS,
    ),
    Builtin(
        "recursive_mode_root",
        "hardline",
        "block",
        "recursive permission or owner change of /, the home directory or /home",
        _recursive_mode_root,
        frozenset({"chmod", "chown", "chgrp", "setfacl"}),
    ),
    Builtin(
        "dd_to_block_device",
        "hardline",
        "block",
        "dd writing to a block device",
        _dd_to_block_device,
        frozenset({"dd"}),
    ),
    Builtin(
        "mkfs_device",
        "hardline",
        "block",
        "creating a filesystem on a device",
        _mkfs_device,
        None,
    ),
    Builtin(
        "redirect_to_block_device",
        "hardline",
        "block",
        "writing to a block device",
        _redirect_to_block_device,
    ),
    Builtin(
        "device_wipe_tools",
        "hardline",
        "block",
        "wiping or repartitioning a block device",
        _device_wipe,
        _WIPE_TOOLS | frozenset(_WIPE_TOOLS_SUB),
    ),
    Builtin(
        "write_protected_path",
        "hardline",
        "block",
        "writing a protected file (Aleph's own files, .git/hooks, .git/config, ~/.ssh, shell start-up files)",
        _write_protected,
    ),
)

GUARDS = (
    Builtin(
        "code_in_variable",
        "guard",
        "ask",
        "stores shell code in a variable where arithmetic would run it (x='a[$(cmd)]')",
        _code_in_variable,
    ),
    Builtin(
        "aleph_files",
        "guard",
        "ask",
        "hands one of Aleph's own files (configuration, ledger, keys) to a program that may change it",
        _touches_aleph_files,
    ),
    Builtin(
        "code_from_pipe",
        "guard",
        "ask",
        "a shell or interpreter runs code produced by another command",
        _code_from_pipe,
    ),
    Builtin(
        "dynamic_shell_code",
        "guard",
        "ask",
        "a shell runs a script whose name or content is only known at run time",
        _dynamic_script,
    ),
    Builtin(
        "dynamic_delete_target",
        "guard",
        "ask",
        "recursive delete of a path that is only known at run time",
        _dynamic_delete,
        frozenset({"rm", "find", "tar", "bsdtar", "gtar", "rsync"}),
    ),
    Builtin(
        "dynamic_write_target",
        "guard",
        "ask",
        "writes to a file whose name is only known at run time",
        _dynamic_write,
    ),
    Builtin(
        "unknown_cwd_write",
        "guard",
        "ask",
        "writes a file that may be protected, in a directory that is only known at run time",
        _unknown_cwd_write,
    ),
    Builtin(
        "loader_variable",
        "guard",
        "ask",
        "sets a loader or hook variable that makes programs run other code",
        _loader_variable,
    ),
    Builtin(
        "shell_state_change",
        "guard",
        "ask",
        "changes how later commands run (alias, trap, source, PATH, set/shopt options)",
        _state_change,
    ),
    Builtin(
        "unknown_program",
        "guard",
        "ask",
        "a program whose options the floor does not know, given arguments that name a program or a wide target "
        "(it may run them)",
        _unknown_program,
    ),
    Builtin(
        "exec_flag",
        "guard",
        "ask",
        "a flag or setting that makes this program run another command",
        _exec_flag,
        frozenset(
            {"git", "tar", "bsdtar", "gtar", "rsync", "ssh", "scp", "sftp", "autossh", "awk", "gawk", "mawk", "nawk"}
            | {"sed", "zip", "man", "crontab", "at", "batch", "make", "gmake", "gdb", "lldb", "vim", "vi", "nvim"}
            | {"ex", "view", "vimdiff", "gvim", "emacs", "ed", "less", "more", "cmake"}
            | frozenset(_EXEC_OPTION_NAMES)
        ),
    ),
)

DEFAULT_RULES = (
    Builtin(
        "rm_rf_system_path",
        "tunable",
        "warn",
        "recursive delete of a system path",
        _rm_rf_system_path,
        _DELETERS,
    ),
    Builtin(
        "pipe_to_shell",
        "tunable",
        "warn",
        "downloaded content piped into a shell or interpreter",
        _pipe_to_shell,
    ),
    Builtin(
        "shell_eval_download",
        "tunable",
        "warn",
        "a shell runs code straight from a download",
        _shell_eval_download,
    ),
    Builtin(
        "chmod_777_system",
        "tunable",
        "warn",
        "world-writable permissions on a system path",
        _chmod_777_system,
        frozenset({"chmod"}),
    ),
    Builtin("write_sensitive_etc", "tunable", "warn", "writing a file under /etc", _write_sensitive_etc),
    Builtin("reverse_shell_devtcp", "tunable", "warn", "network shell (/dev/tcp, nc -e, socat exec)", _reverse_shell),
    Builtin(
        "system_shutdown",
        "tunable",
        "warn",
        "shuts down or reboots the machine",
        _system_shutdown,
        frozenset({"shutdown", "reboot", "halt", "poweroff", "init", "telinit", "systemctl", "loginctl", "kill"}),
    ),
    Builtin(
        "sudo_privilege_stdin",
        "tunable",
        "warn",
        "sudo reading a password from standard input",
        _sudo_stdin,
        frozenset({"sudo"}),
    ),
    Builtin(
        "write_ssh_authorized_keys",
        "tunable",
        "warn",
        "writing an SSH authorized_keys file",
        _authorized_keys,
    ),
    Builtin(
        "privilege_escalation",
        "tunable",
        "ask",
        "runs a command as another user (sudo, doas, su, pkexec)",
        _privilege,
        frozenset({"sudo", "doas", "su", "pkexec", "run0", "runuser", "sudoedit"}),
    ),
)
