from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from aleph import EventLog


def test_recorded_events_read_back_in_order(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.db")
    log.record("s1", "approved", "bash", call_id="c1", turn_id="t1", detail="approved by the user", by="user")
    log.record("s1", "executed", "bash", call_id="c1", turn_id="t1")
    log.record("s2", "refused", "file_write", detail="denied by rule file_write(/etc/**)")
    events = log.events("s1")
    assert [("approved", "c1", "user"), ("executed", "c1", None)] == [(e.kind, e.call_id, e.by) for e in events]
    assert ["refused"] == [e.kind for e in log.events("s2")]
    assert {"session_key", "kind", "tool", "call_id", "turn_id", "detail", "by", "at_ms", "principal"} == set(
        events[0].to_json()
    )
    log.close()


def test_limit_returns_the_newest_events_oldest_first(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.db")
    for i in range(10):
        log.record("s", "executed", f"tool{i}")
    assert ["tool7", "tool8", "tool9"] == [e.tool for e in log.events("s", limit=3)]
    with pytest.raises(ValueError, match="limit"):
        log.events("s", limit=0)
    log.close()


def test_the_database_uses_wal_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    log = EventLog(path)
    log.record("s", "denied", "bash", detail="user said no", by="user")
    log.close()
    with sqlite3.connect(path) as conn:
        assert ("wal",) == conn.execute("PRAGMA journal_mode").fetchone()
    assert ["denied"] == [e.kind for e in EventLog(path).events("s")]


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.db")

    def worker(n: int) -> None:
        for i in range(250):
            log.record(f"s{n}", "executed", "t", call_id=str(i))

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [250] * 4 == [len(log.events(f"s{n}", limit=1000)) for n in range(4)]
    assert 0 == log.lost
    log.close()


def test_an_unknown_kind_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown event kind"):
        EventLog(tmp_path / "e.db").record("s", "maybe", "bash")  # type: ignore[arg-type]


def test_an_unusable_path_never_makes_record_raise(tmp_path: Path) -> None:
    # Tests run as root here, so chmod cannot make a path read-only; a file where the parent
    # directory should be fails the same way (the database cannot be created).
    (tmp_path / "file").write_text("")
    log = EventLog(tmp_path / "file" / "events.db")
    log.record("s", "executed", "bash")
    log.record("s", "failed", "bash", detail="boom")
    assert log.flush()
    assert 2 == log.lost
    assert [] == log.events("s")
    log.close()


def test_a_broken_database_never_makes_record_raise(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    path.write_bytes(b"this is not a database" * 100)
    log = EventLog(path)
    log.record("s", "executed", "bash")
    assert log.flush()
    assert 1 == log.lost
    assert [] == log.events("s")
    log.close()


def test_a_database_with_a_foreign_schema_never_makes_record_raise(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    EventLog(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE events (x)")  # a schema the log cannot write to
    log = EventLog(path)
    log.record("s", "executed", "bash")
    assert log.flush()
    assert 1 == log.lost
    log.close()


def test_record_after_close_is_counted_not_raised(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.db")
    log.close()
    log.record("s", "executed", "bash")
    assert 1 == log.lost


def test_long_text_is_bounded(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.db")
    log.record("s", "failed", "bash", detail="x" * 100_000)
    (event,) = log.events("s")
    assert 4096 == len(event.detail) and event.detail.endswith("[truncated]")
    log.close()
