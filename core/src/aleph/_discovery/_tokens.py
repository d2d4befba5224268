"""The search tokeniser (reference R12.3): identifiers and prose split the same way, CJK as uni- and bigrams."""

from __future__ import annotations

import functools
import re
from collections import Counter

__all__ = ["STOP_WORDS", "search_terms", "stem", "term_counts", "tokenize"]

_CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF))
# For ASCII text this one pattern is exactly the character walk below: a run of letters and digits,
# split where an uppercase letter follows a lowercase letter or a digit. It is ~20x faster, which is
# what keeps an index rebuild over 10,000 tools inside its budget.
_ASCII_TOKEN = re.compile(r"[A-Z]+[a-z0-9]*|[a-z0-9]+")


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def tokenize(text: str) -> list[str]:
    """Lowercased search tokens of ``text``.

    A non-alphanumeric character ends a token; an uppercase letter after a lowercase letter or a
    digit starts one (``getUserById`` → get, user, by, id); tokens shorter than 2 UTF-8 bytes are
    dropped. Each CJK character is a token of its own and, with the CJK character before it, a bigram.
    """
    if text.isascii():
        return [t for t in (m.lower() for m in _ASCII_TOKEN.findall(text)) if len(t) >= 2]
    return _walk(text)


def _walk(text: str) -> list[str]:
    out: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            token = "".join(current).lower()
            if len(token.encode()) >= 2:
                out.append(token)
            current.clear()

    previous_cjk = ""
    for char in text:
        if _is_cjk(char):
            flush()
            out.append(char)
            if previous_cjk:
                out.append(previous_cjk + char)
            previous_cjk = char
            continue
        previous_cjk = ""
        if not char.isalnum():
            flush()
            continue
        if char.isupper() and current and (current[-1].islower() or current[-1].isdigit()):
            flush()
        current.append(char)
    flush()
    return out


STOP_WORDS = frozenset(
    "a an the to of in on for and or is are was were be been my me you your it its this that these those what "
    "which who how do does did can could would should please with from by at as about into out up down some any "
    "all each every just now right there here".split()
)
"""English words that say nothing about which tool is meant; dropped from documents and queries alike."""


@functools.lru_cache(maxsize=65_536)
def stem(token: str) -> str:
    """A light, conservative suffix strip for ASCII words (plural, -ing, -ed, final e): save/saved/saving → sav."""
    if len(token) <= 3 or not token.isascii():
        return token
    if token.endswith("ies") and len(token) > 4:
        token = token[:-3] + "y"
    elif token.endswith("sses"):
        token = token[:-2]
    elif token.endswith("s") and not token.endswith(("ss", "us", "is")):
        token = token[:-1]
    if token.endswith("ing") and len(token) > 5:
        token = token[:-3]
    elif token.endswith("ed") and len(token) > 4:
        token = token[:-2]
    if len(token) > 3 and token[-1] == token[-2] and token[-1] not in "lsz":
        token = token[:-1]
    if len(token) > 3 and token.endswith("e"):
        token = token[:-1]
    return token


def search_terms(text: str) -> list[str]:
    """The terms the search index uses: :func:`tokenize`, minus stop words, lightly stemmed."""
    return [stem(t) for t in tokenize(text) if t not in STOP_WORDS]


def term_counts(text: str) -> tuple[Counter[str], int]:
    """``Counter(search_terms(text))`` and its total, stemming each distinct token once (index builds)."""
    raw = Counter(t for t in tokenize(text) if t not in STOP_WORDS)
    counts: Counter[str] = Counter()
    for token, n in raw.items():
        counts[stem(token)] += n
    return counts, sum(raw.values())
