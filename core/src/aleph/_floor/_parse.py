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

from aleph._floor._reader import WordReader
from aleph._floor._syntax import (
    _ASSIGN,
    _META,
    _NAME,
    _REDIR,
    _RESERVED,
    _SIMPLE_LINE,
    Assign,
    Budget,
    BudgetExceeded,
    Compound,
    FuncDef,
    Node,
    Pipeline,
    Redirect,
    Script,
    ShellSyntaxError,
    Simple,
    Sub,
    Word,
)

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


class _Parser(WordReader):
    def finish(self) -> None:
        self.newlines()
        if self.i < self.n:
            raise self.error(f"unexpected {self.s[self.i]!r}")
        if self.pending:
            self.heredocs()

    # -- lists and pipelines ----------------------------------------------------------------

    def script(self, stop: frozenset[str], *, paren: bool, case_item: bool = False) -> Script:
        out: Script = []
        operator = ""  # the `&&` or `||` just read: bash wants a command after it
        while True:
            self.newlines()
            if self.i >= self.n:
                if operator:
                    raise self.error(f"a command is missing after {operator!r}")
                break
            c = self.s[self.i]
            word = self.reserved()
            ends = (c == ")" and paren) or (word is not None and word in stop)
            ends = ends or (case_item and (self.s.startswith(";;", self.i) or self.s.startswith(";&", self.i)))
            if ends and operator:
                raise self.error(f"a command is missing after {operator!r}")
            if ends:
                break
            operator = ""
            if c == ")" or (c == ";" and not self.s.startswith(";;", self.i)) or c in "&|":
                raise self.error(f"unexpected {c!r}")
            if self.s.startswith(";;", self.i):
                raise self.error("';;' outside case")
            pipeline = self.pipeline()
            out.append(pipeline)
            self.blanks()
            if self.s.startswith("&&", self.i) or self.s.startswith("||", self.i):
                operator = self.s[self.i : self.i + 2]
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

    def body(self, stop: frozenset[str], *, paren: bool) -> Script:
        """A compound command's list: bash wants at least one command in it (``{ }``, ``( )``, ``else fi``)."""
        script = self.script(stop, paren=paren)
        if not script:
            raise self.error("a compound command with no command in it")
        return script

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
            body = self.body(frozenset(), paren=True)
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
            body = self.body(frozenset({"}"}), paren=False)
            self.depth -= 1
            self.take("}")
            node = Compound("group", [body], [], [])
        elif word in ("while", "until"):
            self.i += len(word)
            self.enter()
            cond = self.body(frozenset({"do"}), paren=False)
            self.take("do")
            body = self.body(frozenset({"done"}), paren=False)
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
            function = self.command()
            if not isinstance(function, Compound):
                raise self.error("a function body must be a compound command ({ ...; }, ( ... ), if, for, ...)")
            return FuncDef(name.raw, function)
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
        bodies = [self.body(frozenset({"then"}), paren=False)]
        self.take("then")
        bodies.append(self.body(frozenset({"elif", "else", "fi"}), paren=False))
        while True:
            self.blanks()
            word = self.reserved()
            if word == "elif":
                self.i += 4
                bodies.append(self.body(frozenset({"then"}), paren=False))
                self.take("then")
                bodies.append(self.body(frozenset({"elif", "else", "fi"}), paren=False))
            elif word == "else":
                self.i += 4
                bodies.append(self.body(frozenset({"fi"}), paren=False))
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
            body = self.body(frozenset({"}"}), paren=False)
            self.take("}")
        else:
            self.take("do")
            body = self.body(frozenset({"done"}), paren=False)
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
        if not isinstance(body, Compound):
            raise self.error("a function body must be a compound command ({ ...; }, ( ... ), if, for, ...)")
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

    def substitution(self, text: str) -> Script:
        """Parse the text of a backtick command substitution, one level deeper."""
        return parse(text, self.budget, self.depth + 1)

    def nested_paren(self) -> Script:
        """Parse a script up to the matching ``)`` (the cursor is just after ``(``)."""
        self.enter()
        script = self.script(frozenset(), paren=True)
        self.depth -= 1
        if not self.s.startswith(")", self.i):
            raise self.error("missing ')'")
        self.i += 1
        return script
