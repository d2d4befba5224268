"""Code given inline to an interpreter (``python -c``, ``perl -e``, ``vim -c``...): what it runs, deletes and writes.

Python code is parsed with :mod:`ast`; other languages are read with patterns for the calls that run
programs or touch files. Anything not understood becomes :class:`~aleph._floor._words.Opaque`.
"""

from __future__ import annotations

import ast
import re

from aleph._floor._callargs import call_arguments, computed_word
from aleph._floor._words import Arg, Argv, Inner, Opaque, Text, _quote

_CODE_FLAGS = frozenset({"-c", "-e", "-E", "-r", "--eval", "-p", "--print"})


_STDIN_FILES = frozenset({"/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"})


_FORK_CODE = re.compile(
    r"fork\s{0,8}while\s{0,8}fork|loop\s{0,8}\{\s{0,8}fork|while\s{0,8}\(?\s{0,8}(?:1|true|True)\s{0,8}\)?[\s:{]{0,8}(?:os\.|POSIX::)?fork\s{0,8}\(",
    re.IGNORECASE,
)


_STRING_LITERAL = re.compile(r"'((?:[^'\\\n]|\\.)*)'|\"((?:[^\"\\\n]|\\.)*)\"|`([^`]*)`")


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
            if a.text in ("-m", "-mtimeit") and (a.text == "-mtimeit" or args[i + 1].text == "timeit"):
                timed = _timeit_code(args[i + 1 if a.text == "-mtimeit" else i + 2 :])
                if timed is None:
                    return [Opaque("dynamic_shell_code", "python -m timeit runs code only known at run time")]
                code = timed  # its statements and -s setup are Python code run as such
                break
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


def _timeit_code(args: list[Arg]) -> str | None:
    """The Python ``python -m timeit`` runs: its ``-s``/``--setup`` values and statements; None if computed."""
    parts: list[Arg] = []
    i = 0
    while i < len(args):
        t = args[i].text
        if t in ("-s", "--setup") and i + 1 < len(args):
            parts.append(args[i + 1])
            i += 2
            continue
        if t.startswith("--setup="):
            parts.append(Arg(t[len("--setup=") :], args[i].literal))
        elif t.startswith("-s") and len(t) > 2:
            parts.append(Arg(t[2:], args[i].literal))
        elif t in ("-n", "-r", "-u", "--number", "--repeat", "--unit"):
            i += 1
        elif t == "--":
            parts.extend(args[i + 1 :])
            break
        elif not t.startswith("-"):
            parts.append(args[i])
        i += 1
    if any(not p.literal for p in parts):
        return None
    return "\n".join(p.text for p in parts)


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


_PY_PATH_OTHER = frozenset({"rename", "replace", "symlink_to", "hardlink_to", "open", "chmod", "lchmod"})
"""``Path`` methods that write besides :data:`_PY_PATH_METHODS`: a second path, a mode, an open mode."""


def _py_path_other(node: ast.Call, attr: str, aliases: dict[str, str]) -> list[Inner]:
    """``Path('a').rename('b')``, ``.symlink_to('t')``, ``.open('w')``, ``.chmod(0o777)`` as the write each is."""
    owner = node.func.value if isinstance(node.func, ast.Attribute) else None
    if not (isinstance(owner, ast.Call) and (_py_name(owner.func, aliases) or "").endswith("Path") and owner.args):
        return []
    path = _py_str(owner.args[0])
    other = _py_str(node.args[0]) if node.args else None
    if path is None:
        return []
    if attr in ("rename", "replace") and other is not None:
        return [Argv([Arg("mv"), Arg(path), Arg(other)])]
    if attr in ("symlink_to", "hardlink_to") and other is not None:
        return [Argv([Arg("ln"), Arg("-sf"), Arg(other), Arg(path)])]
    if attr == "open":
        mode = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "mode"), None)
        text = _py_str(mode) if mode is not None else "r"
        return [Argv([Arg("tee"), Arg(path)])] if text is None or any(c in text for c in "wax+") else []
    if attr in ("chmod", "lchmod"):
        return [Argv([Arg("chmod"), Arg("0"), Arg(path)])]
    return []


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
        if isinstance(node.func, ast.Attribute) and node.func.attr in _PY_PATH_OTHER:
            out.extend(_py_path_other(node, node.func.attr, aliases))
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
        elif name in ("os.chmod", "os.lchmod", "os.chown", "os.lchown") and _py_str(first) is not None:
            out.append(Argv([Arg(name.split(".")[1].lstrip("l")), Arg("0"), Arg(_py_str(first) or "")]))
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
    r"|capture3|shell_exec|passthru|proc_open|pcntl_exec|qx|(?<=os\.)execute)\b",
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
    r"|Bun\.(?:spawn|\$)|\bos\.execute\b|" + _DYNAMIC_LOAD
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


# calls that delete a whole tree: always (Ruby's FileUtils, Perl's File::Path, fs-extra, rimraf), or with
# a `recursive` option (Node's fs, Deno); the first may be called without parentheses
_TREE_ALWAYS = (
    r"rm_rf|rm_r|rmtree|remove_tree|remove_dir|remove_entry(?:_secure)?|rimraf(?:Sync)?|removeSync|emptyDir(?:Sync)?"
)
_TREE_CALL = re.compile(rf"(?<![\w$])(?:({_TREE_ALWAYS})\b\s*\(?|(rmSync|rm|rmdirSync|rmdir|remove)\s*\()\s*")


def _tree_deletes(code: str) -> list[Inner]:
    """Tree deletions in Perl, Ruby or Node code whose target is computed, which cannot be proven safe.

    ``FileUtils.rm_rf(Dir.home)``, ``fs.rmSync(home, {recursive: true})``, ``rmtree $ENV{HOME}``; a literal
    target given without parentheses (``rmtree '/x'``) is judged as ``rm -rf`` of it.
    """
    out: list[Inner] = []
    for m in _TREE_CALL.finditer(code):
        if m.group(2) and "recursive" not in code[m.end() : m.end() + 1024]:
            continue
        items = call_arguments(code, m.end())
        if not items:
            continue
        target = computed_word(items[0])
        if not target.literal:
            out.append(
                Opaque(
                    "dynamic_delete_target", f"inline code deletes a tree only known at run time ({m.group(0).strip()})"
                )
            )
        elif not m.group(0).rstrip().endswith("("):
            out.append(Argv([Arg("rm"), Arg("-rf"), target]))
    return out


# Perl's two-argument open and Ruby's Kernel#open run a command when the name starts or ends with `|`
_PIPE_OPEN = re.compile(
    r"(?<![\w$.>])(?:Kernel\s*\.\s*)?open\s*\(?\s*(?:[^,()'\"\n]{1,64},\s*)?(['\"])\s*(\|[^'\"\n]*|[^'\"\n]*\|)\s*\1"
)


def _pattern_code(code: str) -> list[Inner]:
    """Perl, Ruby, Node, PHP, Lua: the literal commands of ``system``/``exec``/``spawn``/backticks."""
    out: list[Inner] = []
    for m in _PIPE_OPEN.finditer(code):
        out.append(Text(Arg(m.group(2).strip().strip("|").strip()), "code open"))
    for m in _FS_CALL.finditer(code):
        program = _FS_PROGRAM.get(m.group(1), "tee")
        out.append(Argv([Arg(program), *([Arg("-rf")] if program == "rm" else []), Arg(m.group(3))]))
    out.extend(_tree_deletes(code))
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
        items = call_arguments(code, arg.start(1))
        if name in ("execFile", "execFileSync", "spawn", "spawnSync", "pcntl_exec") or len(items) > 1:
            out.append(Argv([computed_word(pieces) for pieces in items]))
        else:
            word = computed_word(items[0])
            out.append(Text(Arg(word.text, word.literal), f"code {name}"))
    if re.search(_DYNAMIC_LOAD, code):
        out.append(Opaque("dynamic_shell_code", "inline code evaluates or loads code only known at run time"))
    elif not found and not out:
        out.append(Opaque("dynamic_shell_code", "inline code runs programs in a way the analyser cannot read"))
    return out
