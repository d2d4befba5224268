"""Text analysis shared by the store and the ranker: terms, stems, FTS5 query text.

FTS5's ``porter`` tokenizer stems the index; Python needs the same stems to measure how much of a
query an item covers, so both sides use the original Porter algorithm (snowballstemmer, which uses
PyStemmer's C code when installed).
"""

from __future__ import annotations

import re

import snowballstemmer

__all__ = ["STOPWORDS", "fts_query", "lemma", "normalized", "stem", "stems", "terms"]

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
    s t d ll m re ve don didn doesn isn wasn aren weren hasn haven hadn wouldn shouldn couldn can't""".split()
)
"""English function words: they carry no topic, and their matches only add noise to BM25."""

_STEMMER = snowballstemmer.stemmer("porter")


_STEMS: dict[str, str] = {}
_STEMS_MAX = 200_000
"""Stems of words seen so far (a plain dict: ingest stems every word of every item, lru_cache costs more)."""


def _stem(word: str) -> str:
    found = _STEMS.get(word)
    if found is None:
        found = str(_STEMMER.stemWord(IRREGULAR.get(word, word)))
        if len(_STEMS) < _STEMS_MAX:
            _STEMS[word] = found
    return found


_ASCII_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


def terms(text: str) -> list[str]:
    """Lowercased content words of ``text`` in order (stopwords and possessive ``'s`` removed)."""
    lowered = text.lower()
    if "\u2019" in lowered:
        lowered = lowered.replace("\u2019", "'")
    words = (_ASCII_WORD if lowered.isascii() else _WORD).findall(lowered)
    out = []
    for word in words:
        if "'" in word:
            word = (word[:-2] if word.endswith("'s") else word).replace("'", "")
        if word and word not in STOPWORDS:
            out.append(word)
    return out


def stems(text: str) -> set[str]:
    """The distinct Porter stems of the content words of ``text`` (irregular forms made regular first)."""
    return {_stem(w) for w in terms(text)}


def stem(word: str) -> str:
    """The Porter stem of one lowercased word (irregular forms made regular first)."""
    return _stem(word)


def fts_query(words: list[str] | set[str]) -> str:
    """An FTS5 MATCH expression that matches any of ``words`` (each quoted, so no word is an operator)."""
    return " OR ".join('"' + w.replace('"', "") + '"' for w in sorted(set(words)) if w.replace('"', ""))


_IRREGULAR_TABLE = """
arose arise arisen arise ate eat eaten eat awoke awake became become began begin begun begin bent bend bet bet
bled bleed blew blow blown blow borne bear bought buy bred breed brought bring broke break broken break built
build burnt burn caught catch chose choose chosen choose clung cling came come crept creep dealt deal drew
draw drawn draw dreamt dream drank drink drunk drink drove drive driven drive dug dig fed feed felt feel fell
fall fallen fall fought fight found find fled flee flew fly flown fly forbade forbid forgot forget forgotten
forget forgave forgive forgiven forgive froze freeze frozen freeze gave give given give got get gotten get
went go gone go grew grow grown grow heard hear held hold hid hide hidden hide hung hang kept keep knew know
known know led lead learnt learn left leave lent lend lain lie lit light lost lose made make meant mean met
meet paid pay ran run rang ring rung ring rode ride ridden ride risen rise said say sang sing sung sing sank
sink sunk sink sat sit saw see seen see sought seek sold sell sent send shook shake shaken shake shone shine
shot shoot showed show shown show shrank shrink slept sleep slid slide spoke speak spoken speak spent spend
spun spin stood stand stole steal stolen steal stuck stick stung sting struck strike swam swim swum swim swore
swear sworn swear swept sweep swung swing taught teach took take taken take tore tear torn tear told tell
thought think threw throw thrown throw understood understand woke wake woken wake wore wear worn wear won win
wrote write written write children child men man women woman feet foot teeth tooth mice mouse geese goose
"""
_PAIRS = _IRREGULAR_TABLE.split()
IRREGULAR: dict[str, str] = dict(zip(_PAIRS[::2], _PAIRS[1::2], strict=True))
"""Irregular past forms and plurals → base forms (Porter keeps ``went``/``go``, ``children``/``child`` apart)."""


def lemma(word: str) -> str:
    """The base form of an irregular English verb or plural, else the word itself."""
    return IRREGULAR.get(word, word)


def normalized(text: str) -> str:
    """The content words of ``text`` with irregular forms made regular: what the full-text index stores."""
    return " ".join(lemma(w) for w in terms(text))
