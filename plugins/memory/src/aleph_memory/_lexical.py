"""The full-text side of ranking: which query words a store can afford to match, and compound spellings.

BM25 over FTS5 costs about 5 µs per matching row; in a large store the commonest words are left to
the coverage signal (see :func:`match_expression`). A compound is also matched in its other spelling.
"""

from __future__ import annotations

import sqlite3
from itertools import pairwise

from aleph_memory._items import CONTEXT_WINDOW
from aleph_memory._text import fts_query, stem

__all__ = ["DocCounts", "compound_forms", "match_expression"]

POSTINGS_BUDGET = 3_000
DF_CAP = POSTINGS_BUDGET + 1
"""Counting stops here: a word this common never fits the budget beside another, whatever its real count."""
CONTEXT_FANOUT = 2 * CONTEXT_WINDOW
COMPOUND_PART = 3
"""The shortest half of a compound split or joined to match its other spelling."""
COMPOUND_MAX = 24
"""Longer words are not split (each split is a vocabulary lookup)."""


class DocCounts:
    """How many items of a full-text table hold a word in their own text (capped at DF_CAP), cached.

    The counts only choose which words a large store's query can afford, so an estimate is enough:
    they are kept until the store has grown by a tenth (and at least 100 items) since they were read.
    Counting costs a pass over the word's postings (about 2 ms a question at 100,000 items).
    """

    MAX_WORDS = 100_000

    def __init__(self) -> None:
        self._by_table: dict[str, tuple[int, dict[str, int]]] = {}

    def get(self, conn: sqlite3.Connection, table: str, words: list[str]) -> dict[str, int]:
        """The (capped) document count of each of ``words`` in ``table``'s ``content`` column."""
        size = conn.execute("SELECT max(rowid) FROM items").fetchone()[0] or 0
        stamp, known = self._by_table.get(table, (size, {}))
        if size > stamp + max(100, stamp // 10) or len(known) > self.MAX_WORDS:
            stamp, known = size, {}
        self._by_table[table] = (stamp, known)
        out = {}
        for word in words:
            found = known.get(word)
            if found is None:
                row = conn.execute(
                    f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT {DF_CAP})",
                    (f'content : "{word}"',),
                ).fetchone()
                found = known[word] = int(row[0])
            out[word] = found
        return out


def match_expression(conn: sqlite3.Connection, table: str, words: list[str], counts: DocCounts) -> str:
    """The FTS5 MATCH expression for ``words``, kept within what a query can afford to rank.

    BM25 scores every row that holds any query word, about 5 µs a row. In a small store every word
    is matched in an item's text and in its neighbours' (the usual case, and what the ranking is built
    on). In a large store a word found in many items weighs little (its IDF is near zero) yet costs
    the most: words are taken rarest first while their matches fit POSTINGS_BUDGET, the rest are left
    to the coverage signal, and only the rarest are also matched in the neighbours' text.
    """
    distinct = sorted(set(words))
    df = counts.get(conn, table, distinct)
    if sum(df.values()) * (1 + CONTEXT_FANOUT) <= POSTINGS_BUDGET:
        return fts_query(distinct)
    ranked = sorted(distinct, key=lambda w: (df[w], w))
    content: list[str] = []
    context: list[str] = []
    used = 0
    for word in ranked:
        if content and used + df[word] > POSTINGS_BUDGET:
            break
        content.append(word)
        used += df[word]
    for word in content:
        if context and used + df[word] * CONTEXT_FANOUT > POSTINGS_BUDGET:
            break
        context.append(word)
        used += df[word] * CONTEXT_FANOUT
    expr = f"content : ({fts_query(content)})"
    return f"{expr} OR ctx : ({fts_query(context)})" if context else expr


def compound_forms(conn: sqlite3.Connection, table: str, words: list[str]) -> list[str]:
    """The other spelling of each compound in ``words`` that the agent's items use ("roadtrip" / "road trip").

    A long query word that splits into two indexed words is also matched as that phrase, and two
    consecutive query words are also matched written as one word when that word is indexed. One
    lookup in the table's vocabulary (its stems) answers every candidate at once.
    """
    splits: list[tuple[str, str, str]] = []
    for word in dict.fromkeys(words):
        if 2 * COMPOUND_PART <= len(word) <= COMPOUND_MAX and word.isalpha():
            for i in range(COMPOUND_PART, len(word) - COMPOUND_PART + 1):
                splits.append((word[:i], word[i:], f"{word[:i]} {word[i:]}"))
    joins = [a + b for a, b in pairwise(words) if (a + b).isalpha()]
    wanted = {stem(p) for a, b, _ in splits for p in (a, b)} | {stem(j) for j in joins}
    if not wanted:
        return []
    marks = ",".join("?" * len(wanted))
    known = {t for (t,) in conn.execute(f"SELECT term FROM {table}_vocab WHERE term IN ({marks})", sorted(wanted))}
    out = [phrase for a, b, phrase in splits if stem(a) in known and stem(b) in known]
    out += [j for j in joins if stem(j) in known]
    return out
