"""What a wrapper runs in turn: ``env``, ``timeout``, ``sudo``, ``xargs``, ``find -exec``, ``bash -c`` ...

:func:`unwrap` maps one program and its expanded arguments to what it runs next: an argument list
(:class:`Argv`), shell code to parse (:class:`Text`), or something that cannot be known
(:class:`Opaque`). The walker in :mod:`aleph._floor._analysis` judges each of them as a command of its own.
"""

from __future__ import annotations

import re
from dataclasses import replace

from aleph._floor._inline import _CODE_OPTIONS, _STDIN_FILES, _inline_code, _option_code
from aleph._floor._programs import (
    _CODE_LIKE,
    _GENERIC_WRAPPERS,
    _INTERPRETER,
    _MAX_SCANNED_ARGS,
    _WRAPPERS,
    BUILTINS,
    KNOWN_PROGRAMS,
    UNWRAPPED,
    _looks_like_command,
    _Spec,
    argument_programs,
    is_interpreter,
    names_program,
)
from aleph._floor._sedawk import awk_code
from aleph._floor._words import SHELLS, Arg, Argv, Inner, Opaque, Text, _quote

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
        return [inner for script in awk_code(args)[0] for inner in _inline_code([Arg("-e"), script], None)]
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
        return [Text(args[i], "-c", positional=tuple(args[i + 1 :]))]
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
        if t.startswith("-") and not t.startswith("--") and len(t) > 2:
            # a cluster of short options, read as getopt does: `-iS 'cmd'`, `-vC/ cmd`, `-iu X cmd`
            for pos, flag in enumerate(t[1:], start=2):
                if flag in "uCSa":
                    t = f"-{flag}{t[pos:]}"
                    break
        if t in ("-S", "--split-string") or (t.startswith("-S") and len(t) > 2) or t.startswith("--split-string="):
            if t in ("-S", "--split-string"):
                value = args[i + 1] if i + 1 < len(args) else Arg("")
                rest = args[i + 2 :]
            else:
                value = Arg(t.split("=", 1)[1] if t.startswith("--") else t[2:], a.literal)
                rest = args[i + 1 :]
            value = replace(value, text=_env_escapes(value.text))
            tail = " ".join(_quote(r.text) for r in rest)
            text = Arg(f"{value.text} {tail}".strip(), value.literal and all(r.literal for r in rest))
            prefix = " ".join(_quote(f"{n}={v}") for n, v, _ in assigns)
            return [Text(replace(text, text=f"{prefix} {text.text}".strip() if prefix else text.text), "-S")]
        if t in ("-C", "--chdir") and i + 1 < len(args):
            chdir = args[i + 1]
            i += 2
            continue
        if t.startswith(("--chdir=", "-C")):
            chdir = Arg(t.split("=", 1)[1] if t.startswith("--") else t[2:], a.literal)
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


def _env_escapes(text: str) -> str:
    r"""``env -S`` text with env's own escapes turned into shell text.

    ``\_`` separates words outside quotes; it and ``\t``, ``\n`` ... are that character inside a word;
    ``\c`` ends the text. Other escapes (``\\``, ``\"``, ``\'``, ``\$``, ``\#``) read the same in shell
    text. Single quotes keep them.
    """
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if c == "'" and quote != '"':
            quote = "" if quote else "'"
        elif c == '"' and quote != "'":
            quote = "" if quote else '"'
        elif c == "\\" and quote != "'" and i + 1 < len(text):
            e = text[i + 1]
            if e == "c" and not quote:
                break
            if e in "_tnrvf":
                char = {"_": " ", "t": "\t", "n": "\n", "r": "\r", "v": "\v", "f": "\f"}[e]
                # unquoted, \_ separates words and the others are a character of the word
                out.append(char if quote or e == "_" else f"'{char}'")
                i += 2
                continue
            out.append(text[i : i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


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
