"""What a command acts on: the paths it names, deletes and writes, read from each program's own arguments.

The knowledge of what a program does with its arguments (what ``rm -r`` deletes, where ``dd of=`` or
``sort -o`` writes, which roots ``find`` walks) lives here; the rules in :mod:`aleph._floor._rules` and
:mod:`aleph._floor._execution` judge the targets.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from aleph._floor._analysis import Arg, Command, resolve
from aleph._floor._destinations import patch_files
from aleph._floor._rule import Env
from aleph._floor._sedawk import awk_code, sed_effects, sed_scripts

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


def _system_path(a: Arg, cmd: Command) -> bool:
    if not a.literal or not a.text.startswith("/"):
        return False
    path = resolve(a.text, None) or ""
    if any(_under(path, s) for s in _SCRATCH) or (cmd.cwd and cmd.cwd != "/" and _under(path, cmd.cwd)):
        return False
    return any(_under(path, d) for d in _SYSTEM_DIRS)


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
    | {"setfacl", "rm", "rmdir", "unlink", "shred", "dd", "sort", "curl", "wget", "sed", "find", "patch"}
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
        out.extend(Arg(a.text[3:], a.literal, a.glob) for a in args if a.text.startswith("of="))
    elif p == "sort":
        value = _option_value(args, ("-o", "--output"))
        if value is not None:
            out.append(value)
    elif p in ("curl", "wget"):
        value = _option_value(args, ("-o", "--output") if p == "curl" else ("-O", "--output-document"))
        if value is not None and value.text != "-":
            out.append(value)
    elif p == "patch":
        out.extend(patch_files(args))
    elif p == "sed":
        scripts, files, _, sandbox = sed_scripts(args)
        if any(_sed_in_place(a.text) for a in args):
            out.extend(files)
        for script in [] if sandbox else scripts:
            out.extend(Arg(name, script.literal) for name in sed_effects(script.text).writes)
    elif p == "git":
        texts = [a.text for a in args]
        at, sub = _git_subcommand(texts)
        names = ("-f", "--file") if sub == "config" else ("-o", "--output") if sub in _GIT_OUTPUT else ("--output",)
        value = _option_value(args[at + 1 :], names)
        if value is not None:
            out.append(value)
    elif p in ("awk", "gawk", "mawk", "nawk"):
        for program in awk_code(args)[0]:
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


def _sed_in_place(text: str) -> bool:
    """``-i``, ``-i.bak``, ``-ni``, ``--in-place[=SUFFIX]``: sed rewrites its input files."""
    if text.startswith("--"):
        return text == "--in-place" or text.startswith("--in-place=")
    if not text.startswith("-") or text == "-":
        return False
    flags = text[1:]
    for flag in flags:
        if flag == "i":
            return True
        if flag in "efl":
            return False  # the rest of the word is that option's value
    return False


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
                return Arg(t[len(name) + 1 :], a.literal, a.glob)
            if not name.startswith("--") and len(name) == 2 and t.startswith(name) and len(t) > 2:
                return Arg(t[2:], a.literal, a.glob)
    for i, a in enumerate(args[:-1]):
        # a cluster of flags ending with the option, as getopt reads `curl -sSLo FILE`, `wget -qO FILE`
        t = a.text
        if a.literal and re.fullmatch(r"-[A-Za-z]{2,16}", t) and any(t[-1] == n[1] for n in names if len(n) == 2):
            return args[i + 1]
    return None


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


def _wide_target(a: Arg, cmd: Command, env: Env) -> bool:
    text = a.text.split("=", 1)[1] if a.text.startswith("-") and "=" in a.text else a.text
    if not text or text.startswith("-"):
        return False
    arg = Arg(text, a.literal, a.glob)
    if _root_or_home(arg, cmd, env):
        return True
    return any(path in _SYSTEM_DIRS for path in _covers(arg, cmd))
