"""Walk a parsed shell script and list every command it would run, for the command-policy floor.

:func:`analyse` turns shell text into :class:`Command` records: one per simple command, found in
every list, pipeline, group, loop, function body and substitution, and again for the command a
wrapper runs (``env``, ``timeout``, ``sudo``, ``xargs``, ``find -exec``, ``bash -c``, ``eval`` of
literal text, shell here-documents ...). Words are normalised (quotes spliced, ``$'..'`` decoded,
braces expanded, ``$IFS`` split, ``~``/``$HOME`` replaced); redirection targets are resolved
against the working directory, which follows literal ``cd``. What cannot be known before the
command runs is reported as an :class:`Unknown`, never guessed. Program-specific meaning
(what ``rm -rf`` deletes, what ``dd of=`` writes) is the policy's business, not this module's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from aleph._floor._braces import _brace_expand, assignment_tildes
from aleph._floor._command import Analysis, Command, Limits, Unknown, basename, resolve
from aleph._floor._longopts import canonical_options
from aleph._floor._parse import parse
from aleph._floor._syntax import (
    Budget,
    BudgetExceeded,
    Compound,
    FuncDef,
    Node,
    Pipeline,
    Redirect,
    Script,
    SegKind,
    ShellSyntaxError,
    Simple,
    Word,
)
from aleph._floor._wrappers import SHELLS, Arg, Argv, Text, unmodelled, unwrap

__all__ = [
    "SHELLS",
    "Analysis",
    "Arg",
    "Command",
    "Limits",
    "Unknown",
    "analyse",
    "basename",
    "resolve",
]


_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


@dataclass(slots=True)
class _Ctx:
    cwd: str | None
    depth: int
    via: tuple[str, ...] = ()
    upstream: tuple[str, ...] = ()
    stdin: str | None = None
    funcs: tuple[str, ...] = ()
    piped: bool = False
    background: bool = False
    speculative: bool = False
    loop_vars: tuple[tuple[str, Arg], ...] = ()  # for-loop variables bound to literal relative words
    bindable: bool = True  # no functions, eval, source or namerefs that could change a loop variable unseen


def analyse(
    text: str, *, home: str, cwd: str | None = None, stdin: str | None = None, limits: Limits | None = None
) -> Analysis:
    """Analyse shell ``text``; ``stdin`` is what its first command reads (a script, if that is a shell)."""
    limits = limits or Limits()
    result = Analysis()
    if len(text) > limits.max_input_chars:
        result.budget_exceeded = f"the command is longer than {limits.max_input_chars} characters"
        return result
    budget = Budget(limits.max_commands, limits.max_depth, limits.max_words)
    walker = _Walker(result, budget, home.rstrip("/") or "/")
    try:
        walker.text(text, _Ctx(cwd=cwd, depth=0, stdin=stdin), label=None)
    except BudgetExceeded as exc:
        result.budget_exceeded = str(exc)
    except RecursionError:
        result.budget_exceeded = "nesting too deep"
    return result


class _Walker:
    def __init__(self, result: Analysis, budget: Budget, home: str) -> None:
        self.result = result
        self.budget = budget
        self.home = home
        self.self_calls: dict[str, list[bool]] = {}
        # files this command writes (path -> content when known): `echo ... > s.sh; sh s.sh` runs that content
        self.written: dict[str, str | None] = result.written
        self.values: dict[str, set[str]] = {}

    def value(self, name: str, value: str) -> None:
        values = self.values.setdefault(name, set())
        if len(values) < 16:
            values.add(value)

    def unknown(self, ctx: _Ctx, rule: str, reason: str) -> None:
        if not ctx.speculative:
            self.result.unknowns.append(Unknown(rule, reason))

    # -- structure --------------------------------------------------------------------------

    def text(self, text: str, ctx: _Ctx, label: str | None) -> frozenset[str]:
        """Parse and walk shell code (the top-level command, ``bash -c`` text, literal ``eval`` text)."""
        self.budget.check_depth(ctx.depth)
        cleaned = _INVISIBLE.sub("", text)
        try:
            script = parse(cleaned, self.budget, ctx.depth)
        except ShellSyntaxError as exc:
            where = f" in {label} text" if label else ""
            self.unknown(ctx, "unparseable", f"cannot parse the shell code{where}: {exc}")
            return self.fallback(cleaned, ctx)
        if label:
            ctx.via = (*ctx.via, label)  # ctx is the caller's fresh copy
        ctx.bindable = ctx.bindable and not _HIDDEN_ASSIGNMENT.search(cleaned)
        return self.script(script, ctx)

    def fallback(self, text: str, ctx: _Ctx) -> frozenset[str]:
        """Unparseable text: still look at every piece between operators, so a hardline rule can fire."""
        programs: set[str] = set()
        spec = replace(ctx, speculative=True, depth=ctx.depth + 1)
        for piece in re.split(r"[;&|()`\n{}]+|\$\(|<\(|>\(", text):
            words = [w.strip("'\"") for w in piece.split()]
            words = [w for w in words if w and not _assignment_like(w)]
            if words:
                argv = [Arg(w.replace("'", "").replace('"', "")) for w in words]
                programs |= self.emit(argv, [], [], spec, frozenset())
        return frozenset(programs)

    def script(self, script: Script, ctx: _Ctx) -> frozenset[str]:
        programs: set[str] = set()
        for pipeline in script:
            programs |= self.pipeline(pipeline, ctx)
        return frozenset(programs)

    def pipeline(self, pipeline: Pipeline, ctx: _Ctx) -> frozenset[str]:
        programs: set[str] = set()
        upstream: tuple[str, ...] = ctx.upstream
        piped = len(pipeline.cmds) > 1
        fed: str | None = None
        for index, node in enumerate(pipeline.cmds):
            stage = ctx
            if piped or pipeline.background:
                stage = replace(ctx, piped=piped, background=pipeline.background, upstream=upstream)
                if index > 0:
                    stage.stdin = fed
            found = self.node(node, stage)
            fed = self.printed_text(node) if piped else None
            if piped:
                # each stage of a pipeline is a subshell: a cd inside it does not leak
                upstream = (*upstream, *sorted(found))
            else:
                ctx.cwd = stage.cwd
            programs |= found
        return frozenset(programs)

    def node(self, node: Node, ctx: _Ctx) -> frozenset[str]:
        if isinstance(node, Simple):
            return self.simple(node, ctx)
        if isinstance(node, FuncDef):
            return self.funcdef(node, ctx)
        return self.compound(node, ctx)

    def printed_text(self, node: Node, *, writing: bool = False) -> str | None:
        """What a literal ``echo``/``printf``/``cat <<EOF`` prints (approximately).

        So ``echo '...' | sh`` and ``echo '...' > s.sh; sh s.sh`` can be analysed. ``writing``: the
        node's output redirections are the file being written, not a reason to give up.
        """
        if not isinstance(node, Simple) or not node.words:
            return None
        inputs = [r for r in node.redirects if r.heredoc is not None or r.op in ("<<<", "<", "<&", "<>")]
        if len(inputs) != len(node.redirects) and not writing:
            return None
        if len(node.words) == 1 and node.words[0].raw == "cat" and len(inputs) == 1:
            r = inputs[0]  # cat <<EOF | sh
            if r.heredoc is not None:
                return "".join(text for _, text in r.heredoc.segs)
            if r.op == "<<<" and r.target is not None:
                return " ".join(a.text for a in self.expand(r.target))
            return None
        if inputs:
            return None
        argv = [a for w in node.words for a in self.expand(w)]
        if not all(a.literal for a in argv) or argv[0].text not in ("echo", "printf"):
            return None
        args = [a.text for a in argv[1:]]
        if argv[0].text == "printf":
            # only a format without directives or escapes other than \n prints itself verbatim
            fmt = args[0] if args else ""
            return fmt.replace("\\n", "\n") if "%" not in fmt and "\\" not in fmt.replace("\\n", "") else None
        escapes = False
        while args and re.fullmatch(r"-[neE]+", args[0]):
            escapes = escapes or "e" in args[0]
            args = args[1:]
        text = " ".join(args)
        return None if escapes and "\\" in text else text

    def funcdef(self, node: FuncDef, ctx: _Ctx) -> frozenset[str]:
        name = node.name
        self.self_calls[name] = []
        inner = replace(ctx, funcs=(*ctx.funcs, name), piped=False, background=False)
        programs = self.node(node.body, inner)
        calls = self.self_calls.pop(name)
        if any(calls) or len(calls) >= 2:
            self.result.fork_bombs.append(f"function '{name}' starts copies of itself")
        return programs

    def compound(self, node: Compound, ctx: _Ctx) -> frozenset[str]:
        inner = replace(ctx, depth=ctx.depth + 1)
        programs: set[str] = set()
        for word in node.words:
            programs |= self.word_subs(word, inner)
        input_programs, redirects, stdin = self.redirects(node.redirects, inner)
        programs |= input_programs
        if redirects:
            # `{ ...; } > file` writes file whatever runs inside: judge the redirection on its own
            self.emit([], [], redirects, inner, input_programs)
        if stdin is not None:
            inner.stdin = stdin
        if node.var is not None:
            for a in [a for w in node.words for a in self.expand(w)][:64]:
                if a.literal:
                    self.value(node.var, a.text)
        if node.var is not None and ctx.bindable and not _rebinds(node.bodies, node.var):
            binding = self.loop_binding(node.words)
            if binding is not None:
                inner.loop_vars = (*inner.loop_vars, (node.var, binding))
        for body in node.bodies:
            programs |= self.script(body, inner)
        if node.kind in ("while", "until") and _forever(node) and any(p.background for p in node.bodies[1]):
            self.result.fork_bombs.append(f"an endless {node.kind} loop starts background jobs")
        if node.kind != "subshell":
            ctx.cwd = inner.cwd
        return frozenset(programs)

    def loop_binding(self, words: list[Word]) -> Arg | None:
        """What ``$f`` stands for in ``for f in a b *.txt``, if every value is a literal relative path.

        The glob wins if there is one. Anything absolute, ``..`` or computed binds nothing.
        """
        values = [a for w in words for a in self.expand(w)]
        if not values or any(
            not a.literal or a.text.startswith("/") or ".." in a.text.split("/") or a.text in ("", ".") for a in values
        ):
            return None
        return next((a for a in values if a.glob), values[0])

    def word_subs(self, word: Word, ctx: _Ctx) -> frozenset[str]:
        programs: set[str] = set()
        for sub in word.subs:
            inner = replace(ctx, depth=ctx.depth + 1, upstream=(), stdin=None, piped=False, background=False)
            programs |= self.script(sub.script, inner)
        return frozenset(programs)

    def redirects(
        self, redirects: list[Redirect], ctx: _Ctx
    ) -> tuple[frozenset[str], list[tuple[str, str | None, Arg | None]], str | None]:
        programs: set[str] = set()
        out: list[tuple[str, str | None, Arg | None]] = []
        stdin: str | None = None
        for r in redirects:
            if r.target is not None:
                programs |= self.word_subs(r.target, ctx)
            if r.heredoc is not None:
                programs |= self.word_subs(r.heredoc, ctx)
                stdin = "".join(text for _, text in r.heredoc.segs)
                continue
            if r.op == "<<<" and r.target is not None:
                expanded = self.expand(r.target)
                stdin = " ".join(a.text for a in expanded) if all(a.literal for a in expanded) else None
                if stdin is None:  # computed text on standard input: kept, so a shell reading it is judged
                    out.append((r.op, r.fd, Arg(r.target.raw, literal=False)))
                continue
            target = None
            if r.target is not None:
                expanded = self.expand(r.target, ctx.loop_vars)
                target = expanded[0] if len(expanded) == 1 else Arg(r.target.raw, literal=False)
            out.append((r.op, r.fd, target))
        return frozenset(programs), out, stdin

    # -- words ------------------------------------------------------------------------------

    def expand(self, word: Word, loop_vars: tuple[tuple[str, Arg], ...] = ()) -> list[Arg]:
        """Brace expansion, ``$IFS`` splitting and ``~``/``$HOME``, then render each resulting word."""
        segs = assignment_tildes(word.segs)
        if len(segs) == 1 and segs[0][0] == "u" and "{" not in segs[0][1]:
            self.budget.count_words(1)
            return [Arg(segs[0][1], True, _is_glob(segs[0][1]))]
        if any(kind == "u" and "{" in text for kind, text in segs):
            # tilde expansion follows brace expansion: `{~,x}` gives `~`, which is the home directory
            variants = [_leading_tilde(v) for v in _brace_expand(segs, self.budget)]
        else:
            variants = [list(segs)]
        out: list[Arg] = []
        for variant in variants:
            fields: list[list[tuple[SegKind, str]]] = [[]]
            for kind, text in variant:
                if kind == "ifs":
                    fields.append([])
                else:
                    fields[-1].append((kind, text))
            for part in fields:
                # an unquoted word that expanded to nothing ({,a}, $IFS) is dropped, as bash does
                if any(kind != "u" or text for kind, text in part) or (len(fields) == 1 and len(variants) == 1):
                    out.append(self.render(part, loop_vars))
        self.budget.count_words(len(out))
        return out

    def render(self, segs: list[tuple[SegKind, str]], loop_vars: tuple[tuple[str, Arg], ...] = ()) -> Arg:
        text: list[str] = []
        literal = True
        glob = False
        for kind, value in segs:
            if kind == "home":
                text.append(self.home)
            elif kind == "d" and loop_vars and (bound := _bound(value, loop_vars)) is not None:
                text.append(bound.text)
                glob = glob or bound.glob
            elif kind == "d":
                literal = False
                text.append(value)
            else:
                if kind == "u" and _is_glob(value):
                    glob = True
                text.append(value)
        return Arg("".join(text), literal, glob)

    # -- simple commands --------------------------------------------------------------------

    def simple(self, node: Simple, ctx: _Ctx) -> frozenset[str]:
        programs: set[str] = set()
        sub_programs: set[str] = set()
        argv: list[Arg] = []
        for word in node.words:
            if word.subs:
                sub_programs |= self.word_subs(word, ctx)
            argv.extend(self.expand(word, ctx.loop_vars))
        assigns: list[tuple[str, str, bool]] = []
        for assign in node.assigns:
            if assign.index is not None:
                sub_programs |= self.word_subs(assign.index, ctx)
            items = [assign.value] if assign.value is not None else assign.array
            values: list[Arg] = []
            for item in items:
                sub_programs |= self.word_subs(item, ctx)
                values.append(self.render([s for s in item.segs if s[0] != "ifs"]))
            assigns.append((assign.name, " ".join(v.text for v in values), all(v.literal for v in values)))
        redirects: list[tuple[str, str | None, Arg | None]] = []
        if node.redirects:
            input_programs, redirects, stdin = self.redirects(node.redirects, ctx)
            sub_programs |= input_programs
            if stdin is not None:
                ctx = replace(ctx, stdin=stdin)
        programs |= sub_programs
        for op, fd, target in redirects:
            if op in (">", ">>", ">|", "&>", "&>>") and fd in (None, "1") and target is not None and target.literal:
                path = resolve(target.text, ctx.cwd)
                if path is not None:
                    self.written[path] = self.printed_text(node, writing=True) if op in (">", ">|") else None
        programs |= self.emit(argv, assigns, redirects, ctx, frozenset(sub_programs))
        return frozenset(programs)

    def emit(
        self,
        argv: list[Arg],
        assigns: list[tuple[str, str, bool]],
        redirects: list[tuple[str, str | None, Arg | None]],
        ctx: _Ctx,
        input_programs: frozenset[str],
    ) -> frozenset[str]:
        """Record one command, then whatever it runs in turn (wrappers, ``-c`` text, ``eval``)."""
        self.budget.count_command()
        self.budget.check_depth(ctx.depth)
        program = ""
        if argv:
            head = argv[0]
            if head.literal and not head.glob:
                program = basename(head.text)
            else:
                self.unknown(ctx, "dynamic_program", f"the program name {head.text!r} is only known at run time")
        if program:
            argv = [argv[0], *canonical_options(program, argv[1:])]  # `--recur` is `--recursive`, as getopt reads it
        command = Command(
            argv=tuple(argv),
            program=program,
            assigns=tuple(assigns),
            redirects=tuple(redirects),
            upstream=ctx.upstream,
            stdin_known=ctx.stdin is not None,
            input_programs=input_programs,
            via=ctx.via,
            cwd=ctx.cwd,
            depth=ctx.depth,
            speculative=ctx.speculative,
            values=self.values,
        )
        self.result.commands.append(command)
        for name, value, literal in assigns:
            if literal:
                self.value(name, value)
        if program in ("export", "declare", "typeset", "local", "readonly"):
            for a in argv[1:]:
                m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", a.text, re.S)
                if m and a.literal:
                    self.value(m.group(1), m.group(2))
        programs = {program} if program else set()
        if program in ctx.funcs:
            self.self_calls[program].append(ctx.piped or ctx.background)
        if not program:
            return frozenset(programs)
        if program == "cd" or program == "pushd":
            ctx.cwd = self.cd(argv[1:], ctx.cwd)
        script = self.written_script(program, argv, redirects, ctx.cwd)
        if script is not None:
            path, content = script
            if content is None:
                self.unknown(ctx, "dynamic_shell_code", f"runs {path}, a script this command writes")
            else:
                programs |= self.text(content, replace(ctx, depth=ctx.depth + 1, stdin=None), f"script {path}")
        items = unwrap(program, list(argv[1:]), ctx.stdin)
        if not items and _workspace_program(argv[0].text) and program not in SHELLS:
            items = unmodelled(list(argv[1:]))  # `./tools/ls` is a file of the workspace, not ls
        inner = replace(ctx, depth=ctx.depth + 1) if items else ctx
        for item in items:
            if isinstance(item, Text):
                label = f"{program} {item.label}".strip()
                if item.speculative:
                    spec = replace(inner, stdin=None, speculative=True)
                    programs |= self.text(item.arg.text, spec, label)
                elif item.arg.literal:
                    sub = replace(inner, stdin=None, loop_vars=_positional(item, inner.loop_vars))
                    programs |= self.text(item.arg.text, sub, label)
                    if program == "eval":  # eval runs in this shell: its cd stays
                        ctx.cwd = sub.cwd
                else:
                    self.unknown(ctx, "dynamic_shell_code", f"{label}: shell code is only known at run time")
                    programs |= self.fallback(item.arg.text, inner)
            elif isinstance(item, Argv):
                if not item.argv:
                    continue
                spec = replace(inner, via=(*ctx.via, program), speculative=ctx.speculative or item.speculative)
                if item.chdir is not None:
                    spec.cwd = resolve(item.chdir.text, ctx.cwd) if item.chdir.literal else None
                programs |= self.emit(item.argv, item.assigns, [], spec, input_programs)
                if program in ("builtin", "command"):  # `builtin cd /` changes this shell's directory
                    ctx.cwd = spec.cwd
            elif item.rule == "fork_bomb":
                self.result.fork_bombs.append(f"{program}: {item.reason}")
            else:
                self.unknown(ctx, item.rule, f"{program}: {item.reason}")
        return frozenset(programs)

    def written_script(
        self,
        program: str,
        argv: list[Arg],
        redirects: list[tuple[str, str | None, Arg | None]],
        cwd: str | None,
    ) -> tuple[str, str | None] | None:
        """The file (and its content) this command runs as a script, if an earlier part of the text wrote it."""
        if not self.written:
            return None
        candidates: list[Arg] = []
        if "/" in argv[0].text:
            candidates.append(argv[0])  # ./s.sh
        if program in SHELLS or program in ("source", "."):
            operands = [a for a in argv[1:] if not a.text.startswith(("-", "+"))]
            candidates.extend(operands[:1])
            candidates.extend(t for op, fd, t in redirects if op == "<" and fd in (None, "0") and t is not None)
        for arg in candidates:
            path = resolve(arg.text, cwd) if arg.literal else None
            if path is not None and path in self.written:
                return path, self.written[path]
        return None

    def cd(self, args: list[Arg], cwd: str | None) -> str | None:
        operands = [a for a in args if not (a.literal and a.text.startswith("-") and a.text != "-")]
        if not operands:
            return self.home
        target = operands[0]
        if not target.literal or target.glob or target.text == "-":
            return None
        return resolve(target.text, cwd)


def _workspace_program(head: str) -> bool:
    """A program word that is a path outside the system's program directories (``./tools/git``)."""
    return "/" in head and not head.startswith(("/usr/", "/bin/", "/sbin/", "/opt/", "/nix/"))


def _leading_tilde(segs: list[tuple[SegKind, str]]) -> list[tuple[SegKind, str]]:
    if not segs or segs[0][0] != "u" or not segs[0][1].startswith("~"):
        return segs
    text = segs[0][1]
    m = re.match(r"~[^/]*", text)
    assert m is not None
    head: tuple[SegKind, str] = ("home", "~") if m.group() == "~" else ("d", m.group())
    rest: list[tuple[SegKind, str]] = [("u", text[m.end() :])] if len(text) > m.end() else []
    return [head, *rest, *segs[1:]]


def _is_glob(text: str) -> bool:
    """Unquoted ``*``, ``?`` or a ``[...]`` bracket (linear: no regex backtracking on long words)."""
    if "*" in text or "?" in text:
        return True
    start = text.find("[")
    return start >= 0 and text.find("]", start + 1) > 0


# Ways a variable can change without an assignment in the loop body itself: a function called from
# it, eval/source text, a nameref, an alias, decoded $'...' text. Any of these turns loop binding off.
_HIDDEN_ASSIGNMENT = re.compile(
    r"\(\s*\)|\bfunction\b|\beval\b|\bsource\b|(?:^|[\s;&|(])\.\s|\$'|\balias\b|BASH_FUNC_"
    r"|\b(?:declare|local|typeset|readonly|export)\b[^\n;|&]{0,200}?\s-[A-Za-z]*n"
)


_REBINDERS = frozenset({"eval", "source", ".", "read", "mapfile", "readarray", "let", "getopts", "printf", "unset"})


def _rebinds(bodies: list[Script], name: str) -> bool:
    """Whether a loop body may give ``name`` another value (conservative: any bare mention counts)."""
    mention = re.compile(rf"(?<![\w$])(?<!\$\{{){re.escape(name)}(?!\w)|\$\{{{re.escape(name)}:?[=?]")

    def words(word_list: list[Word]) -> bool:
        return any(mention.search(w.raw) or any(scripts([sub.script]) for sub in w.subs) for w in word_list)

    def node(n: Node) -> bool:
        if isinstance(n, FuncDef):
            return node(n.body)
        if isinstance(n, Simple):
            if any(a.name == name for a in n.assigns) or (n.words and n.words[0].raw in _REBINDERS):
                return True
            values = [w for a in n.assigns for w in ([a.value] if a.value else a.array)]
            targets = [r.target for r in n.redirects if r.target is not None]
            return words(n.words) or words(values) or words(targets)
        return n.var == name or words(n.words) or scripts(n.bodies)

    def scripts(script_list: list[Script]) -> bool:
        return any(node(n) for script in script_list for pipeline in script for n in pipeline.cmds)

    return scripts(bodies)


_SHIFTS = re.compile(r"(?<![\w-])(?:shift|set|getopts|eval|source|\.)(?![\w-])|\(\s*\)")
"""Words after which ``$1``... may no longer be what the caller passed (or a function has its own)."""


def _positional(item: Text, outer: tuple[tuple[str, Arg], ...]) -> tuple[tuple[str, Arg], ...]:
    """``sh -c CODE arg0 arg1...``: ``$0``, ``$1``... (and ``$@`` for a single argument) bound to the literal words.

    ``find -exec sh -c 'rm -rf "$1"' _ {} +`` is then judged with find's targets as rm's operands.
    Code that shifts or resets them (or defines functions) keeps them unknown.
    """
    if not item.positional or _SHIFTS.search(item.arg.text):
        return outer
    # An unquoted reference globs its value: a word that was quoted outside is a pattern inside.
    words = [Arg(a.text, True, a.glob or _is_glob(a.text)) if a.literal else a for a in item.positional[:10]]
    bound = [(str(n), a) for n, a in enumerate(words) if a.literal]
    if len(words) == 2 and words[1].literal:
        bound += [("@", words[1]), ("*", words[1])]
    return (*outer, *bound)


def _bound(source: str, loop_vars: tuple[tuple[str, Arg], ...]) -> Arg | None:
    m = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*|[0-9@*])\}?", source)
    if m is None:
        return None
    return next((value for name, value in reversed(loop_vars) if name == m.group(1)), None)


def _forever(node: Compound) -> bool:
    """A ``while true``/``while :``/``until false`` loop condition."""
    cond = node.bodies[0]
    if len(cond) != 1 or len(cond[0].cmds) != 1 or cond[0].negated:
        return False
    cmd = cond[0].cmds[0]
    if not isinstance(cmd, Simple) or len(cmd.words) != 1:
        return False
    word = cmd.words[0].raw
    return word in (("true", ":") if node.kind == "while" else ("false",))


def _assignment_like(word: str) -> bool:
    return re.match(r"[A-Za-z_][A-Za-z0-9_]*=", word) is not None
