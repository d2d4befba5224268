r"""A conservative parser for the bash command language, for the command-policy floor.

It builds a small tree of every command a piece of shell text would run: lists (``;``, ``&&``,
``||``, ``&``, newlines), pipelines, subshells, ``{ }`` groups, ``if``/``while``/``until``/
``for``/``select``/``case``, ``[[ ]]``, ``(( ))``, function definitions, redirections,
here-documents and here-strings, and the command and process substitutions inside words
(``$(...)``, backticks, ``<(...)``, ``>(...)``, also inside ``"..."``, ``${...}`` and ``$((...))``).

Words keep how each piece was quoted (:class:`Word` segments) so the analyser can splice quotes,
decode ``$'\x72m'``, expand braces and see ``$IFS``. Anything outside this grammar (extglob
patterns, unbalanced quotes, a stray ``)``) raises :class:`ShellSyntaxError`: the caller treats
the text as "cannot be proven safe". Work is bounded by :class:`Budget`; running out raises
:class:`BudgetExceeded`, which the caller turns into a block.

No third-party parser: bashlex (the only maintained pure-Python one) rejects ``[[ ]]``,
``$((...))``, ``time``, ``case`` and quoted here-document delimiters, and costs 0.2-0.8 ms a line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Union

__all__ = [
    "Assign",
    "Budget",
    "BudgetExceeded",
    "Compound",
    "FuncDef",
    "Node",
    "Pipeline",
    "Redirect",
    "Script",
    "ShellSyntaxError",
    "Simple",
    "Sub",
    "Word",
    "parse",
]

SegKind = Literal["u", "q", "d", "ifs", "home"]
"""Word segment kinds: unquoted text, quoted text, a dynamic expansion (source text kept),
an unquoted ``$IFS`` (a word break), ``~``/``$HOME``."""


class ShellSyntaxError(ValueError):
    """The text is not in the grammar this parser proves things about."""


class BudgetExceeded(Exception):
    """The analysis budget ran out (too many commands, too deep, too much expansion)."""


@dataclass(slots=True)
class Budget:
    """Bounds on analysis work; shared by every nested parse of one check."""

    max_commands: int
    max_depth: int
    max_words: int
    commands: int = 0
    words: int = 0

    def count_command(self) -> None:
        """Count one analysed command; raises :class:`BudgetExceeded` past the bound."""
        self.commands += 1
        if self.commands > self.max_commands:
            raise BudgetExceeded(f"more than {self.max_commands} sub-commands")

    def count_words(self, n: int) -> None:
        """Count ``n`` words produced by expansion."""
        self.words += n
        if self.words > self.max_words:
            raise BudgetExceeded(f"more than {self.max_words} words after expansion")

    def check_depth(self, depth: int) -> None:
        """Refuse nesting deeper than the bound."""
        if depth > self.max_depth:
            raise BudgetExceeded(f"nesting deeper than {self.max_depth} levels")


@dataclass(slots=True)
class Sub:
    """A command substitution (``cmd``: ``$(...)``/backticks) or process substitution (``in``/``out``)."""

    kind: Literal["cmd", "in", "out"]
    script: Script


@dataclass(slots=True)
class Word:
    """One shell word: its source text, quoting-aware segments and the substitutions inside it."""

    raw: str
    segs: list[tuple[SegKind, str]]
    subs: list[Sub] = field(default_factory=list)


@dataclass(slots=True)
class Assign:
    """``NAME=value`` (or ``NAME+=value``, ``NAME=(a b)``) before a command or on its own."""

    name: str
    value: Word | None
    array: list[Word] = field(default_factory=list)
    index: Word | None = None


@dataclass(slots=True)
class Redirect:
    """A redirection: operator, optional fd, target word, or a here-document body."""

    op: str
    fd: str | None
    target: Word | None
    heredoc: Word | None = None
    heredoc_quoted: bool = False


@dataclass(slots=True)
class Simple:
    """A simple command: assignments, words (program first) and redirections."""

    assigns: list[Assign]
    words: list[Word]
    redirects: list[Redirect]


@dataclass(slots=True)
class Compound:
    """A compound command (subshell, group, if, loop, case, ``[[ ]]``, ``(( ))``)."""

    kind: str
    bodies: list[Script]
    words: list[Word]
    redirects: list[Redirect]
    var: str | None = None


@dataclass(slots=True)
class FuncDef:
    """``name() body`` or ``function name body``."""

    name: str
    body: Node


Node = Union[Simple, Compound, FuncDef]  # noqa: UP007 - a runtime alias used in isinstance-free code


@dataclass(slots=True)
class Pipeline:
    """Commands joined by ``|``; ``background`` when the list operator after it is ``&``."""

    cmds: list[Node]
    negated: bool = False
    background: bool = False


Script = list[Pipeline]

_META = frozenset(" \t\n;&|()<>")
_PLAIN = re.compile(r"[^\s;&|()<>'\"\\$`]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]\s;&|()<>]*+\])?\+?=")
_REDIR = re.compile(r"(\d+|\{[A-Za-z_][A-Za-z0-9_]*\})?(<<<|<<-|<<|<>|<&|<|>>|>&|>\||>|&>>|&>)")
_TILDE = re.compile(r"~([A-Za-z0-9_.][A-Za-z0-9_.-]*|[+-])?(?=/|$|[\s;&|()<>:])")
_SIMPLE_LINE = re.compile(r"[ \t]*+[A-Za-z0-9_./:@%^+,-]++(?:[ \t]++[A-Za-z0-9_./:@%^+=,-]++)*+[ \t]*+")
_SPECIAL_PARAM = frozenset("@*#?-$!0123456789")
_RESERVED = frozenset(
    "if then elif else fi for in do done while until case esac function select time coproc { } ! [[ ]]".split()
)
_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def parse(text: str, budget: Budget, depth: int = 0) -> Script:
    """Parse ``text`` into a :data:`Script`. Raises :class:`ShellSyntaxError` or :class:`BudgetExceeded`."""
    budget.check_depth(depth)
    if _SIMPLE_LINE.fullmatch(text):
        # one command of plain words (no quotes, expansions, operators or assignments): split on blanks
        words = text.split()
        if words[0] not in _RESERVED:
            return [Pipeline([Simple([], [Word(w, [("u", w)]) for w in words], [])])]
    parser = _Parser(text, budget, depth)
    script = parser.script(frozenset(), paren=False)
    parser.finish()
    return script


class _Parser:
    def __init__(self, text: str, budget: Budget, depth: int) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0
        self.budget = budget
        self.depth = depth
        self.pending: list[tuple[Redirect, str, bool]] = []

    # -- low-level helpers ------------------------------------------------------------------

    def error(self, message: str) -> ShellSyntaxError:
        return ShellSyntaxError(f"{message} (at character {self.i})")

    def blanks(self) -> None:
        """Skip spaces, tabs, line continuations and comments (not newlines)."""
        s, n = self.s, self.n
        while self.i < n:
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = n if end < 0 else end
            else:
                return

    def newlines(self) -> None:
        """Skip blanks and newlines, reading any here-document bodies the newlines start."""
        while True:
            self.blanks()
            if self.i < self.n and self.s[self.i] == "\n":
                self.i += 1
                self.heredocs()
            else:
                return

    def reserved(self) -> str | None:
        """The reserved word at the cursor, if the next token is one."""
        m = _PLAIN.match(self.s, self.i)
        if not m:
            return None
        token = m.group()
        end = m.end()
        if token in _RESERVED and (end >= self.n or self.s[end] in _META):
            return token
        return None

    def take(self, word: str) -> None:
        self.blanks()
        if self.reserved() != word:
            raise self.error(f"expected '{word}'")
        self.i += len(word)

    def enter(self) -> None:
        self.depth += 1
        self.budget.check_depth(self.depth)

    def finish(self) -> None:
        self.newlines()
        if self.i < self.n:
            raise self.error(f"unexpected {self.s[self.i]!r}")
        if self.pending:
            self.heredocs()

    # -- lists and pipelines ----------------------------------------------------------------

    def script(self, stop: frozenset[str], *, paren: bool, case_item: bool = False) -> Script:
        out: Script = []
        while True:
            self.newlines()
            if self.i >= self.n:
                break
            c = self.s[self.i]
            if c == ")" and paren:
                break
            if case_item and (self.s.startswith(";;", self.i) or self.s.startswith(";&", self.i)):
                break
            word = self.reserved()
            if word is not None and word in stop:
                break
            if c == ")" or (c == ";" and not self.s.startswith(";;", self.i)) or c in "&|":
                raise self.error(f"unexpected {c!r}")
            if self.s.startswith(";;", self.i):
                raise self.error("';;' outside case")
            pipeline = self.pipeline()
            out.append(pipeline)
            self.blanks()
            if self.s.startswith("&&", self.i) or self.s.startswith("||", self.i):
                self.i += 2
                self.newlines()
                continue
            if self.i < self.n:
                c = self.s[self.i]
                if c == "&":
                    pipeline.background = True
                    self.i += 1
                elif c == ";" and not self.s.startswith(";;", self.i) and not self.s.startswith(";&", self.i):
                    self.i += 1
                elif c == "\n":
                    continue
                else:
                    break
        return out

    def pipeline(self) -> Pipeline:
        pipe = Pipeline([])
        self.blanks()
        while True:
            word = self.reserved()
            if word == "!":
                pipe.negated = True
                self.i += 1
            elif word == "coproc":
                self.i += 6
                self.blanks()
                m = _NAME.match(self.s, self.i)
                if m and re.compile(r"[ \t]*[{(]").match(self.s, m.end()):
                    self.i = m.end()  # coproc NAME { ...; }: the name of the co-process
            elif word == "time":
                self.i += 4
                self.blanks()
                if self.s.startswith("-p", self.i) and (self.i + 2 >= self.n or self.s[self.i + 2] in _META):
                    self.i += 2
            else:
                break
            self.blanks()
        while True:
            pipe.cmds.append(self.command())
            self.blanks()
            if self.s.startswith("||", self.i) or not self.s.startswith("|", self.i):
                return pipe
            self.i += 2 if self.s.startswith("|&", self.i) else 1
            self.newlines()

    # -- commands ---------------------------------------------------------------------------

    def command(self) -> Node:
        self.blanks()
        if self.i >= self.n:
            raise self.error("missing command")
        word = self.reserved()
        node: Node
        arith: Word | None = None
        if self.s.startswith("((", self.i):
            start = self.i
            self.i += 2
            try:
                arith = self.arith_body()
            except ShellSyntaxError:
                # like bash: "((" that is not arithmetic is two nested subshells
                self.i = start
        if arith is not None:
            node = Compound("arith", [], [arith], [])
        elif self.s[self.i] == "(":
            self.i += 1
            self.enter()
            body = self.script(frozenset(), paren=True)
            self.depth -= 1
            if not self.s.startswith(")", self.i):
                raise self.error("missing ')'")
            self.i += 1
            node = Compound("subshell", [body], [], [])
        elif word is None or word in ("!", "time"):
            return self.simple()
        elif word == "{":
            self.i += 1
            self.enter()
            body = self.script(frozenset({"}"}), paren=False)
            self.depth -= 1
            self.take("}")
            node = Compound("group", [body], [], [])
        elif word in ("while", "until"):
            self.i += len(word)
            self.enter()
            cond = self.script(frozenset({"do"}), paren=False)
            self.take("do")
            body = self.script(frozenset({"done"}), paren=False)
            self.take("done")
            self.depth -= 1
            node = Compound(word, [cond, body], [], [])
        elif word == "if":
            node = self.if_clause()
        elif word in ("for", "select"):
            node = self.for_clause(word)
        elif word == "case":
            node = self.case_clause()
        elif word == "[[":
            node = self.cond()
        elif word == "function":
            self.i += len(word)
            self.blanks()
            name = self.word()
            self.blanks()
            if self.s.startswith("(", self.i):
                self.i += 1
                self.blanks()
                if not self.s.startswith(")", self.i):
                    raise self.error("expected ')' after function name")
                self.i += 1
            self.newlines()
            return FuncDef(name.raw, self.command())
        else:
            raise self.error(f"unexpected '{word}'")
        node.redirects.extend(self.trailing_redirects())
        return node

    def trailing_redirects(self) -> list[Redirect]:
        out: list[Redirect] = []
        while True:
            self.blanks()
            redirect = self.redirect()
            if redirect is None:
                return out
            out.append(redirect)

    def if_clause(self) -> Compound:
        self.i += 2
        self.enter()
        bodies = [self.script(frozenset({"then"}), paren=False)]
        self.take("then")
        bodies.append(self.script(frozenset({"elif", "else", "fi"}), paren=False))
        while True:
            self.blanks()
            word = self.reserved()
            if word == "elif":
                self.i += 4
                bodies.append(self.script(frozenset({"then"}), paren=False))
                self.take("then")
                bodies.append(self.script(frozenset({"elif", "else", "fi"}), paren=False))
            elif word == "else":
                self.i += 4
                bodies.append(self.script(frozenset({"fi"}), paren=False))
            else:
                self.take("fi")
                break
        self.depth -= 1
        return Compound("if", bodies, [], [])

    def for_clause(self, kind: str) -> Compound:
        self.i += len(kind)
        self.blanks()
        words: list[Word] = []
        var = None
        if self.s.startswith("((", self.i):
            self.i += 2
            words.append(self.arith_body())
        else:
            m = _NAME.match(self.s, self.i)
            if not m:
                raise self.error(f"bad {kind} variable")
            var = m.group()
            self.i = m.end()
            self.newlines()
            if self.reserved() == "in":
                self.i += 2
                while True:
                    self.blanks()
                    if self.i >= self.n or self.s[self.i] in ";\n":
                        break
                    words.append(self.word())
        self.blanks()
        if self.s.startswith(";", self.i):
            self.i += 1
        self.newlines()
        self.enter()
        if self.reserved() == "{":
            self.i += 1
            body = self.script(frozenset({"}"}), paren=False)
            self.take("}")
        else:
            self.take("do")
            body = self.script(frozenset({"done"}), paren=False)
            self.take("done")
        self.depth -= 1
        return Compound(kind, [body], words, [], var)

    def case_clause(self) -> Compound:
        self.i += 4
        self.blanks()
        words = [self.word()]
        self.newlines()
        self.take("in")
        self.enter()
        bodies: list[Script] = []
        while True:
            self.newlines()
            if self.reserved() == "esac":
                self.i += 4
                break
            if self.s.startswith("(", self.i):
                self.i += 1
            while True:
                self.blanks()
                words.append(self.word())
                self.blanks()
                if self.s.startswith("|", self.i):
                    self.i += 1
                    continue
                if self.s.startswith(")", self.i):
                    self.i += 1
                    break
                raise self.error("bad case pattern")
            bodies.append(self.script(frozenset({"esac"}), paren=False, case_item=True))
            self.blanks()
            for op in (";;&", ";;", ";&"):
                if self.s.startswith(op, self.i):
                    self.i += len(op)
                    break
        self.depth -= 1
        return Compound("case", bodies, words, [])

    def cond(self) -> Compound:
        self.i += 2
        words: list[Word] = []
        while True:
            self.newlines()
            if self.i >= self.n:
                raise self.error("missing ']]'")
            if self.reserved() == "]]":
                self.i += 2
                return Compound("cond", [], words, [])
            if self.s[self.i] in "()<>!|&;":
                self.i += 1
                continue
            words.append(self.word())

    def simple(self) -> Node:
        assigns: list[Assign] = []
        words: list[Word] = []
        redirects: list[Redirect] = []
        while True:
            self.blanks()
            if self.i >= self.n:
                break
            c = self.s[self.i]
            if (c == "<" or c == ">") and self.s.startswith("(", self.i + 1):
                words.append(self.word())
                continue
            redirect = self.redirect()
            if redirect is not None:
                redirects.append(redirect)
                continue
            if c in _META:
                if c == "(" and len(words) == 1 and not assigns and not redirects:
                    return self.funcdef(words[0])
                if c == "(":
                    raise self.error("unexpected '('")
                break
            m = _ASSIGN.match(self.s, self.i)
            if m and not words:
                assigns.append(self.assignment(m))
                continue
            if m and self.s.startswith("(", m.end()):
                # declare/local/export NAME=(a b): an array argument, opaque to the analyser
                start = self.i
                assign = self.assignment(m)
                raw = self.s[start : self.i]
                subs = [sub for item in assign.array for sub in item.subs]
                subs.extend(assign.index.subs if assign.index is not None else [])
                words.append(Word(raw, [("d", raw)], subs))
                continue
            words.append(self.word())
        if not (assigns or words or redirects):
            raise self.error("missing command")
        return Simple(assigns, words, redirects)

    def funcdef(self, name: Word) -> FuncDef:
        self.i += 1
        self.blanks()
        if not self.s.startswith(")", self.i):
            raise self.error("expected ')' in function definition")
        self.i += 1
        self.newlines()
        self.enter()
        body = self.command()
        self.depth -= 1
        return FuncDef(name.raw, body)

    def assignment(self, m: re.Match[str]) -> Assign:
        self.i = m.end()
        index = None
        if m.group(2) and any(t in m.group(2) for t in ("$", "`", "<(", ">(")):
            # a[$(cmd)]=x runs cmd: keep the substitutions of the subscript
            index = _Parser(m.group(2)[1:-1], self.budget, self.depth).dquote_text()
        assign = self.assignment_value(m)
        assign.index = index
        return assign

    def assignment_value(self, m: re.Match[str]) -> Assign:
        if self.s.startswith("(", self.i):
            self.i += 1
            items: list[Word] = []
            while True:
                self.newlines()
                if self.i >= self.n:
                    raise self.error("missing ')' in array assignment")
                if self.s[self.i] == ")":
                    self.i += 1
                    return Assign(m.group(1), None, items)
                items.append(self.word())
        if self.i >= self.n or (self.s[self.i] in _META and not self.s.startswith(("<(", ">("), self.i)):
            return Assign(m.group(1), Word("", []))
        return Assign(m.group(1), self.word(tilde=True))

    def redirect(self) -> Redirect | None:
        m = _REDIR.match(self.s, self.i)
        if not m:
            return None
        op = m.group(2)
        if op in ("<", ">") and self.s.startswith("(", m.end()):
            return None
        self.i = m.end()
        fd = m.group(1)
        self.blanks()
        if op in (">&", "<&"):
            dup = re.compile(r"(\d+|-)(?=[\s;&|()<>]|$)").match(self.s, self.i)
            if dup:
                self.i = dup.end()
                return Redirect(op, fd, None)
        procsub = self.s.startswith(("<(", ">("), self.i)
        if self.i >= self.n or (self.s[self.i] in _META and not procsub):
            raise self.error(f"missing target after '{op}'")
        target = self.word()
        redirect = Redirect(op, fd, target)
        if op in ("<<", "<<-"):
            quoted = any(kind != "u" for kind, _ in target.segs)
            delim = "".join(text for _, text in target.segs)
            self.pending.append((redirect, delim, quoted))
            redirect.heredoc_quoted = quoted
        return redirect

    def heredocs(self) -> None:
        """Read the bodies of pending here-documents, starting at the cursor (after a newline)."""
        pending, self.pending = self.pending, []
        for redirect, delim, quoted in pending:
            strip = redirect.op == "<<-"
            start = self.i
            body_end = self.n
            pos = self.i
            while pos < self.n:
                end = self.s.find("\n", pos)
                line_end = self.n if end < 0 else end
                line = self.s[pos:line_end]
                if (line.lstrip("\t") if strip else line) == delim:
                    body_end = pos
                    pos = line_end + 1 if end >= 0 else self.n
                    break
                pos = line_end + 1 if end >= 0 else self.n
            else:
                body_end = self.n
            body = self.s[start:body_end]
            self.i = min(pos, self.n)
            if quoted:
                redirect.heredoc = Word(body, [("q", body)])
            else:
                redirect.heredoc = _Parser(body, self.budget, self.depth).dquote_text()

    # -- words ------------------------------------------------------------------------------

    def word(self, *, tilde: bool = True) -> Word:
        s, n = self.s, self.n
        start = self.i
        segs: list[tuple[SegKind, str]] = []
        subs: list[Sub] = []
        if tilde and s.startswith("~", self.i):
            m = _TILDE.match(s, self.i)
            if m and m.group() == "~":
                segs.append(("home", "~"))
                self.i += 1
            elif m:  # ~user, ~+, ~-: another directory, only known at run time
                segs.append(("d", m.group()))
                self.i = m.end()
        while self.i < n:
            c = s[self.i]
            if c in _META:
                if (c == "<" or c == ">") and s.startswith("(", self.i + 1) and self.i == start:
                    kind: Literal["in", "out"] = "in" if c == "<" else "out"
                    self.i += 2
                    subs.append(Sub(kind, self.nested_paren()))
                    segs.append(("d", s[start : self.i]))
                    continue
                break
            m = _PLAIN.match(s, self.i)
            if m:
                segs.append(("u", m.group()))
                self.i = m.end()
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise self.error("unterminated single quote")
                segs.append(("q", s[self.i + 1 : end]))
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self.dquote(segs, subs, closing='"')
            elif c == "\\":
                if s.startswith("\\\n", self.i):
                    self.i += 2
                elif self.i + 1 < n:
                    segs.append(("q", s[self.i + 1]))
                    self.i += 2
                else:
                    segs.append(("u", "\\"))
                    self.i += 1
            elif c == "$":
                self.dollar(segs, subs, quoted=False)
            elif c == "`":
                self.backtick(segs, subs)
            else:  # pragma: no cover - _PLAIN covers every other character
                raise self.error(f"unexpected {c!r}")
        if self.i == start:
            raise self.error(f"expected a word, found {s[self.i] if self.i < n else 'end of input'!r}")
        return Word(s[start : self.i], segs, subs)

    def dquote_text(self) -> Word:
        """The whole text as the inside of double quotes (an unquoted here-document body)."""
        segs: list[tuple[SegKind, str]] = []
        subs: list[Sub] = []
        self.dquote(segs, subs, closing=None)
        return Word(self.s, segs, subs)

    def dquote(self, segs: list[tuple[SegKind, str]], subs: list[Sub], closing: str | None) -> None:
        s, n = self.s, self.n
        buf: list[str] = []
        while True:
            if self.i >= n:
                if closing is not None:
                    raise self.error("unterminated double quote")
                break
            c = s[self.i]
            if c == closing:
                self.i += 1
                break
            if c == "\\" and self.i + 1 < n:
                nxt = s[self.i + 1]
                if nxt == "\n":
                    self.i += 2
                    continue
                if nxt in '$`"\\' and (nxt != '"' or closing is not None):
                    buf.append(nxt)
                    self.i += 2
                    continue
                buf.append(c)
                self.i += 1
            elif c == "$" or c == "`":
                if buf:
                    segs.append(("q", "".join(buf)))
                    buf = []
                if c == "$":
                    self.dollar(segs, subs, quoted=True)
                else:
                    self.backtick(segs, subs)
            else:
                buf.append(c)
                self.i += 1
        if buf:
            segs.append(("q", "".join(buf)))

    def dollar(self, segs: list[tuple[SegKind, str]], subs: list[Sub], *, quoted: bool) -> None:
        s = self.s
        start = self.i
        nxt = s[self.i + 1] if self.i + 1 < self.n else ""
        if nxt == "'" and not quoted:
            self.i += 2
            segs.append(("q", self.ansi_c()))
        elif nxt == '"' and not quoted:
            self.i += 2
            self.dquote(segs, subs, closing='"')
        elif s.startswith("$((", self.i):
            self.i += 3
            inner = self.arith_body()
            subs.extend(inner.subs)
            segs.append(("d", s[start : self.i]))
        elif nxt == "(":
            self.i += 2
            subs.append(Sub("cmd", self.nested_paren()))
            segs.append(("d", s[start : self.i]))
        elif nxt == "{":
            self.i += 2
            inner_start = self.i
            self.balanced("}")
            name = s[inner_start : self.i - 1]
            if name == "IFS":
                segs.append(("q", " ") if quoted else ("ifs", " "))
            elif name == "HOME":
                segs.append(("home", s[start : self.i]))
            else:
                segs.append(("d", s[start : self.i]))
                if any(t in name for t in ("$(", "`", "<(", ">(")):
                    inner = _Parser(name, self.budget, self.depth).dquote_text()
                    subs.extend(inner.subs)
        else:
            m = _NAME.match(s, self.i + 1)
            if m:
                self.i = m.end()
                name = m.group()
                if name == "IFS":
                    segs.append(("q", " ") if quoted else ("ifs", " "))
                elif name == "HOME":
                    segs.append(("home", "$HOME"))
                else:
                    segs.append(("d", s[start : self.i]))
            elif nxt and nxt in _SPECIAL_PARAM:
                self.i += 2
                segs.append(("d", s[start : self.i]))
            else:
                self.i += 1
                segs.append(("q" if quoted else "u", "$"))

    def ansi_c(self) -> str:
        s, n = self.s, self.n
        out: list[str] = []
        while True:
            if self.i >= n:
                raise self.error("unterminated $'...'")
            c = s[self.i]
            if c == "'":
                self.i += 1
                return "".join(out)
            if c != "\\" or self.i + 1 >= n:
                out.append(c)
                self.i += 1
                continue
            e = s[self.i + 1]
            self.i += 2
            if e in _ANSI:
                out.append(_ANSI[e])
            elif e in "xuU":
                width = {"x": 2, "u": 4, "U": 8}[e]
                m = re.compile(f"[0-9A-Fa-f]{{1,{width}}}").match(s, self.i)
                if not m:
                    out.append("\\" + e)
                    continue
                self.i = m.end()
                code = int(m.group(), 16)
                out.append(chr(code) if code < 0x110000 else "\ufffd")
            elif e in "01234567":
                m = re.compile("[0-7]{1,3}").match(s, self.i - 1)
                assert m is not None
                self.i = m.end()
                out.append(chr(int(m.group(), 8) & 0xFF))
            elif e == "c" and self.i < n:
                out.append(chr(ord(s[self.i]) & 0x1F))
                self.i += 1
            else:
                out.append(e if e in "\\'\"?" else "\\" + e)

    def backtick(self, segs: list[tuple[SegKind, str]], subs: list[Sub]) -> None:
        s, n = self.s, self.n
        start = self.i
        self.i += 1
        buf: list[str] = []
        while True:
            if self.i >= n:
                raise self.error("unterminated backquote")
            c = s[self.i]
            if c == "`":
                self.i += 1
                break
            if c == "\\" and self.i + 1 < n and s[self.i + 1] in "$`\\":
                buf.append(s[self.i + 1])
                self.i += 2
                continue
            buf.append(c)
            self.i += 1
        subs.append(Sub("cmd", parse("".join(buf), self.budget, self.depth + 1)))
        segs.append(("d", s[start : self.i]))

    def nested_paren(self) -> Script:
        """Parse a script up to the matching ``)`` (the cursor is just after ``(``)."""
        self.enter()
        script = self.script(frozenset(), paren=True)
        self.depth -= 1
        if not self.s.startswith(")", self.i):
            raise self.error("missing ')'")
        self.i += 1
        return script

    def balanced(self, closing: str) -> None:
        """Skip to just after the ``closing`` that balances, honouring quotes and nested ``${``."""
        s, n = self.s, self.n
        while self.i < n:
            c = s[self.i]
            if c == closing:
                self.i += 1
                return
            if c == "\\":
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                if end < 0:
                    raise self.error("unterminated single quote")
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self.dquote([], [], closing='"')
            elif c == "$" and s.startswith("${", self.i):
                self.i += 2
                self.enter()
                self.balanced("}")
                self.depth -= 1
            elif c == "$" and s.startswith("$(", self.i):
                self.i += 2
                self.nested_paren()
            elif c == "`":
                self.backtick([], [])
            else:
                self.i += 1
        raise self.error(f"missing '{closing}'")

    def arith_body(self) -> Word:
        """The inside of ``((...))``/``$((...))`` up to the closing ``))``; keeps its substitutions."""
        s, n = self.s, self.n
        start = self.i
        subs: list[Sub] = []
        depth = 0
        self.enter()
        while self.i < n:
            c = s[self.i]
            if c == "(":
                depth += 1
                self.i += 1
            elif c == ")":
                if depth == 0:
                    if not s.startswith("))", self.i):
                        raise self.error("missing '))'")
                    text = s[start : self.i]
                    self.i += 2
                    self.depth -= 1
                    return Word(text, [("d", text)], subs)
                depth -= 1
                self.i += 1
            elif c == "$" or c == "`":
                segs: list[tuple[SegKind, str]] = []
                if c == "$":
                    self.dollar(segs, subs, quoted=True)
                else:
                    self.backtick(segs, subs)
            elif c == "'" or c == '"':
                self.word(tilde=False)
            else:
                self.i += 1
        raise self.error("missing '))'")
