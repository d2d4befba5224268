"""What a wrapper runs in turn: ``env``, ``timeout``, ``sudo``, ``xargs``, ``find -exec``, ``bash -c`` ...

:func:`unwrap` maps one program and its expanded arguments to what it runs next: an argument list
(:class:`Argv`), shell code to parse (:class:`Text`), or something that cannot be known
(:class:`Opaque`). The walker in :mod:`aleph._floor._analysis` judges each of them as a command of its own.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

__all__ = [
    "BUILTINS",
    "KNOWN_PROGRAMS",
    "SHELLS",
    "UNWRAPPED",
    "Arg",
    "Argv",
    "Inner",
    "Opaque",
    "Text",
    "argument_programs",
    "is_interpreter",
    "names_program",
    "unmodelled",
    "unwrap",
]

SHELLS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "ash", "yash", "posh", "rbash", "fish", "lksh", "oksh"}
    | {"csh", "tcsh"}
)
"""Programs that run shell code from ``-c``, a file or standard input."""


@dataclass(frozen=True, slots=True)
class Arg:
    """One expanded word: its text (dynamic parts keep their source text), whether it is fully known, glob."""

    text: str
    literal: bool = True
    glob: bool = False


@dataclass(frozen=True, slots=True)
class Argv:
    argv: list[Arg]
    assigns: list[tuple[str, str, bool]] = field(default_factory=list)
    speculative: bool = False
    chdir: Arg | None = None  # env -C DIR, sudo -D DIR


@dataclass(frozen=True, slots=True)
class Text:
    arg: Arg
    label: str
    speculative: bool = False


@dataclass(frozen=True, slots=True)
class Opaque:
    rule: str
    reason: str


Inner = Argv | Text | Opaque


@dataclass(frozen=True, slots=True)
class _Spec:
    short: str = ""  # short options that take a value
    long: frozenset[str] = frozenset()  # long options that take a value
    positional: int = 0  # operands before the command (timeout's duration, chrt's priority)
    no_command: frozenset[str] = frozenset()  # options after which nothing is run


_WRAPPERS: dict[str, _Spec] = {
    "timeout": _Spec("sk", frozenset({"signal", "kill-after"}), 1),
    "nice": _Spec("n", frozenset({"adjustment"})),
    "nohup": _Spec(),
    "setsid": _Spec(),
    "stdbuf": _Spec("ioe", frozenset({"input", "output", "error"})),
    "ionice": _Spec("cnpPu", frozenset({"class", "classdata", "pid", "pgid", "uid"}), 0, frozenset({"-p", "-P", "-u"})),
    "chrt": _Spec("T", frozenset({"sched-runtime", "sched-period", "sched-deadline"}), 1, frozenset({"-p", "--pid"})),
    "taskset": _Spec("", frozenset(), 1, frozenset({"-p", "--pid"})),
    "time": _Spec("fo", frozenset({"format", "output"})),
    "command": _Spec("", frozenset(), 0, frozenset({"-v", "-V"})),
    "builtin": _Spec(),
    "exec": _Spec("a"),
    "sudo": _Spec(
        "CDghpRrTtUu",
        frozenset({"user", "group", "host", "prompt", "chroot", "chdir", "role", "type", "close-from", "other-user"}),
        0,
        frozenset({"-e", "--edit", "-l", "--list", "-v", "--validate", "-K", "-V", "--version", "-h", "--help"}),
    ),
    "doas": _Spec("uC"),
    "pkexec": _Spec("", frozenset({"user"})),
    "run0": _Spec("ugD", frozenset({"user", "group", "unit", "property", "description", "slice", "chdir", "setenv"})),
    "runuser": _Spec("ugGw", frozenset({"user", "group", "supp-group", "whitelist-environment", "shell"})),
    "xargs": _Spec(
        "aEdILnPs",
        frozenset({"arg-file", "delimiter", "eof", "replace", "max-lines", "max-args", "max-procs", "max-chars"}),
    ),
    "flock": _Spec("Ew", frozenset({"conflict-exit-code", "timeout"}), 1),
    "nsenter": _Spec("tSG", frozenset({"target", "setuid", "setgid"})),
    "unshare": _Spec("RwSG", frozenset({"root", "wd", "setuid", "setgid", "map-user", "map-group"})),
    "chroot": _Spec("", frozenset({"userspec", "groups"}), 1),
    "prlimit": _Spec("p", frozenset({"pid"})),
    "numactl": _Spec("CcmNpiP", frozenset()),
    "faketime": _Spec("f", frozenset(), 1),
    "sg": _Spec(),
}
_GENERIC_WRAPPERS = frozenset(
    {
        "strace",
        "ltrace",
        "valgrind",
        "fakeroot",
        "firejail",
        "systemd-run",
        "torsocks",
        "proxychains",
        "proxychains4",
        "catchsegv",
        "unbuffer",
        "cgexec",
        "dbus-run-session",
        "dbus-launch",
        "xvfb-run",
        "ssh-agent",
        "uv",
        "uvx",
        "poetry",
        "pipenv",
        "pdm",
        "hatch",
        "conda",
        "micromamba",
        "bwrap",
        "sandbox-exec",
        "caffeinate",
        "daemonize",
        "start-stop-daemon",
        "su",
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "bun",
        "bunx",
    }
)
_INTERPRETER = re.compile(
    r"python[0-9.]*|pypy[0-9.]*|perl[0-9.]*|ruby[0-9.]*|node|nodejs|deno|bun|php[0-9.]*|lua[0-9.]*"
)
_CODE_FLAGS = frozenset({"-c", "-e", "-E", "-r", "--eval", "-p", "--print"})
_STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"})
_FORK_CODE = re.compile(
    r"fork\s{0,8}while\s{0,8}fork|loop\s{0,8}\{\s{0,8}fork|while\s{0,8}\(?\s{0,8}(?:1|true|True)\s{0,8}\)?[\s:{]{0,8}(?:os\.|POSIX::)?fork\s{0,8}\(",
    re.IGNORECASE,
)
_STRING_LITERAL = re.compile(r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"|`([^`]*)`")
_SHELL_VALUE_OPTS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


def _skip_options(args: list[Arg], spec: _Spec) -> int | None:
    """Index of the first operand after ``spec``'s options; ``None`` if an option means "runs nothing"."""
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        if not a.literal:
            return i
        if t == "--":
            return i + 1
        if not t.startswith("-") or t == "-":
            return i
        if t in spec.no_command:
            return None
        if t.startswith("--"):
            name = t[2:].split("=", 1)[0]
            i += 2 if name in spec.long and "=" not in t else 1
            continue
        flags = t[1:]
        if any(f"-{f}" in spec.no_command for f in flags if not f.isdigit()):
            return None
        for pos, flag in enumerate(flags):
            if flag in spec.short:
                i += 1 if pos < len(flags) - 1 else 2
                break
        else:
            i += 1
    return i


def unwrap(program: str, args: list[Arg], stdin: str | None) -> list[Inner]:
    """What ``program args`` runs in turn: argv lists, shell text, or something that cannot be known."""
    if program in SHELLS:
        return _shell(args, stdin)
    if program == "env":
        return _env(args)
    if program == "eval":
        args = args[1:] if args and args[0].text == "--" else args
        if not args:
            return []
        return [Text(Arg(" ".join(a.text for a in args), all(a.literal for a in args)), "")]
    if program in ("busybox", "toybox"):
        if args and args[0].literal and args[0].text.startswith("-"):
            return []
        return [Argv(args)]
    if program == "find":
        return _find(args)
    if program == "watch":
        return _watch(args)
    if program == "script":
        return _flag_text(args, ("-c", "--command"), "-c")
    if program == "parallel":
        return _parallel(args)
    if program == "git":
        return _git(args)
    if program in _CODE_OPTIONS:
        return _option_code(args, _CODE_OPTIONS[program])
    if _INTERPRETER.fullmatch(program):
        return _inline_code(args, stdin, program)
    if program == "trap" or program == "alias":
        # the text runs later (on a signal, or when the alias is used): analyse it now
        out: list[Inner] = []
        for a in args:
            if program == "alias":
                if "=" in a.text:
                    out.append(Text(Arg(a.text.split("=", 1)[1], a.literal), "alias"))
            elif not a.text.startswith("-"):
                out.append(Text(a, "trap"))
                break
        return out
    if program in ("ssh", "autossh", "docker", "podman", "kubectl", "oc", "nerdctl"):
        return _remote(program, args)
    if program in ("su", "runuser") and any(
        a.text in ("-c", "--command") or a.text.startswith("--command=") for a in args
    ):
        return _flag_text(args, ("-c", "--command"), "-c")
    if program in ("declare", "typeset", "local", "export", "readonly"):
        # declare 'a[$(cmd)]=1' evaluates the subscript, quoted or not
        subscripts = [m.group(1) for a in args if (m := re.match(r"[A-Za-z_][A-Za-z0-9_]*\[(.*)\]\+?=", a.text, re.S))]
        return [Text(Arg(": " + sub), "subscript") for sub in subscripts if "$" in sub or "`" in sub]
    if program in ("source", ".") and stdin is not None and args and args[0].text in _STDIN_FILES:
        return [Text(Arg(stdin), "stdin")]
    if program in ("awk", "gawk", "mawk", "nawk"):
        script = next((a for a in args if not a.text.startswith("-")), None)
        return _inline_code([Arg("-e"), script], None) if script is not None else []
    if program in ("at", "batch") and stdin is not None:
        return [Text(Arg(stdin), "at")]
    if program == "sg":  # sg GROUP [-c] COMMAND: the command is shell text
        rest = args[1:]
        if rest and rest[0].text == "-c":
            rest = rest[1:]
        return [Text(Arg(" ".join(a.text for a in rest), all(a.literal for a in rest)), "-c")] if rest else []
    spec = _WRAPPERS.get(program)
    if program == "faketime" and any(a.text == "-f" or a.text.startswith("-f") for a in args):
        spec = _Spec("f")  # with -f the time comes from the option, not an operand
    if spec is not None:
        start = _skip_options(args, spec)
        if start is None:
            return []
        start += spec.positional
        if program == "flock" and any(a.text in ("-c", "--command") for a in args):
            return _flag_text(args, ("-c", "--command"), "-c")
        inner = args[start:]
        if inner and inner[0].text == "--":
            inner = inner[1:]
        if program == "xargs":
            # the input lines become arguments: in place of the -I string, else at the end
            inner = inner or [Arg("echo")]
            replace_str = _xargs_replace(args[:start])
            if replace_str:
                inner = [Arg(a.text, False) if replace_str in a.text else a for a in inner]
            else:
                inner = [*inner, Arg("<input>", literal=False)]
        if program in ("sudo", "doas", "run0"):
            env_assigns: list[tuple[str, str, bool]] = []
            while inner and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", inner[0].text):
                name, _, value = inner[0].text.partition("=")
                env_assigns.append((name, value, inner[0].literal))
                inner = inner[1:]
            if env_assigns and inner:
                return [Argv(inner, env_assigns)]
        if program in ("sudo", "doas", "run0") and not inner:
            # an interactive root shell reads its commands from standard input
            return [Argv([Arg("sh")])] if any(a.text in ("-s", "-i", "--shell", "--login") for a in args) else []
        # an option value we skipped may really be the command (an option this table gets wrong)
        skipped: list[Inner] = [
            Argv(args[k:], speculative=True) for k in range(min(start, len(args))) if _looks_like_command(args[k])
        ]
        return [Argv(inner), *skipped[:4]]
    if program in _GENERIC_WRAPPERS or program not in KNOWN_PROGRAMS:
        return unmodelled(args)
    return []


def unmodelled(args: list[Arg]) -> list[Inner]:
    """A program whose options are not modelled (a generic wrapper, or a program not known at all).

    The first operand that names a known program is judged as the command it runs (fully, guards
    included); every other operand position and every argument that reads like shell code is tried
    speculatively, so a hardline rule fires wherever the real command starts. Whether an unknown
    program may run what its arguments name is the ``unknown_program`` guard's question.
    """
    out: list[Inner] = []
    args = args[:_MAX_SCANNED_ARGS]
    probable = next((i for i, a in enumerate(args) if names_program(a)), None)
    if probable is not None:
        out.append(Argv(args[probable:]))
    guesses: list[Inner] = [
        Argv(args[i:], speculative=True)
        for i, a in enumerate(args)
        if i != probable and not a.text.startswith("-") and _looks_like_command(a)
    ]
    out.extend(guesses[:8])
    for a in args:
        text = a.text.split("=", 1)[1] if a.text.startswith("-") and "=" in a.text else a.text
        if _CODE_LIKE.search(text):
            out.append(Text(Arg(text.lstrip("!:"), a.literal), "argument", speculative=True))
    return out[:16]


UNWRAPPED = (
    SHELLS
    | frozenset(_WRAPPERS)
    | _GENERIC_WRAPPERS
    | {"env", "eval", "busybox", "toybox", "find", "watch", "script", "parallel", "git", "trap", "alias", "ssh"}
    | {"autossh", "docker", "podman", "kubectl", "oc", "nerdctl", "su", "runuser", "declare", "typeset", "local"}
    | {"export", "readonly", "source", ".", "awk", "gawk", "mawk", "nawk", "at", "batch"}
)
"""Programs whose inner command the unwrapper finds (or, for generic wrappers, guesses)."""


def is_interpreter(program: str) -> bool:
    """Python, Perl, Ruby, Node, PHP, Lua ...: programs that run inline code (``-c``/``-e``)."""
    return _INTERPRETER.fullmatch(program) is not None


_MAX_SCANNED_ARGS = 256  # an unknown program's arguments read for program names (bounded work per command)
_CODE_LIKE = re.compile(r"[\s;|&`$(]")


def names_program(a: Arg) -> bool:
    """Whether an argument is the name of a program (bare, or a path to one): something it may run."""
    if not a.literal or not a.text or a.text.startswith("-"):
        return False
    name = a.text.rsplit("/", 1)[-1]
    return name in _PROGRAM_WORDS or (bool(_INTERPRETER.fullmatch(name)) and name not in _SUBCOMMAND_WORDS)


def argument_programs(args: list[Arg]) -> list[str]:
    """Program names an unknown program's arguments mention, whole or inside code-like text (``-c 'rm x'``)."""
    found: list[str] = []
    for a in args[:_MAX_SCANNED_ARGS]:
        text = a.text.split("=", 1)[1] if a.text.startswith("-") and "=" in a.text else a.text
        if names_program(Arg(text, a.literal)):
            found.append(text.rsplit("/", 1)[-1])
        elif _CODE_LIKE.search(text):
            for word in re.split(r"[\s;|&`$()!'\"<>{}]+", text)[:64]:
                if names_program(Arg(word)):
                    found.append(word.rsplit("/", 1)[-1])
    return found


BUILTINS = frozenset(
    {"cd", "pushd", "popd", "dirs", "export", "declare", "typeset", "local", "readonly", "unset", "set", "shopt"}
    | {"read", "mapfile", "readarray", "exit", "return", "shift", "getopts", "let", "wait", "jobs", "fg", "bg"}
    | {"disown", "umask", "ulimit", "history", "hash", "help", "logout", "times", ":", ".", "source", "alias"}
    | {"unalias", "trap", "eval", "exec", "command", "builtin", "enable", "break", "continue", "caller", "complete"}
    | {"compgen", "compopt", "suspend", "coproc", "fc"}
)
"""Shell builtins and keywords: no wrapper can run them, so they never count as a program an argument names."""

KNOWN_PROGRAMS = frozenset(
    # reading, printing, text processing: their options are understood and none runs a program
    {"ls", "cat", "head", "tail", "grep", "egrep", "fgrep", "rg", "ag", "wc", "sort", "uniq", "cut", "tr", "paste"}
    | {"join", "comm", "diff", "cmp", "file", "stat", "du", "df", "tree", "echo", "printf", "true", "false", "pwd"}
    | {"basename", "dirname", "realpath", "readlink", "which", "type", "test", "[", "[[", "date", "id", "whoami"}
    | {"uname", "hostname", "seq", "yes", "sleep", "nl", "fold", "fmt", "column", "rev", "tac", "expand", "od"}
    | {"unexpand", "xxd", "hexdump", "strings", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum"}
    | {"sha512sum", "b2sum", "cksum", "sum", "base64", "base32", "jq", "yq", "less", "more", "man", "info", "look"}
    | {"diff3", "sdiff", "colordiff", "wdiff", "bat", "batcat", "locate", "lsof", "ps", "pgrep"}
    | {"top", "htop", "free", "uptime", "nproc", "lscpu", "lsblk", "mount", "findmnt", "env", "printenv", "getconf"}
    | {"locale", "tty", "stty", "tput", "clear", "reset", "cal", "expr", "bc", "factor", "numfmt", "shuf"}
    | {"split", "csplit", "iconv", "dos2unix", "unix2dos", "patch", "ping", "dig", "nslookup", "host", "ss"}
    | {"netstat", "ifconfig", "whereis", "apropos", "whatis", "groups", "users", "who", "w", "last"}
    # changing files: what they write or delete is judged by the rules
    | {"touch", "mkdir", "rmdir", "cp", "mv", "ln", "link", "unlink", "rm", "chmod", "chown", "chgrp", "install"}
    | {"truncate", "tee", "dd", "shred", "mktemp", "mkfifo", "mknod", "chattr", "lsattr", "setfacl", "getfacl"}
    | {"sync", "fallocate", "wipefs", "blkdiscard", "sgdisk", "sfdisk", "badblocks", "fdisk", "gdisk"}
    | {"cfdisk", "hdparm", "nvme", "cryptsetup", "parted", "mkswap", "mke2fs", "mkntfs", "mkdosfs", "mkexfatfs"}
    | {"gzip", "gunzip", "zcat", "bzip2", "bunzip2", "bzcat", "xz", "unxz", "xzcat", "zstd", "unzstd", "lz4"}
    | {"zip", "unzip", "tar", "bsdtar", "gtar", "cpio", "7z", "ar", "rsync", "scp", "sftp", "curl", "wget"}
    | {"aria2c", "http", "https", "xh", "wget2", "nc", "ncat", "netcat", "socat", "kill", "pkill", "killall"}
    | {"shutdown", "reboot", "halt", "poweroff", "init", "telinit", "systemctl", "loginctl", "journalctl"}
    | {"crontab", "sed", "awk", "gawk", "mawk", "nawk", "perl", "make", "gmake", "gdb", "vim", "vi", "nvim", "ex"}
    | {"view", "vimdiff", "gvim", "emacs", "nano", "ed", "git"}
    # build and test tools: they run the project's own code, which the sandbox contains
    | {"pytest", "py.test", "pip", "pip3", "cargo", "rustc", "go", "gofmt", "gcc", "g++", "cc", "c++"}
    | {"clang", "clang++", "ld", "as", "cmake", "ninja", "meson", "mvn", "gradle", "java", "javac", "ruff", "mypy"}
    | {"black", "isort", "flake8", "pylint", "pyright", "nox", "pre-commit", "tsc", "eslint", "prettier"}
    | {"jest", "vitest", "mocha", "rake", "dotnet", "swift", "swiftc", "kotlin"}
    | {"kotlinc", "scala", "sbt", "zig", "ghc", "elixir", "erl", "rebar3", "Rscript"}
    | {"julia", "coverage", "pydoc", "twine", "maturin", "sphinx-build", "mkdocs", "hugo", "protoc", "buf"}
    | {"pkg-config", "autoconf", "automake", "libtool", "configure", "strip", "objdump", "nm", "readelf", "ldd"}
    | BUILTINS  # shell builtins and keywords: the walker and the rules know them
)
"""Programs whose behaviour the floor understands: none runs a program its arguments name unless a
rule or the unwrapper looks at exactly that (``find -exec``, ``git -c``, ``tar --to-command``)."""

_SUBCOMMAND_WORDS = frozenset(
    {"test", "install", "run", "build", "help", "info", "list", "show", "status", "type", "set", "time", "exec"}
    | {"add", "remove", "update", "init", "start", "stop", "log", "diff", "check", "format", "lint", "clean"}
    | {"true", "false", "yes", "echo", "printf", "read", "wait", "sync", "file", "look", "last", "users", "w"}
    | {"host", "ip", "as", "ld", "cc", "ar", "nm", "fg", "bg", "view", "more", "less", "link", "split", "sum"}
    | {"expand", "fold", "join", "paste", "cut", "sort", "uniq", "tree", "top", "free", "groups", "who", "id"}
    | {"date", "cal", "seq", "stat", "du", "df", "wc", "head", "tail", "cat", "ls", "pwd", "dirs", "jobs", "hash"}
    | {"history", "times", "help", "complete", "alias", "command", "builtin", "enable", "caller", "shift", "let"}
    | {"mount", "clear", "reset", "column", "rev", "tac", "od", "bc", "dc", "expr", "factor", "locale", "info"}
    | {"go", "mix", "stack", "swift", "bundle", "gem", "coverage", "configure", "strip", ":", "."}
    | {"[", "[[", "which", "whereis", "getconf", "tput", "tty", "stty", "nproc", "uptime", "ps", "mktemp", "patch"}
)
"""Known program names that are also everyday words in arguments (``cargo test``, ``pip install``)."""

_PROGRAM_WORDS = (
    ((KNOWN_PROGRAMS - BUILTINS) | SHELLS | frozenset(_WRAPPERS) | _GENERIC_WRAPPERS)
    | {"xargs", "env", "busybox", "toybox", "find", "watch", "script", "parallel", "ssh", "autossh", "docker"}
    | {"podman", "kubectl", "su", "sudo", "doas", "pkexec", "at", "batch", "python", "python3", "node"}
    | {"eatmydata", "setpriv", "capsh", "chpst", "unshare", "firejail", "flock", "sqlite3", "psql", "mysql"}
    | {"tmux", "screen", "expect", "lldb", "ltrace", "strace", "setsid", "xdg-open", "open", "nohup", "sg"}
) - _SUBCOMMAND_WORDS


def _looks_like_command(a: Arg) -> bool:
    return a.literal and re.fullmatch(r"[A-Za-z_./][A-Za-z0-9_.+/-]*", a.text) is not None and not a.text.isdigit()


def _xargs_replace(opts: list[Arg]) -> str | None:
    for i, a in enumerate(opts):
        if a.text == "-I" and i + 1 < len(opts):
            return opts[i + 1].text
        if a.text.startswith("-I") and len(a.text) > 2:
            return a.text[2:]
        if a.text.startswith("-i") or a.text.startswith("--replace"):
            return "{}"
    return None


def _shell(args: list[Arg], stdin: str | None) -> list[Inner]:
    i = 0
    command_flag = False
    from_stdin = False  # `sh -s args` and `sh - args` read the script from standard input
    while i < len(args):
        a = args[i]
        t = a.text
        if not a.literal:
            break
        if t in ("--", "-"):
            from_stdin = t == "-"
            i += 1
            break
        if t in _SHELL_VALUE_OPTS:
            i += 2
            continue
        if t.startswith("--"):
            if t == "--command":
                command_flag = True
            i += 1
            continue
        if (t.startswith("-") or t.startswith("+")) and len(t) > 1:
            if t[0] == "-" and "c" in t[1:]:
                command_flag = True
            from_stdin = from_stdin or (t[0] == "-" and "s" in t[1:])
            i += 1
            continue
        break
    if command_flag:
        if i >= len(args):
            return [Opaque("unparseable", "-c without shell code")]
        return [Text(args[i], "-c")]
    if (from_stdin or (i < len(args) and args[i].text in _STDIN_FILES)) and stdin is not None:
        return [Text(Arg(stdin), "stdin")]
    if i < len(args) and args[i].text.startswith(("/dev/fd/", "/proc/")):
        return [Opaque("dynamic_shell_code", f"runs a script from {args[i].text}, which cannot be analysed")]
    if i < len(args):
        return []  # a script file: its contents are not part of this command
    if stdin is not None:
        return [Text(Arg(stdin), "stdin")]
    return []


def _env(args: list[Arg]) -> list[Inner]:
    assigns: list[tuple[str, str, bool]] = []
    chdir: Arg | None = None
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        if t == "--":
            i += 1
            break
        if t in ("-S", "--split-string") or (t.startswith("-S") and len(t) > 2) or t.startswith("--split-string="):
            if t in ("-S", "--split-string"):
                value = args[i + 1] if i + 1 < len(args) else Arg("")
                rest = args[i + 2 :]
            else:
                value = Arg(t.split("=", 1)[1] if t.startswith("--") else t[2:], a.literal)
                rest = args[i + 1 :]
            tail = " ".join(_quote(r.text) for r in rest)
            text = Arg(f"{value.text} {tail}".strip(), value.literal and all(r.literal for r in rest))
            prefix = " ".join(_quote(f"{n}={v}") for n, v, _ in assigns)
            return [Text(replace(text, text=f"{prefix} {text.text}".strip() if prefix else text.text), "-S")]
        if t in ("-C", "--chdir") and i + 1 < len(args):
            chdir = args[i + 1]
            i += 2
            continue
        if t.startswith("--chdir="):
            chdir = Arg(t.split("=", 1)[1], a.literal)
            i += 1
            continue
        if t in ("-u", "--unset", "-a", "--argv0"):
            i += 2
            continue
        if t.startswith("-") and len(t) > 1:
            i += 1
            continue
        m = re.match(r"([^=]+)=(.*)", t, re.S)
        if m:
            assigns.append((m.group(1), m.group(2), a.literal))
            i += 1
            continue
        break
    inner = args[i:]
    return [Argv(inner, assigns, chdir=chdir)] if inner else []


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _find(args: list[Arg]) -> list[Inner]:
    roots: list[Arg] = []
    for a in args:
        if a.text.startswith("-") or a.text in ("(", "!", ")"):
            break
        roots.append(a)
    out: list[Inner] = []
    i = 0
    while i < len(args):
        if args[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j].text not in (";", "+"):
                j += 1
            # {} is whatever find finds: anything under a start point, written as "<start>/*"
            for root in (roots or [Arg(".")])[:4]:
                here = (
                    Arg(root.text.rstrip("/") + "/*", root.literal, True) if root.text != "/" else Arg("/*", True, True)
                )
                inner = [_place(a, here) if "{}" in a.text else a for a in args[i + 1 : j]]
                out.append(Argv(inner))
            i = j + 1
        else:
            i += 1
    return out


def _place(a: Arg, value: Arg) -> Arg:
    return Arg(a.text.replace("{}", value.text), a.literal and value.literal, a.glob or value.glob)


def _watch(args: list[Arg]) -> list[Inner]:
    start = _skip_options(args, _Spec("nq", frozenset({"interval", "differences"})))
    if start is None or start >= len(args):
        return []
    if any(a.text in ("-x", "--exec") for a in args[:start]):
        return [Argv(args[start:])]
    rest = args[start:]
    return [Text(Arg(" ".join(a.text for a in rest), all(a.literal for a in rest)), "")]


def _flag_text(args: list[Arg], flags: tuple[str, ...], label: str) -> list[Inner]:
    short = [f[1] for f in flags if len(f) == 2]
    for i, a in enumerate(args):
        clustered = re.fullmatch(r"-[A-Za-z]*[" + "".join(short) + "]", a.text) is not None if short else False
        if (a.text in flags or clustered) and i + 1 < len(args):
            return [Text(args[i + 1], label)]
        for flag in flags:
            if flag.startswith("--") and a.text.startswith(flag + "="):
                return [Text(Arg(a.text.split("=", 1)[1], a.literal), label)]
    return []


def _parallel(args: list[Arg]) -> list[Inner]:
    words: list[Arg] = []
    i = 0
    with_value = {"-j", "-S", "-P", "--jobs", "--sshlogin", "--joblog", "--results", "-a", "--arg-file", "--colsep"}
    while i < len(args):
        t = args[i].text
        if t.startswith(":::"):
            break
        if not words and t.startswith("-"):
            i += 2 if t in with_value else 1
            continue
        words.append(args[i])
        i += 1
    if not words:
        return [Opaque("commands_from_input", "runs commands read from its input, which cannot be analysed")]
    template = " ".join(w.text for w in words)
    literal = all(w.literal for w in words)
    values = [a for a in args[i + 1 :] if not a.text.startswith(":::")][:16] if i < len(args) else []
    if not values:
        return [Text(Arg(template, literal), "")]
    out: list[Inner] = []
    for v in values:
        text = template.replace("{}", _quote(v.text)) if "{}" in template else f"{template} {_quote(v.text)}"
        out.append(Text(Arg(text, literal and v.literal), ""))
    return out


def _git(args: list[Arg]) -> list[Inner]:
    texts = [a.text for a in args]
    out: list[Inner] = []
    for i, t in enumerate(texts):
        if t in ("-x", "--exec") and "rebase" in texts[:i] and i + 1 < len(args):
            out.append(Text(args[i + 1], "rebase --exec"))
        elif t.startswith("--exec=") and "rebase" in texts[:i]:
            out.append(Text(Arg(t.split("=", 1)[1], args[i].literal), "rebase --exec"))
        elif t in ("-c", "--config") and i + 1 < len(args) and "=" in texts[i + 1]:
            key, _, setting = texts[i + 1].partition("=")
            if _GIT_COMMAND_KEY.search(key):  # core.pager, core.sshCommand, diff.external ...: a command
                out.append(Text(Arg(setting.lstrip("!"), args[i + 1].literal), "config", speculative=True))
        elif t in ("--exec", "--upload-pack", "--receive-pack", "-u") and i + 1 < len(args):
            out.append(Text(args[i + 1], "exec option", speculative=True))
        elif t.startswith(("--exec=", "--upload-pack=", "--receive-pack=", "--extcmd=", "-x", "-O")) and len(t) > 2:
            given = t.split("=", 1)[1] if "=" in t and t.startswith("--") else t[2:]
            out.append(Text(Arg(given, args[i].literal), "exec option", speculative=True))
        elif t in ("--extcmd", "-x", "-O", "--open-files-in-pager") and i + 1 < len(args):
            out.append(Text(args[i + 1], "exec option", speculative=True))
        elif t == "foreach" and "submodule" in texts[:i]:
            rest = [a for a in args[i + 1 :] if a.text not in ("--recursive", "-q", "--quiet")]
            if rest:
                out.append(Text(Arg(" ".join(a.text for a in rest), all(a.literal for a in rest)), "foreach"))
            break
        elif t == "run" and "bisect" in texts[:i]:
            out.append(Argv(args[i + 1 :]))
            break
        else:
            # a shell alias (`-c alias.x='!cmd'`, `git config alias.x '!cmd'`) runs its text later
            value = t.split("=", 1)[1] if t.lower().startswith("alias.") and "=" in t else None
            if value is None and t.lower().startswith("alias.") and "config" in texts[:i] and i + 1 < len(args):
                value = texts[i + 1]
            if value is not None and value.startswith("!"):
                out.append(Text(Arg(value[1:], args[i].literal), "alias", speculative=True))
    return out


# Options whose value is code the program runs (make's --eval recipes, gdb's -ex, vim's -c '!cmd').
_CODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "make": ("--eval", "-E"),
    "gmake": ("--eval", "-E"),
    "gdb": ("-ex", "--ex", "-iex", "--iex", "-eval-command", "--eval-command", "-init-eval-command"),
    "lldb": ("-o", "--one-line", "-O", "--one-line-before-file", "-k", "--one-line-on-crash"),
    "vim": ("-c", "--cmd"),
    "vi": ("-c", "--cmd"),
    "nvim": ("-c", "--cmd"),
    "ex": ("-c", "--cmd"),
    "view": ("-c", "--cmd"),
    "vimdiff": ("-c", "--cmd"),
    "gvim": ("-c", "--cmd"),
    "emacs": ("--eval", "-eval"),
    "nc": ("-c", "-e", "--sh-exec", "--exec"),
    "ncat": ("-c", "-e", "--sh-exec", "--exec", "--lua-exec"),
    "netcat": ("-c", "-e"),
    "go": ("-exec", "-toolexec"),
    "rg": ("--pre",),
    "man": ("-P", "--pager", "-H", "--html"),
    "sort": ("--compress-program",),
    "split": ("--filter",),
}
_CODE_PREFIX = re.compile(r"^\s*(?:shell\b|pipe\b|python\b|!+|\|)\s*|^\s*(?:silent!?\s+|exe(?:cute)?\s+)*!\s*")


def _option_code(args: list[Arg], names: tuple[str, ...]) -> list[Inner]:
    """The values of code-running options (and ``+cmd`` for editors), tried as shell text speculatively."""
    out: list[Inner] = []
    for i, a in enumerate(args):
        t = a.text
        value: Arg | None = None
        if t in names and i + 1 < len(args):
            value = args[i + 1]
        elif t.startswith("+") and len(t) > 1:
            value = Arg(t[1:], a.literal)
        else:
            for name in names:
                if t.startswith(name + "=") or (
                    name.startswith("-")
                    and not name.startswith("--")
                    and t.startswith(name)
                    and len(t) > len(name)
                    and len(name) == 2
                ):
                    value = Arg(t[len(name) + (1 if t.startswith(name + "=") else 0) :], a.literal)
                    break
        if value is not None:
            code = _CODE_PREFIX.sub("", value.text, count=1)
            for part in re.split(r"\n|(?<=:);", code)[:8]:
                out.append(Text(Arg(_CODE_PREFIX.sub("", part, count=1), value.literal), "option", speculative=True))
    return out[:16]


_GIT_COMMAND_KEY = re.compile(
    r"pager|editor|command|cmd|program|fsmonitor|external|textconv|driver|askpass|proxy|uploadpack|receivepack",
    re.IGNORECASE,
)
_SSH_VALUE_OPTS = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def _remote(program: str, args: list[Arg]) -> list[Inner]:
    """The command ``ssh host cmd`` or ``docker exec c cmd`` runs elsewhere: judged speculatively (rules only)."""
    if program in ("ssh", "autossh"):
        i = 0
        while i < len(args) and args[i].text.startswith("-"):
            flag = args[i].text
            i += 2 if len(flag) == 2 and flag[1] in _SSH_VALUE_OPTS else 1
        rest = args[i + 1 :]
        if not rest:
            return []
        return [Text(Arg(" ".join(a.text for a in rest), all(a.literal for a in rest)), "remote", speculative=True)]
    texts = [a.text for a in args]
    if "--" in texts:
        return [Argv(args[texts.index("--") + 1 :], speculative=True)]
    if texts[:1] == ["exec"]:
        operands = [i for i, a in enumerate(args) if i > 0 and not a.text.startswith("-")]
        return [Argv(args[k:], speculative=True) for k in operands[1:3]]
    return []


def _inline_code(args: list[Arg], stdin: str | None, program: str = "") -> list[Inner]:
    """Code given inline to an interpreter (``-c``/``-e`` text, or a script on standard input).

    Python is parsed for real (:mod:`ast`): every call that runs a program or deletes a tree is
    judged as the command it runs, and one whose command is only known at run time (or code that
    reaches such a call indirectly: ``exec`` of computed text, ``getattr(os, name)``, ``__import__``)
    cannot be proven safe. Other languages are read with patterns: a literal argument of
    ``system``/``exec``/``spawn``/backticks is the command, anything else there cannot be proven.
    String literals are also tried as shell text speculatively, so a hardline rule still fires.
    """
    python = re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", program) is not None
    code: str | None = None
    skip = False
    for i, a in enumerate(args[:-1]):
        if python:
            if skip or a.text in ("-W", "-X", "--check-hash-based-pycs"):
                skip = not skip
                continue
            if a.text == "-m" or not a.text.startswith("-") or a.text == "-":
                break  # a module or a script file: not part of this command's text
            if "c" not in a.text[1:] or a.text.startswith("--"):
                continue
        if a.text in _CODE_FLAGS or re.fullmatch(r"-[A-Za-z]*[ceE]", a.text):
            if not args[i + 1].literal:
                return [Opaque("dynamic_shell_code", "inline code is only known at run time")]
            code = args[i + 1].text
            break
    if code is None:
        operands = [a for a in args if not a.text.startswith("-") or a.text == "-"]
        if stdin is None or (operands and operands[0].text not in _STDIN_FILES):
            return []
        code = stdin
    if _FORK_CODE.search(code):
        return [Opaque("fork_bomb", "inline code forks in an endless loop")]
    out: list[Inner] = []
    if python:
        out.extend(_python_code(code, 0))
    else:
        out.extend(_pattern_code(code))
    for m in _STRING_LITERAL.finditer(code):
        text = next(g for g in m.groups() if g is not None)
        if " " in text or "/" in text:
            out.append(Text(Arg(text), "code", speculative=True))
    for group in re.findall(r"\[([^\[\]]*)\]", code):
        words = [next(g for g in m.groups() if g is not None) for m in _STRING_LITERAL.finditer(group)]
        if len(words) > 1:
            out.append(Text(Arg(" ".join(_quote(w) for w in words)), "code", speculative=True))
    proven = [item for item in out if not (isinstance(item, Text) and item.speculative)]
    return [*proven[:32], *[item for item in out if item not in proven][:16]]


# Python calls that run shell text, an argv, or delete a tree; names as imported (aliases resolved).
_PY_SHELL = frozenset(
    {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput", "commands.getoutput"}
    | {"commands.getstatusoutput", "platform.popen", "asyncio.create_subprocess_shell", "pty.spawn"}
)
_PY_ARGV = frozenset(
    {"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output", "subprocess.Popen"}
    | {"asyncio.create_subprocess_exec", "os.posix_spawn", "os.posix_spawnp"}
)
_PY_EXEC_PREFIX = ("os.exec", "os.spawn")
_PY_DELETE_TREE = frozenset({"shutil.rmtree"})
_PY_DELETE = frozenset({"os.remove", "os.unlink", "os.rmdir", "os.removedirs"})
_PY_DYNAMIC = frozenset(
    {"exec", "eval", "compile", "__import__", "importlib.import_module", "importlib.__import__", "runpy.run_path"}
    | {"runpy.run_module", "code.interact", "pickle.loads", "pickle.load", "marshal.loads", "ctypes.CDLL"}
    | {"ctypes.cdll.LoadLibrary", "getattr", "globals", "vars", "locals", "breakpoint"}
)
_PY_TWO_PATHS = {
    "os.rename": "mv",
    "os.replace": "mv",
    "shutil.move": "mv",
    "shutil.copy": "cp",
    "shutil.copy2": "cp",
    "shutil.copyfile": "cp",
    "shutil.copytree": "cp",
    "os.symlink": "ln",
    "os.link": "ln",
}
_PY_PATH_METHODS = {"write_text": "tee", "write_bytes": "tee", "unlink": "rm", "rmdir": "rmdir", "touch": "touch"}


def _py_writes(call: ast.Call) -> bool:
    """``open(path, mode)`` with a mode that writes (or a mode the analyser cannot read)."""
    mode: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    mode = next((k.value for k in call.keywords if k.arg in ("mode", "flags")), mode)
    if mode is None:
        return False
    text = _py_str(mode)
    return text is None or any(c in text for c in "wax+")


_PY_MODULES = frozenset({"os", "subprocess", "shutil", "pty", "commands", "platform", "asyncio", "posix", "ctypes"})
_MAX_PY_DEPTH = 4


def _py_name(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    name = ".".join(reversed(parts))
    return "os" + name[5:] if name.startswith("posix.") else name


def _py_str(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _py_argv(node: ast.expr | None) -> list[Arg] | None:
    """An argv list whose program is a literal; computed items become unknown words (no shell parses them)."""
    if not isinstance(node, ast.List | ast.Tuple) or not node.elts or _py_str(node.elts[0]) is None:
        return None
    if any(isinstance(e, ast.Starred) for e in node.elts):
        return None
    out = []
    for e in node.elts[:256]:
        text = _py_str(e)
        out.append(Arg(text) if text is not None else Arg("$(" + ast.unparse(e)[:200] + ")", literal=False))
    return out


def _py_strings(node: ast.expr | None) -> list[str] | None:
    if isinstance(node, ast.List | ast.Tuple):
        items = [_py_str(e) for e in node.elts]
        return None if any(i is None for i in items) else [i for i in items if i is not None]
    return None


def _python_code(code: str, depth: int) -> list[Inner]:
    """What a Python program runs, from its syntax tree."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return [Opaque("unparseable", f"the Python code cannot be parsed ({type(exc).__name__})")]
    aliases: dict[str, str] = {}
    out: list[Inner] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if alias.name == "*":
                    if node.module.split(".")[0] in _PY_MODULES:
                        out.append(Opaque("dynamic_shell_code", f"python imports everything from {node.module}"))
                    continue
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    called: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        called.add(id(node.func))
        if isinstance(node.func, ast.Attribute) and node.func.attr in _PY_PATH_METHODS:
            owner = node.func.value  # Path('x').write_text(...)
            if isinstance(owner, ast.Call) and (_py_name(owner.func, aliases) or "").endswith("Path"):
                path = _py_str(owner.args[0]) if owner.args else None
                if path is not None:
                    out.append(Argv([Arg(_PY_PATH_METHODS[node.func.attr]), Arg(path)]))
        name = _py_name(node.func, aliases)
        if name is None:
            continue
        first = node.args[0] if node.args else None
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if first is None:
            first = keywords.get("args") or keywords.get("cmd") or keywords.get("command")
        if name in _PY_SHELL:
            text = _py_str(first)
            argv = _py_strings(first)
            if text is not None:
                out.append(
                    Text(Arg(text), f"python {name}") if name != "pty.spawn" else Argv([Arg(w) for w in text.split()])
                )
            elif argv is not None:
                out.append(Argv([Arg(w) for w in argv]))
            else:
                out.append(Opaque("dynamic_shell_code", f"python {name}() runs a command only known at run time"))
        elif name in _PY_ARGV or name.startswith(_PY_EXEC_PREFIX):
            values = list(node.args)
            if name.startswith(_PY_EXEC_PREFIX):
                values = [v for v in values if not (isinstance(v, ast.Constant) and isinstance(v.value, int))]
                values = values[1:] if values else []  # the path, then argv (argv[0] names the program)
                if len(values) == 1 and _py_strings(values[0]) is not None:
                    words = _py_strings(values[0])
                else:
                    found = [_py_str(v) for v in values]
                    words = None if any(w is None for w in found) else [w for w in found if w is not None]
                    if words and name.startswith(("os.execv", "os.spawnv")):
                        words = None
            else:
                text = _py_str(first)
                words = _py_strings(first)
                if text is not None:
                    shell = keywords.get("shell")
                    if isinstance(shell, ast.Constant) and shell.value is True:
                        out.append(Text(Arg(text), f"python {name}"))
                        continue
                    words = [text]
                elif "shell" in keywords and words is not None:
                    shell = keywords["shell"]
                    if not (isinstance(shell, ast.Constant) and shell.value in (False, None)):
                        words = None
            partial = _py_argv(first) if not words and name in _PY_ARGV and "shell" not in keywords else None
            if words:
                out.append(Argv([Arg(w) for w in words]))
            elif partial is not None:
                out.append(Argv(partial))  # ['git', 'log', path]: a known program, arguments judged as unknown words
            else:
                out.append(Opaque("dynamic_shell_code", f"python {name}() runs a command only known at run time"))
        elif name in _PY_DELETE_TREE or name in _PY_DELETE:
            path = _py_str(first)
            if path is not None:
                out.append(Argv([Arg("rm"), *([Arg("-rf")] if name in _PY_DELETE_TREE else []), Arg(path)]))
            elif name in _PY_DELETE_TREE:
                out.append(Opaque("dynamic_delete_target", f"python {name}() deletes a tree only known at run time"))
        elif name in ("open", "io.open", "os.open", "codecs.open") and _py_writes(node):
            path = _py_str(first)
            if path is not None:
                out.append(Argv([Arg("tee"), Arg(path)]))  # judged as writing that file
        elif name in _PY_TWO_PATHS and len(node.args) >= 2:
            src, dst = _py_str(node.args[0]), _py_str(node.args[1])
            if src is not None and dst is not None:
                out.append(Argv([Arg(_PY_TWO_PATHS[name]), Arg(src), Arg(dst)]))
        elif name in ("exec", "eval", "compile") and depth < _MAX_PY_DEPTH and _py_str(first) is not None:
            out.extend(_python_code(_py_str(first) or "", depth + 1))
        elif name in _PY_DYNAMIC and not (
            name == "getattr"
            and len(node.args) > 1
            and _py_str(node.args[1])
            and (_py_name(node.args[0], aliases) or "").split(".")[0] not in _PY_MODULES
        ):
            out.append(Opaque("dynamic_shell_code", f"python {name}() may run code the analyser cannot read"))
    for node in ast.walk(tree):
        # a reference to a program-running function that is not a direct call: `f = os.system; f(x)`
        if isinstance(node, ast.Attribute | ast.Name) and id(node) not in called:
            name = _py_name(node, aliases)
            if name is not None and (
                name in _PY_SHELL
                or name in _PY_ARGV
                or name.startswith(_PY_EXEC_PREFIX)
                or name in _PY_DELETE_TREE
                or name in ("sys.modules", "builtins", "__builtins__", "os.__dict__")
            ):
                out.append(Opaque("dynamic_shell_code", f"python refers to {name} without calling it directly"))
    return out


_EXEC_CALL = re.compile(
    r"(?<![\w$])(system|exec|execSync|execFile|execFileSync|spawn|spawnSync|popen|popen2|popen3|capture2e?"
    r"|capture3|shell_exec|passthru|proc_open|pcntl_exec|qx)\b",
)
_EXEC_ARG = re.compile(r"\s*\(?\s*(?:\[\s*)?('(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|`[^`]*`)")
# code evaluated or a module loaded under a computed name: `eval(x)`, `require('child_' + 'process')`
_DYNAMIC_LOAD = (
    r"\beval\s*\(|\bnew\s+Function\b|(?<![\w.])Function\s*\(|\bprocess\s*\.\s*(?:binding|dlopen)\b"
    r"|\b(?:require|import)\s*\(\s*(?!('|\"|`)[^'\"`\n]*\1\s*\))"
)
_EXEC_PRESENT = re.compile(
    r"child_process|\bsystem\s*[(\"']|\bexec(?:Sync|File|FileSync)?\s*[(\"']|\bspawn(?:Sync)?\s*\("
    r"|\bqx\s*[{(/|]|\bpopen\w*\s*\(|shell_exec|passthru|proc_open|pcntl_exec|%x[{(\[]|\bOpen3\b|Deno\.(?:run|Command)"
    r"|Bun\.(?:spawn|\$)|" + _DYNAMIC_LOAD
)


_FS_CALL = re.compile(
    r"\b(rmSync|rm|rmdirSync|rmdir|unlinkSync|unlink|writeFileSync|writeFile|appendFileSync|appendFile"
    r"|createWriteStream|unlink_r|rmtree|remove_dir_all|rm_rf|rm_r)\s*\(\s*(['\"`])([^'\"`\n]*)\2"
)
_FS_PROGRAM = {
    "rmSync": "rm",
    "rm": "rm",
    "rmdirSync": "rm",
    "rmdir": "rm",
    "unlinkSync": "rm",
    "unlink": "rm",
    "rmtree": "rm",
    "rm_rf": "rm",
    "rm_r": "rm",
}


def _pattern_code(code: str) -> list[Inner]:
    """Perl, Ruby, Node, PHP, Lua: the literal commands of ``system``/``exec``/``spawn``/backticks."""
    out: list[Inner] = []
    for m in _FS_CALL.finditer(code):
        program = _FS_PROGRAM.get(m.group(1), "tee")
        out.append(Argv([Arg(program), *([Arg("-rf")] if program == "rm" else []), Arg(m.group(3))]))
    for m in re.finditer(r"(?<![\w\\])`([^`\n]*)`", code):
        out.append(Text(Arg(m.group(1)), "code backticks"))
    if not _EXEC_PRESENT.search(code):
        return out
    found = False
    for m in _EXEC_CALL.finditer(code):
        name = m.group(1)
        arg = _EXEC_ARG.match(code, m.end())
        if arg is None:
            out.append(Opaque("dynamic_shell_code", f"inline code calls {name} with a command only known at run time"))
            continue
        found = True
        literal = arg.group(1)[1:-1]
        words = [
            next(g for g in w.groups() if g is not None)
            for w in _STRING_LITERAL.finditer(
                code[arg.start(1) : arg.start(1) + 4096].split(")", 1)[0].split("]", 1)[0]
            )
        ]
        if name in ("execFile", "execFileSync", "spawn", "spawnSync", "pcntl_exec") or len(words) > 1:
            out.append(Argv([Arg(w) for w in words or [literal]]))
        else:
            out.append(Text(Arg(literal), f"code {name}"))
    if re.search(_DYNAMIC_LOAD, code):
        out.append(Opaque("dynamic_shell_code", "inline code evaluates or loads code only known at run time"))
    elif not found and not out:
        out.append(Opaque("dynamic_shell_code", "inline code runs programs in a way the analyser cannot read"))
    return out
