"""The rules about what runs code.

Downloads piped into interpreters, loader and hook variables, builtins that change later execution,
options of harmless programs that run another one, and program names only known at run time.
"""

from __future__ import annotations

import re

from aleph._floor._analysis import SHELLS, Command, resolve
from aleph._floor._programs import _GENERIC_WRAPPERS
from aleph._floor._rule import Env
from aleph._floor._sedawk import awk_code, sed_effects, sed_scripts
from aleph._floor._targets import _flags, _git_subcommand, _paths, _under, _wide_target
from aleph._floor._wrappers import KNOWN_PROGRAMS, UNWRAPPED, argument_programs, is_interpreter

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
    """Standard input comes from a descriptor, a computed file or computed text (``<&3``, ``<<< "$x"``)."""
    return any(
        fd in (None, "0") and (op == "<&" or (op in ("<", "<>", "<<<") and target is not None and not target.literal))
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


_AWK_EXEC = re.compile(r"system\s{0,64}\(|\|\s{0,64}getline|\|&|printf?[^;}\n]{0,256}\|\s{0,64}\"|@load\b")


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


def _sudo_stdin(cmd: Command, env: Env) -> bool:
    for a in cmd.args:
        t = a.text
        if not t.startswith("-") or t == "--":
            return False
        if t == "--stdin" or (not t.startswith("--") and "S" in t[1:]):
            return True
    return False


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
    if p in ("awk", "gawk", "mawk", "nawk"):
        code, unseen = awk_code(args)
        return unseen or any(_AWK_EXEC.search(a.text) for a in code)
    if p == "busybox":
        program = next((t for t in texts if not t.startswith("-")), "")
        return bool(_AWK_EXEC.search(program))
    if p == "sed":
        scripts, _, unseen, sandbox = sed_scripts(args)
        return not sandbox and (unseen or any(sed_effects(a.text).runs for a in scripts))
    if p in ("zip",):
        return any(t in ("-TT", "--unzip-command") or t.startswith("--unzip-command=") for t in texts)
    if p == "man":
        return any(t in ("-P", "--pager", "-H", "--html") or t.startswith(("--pager=", "--html=")) for t in texts)
    if p in ("crontab",):
        return not any(t in ("-l", "-e", "-r") for t in texts) and not (texts == [])
    if p in ("at", "batch"):
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
        and not any(a.text.startswith("-") and not a.text.startswith("--") and "c" in a.text[1:] for a in cmd.args)
    ) or any(  # the start-up file of an interactive shell is a script it runs: `bash --rcfile <(...) -i`
        a.text in ("--rcfile", "--init-file") and i + 1 < len(cmd.args) and not cmd.args[i + 1].literal
        for i, a in enumerate(cmd.args)
    )


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
    known = system and (p in KNOWN_PROGRAMS or p in UNWRAPPED or is_interpreter(p))
    names_known = any(a.literal and a.text.rsplit("/", 1)[-1] in KNOWN_PROGRAMS for a in cmd.args)
    if known and not (p in _GENERIC_WRAPPERS and not names_known):
        return False  # a workspace file named `ls` or `git` is not the program the floor knows
    # a generic wrapper (npx, uv run) whose command is no program the floor knows is judged as that program
    cached = cmd.memo.get("unknown_program")
    if cached is None:
        cached = cmd.memo["unknown_program"] = (
            bool(argument_programs(list(cmd.args)))
            or any(_wide_target(a, cmd, env) for a in cmd.args)
            or any(not a.literal and a.text.startswith(("$", "`", '"$')) for a in cmd.args)
        )
    return bool(cached)
