"""Reading shell words: blanks, quotes, ``$``-expansions, command substitutions and ANSI-C strings.

:class:`WordReader` is the lexical half of the parser; the grammar (lists, pipelines, compound
commands) is :class:`aleph._floor._parse._Parser`, which fills in the two places where a word holds a
whole script.
"""

from __future__ import annotations

import re
from typing import Literal

from aleph._floor._syntax import (
    _ANSI,
    _META,
    _NAME,
    _PLAIN,
    _RESERVED,
    _SPECIAL_PARAM,
    _TILDE,
    Budget,
    Redirect,
    Script,
    SegKind,
    ShellSyntaxError,
    Sub,
    Word,
)


class WordReader:
    """The cursor over the text and the reading of words; the grammar is a subclass."""

    def nested_paren(self) -> Script:
        """Parse a script up to the matching ``)`` (the cursor is just after ``(``): the grammar's."""
        raise NotImplementedError

    def substitution(self, text: str) -> Script:
        """Parse the text of a backtick command substitution, one level deeper: the grammar's."""
        raise NotImplementedError

    def __init__(self, text: str, budget: Budget, depth: int) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0
        self.budget = budget
        self.depth = depth
        self.pending: list[tuple[Redirect, str, bool]] = []

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
                redirect.heredoc = type(self)(body, self.budget, self.depth).dquote_text()

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
                    inner = type(self)(name, self.budget, self.depth).dquote_text()
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
        subs.append(Sub("cmd", self.substitution("".join(buf))))
        segs.append(("d", s[start : self.i]))

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
