"""Text analysis shared by the store and the ranker: terms, stems, FTS5 query text.

FTS5's ``porter`` tokenizer stems the index; Python needs the same stems to measure how much of a
query an item covers, so both sides use the original Porter algorithm (snowballstemmer, which uses
PyStemmer's C code when installed).
"""

from __future__ import annotations

import functools
import re

import snowballstemmer

__all__ = ["STOPWORDS", "fts_query", "stems", "terms"]

FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"
"""The tokenizer every full-text table of this family uses."""

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve don didn doesn isn wasn aren weren hasn haven hadn won wouldn shouldn couldn can't""".split()
)
"""English function words: they carry no topic, and their matches only add noise to BM25."""

_STEMMER = snowballstemmer.stemmer("porter")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


_ASCII_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


def terms(text: str) -> list[str]:
    """Lowercased content words of ``text`` in order (stopwords and possessive ``'s`` removed)."""
    lowered = text.lower()
    words = (_ASCII_WORD if lowered.isascii() else _WORD).findall(lowered)
    out = []
    for word in words:
        if "'" in word:
            word = (word[:-2] if word.endswith("'s") else word).replace("'", "")
        if word and word not in STOPWORDS:
            out.append(word)
    return out


def stems(text: str) -> set[str]:
    """The distinct Porter stems of the content words of ``text``."""
    return {_stem(w) for w in terms(text)}


def stem(word: str) -> str:
    """The Porter stem of one lowercased word."""
    return _stem(word)


def fts_query(words: list[str] | set[str]) -> str:
    """An FTS5 MATCH expression that matches any of ``words`` (each quoted, so no word is an operator)."""
    return " OR ".join('"' + w.replace('"', "") + '"' for w in sorted(set(words)) if w.replace('"', ""))
