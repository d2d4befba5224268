"""Ranking memory for a query: full text first, then what the data model knows about each item.

1. **Candidates** come from FTS5 (porter stems, stopwords dropped; a compound also in its other
   spelling, "roadtrip" / "road trip") over each item's own text and,
   at a fifth of the weight, its neighbouring turns in the same session, confined to the agent;
   a date the query names adds the items of that window, and the turn that opens each of its
   sessions (it catches up on what happened since the last) is preferred; a question asking for a kind
   of place ("Which cities ...") adds the items that name one (``_places``).
2. **People.** A query that names a known speaker is about that person: the name is taken out of
   the lexical query (it matches every turn that greets them) and that speaker's items are preferred.
3. **Coverage.** Items whose text and neighbours cover more of the query's distinct stems rise: BM25
   alone lets one rare word outweigh a turn that answers the whole question.
4. **Replies.** A turn that asks what the query asks passes a share of its score to the next turn,
   its answer; a question about what someone thinks, says or feels passes the same share from the
   other person's turns to that person's next turn, their reaction; a "when" query prefers turns
   that say when.
5. **Sessions.** A session in which several items match is likelier to hold the answer than one
   stray match: each item gains a share of its session's summed top scores.
6. **Vectors** (when an embedder is configured): every item has its own vector and a turn also a
   context vector (the turn with the turns before and after it). The query without the people it
   names is embedded; the items nearest by the two cosines summed (among the items of the person
   the query is about, when it names any: see ``_subject``; a "both" question about several people
   takes each one's nearest) join the candidates, with the
   next turn of each nearby turn that asks, and a 0-1 scaled similarity is added to the finished
   lexical ranking (its scores over its best); that next turn gains half its asker's. Vectors do
   not know when a turn was said: a dated query's similarity counts only inside its window, a
   "when" query's not at all.

The weights are fixed round numbers. Each signal was kept only when it helped on two LoCoMo
conversations used to design it and on three others used to confirm it (bench/bench_memory.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from aleph_memory._answers import POOL, asks_about_both, asks_for_a_set, distinct_events, diversify
from aleph_memory._answervecs import by_meaning
from aleph_memory._db import Database
from aleph_memory._events import events_in, told_elsewhere, window_holds
from aleph_memory._holidays import HOLIDAY
from aleph_memory._items import Item, ItemStore, fts_table
from aleph_memory._lexical import DocCounts, compound_forms, match_expression
from aleph_memory._places import asks_for_a_place, items_naming_a_place
from aleph_memory._providers import Embedder, _numpy, embed_normalised
from aleph_memory._text import lemma, stem, terms
from aleph_memory._vectorindex import Nearest, VectorIndex
from aleph_memory._when import Window, find_window

__all__ = ["Hit", "Ranker", "SearchResult"]

CANDIDATES = 300
CONTEXT_WEIGHT = 0.2
COVERAGE_WEIGHT = 0.4
SPEAKER_BOOST = 1.3
SESSION_WEIGHT = 0.3
SESSION_TOP = 5
TIME_WEIGHT = 0.5
OPENER_WEIGHT = 0.3
"""In a dated window, a session's first turn (it catches up on what happened since the last one) gains this."""
EVENT_WEIGHT = 0.5
"""An item whose own words resolve inside a query's window gains this times their confidence (and TIME_WEIGHT)."""
EVENT_CANDIDATES = 300
PLACE_WEIGHT = 0.3
"""A question that asks for a kind of place ("Which cities ...") prefers the items that name a place."""
PLACE_CANDIDATES = 300
WHEN_WEIGHT = 0.4
"""A "when ..." question is answered by a turn that says when (yesterday, last week, on Friday)."""
REPLY_SHARE = 0.5
"""A turn that asks what the query asks passes half its score to the next turn of its session (the reply)."""
REPLY_TOP = 30
WINDOW_CANDIDATES = 300
DENSE_WEIGHT = 0.6
"""Vectors join the finished lexical ranking: its scores over its best one, plus this times the scaled similarity."""
DENSE_CANDIDATES = 150
DENSE_REPLY_SHARE = 0.5
"""A turn that asks, among the REPLY_TOP nearest by vector, passes this share of its similarity to the next turn."""
MAX_QUERY_TERMS = 64
VECTOR_SETS = True
"""A set question without a date or bound orders its tail's new sessions by meaning (``_answervecs``)."""
PER_PERSON = True
"""A "both" question about several named people takes each one's nearest items by vector, not its subject's only."""


_ASKS_WHEN = re.compile(r"\s*(?:when|what (?:day|date|month|year|time)|how long)\b", re.I)
_ASKS_REACTION = re.compile(
    r"\b(?:think|thinks|thought|feel|feels|felt|say|says|said|describe|describes|described|tell|tells|told"
    r"|react|reacts|reacted)\b",
    re.I,
)
"""A question about what someone thinks, says or feels: answered by their reaction to the other person."""
_MONTH_WORD = re.compile(rf"\b(?:(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|{HOLIDAY})\b", re.I)
"""A query that may name a month or a holiday without a year: only then are the store's years looked up."""
_WHEN_WORDS = """yesterday today tomorrow tonight ago last week weekend month year recently monday tuesday
wednesday thursday friday saturday sunday""".split()
_WHEN_MARKS = tuple(f" {stem(w)} " for w in _WHEN_WORDS)

_People = dict[str, list[tuple[str, tuple[str, ...]]]]
"""Known speakers by the first word of their name, with all of its words."""

_Features = tuple[str, str | None, str | None, str, str, str, int | None, int | None, str]
"""kind, speaker, session, stems (own and neighbours'), status, agent, occurred_at, seq, own stems."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked item and its score."""

    item: Item
    score: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    """Ranked hits, how they were ranked (``lexical`` or ``hybrid``) and why vectors were not used, if so."""

    hits: list[Hit]
    mode: str
    degraded: str | None = None
    people: tuple[str, ...] = ()


class Ranker:
    """Searches an :class:`ItemStore`, optionally with a vector index of one embedder."""

    def __init__(self, db: Database, items: ItemStore) -> None:
        self.db = db
        self.items = items
        self._speakers: dict[str, tuple[int, _People]] = {}
        self._vectors: dict[str, VectorIndex] = {}
        self._counts = DocCounts()

    # -- vectors ---------------------------------------------------------------------------------

    def vector_index(self, embedder: Embedder, agent: str) -> VectorIndex:
        """The in-memory index of ``agent``'s vectors from ``embedder``, brought up to date."""
        index = self._vectors.get(agent)
        if index is None or index.model != embedder.name:
            index = self._vectors[agent] = VectorIndex(embedder.name, embedder.dim)

        def rows(after: int) -> list[tuple[int, bytes, str | None, int]]:
            with self.db.read() as conn:
                # CROSS JOIN keeps vectors the outer loop: only rows stamped after ``after`` are visited, never
                # every item of the agent.
                return conn.execute(
                    "SELECT v.rowid, v.vector, i.speaker, v.stamp FROM vectors v INDEXED BY vectors_by_stamp"
                    " CROSS JOIN items i ON i.rowid = v.rowid WHERE v.model = ? AND v.stamp > ? AND i.agent = ?"
                    " ORDER BY v.stamp",
                    (embedder.name, after, agent),
                ).fetchall()

        def context_rows(after: int) -> list[tuple[int, bytes, int]]:
            with self.db.read() as conn:
                return conn.execute(
                    "SELECT c.rowid, c.vector, c.stamp FROM context_vectors c INDEXED BY context_vectors_by_stamp"
                    " CROSS JOIN items i ON i.rowid = c.rowid WHERE c.model = ? AND c.stamp > ? AND i.agent = ?"
                    " ORDER BY c.stamp",
                    (embedder.name, after, agent),
                ).fetchall()

        def newest(what: str) -> int:
            with self.db.read() as conn:
                table = "context_vectors" if what == "stamp" else "vectors"
                row = conn.execute(f"SELECT max(stamp) FROM {table} WHERE model = ?", (embedder.name,))
                return int(row.fetchone()[0] or 0)

        index.refresh(rows, context_rows, newest)
        return index

    # -- people ----------------------------------------------------------------------------------

    def _people(self, agent: str) -> _People:
        with self.db.read() as conn:
            version = conn.execute("PRAGMA data_version").fetchone()[0] * 1_000_003 + conn.total_changes
        cached = self._speakers.get(agent)
        if cached is None or cached[0] != version:
            people: _People = {}
            for person in self.items.speakers(agent):
                parts = tuple(terms(person))
                if parts:
                    people.setdefault(parts[0], []).append((person, parts))
            cached = (version, people)
            self._speakers[agent] = cached
        return cached[1]

    # -- search ----------------------------------------------------------------------------------

    def search(
        self,
        agent: str,
        query: str,
        *,
        limit: int = 10,
        kinds: Sequence[str] | None = None,
        session: str | None = None,
        embedder: Embedder | None = None,
        degraded: str | None = None,
    ) -> SearchResult:
        """The ``limit`` best active items of ``agent`` for ``query`` (optionally of ``kinds`` / one ``session``)."""
        original = query
        window = find_window(query, self._years(agent) if _MONTH_WORD.search(query) else None)
        if window is not None and not window.bound and not self._holds(agent, window.ranges):
            # Nothing was said or happened then: the date cannot narrow anything, and its words ("summer")
            # may still match the turn that tells of it with another date ("last summer", said a year on).
            window = None
        if window is not None:
            query = query.replace(window.text, f" {window.words} ")
        words = terms(query)[:MAX_QUERY_TERMS]
        people = self._people(agent)
        named = _named_people(words, people)
        name_words = {w for person in named for w in terms(person)}
        subject = _subject(original, named) if named else None
        lexical = [lemma(w) for w in words if w not in name_words]
        if not lexical and window is None:
            lexical = [lemma(w) for w in words]
        elif not lexical:
            # A query of nothing but names and a date ("What did Amara do on 10 May?") asks what happened
            # then: the window is the query and the subject the speaker signal's; searching the subject's
            # name would rank every turn that greets her above what she did that day. Another person named
            # ("What did Nate do for Joanna on 25 May?") is what the turn is about: their name stays.
            lexical = [lemma(w) for w in words if subject is None or w not in terms(subject)]
        query_stems = {stem(w) for w in lexical}
        padded_stems = [f" {q} " for q in query_stems]
        scores: dict[int, float] = {}
        table = fts_table(agent)
        if lexical and self._has_table(table):
            with self.db.read() as conn:
                matched = lexical + compound_forms(conn, table, lexical)
                rows = conn.execute(
                    f"SELECT rowid, -bm25({table}, 1.0, {CONTEXT_WEIGHT}) AS s FROM {table}"
                    f" WHERE {table} MATCH ? ORDER BY s DESC LIMIT ?",
                    (match_expression(conn, table, matched, self._counts), CANDIDATES),
                ).fetchall()
            top = rows[0][1] if rows and rows[0][1] > 0 else 1.0
            scores = {r: s / top for r, s in rows}
        events: dict[int, float] = {}
        if window is not None and not window.bound:
            # Event time first: the items whose own words put what they tell of inside the window
            # ("yesterday", said the day after) are candidates, and rank above what was merely said then.
            with self.db.read() as conn:
                events = events_in(conn, agent, window.ranges, EVENT_CANDIDATES, window.slack)
            for rowid in events:
                scores.setdefault(rowid, 0.0)
        placed: set[int] = set()
        if PLACE_WEIGHT and asks_for_a_place(original):
            with self.db.read() as conn:
                placed = items_naming_a_place(conn, agent, subject if len(named) == 1 else None, PLACE_CANDIDATES)
        for rowid in placed:
            scores.setdefault(rowid, 0.0)
        if window is not None and not window.bound and WINDOW_CANDIDATES:
            # A question that names a date asks about what happened then, whether or not its other words
            # match: the items of that window are candidates too (ranked by coverage, time and session).
            # A month named without a year is one range a year, latest first; they share one budget.
            budget = WINDOW_CANDIDATES
            with self.db.read() as conn:
                for start, end in sorted(window.ranges, reverse=True):
                    if budget <= 0:
                        break
                    rows = conn.execute(
                        "SELECT rowid FROM items WHERE agent = ? AND occurred_at >= ? AND occurred_at < ?"
                        " AND status = 'active' LIMIT ?",
                        (agent, start, end, budget),
                    ).fetchall()
                    budget -= len(rows)
                    for (rowid,) in rows:
                        scores.setdefault(rowid, 0.0)
        mode = "lexical"
        dense: dict[int, float] = {}
        if embedder is not None and lexical:
            both = tuple(sorted(named)) if len(named) >= 2 and asks_about_both(original) else ()
            dense = self._dense(embedder, agent, _vector_query(query, name_words), subject, scores, both)
            mode = "hybrid"
        if not scores:
            return SearchResult([], mode, degraded, tuple(sorted(named)))
        if REPLY_SHARE and scores:
            # A turn that asks what the query asks is answered by the next turn in its session, whose own
            # words rarely repeat the question's ("Yep, three years now!"): it gets a share of the asker's score.
            base = scores.copy()
            top = sorted(base, key=lambda r: -base[r])[:REPLY_TOP]
            rows = self._next_turns(top, asking=True)
            if subject is not None and _ASKS_REACTION.search(original):
                # "What does Gina think about the studio Jon opened?" is answered by Gina's turn right
                # after Jon's turn about the studio: her reaction, which rarely repeats his words.
                rows += self._next_turns(top, reacting=subject)
            for q_row, a_row in rows:
                scores[a_row] = scores.get(a_row, 0.0) + REPLY_SHARE * base[q_row]
        features = self._features(list(scores))
        asks_when = bool(_ASKS_WHEN.match(original))
        openers = self._openers(agent, features, window) if window is not None and OPENER_WEIGHT else {}
        elsewhere: set[int] = set()
        if window is not None and not window.bound:
            said = [r for r, f in features.items() if r not in events and f[6] is not None and f[6] in window]
            with self.db.read() as conn:
                elsewhere = told_elsewhere(conn, said, window.ranges)
        final: dict[int, float] = {}
        for rowid, lex in scores.items():
            f = features.get(rowid)
            if f is None or f[4] != "active" or f[5] != agent:
                continue
            kind, speaker, item_session, own = f[0], f[1], f[2], f[3]
            if kinds is not None and kind not in kinds:
                continue
            if session is not None and item_session != session:
                continue
            value = lex
            if query_stems:
                covered = 0  # a loop, not a generator: this runs for each of ~1,000 candidates a question
                for q in padded_stems:
                    if q in own:
                        covered += 1
                value += COVERAGE_WEIGHT * covered / len(padded_stems)
            if rowid in events:
                value += TIME_WEIGHT + EVENT_WEIGHT * events[rowid]
            elif window is not None and f[6] is not None and f[6] in window and rowid not in elsewhere:
                value += TIME_WEIGHT * window.said_share(f[6])
                if f[2] is not None and f[7] is not None and f[7] == openers.get(f[2]):
                    value += OPENER_WEIGHT
            if rowid in placed:
                value += PLACE_WEIGHT
            if asks_when and any(m in f[8] for m in _WHEN_MARKS):
                value += WHEN_WEIGHT
            if len(named) == 1 and speaker in named:
                value *= SPEAKER_BOOST
            final[rowid] = value
        by_session: dict[str, list[float]] = {}
        for rowid, value in final.items():
            s = features[rowid][2]
            if s is not None:
                by_session.setdefault(s, []).append(value)
        if by_session:
            totals = {s: sum(sorted(v, reverse=True)[:SESSION_TOP]) for s, v in by_session.items()}
            best = max(totals.values()) or 1.0
            for rowid in final:
                s = features[rowid][2]
                if s is not None:
                    final[rowid] += SESSION_WEIGHT * totals[s] / best
        used: dict[int, float] = {}  # each item's scaled similarity as the ranking took it (set questions' tails)
        if dense:
            # Vectors join the finished lexical ranking (added earlier, they would also feed the reply and
            # session signals: 300 / 369 instead of 303 / 375 questions on LoCoMo's two groups). Time is
            # the lexical ranking's: a dated question's similarity counts inside its window only, a
            # "when" question's not at all.
            best_final = max(final.values(), default=0.0) or 1.0
            for rowid in final:
                d = dense.get(rowid, 0.0)
                if window is not None:
                    # Vectors know what a turn is about, not when it was said: for a dated question
                    # only the window's items take their similarity (the rest keep their lexical rank).
                    at = features[rowid][6]
                    if rowid not in events and (at is None or at not in window):
                        d = 0.0
                elif asks_when:
                    # A "when" question is answered by a turn that says when (and its session's date),
                    # which only the lexical ranking sees; its vectors' nearest items stay candidates.
                    d = 0.0
                final[rowid] = final[rowid] / best_final + DENSE_WEIGHT * d
                if d:
                    used[rowid] = d
        ranked = sorted(final, key=lambda r: (-final[r], -r))
        both = len(named) >= 2 and asks_about_both(original)
        if both:
            # "Both" / "in common" about two named people: each one's turns, not the first one's only.
            pool = ranked[: POOL * limit]
            speakers = {r: features[r][1] if features[r][1] in named else None for r in pool}
            ranked = diversify(ranked, final, {r: features[r][2] for r in pool}, limit, speakers)
        elif asks_for_a_set(original):
            # "How many times", "which ones", "what has she painted": several events (see _answers).
            mine = {r: f[2] if len(named) != 1 or f[1] in named else None for r, f in features.items()}
            index = self._vectors.get(agent) if dense and VECTOR_SETS and window is None else None
            if index is not None:
                ranked = by_meaning(ranked, final, mine, limit, index, used)
            else:
                ranked = distinct_events(ranked, mine, limit)
        ranked = ranked[: max(0, limit)]
        items = self.items.by_rowids(ranked)
        hits = [Hit(items[r], round(final[r], 4)) for r in ranked if r in items]
        return SearchResult(hits, mode, degraded, tuple(sorted(named)))

    def _dense(
        self,
        embedder: Embedder,
        agent: str,
        question: str,
        gate: str | None,
        scores: dict[int, float],
        people: Sequence[str] = (),
    ) -> dict[int, float]:
        """Scaled vector similarity (0-1) of the candidates to ``question`` (see :func:`_vector_query`).

        The nearest items join ``scores`` (at 0).
        An item's similarity is its own vector's cosine to the query plus its context vector's (the turn
        with its neighbours). A query about a known person (``gate``: the one it names, or of several the
        subject, see :func:`_subject`) is about what that person said: the nearest items are taken among
        that speaker's items only (whatever else the vectors find near a name-less question about "her
        pets" is mostly the other person's chatter). A nearby turn that asks passes a share of its
        similarity to the next turn, its answer (signal 4, by meaning instead of words). A "both" question about
        several named people (``people``) asks for a piece of evidence from each, told in each one's own words:
        each person's nearest items are taken among their items and scaled among themselves (DENSE_CANDIDATES
        shared between them), so the subject's turns do not crowd out the other person's.
        """
        index = self.vector_index(embedder, agent)
        # Embedded here, not on a second thread beside the lexical ranking: that was measured and lost on the
        # busy 2-core machine (p50 57.8 against 39.9 ms at 100,000 items, 5 ms more CPU: the two threads take
        # turns at the GIL).
        qv = embed_normalised(embedder, [question])[0]
        if len(people) >= 2 and PER_PERSON:
            # Each person's part of a "both" question retrieved on its own: their nearest, scaled among them.
            out: dict[int, float] = {}
            for near in index.nearest_by_speaker(qv, people, DENSE_CANDIDATES // len(people)):
                for rowid, value in self._nearest(near, scores).items():
                    out[rowid] = max(out.get(rowid, 0.0), value)
            if out:
                return out
        return self._nearest(index.nearest(qv, DENSE_CANDIDATES, gate), scores)

    def _nearest(self, near: Nearest, scores: dict[int, float]) -> dict[int, float]:
        """The nearest rows (``near``, nearest first) join ``scores``; each candidate's similarity, 0-1."""
        np = _numpy()
        if not len(near.rowids):
            return {}
        # Nearest first: which of them a tie at 0 among the lexical scores lets pass a reply share is then
        # the nearest ones, not the order a partial sort left them in.
        for rowid in near.rowids.tolist():
            scores.setdefault(rowid, 0.0)
        asking = near.rowids[:REPLY_TOP].tolist() if DENSE_REPLY_SHARE else []
        replies = dict(self._next_turns(asking, asking=True))
        for answer in replies.values():
            scores.setdefault(answer, 0.0)
        # Similarities mean little in absolute terms: scale them so the nearest item scores 1 and the
        # last of the nearest DENSE_CANDIDATES scores 0.
        high, low = float(near.sims[0]), float(near.sims[-1])
        spread = (high - low) or 1.0
        # Only the candidates are scored (exactly, like the nearest rows), not every row; outside the gate an
        # item takes no similarity.
        found, sims = near.similarities(np.fromiter(scores, dtype=np.int64, count=len(scores)))
        scaled = np.clip((sims - low) / spread, 0.0, 1.0)
        out = dict(zip(found.tolist(), scaled.tolist(), strict=True))
        for question, answer in replies.items():
            if question in out:
                out[answer] = out.get(answer, 0.0) + DENSE_REPLY_SHARE * out[question]
        return out

    def _next_turns(
        self, rowids: list[int], *, asking: bool = False, reacting: str | None = None
    ) -> list[tuple[int, int]]:
        """(turn, the next turn of its session) for each turn among ``rowids``.

        ``asking``: only turns that ask (hold a ``?``), paired with their answer. ``reacting``: only the
        other person's turns, paired with the next turn when ``reacting`` said it (their reaction).
        """
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        where, params = "", list(rowids)
        if asking:
            where += " AND q.content LIKE '%?%'"
        if reacting is not None:
            where += " AND q.speaker IS NOT ? AND a.speaker = ?"
            params += [reacting, reacting]
        with self.db.read() as conn:
            # Without statistics the planner looks replies up by (agent, kind, status), a scan of every
            # turn for each asking turn (30+ ms a query at 20,000 items): name the session index.
            return conn.execute(
                "SELECT q.rowid, a.rowid FROM items q JOIN items a INDEXED BY items_by_session"
                " ON a.agent = q.agent AND a.session = q.session"
                f" AND a.seq = q.seq + 1 AND a.kind = 'turn' WHERE q.rowid IN ({marks}) AND q.kind = 'turn'"
                f"{where} AND a.status = 'active'",
                params,
            ).fetchall()

    def _years(self, agent: str) -> tuple[int, int] | None:
        """The first and last year of the agent's items (by ``occurred_at``), or None when it has none."""
        with self.db.read() as conn:
            # Two statements: SQLite answers a lone min() or max() from the (agent, occurred_at) index in one
            # step, but both in one statement by reading every entry of the agent (10 ms at 100,000 items).
            low, high = (
                conn.execute(f"SELECT {f}(occurred_at) FROM items WHERE agent = ?", (agent,)).fetchone()[0]
                for f in ("min", "max")
            )
        if low is None or high is None:
            return None
        return datetime.fromtimestamp(low / 1000, UTC).year, datetime.fromtimestamp(high / 1000, UTC).year

    def _holds(self, agent: str, ranges: tuple[tuple[int, int], ...]) -> bool:
        with self.db.read() as conn:
            return window_holds(conn, agent, ranges)

    def _openers(self, agent: str, features: dict[int, _Features], window: Window) -> dict[str, int]:
        """The first turn's ``seq`` of each session that has a candidate inside ``window``."""
        sessions = sorted({f[2] for f in features.values() if f[2] is not None and f[6] is not None and f[6] in window})
        out: dict[str, int] = {}
        with self.db.read() as conn:
            for start in range(0, len(sessions), 500):
                chunk = sessions[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for name, first in conn.execute(
                    f"SELECT session, min(seq) FROM items INDEXED BY items_by_session WHERE session IN ({marks})"
                    " AND agent = ? AND kind = 'turn' AND status = 'active' GROUP BY session",
                    [*chunk, agent],
                ):
                    out[name] = first
        return out

    def _has_table(self, table: str) -> bool:
        if table in self.items._tables:
            return True
        with self.db.read() as conn:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        if found:
            self.items._tables.add(table)
        return found is not None

    def _features(self, rowids: list[int]) -> dict[int, _Features]:
        out: dict[int, _Features] = {}
        with self.db.read() as conn:
            for start in range(0, len(rowids), 500):
                chunk = rowids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for row in conn.execute(
                    "SELECT rowid, kind, speaker, session, stems, ctx_stems, status, agent, occurred_at, seq FROM items"
                    f" WHERE rowid IN ({marks})",
                    chunk,
                ):
                    # Stems as one padded string: a membership test per query stem is cheaper than a set.
                    out[row[0]] = (
                        row[1],
                        row[2],
                        row[3],
                        f" {row[4]} {row[5]} ",
                        row[6],
                        row[7],
                        row[8],
                        row[9],
                        f" {row[4]} ",
                    )
        return out


def _vector_query(query: str, name_words: set[str]) -> str:
    """The question as a sentence model should see it: its own wording, without the people it names.

    A sentence vector of "When did Ann go to the support group?" is dominated by "Ann" and lands
    nearest the turns that greet Ann; people are the speaker signal's job, the vector's is the topic.
    """
    if not name_words:
        return query
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in sorted(name_words)) + r")(?:'s)?\b", re.I)
    text = " ".join(pattern.sub(" ", query).split())
    return text or query


def _subject(query: str, named: set[str]) -> str | None:
    """The person a query asks about: the only one it names, else the first one not named as an owner ("X's")."""
    if len(named) == 1:
        return next(iter(named))
    lowered = query.lower()
    owners = {p for p in named if re.search(r"\b" + re.escape(p.lower()) + r"['\u2019]s\b", lowered)}
    found = []
    for person in named - owners or named:
        first = re.search(r"\b" + re.escape(person.lower().split()[0]) + r"\b", lowered)
        if first is not None:
            found.append((first.start(), person))
    return min(found)[1] if found else None


def _named_people(words: list[str], people: _People) -> set[str]:
    """The known people a query names (every word of the name appears in the query)."""
    present = set(words)
    found = set()
    for word in present:
        for person, parts in people.get(word, ()):
            if all(p in present for p in parts):
                found.add(person)
    return found
