"""Bash brace expansion (``{a,b}``, ``{1..5}``) of a word's unquoted segments, bounded by the budget."""

from __future__ import annotations

import itertools
import re

from aleph._floor._syntax import Budget, BudgetExceeded, SegKind

_MAX_BRACE_WORD = 4_096


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
        ends = (m.group(1), m.group(2))
        if any(len(e.lstrip("-")) > 1 and e.lstrip("-").startswith("0") for e in ends):
            width = max(len(e) for e in ends)  # {01..03}: zero-padded like the widest end
            return [f"{x:0{width}d}" for x in rng]
        return [str(x) for x in rng]
    m = re.fullmatch(r"([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?", inner)
    if m:
        a, b = ord(m.group(1)), ord(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
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


_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_TILDE_PREFIX = re.compile(r"~[A-Za-z0-9._-]{0,256}")


def assignment_tildes(segs: list[tuple[SegKind, str]]) -> list[tuple[SegKind, str]]:
    """Tilde expansion bash does in an argument that looks like an assignment (``dd of=~/.bashrc``).

    Outside POSIX mode bash expands an unquoted ``~`` right after the first ``=`` and after each ``:`` of
    such a word, as in a real assignment; ``of=~/x`` names ``$HOME/x``. ``~user`` becomes unknown.
    """
    if not segs or segs[0][0] != "u":
        return segs
    text = segs[0][1]
    m = _ASSIGNMENT_WORD.match(text)
    if m is None or "~" not in text:
        return segs
    out: list[tuple[SegKind, str]] = []
    start = 0
    i = m.end()
    while i < len(text):
        if text[i] == "~" and (i == m.end() or text[i - 1] == ":"):
            prefix = _TILDE_PREFIX.match(text, i)
            assert prefix is not None
            end = prefix.end()
            if end == len(text) or text[end] in "/:":
                out.append(("u", text[start:i]))
                out.append(("home", "~") if end == i + 1 else ("d", text[i:end]))
                start = i = end
                continue
        i += 1
    if not out:
        return segs
    if start < len(text):
        out.append(("u", text[start:]))
    return [*out, *segs[1:]]
