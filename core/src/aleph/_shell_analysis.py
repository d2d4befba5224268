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

import itertools
import posixpath
import re
from dataclasses import dataclass, field, replace

from aleph._shell_parse import (
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
    parse,
)

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

SHELLS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "ash", "yash", "posh", "rbash", "fish", "lksh", "oksh"}
    | {"csh", "tcsh"}
)
"""Programs that run shell code from ``-c``, a file or standard input."""

_MAX_BRACE_WORD = 4_096
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


@dataclass(frozen=True, slots=True)
class Limits:
    """The analysis budget: every number an input controls is bounded."""

    max_input_chars: int = 262_144
    max_commands: int = 1_000
    max_depth: int = 24
    max_words: int = 20_000


@dataclass(frozen=True, slots=True)
class Arg:
    """One expanded word: its text (dynamic parts keep their source text), whether it is fully known, glob."""

    text: str
    literal: bool = True
    glob: bool = False


@dataclass(frozen=True, slots=True)
class Command:
    """One command the text would run, after unwrapping.

    :ivar argv: the expanded words, program first (may be empty for a bare assignment).
    :ivar program: basename of the program, ``""`` if none or not known.
    :ivar assigns: ``(name, value, literal)`` for each ``NAME=value`` given to this command (or on its own).
    :ivar redirects: ``(operator, fd, target)``; ``target`` is ``None`` for fd duplications.
    :ivar upstream: programs of earlier stages of the same pipeline (what feeds its standard input).
    :ivar stdin_known: its standard input is known text (a here-document, here-string, literal ``echo``).
    :ivar input_programs: programs inside the substitutions in its words and input redirections.
    :ivar via: the wrappers it was found inside, outermost first (``("sudo", "bash -c")``).
    :ivar cwd: the working directory it runs in, when known.
    :ivar speculative: a guess at what a loosely known wrapper runs; only rules apply to it.
    """

    argv: tuple[Arg, ...]
    program: str
    assigns: tuple[tuple[str, str, bool], ...] = ()
    redirects: tuple[tuple[str, str | None, Arg | None], ...] = ()
    upstream: tuple[str, ...] = ()
    stdin_known: bool = False
    input_programs: frozenset[str] = frozenset()
    via: tuple[str, ...] = ()
    cwd: str | None = None
    depth: int = 0
    speculative: bool = False
    memo: dict[str, object] = field(default_factory=dict, compare=False, repr=False, hash=False)
    """Per-command scratch space for facts the rules derive more than once (write targets)."""

    @property
    def args(self) -> tuple[Arg, ...]:
        """The arguments after the program."""
        return self.argv[1:]

    @property
    def text(self) -> str:
        """Normalised text: assignments, program, arguments and redirections, space-joined."""
        parts = [f"{name}={value}" for name, value, _ in self.assigns]
        parts.extend(a.text for a in self.argv)
        parts.extend(f"{op} {target.text}" for op, _, target in self.redirects if target is not None)
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Unknown:
    """Something the analyser cannot prove safe: a rule name for it and the reason."""

    rule: str
    reason: str


@dataclass(slots=True)
class Analysis:
    """Everything :func:`analyse` found."""

    commands: list[Command] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)
    fork_bombs: list[str] = field(default_factory=list)
    budget_exceeded: str | None = None


def basename(text: str) -> str:
    """The program basename of a (possibly path-qualified) program word."""
    return text.rstrip("/").rsplit("/", 1)[-1]


def resolve(text: str, cwd: str | None) -> str | None:
    """Absolute, normalised form of a path (no filesystem access); ``None`` if relative and cwd unknown."""
    if not text.startswith("/"):
        if cwd is None:
            return None
        text = f"{cwd}/{text}"
    path = posixpath.normpath(text)
    return "/" + path.lstrip("/") if path.startswith("//") else path


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

    def printed_text(self, node: Node) -> str | None:
        """What a literal ``echo``/``printf`` prints (approximately), so ``echo '...' | sh`` can be analysed."""
        if not isinstance(node, Simple) or not node.words:
            return None
        if len(node.words) == 1 and node.words[0].raw == "cat" and len(node.redirects) == 1:
            r = node.redirects[0]  # cat <<EOF | sh
            if r.heredoc is not None:
                return "".join(text for _, text in r.heredoc.segs)
            if r.op == "<<<" and r.target is not None:
                return " ".join(a.text for a in self.expand(r.target))
            return None
        if node.redirects:
            return None
        argv = [a for w in node.words for a in self.expand(w)]
        if not all(a.literal for a in argv) or argv[0].text not in ("echo", "printf"):
            return None
        args = [a.text for a in argv[1:]]
        while argv[0].text == "echo" and args and re.fullmatch(r"-[neE]+", args[0]):
            args = args[1:]
        return " ".join(args).replace("\\n", "\n")

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
        segs = word.segs
        if len(segs) == 1 and segs[0][0] == "u" and "{" not in segs[0][1]:
            self.budget.count_words(1)
            return [Arg(segs[0][1], True, _is_glob(segs[0][1]))]
        if any(kind == "u" and "{" in text for kind, text in segs):
            variants = _brace_expand(segs, self.budget)
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
                if part or len(fields) == 1:
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
        )
        self.result.commands.append(command)
        programs = {program} if program else set()
        if program in ctx.funcs:
            self.self_calls[program].append(ctx.piped or ctx.background)
        if not program:
            return frozenset(programs)
        if program == "cd" or program == "pushd":
            ctx.cwd = self.cd(argv[1:], ctx.cwd)
        items = _unwrap(program, list(argv[1:]), ctx.stdin)
        inner = replace(ctx, depth=ctx.depth + 1) if items else ctx
        for item in items:
            if isinstance(item, _Text):
                label = f"{program} {item.label}".strip()
                if item.speculative:
                    spec = replace(inner, stdin=None, speculative=True)
                    programs |= self.text(item.arg.text, spec, label)
                elif item.arg.literal:
                    sub = replace(inner, stdin=None)
                    programs |= self.text(item.arg.text, sub, label)
                    if program == "eval":  # eval runs in this shell: its cd stays
                        ctx.cwd = sub.cwd
                else:
                    self.unknown(ctx, "dynamic_shell_code", f"{label}: shell code is only known at run time")
                    programs |= self.fallback(item.arg.text, inner)
            elif isinstance(item, _Argv):
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

    def cd(self, args: list[Arg], cwd: str | None) -> str | None:
        operands = [a for a in args if not (a.literal and a.text.startswith("-") and a.text != "-")]
        if not operands:
            return self.home
        target = operands[0]
        if not target.literal or target.glob or target.text == "-":
            return None
        return resolve(target.text, cwd)


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


def _bound(source: str, loop_vars: tuple[tuple[str, Arg], ...]) -> Arg | None:
    m = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", source)
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


def _brace_expand(segs: list[tuple[SegKind, str]], budget: Budget) -> list[list[tuple[SegKind, str]]]:
    """Bash brace expansion over unquoted text (``{a,b}``, ``{1..3}``), bounded by the word budget."""
    if sum(len(text) for _, text in segs) > _MAX_BRACE_WORD:
        raise BudgetExceeded(f"a word with braces longer than {_MAX_BRACE_WORD} characters")
    atoms: list[tuple[SegKind, str]] = []
    for kind, text in segs:
        if kind == "u":
            atoms.extend(("u", ch) for ch in text)
        else:
            atoms.append((kind, text))
    results: list[list[tuple[SegKind, str]]] = []
    pending = [atoms]
    while pending:
        item = pending.pop()
        expanded = _brace_once(item)
        if expanded is None:
            results.append(item)
            budget.count_words(1)
        else:
            pending.extend(reversed(expanded))
            budget.count_words(len(expanded))
    return [_merge(r) for r in results]


def _brace_once(atoms: list[tuple[SegKind, str]]) -> list[list[tuple[SegKind, str]]] | None:
    for start, (kind, text) in enumerate(atoms):
        if kind != "u" or text != "{" or (start > 0 and atoms[start - 1] == ("u", "$")):
            continue
        depth = 0
        commas: list[int] = []
        for end in range(start + 1, len(atoms)):
            k, t = atoms[end]
            if k != "u":
                continue
            if t == "{":
                depth += 1
            elif t == "}" and depth:
                depth -= 1
            elif t == "}":
                pre, post = atoms[:start], atoms[end + 1 :]
                if commas:
                    bounds = [start, *commas, end]
                    return [pre + atoms[a + 1 : b] + post for a, b in itertools.pairwise(bounds)]
                inner = "".join(t for k, t in atoms[start + 1 : end] if k == "u")
                seq = _sequence(inner) if all(k == "u" for k, _ in atoms[start + 1 : end]) else None
                if seq is None:
                    break
                return [pre + [("u", c) for c in s] + post for s in seq]
            elif t == "," and depth == 0:
                commas.append(end)
    return None


def _sequence(inner: str) -> list[str] | None:
    m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?", inner)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        if abs(b - a) // step > 10_000:
            raise BudgetExceeded("brace sequence too long")
        rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(x) for x in rng]
    m = re.fullmatch(r"([A-Za-z])\.\.([A-Za-z])", inner)
    if m:
        a, b = ord(m.group(1)), ord(m.group(2))
        rng = range(a, b + 1) if a <= b else range(a, b - 1, -1)
        return [chr(x) for x in rng]
    return None


def _merge(atoms: list[tuple[SegKind, str]]) -> list[tuple[SegKind, str]]:
    out: list[tuple[SegKind, str]] = []
    for kind, text in atoms:
        if out and kind == "u" and out[-1][0] == "u":
            out[-1] = ("u", out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


# -- wrappers ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Argv:
    argv: list[Arg]
    assigns: list[tuple[str, str, bool]] = field(default_factory=list)
    speculative: bool = False
    chdir: Arg | None = None  # env -C DIR, sudo -D DIR


@dataclass(frozen=True, slots=True)
class _Text:
    arg: Arg
    label: str
    speculative: bool = False


@dataclass(frozen=True, slots=True)
class _Opaque:
    rule: str
    reason: str


_Inner = _Argv | _Text | _Opaque


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


def _unwrap(program: str, args: list[Arg], stdin: str | None) -> list[_Inner]:
    """What ``program args`` runs in turn: argv lists, shell text, or something that cannot be known."""
    if program in SHELLS:
        return _shell(args, stdin)
    if program == "env":
        return _env(args)
    if program == "eval":
        args = args[1:] if args and args[0].text == "--" else args
        if not args:
            return []
        return [_Text(Arg(" ".join(a.text for a in args), all(a.literal for a in args)), "")]
    if program in ("busybox", "toybox"):
        if args and args[0].literal and args[0].text.startswith("-"):
            return []
        return [_Argv(args)]
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
    if _INTERPRETER.fullmatch(program):
        return _inline_code(args, stdin)
    if program == "trap" or program == "alias":
        # the text runs later (on a signal, or when the alias is used): analyse it now
        out: list[_Inner] = []
        for a in args:
            if program == "alias":
                if "=" in a.text:
                    out.append(_Text(Arg(a.text.split("=", 1)[1], a.literal), "alias"))
            elif not a.text.startswith("-"):
                out.append(_Text(a, "trap"))
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
        return [_Text(Arg(": " + sub), "subscript") for sub in subscripts if "$" in sub or "`" in sub]
    if program in ("source", ".") and stdin is not None and args and args[0].text in _STDIN_FILES:
        return [_Text(Arg(stdin), "stdin")]
    if program in ("awk", "gawk", "mawk", "nawk"):
        script = next((a for a in args if not a.text.startswith("-")), None)
        return _inline_code([Arg("-e"), script], None) if script is not None else []
    if program in ("at", "batch") and stdin is not None:
        return [_Text(Arg(stdin), "at")]
    spec = _WRAPPERS.get(program)
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
                return [_Argv(inner, env_assigns)]
        if program in ("sudo", "doas", "run0") and not inner:
            # an interactive root shell reads its commands from standard input
            return [_Argv([Arg("sh")])] if any(a.text in ("-s", "-i", "--shell", "--login") for a in args) else []
        # an option value we skipped may really be the command (an option this table gets wrong)
        skipped: list[_Inner] = [
            _Argv(args[k:], speculative=True) for k in range(min(start, len(args))) if _looks_like_command(args[k])
        ]
        return [_Argv(inner), *skipped[:4]]
    if program in _GENERIC_WRAPPERS:
        # options of these are not modelled: try every operand position as the start of a command
        guesses: list[_Inner] = [
            _Argv(args[i:], speculative=True) for i, a in enumerate(args) if not a.text.startswith("-")
        ]
        return guesses[:8]
    return []


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


def _shell(args: list[Arg], stdin: str | None) -> list[_Inner]:
    i = 0
    command_flag = False
    while i < len(args):
        a = args[i]
        t = a.text
        if not a.literal:
            break
        if t in ("--", "-"):
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
            i += 1
            continue
        break
    if command_flag:
        if i >= len(args):
            return [_Opaque("unparseable", "-c without shell code")]
        return [_Text(args[i], "-c")]
    if i < len(args) and args[i].text in _STDIN_FILES and stdin is not None:
        return [_Text(Arg(stdin), "stdin")]
    if i < len(args):
        return []  # a script file: its contents are not part of this command
    if stdin is not None:
        return [_Text(Arg(stdin), "stdin")]
    return []


def _env(args: list[Arg]) -> list[_Inner]:
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
            return [_Text(replace(text, text=f"{prefix} {text.text}".strip() if prefix else text.text), "-S")]
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
    return [_Argv(inner, assigns, chdir=chdir)] if inner else []


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _find(args: list[Arg]) -> list[_Inner]:
    roots: list[Arg] = []
    for a in args:
        if a.text.startswith("-") or a.text in ("(", "!", ")"):
            break
        roots.append(a)
    out: list[_Inner] = []
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
                out.append(_Argv(inner))
            i = j + 1
        else:
            i += 1
    return out


def _place(a: Arg, value: Arg) -> Arg:
    return Arg(a.text.replace("{}", value.text), a.literal and value.literal, a.glob or value.glob)


def _watch(args: list[Arg]) -> list[_Inner]:
    start = _skip_options(args, _Spec("nq", frozenset({"interval", "differences"})))
    if start is None or start >= len(args):
        return []
    if any(a.text in ("-x", "--exec") for a in args[:start]):
        return [_Argv(args[start:])]
    rest = args[start:]
    return [_Text(Arg(" ".join(a.text for a in rest), all(a.literal for a in rest)), "")]


def _flag_text(args: list[Arg], flags: tuple[str, ...], label: str) -> list[_Inner]:
    short = [f[1] for f in flags if len(f) == 2]
    for i, a in enumerate(args):
        clustered = re.fullmatch(r"-[A-Za-z]*[" + "".join(short) + "]", a.text) is not None if short else False
        if (a.text in flags or clustered) and i + 1 < len(args):
            return [_Text(args[i + 1], label)]
        for flag in flags:
            if flag.startswith("--") and a.text.startswith(flag + "="):
                return [_Text(Arg(a.text.split("=", 1)[1], a.literal), label)]
    return []


def _parallel(args: list[Arg]) -> list[_Inner]:
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
        return [_Opaque("commands_from_input", "runs commands read from its input, which cannot be analysed")]
    template = " ".join(w.text for w in words)
    literal = all(w.literal for w in words)
    values = [a for a in args[i + 1 :] if not a.text.startswith(":::")][:16] if i < len(args) else []
    if not values:
        return [_Text(Arg(template, literal), "")]
    out: list[_Inner] = []
    for v in values:
        text = template.replace("{}", _quote(v.text)) if "{}" in template else f"{template} {_quote(v.text)}"
        out.append(_Text(Arg(text, literal and v.literal), ""))
    return out


def _git(args: list[Arg]) -> list[_Inner]:
    texts = [a.text for a in args]
    out: list[_Inner] = []
    for i, t in enumerate(texts):
        if t in ("-x", "--exec") and "rebase" in texts[:i] and i + 1 < len(args):
            out.append(_Text(args[i + 1], "rebase --exec"))
        elif t.startswith("--exec=") and "rebase" in texts[:i]:
            out.append(_Text(Arg(t.split("=", 1)[1], args[i].literal), "rebase --exec"))
        elif t == "foreach" and "submodule" in texts[:i]:
            rest = [a for a in args[i + 1 :] if a.text not in ("--recursive", "-q", "--quiet")]
            if rest:
                out.append(_Text(Arg(" ".join(a.text for a in rest), all(a.literal for a in rest)), "foreach"))
            break
        elif t == "run" and "bisect" in texts[:i]:
            out.append(_Argv(args[i + 1 :]))
            break
        else:
            # a shell alias (`-c alias.x='!cmd'`, `git config alias.x '!cmd'`) runs its text later
            value = t.split("=", 1)[1] if t.lower().startswith("alias.") and "=" in t else None
            if value is None and t.lower().startswith("alias.") and "config" in texts[:i] and i + 1 < len(args):
                value = texts[i + 1]
            if value is not None and value.startswith("!"):
                out.append(_Text(Arg(value[1:], args[i].literal), "alias", speculative=True))
    return out


_SSH_VALUE_OPTS = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def _remote(program: str, args: list[Arg]) -> list[_Inner]:
    """The command ``ssh host cmd`` or ``docker exec c cmd`` runs elsewhere: judged speculatively (rules only)."""
    if program in ("ssh", "autossh"):
        i = 0
        while i < len(args) and args[i].text.startswith("-"):
            flag = args[i].text
            i += 2 if len(flag) == 2 and flag[1] in _SSH_VALUE_OPTS else 1
        rest = args[i + 1 :]
        if not rest:
            return []
        return [_Text(Arg(" ".join(a.text for a in rest), all(a.literal for a in rest)), "remote", speculative=True)]
    texts = [a.text for a in args]
    if "--" in texts:
        return [_Argv(args[texts.index("--") + 1 :], speculative=True)]
    if texts[:1] == ["exec"]:
        operands = [i for i, a in enumerate(args) if i > 0 and not a.text.startswith("-")]
        return [_Argv(args[k:], speculative=True) for k in operands[1:3]]
    return []


def _inline_code(args: list[Arg], stdin: str | None) -> list[_Inner]:
    """Code given inline to an interpreter: its string literals may be shell commands (``os.system('...')``).

    They are analysed speculatively, alone and joined per ``[...]`` list, so a hardline rule still fires.
    """
    for i, a in enumerate(args[:-1]):
        if a.text in _CODE_FLAGS or re.fullmatch(r"-[A-Za-z]*[ceE]", a.text):
            code = args[i + 1].text
            break
    else:
        operands = [a for a in args if not a.text.startswith("-")]
        if stdin is None or (operands and operands[0].text not in _STDIN_FILES):
            return []
        code = stdin
    if _FORK_CODE.search(code):
        return [_Opaque("fork_bomb", "inline code forks in an endless loop")]
    out: list[_Inner] = []
    for m in _STRING_LITERAL.finditer(code):
        text = next(g for g in m.groups() if g is not None)
        if " " in text or "/" in text:
            out.append(_Text(Arg(text), "code", speculative=True))
    for group in re.findall(r"\[([^\[\]]*)\]", code):
        words = [next(g for g in m.groups() if g is not None) for m in _STRING_LITERAL.finditer(group)]
        if len(words) > 1:
            out.append(_Text(Arg(" ".join(_quote(w) for w in words)), "code", speculative=True))
    return out[:16]
