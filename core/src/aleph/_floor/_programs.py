"""Which words name programs.

The wrappers and how their options are read, the known programs and builtins, interpreters, and
program names in arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aleph._floor._words import SHELLS, Arg


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
