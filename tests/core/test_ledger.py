from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from aleph import Keystore, Ledger, LedgerRecord, LedgerRow
from aleph._ledger import LedgerError, row_hash

# ---- the row hash (reference §6.5 "identity") --------------------------------------------------

BASE: dict[str, Any] = {
    "agent_id": "main",
    "seq": 2,
    "at_ms": 1_700_000_000_000,
    "action": "tool_call",
    "outcome": "ok",
    "target": "bash",
    "args_fp": "0" * 32,
    "detail": "bash: ls",
    "signer_fp": "f" * 32,
    "principal": "alice",
    "result_fp": "r" * 8,
    "rule": "bash(ls)",
    "prev_hash": bytes(range(32)),
}


def h(**changes: Any) -> bytes:
    return row_hash(**{**BASE, **changes})


def lp(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">I", len(data)) + data


def opt(text: str | None) -> bytes:
    return b"\x00" if text is None else b"\x01" + lp(text)


def test_the_hash_follows_the_documented_v2_layout() -> None:
    b = BASE
    expected = hashlib.sha256(
        b"aleph-agent-ledger-v2"
        + lp(b["agent_id"])
        + struct.pack(">q", b["seq"])
        + struct.pack(">q", b["at_ms"])
        + lp(b["action"])
        + lp(b["outcome"])
        + lp(b["target"])
        + opt(b["args_fp"])
        + lp(b["detail"])
        + lp(b["signer_fp"])
        + opt(b["principal"])
        + opt(b["result_fp"])
        + opt(b["rule"])
        + b["prev_hash"]
    ).digest()
    assert expected == h()


def test_the_hash_is_deterministic() -> None:
    assert h() == h()


def test_the_agent_id_is_part_of_the_hash() -> None:
    assert h() != h(agent_id="other")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("agent_id", "main2"),
        ("seq", 3),
        ("at_ms", 1),
        ("action", "tool_denied"),
        ("outcome", "error"),
        ("target", "bash2"),
        ("args_fp", "1" * 32),
        ("detail", "bash: ls -l"),
        ("signer_fp", "e" * 32),
        ("principal", "bob"),
        ("result_fp", "s" * 8),
        ("rule", "bash(*)"),
        ("prev_hash", bytes(32)),
    ],
)
def test_every_field_affects_the_hash(name: str, value: Any) -> None:
    assert h() != h(**{name: value})


@pytest.mark.parametrize("name", ["args_fp", "principal", "result_fp", "rule"])
def test_none_differs_from_an_empty_string(name: str) -> None:
    assert h(**{name: None}) != h(**{name: ""})


def test_length_prefixes_make_adjacent_fields_unambiguous() -> None:
    assert h(target="ab", detail="c", args_fp=None) != h(target="a", detail="bc", args_fp=None)
    assert h(action="tool_call", outcome="ok") != h(action="tool_callo", outcome="k")
    assert h(detail="x", signer_fp="yz") != h(detail="xy", signer_fp="z")


def test_a_genesis_row_hashes_like_one_with_a_zero_prev_hash() -> None:
    assert h(prev_hash=None) == h(prev_hash=bytes(32))


# ---- helpers ------------------------------------------------------------------------------------


def record(i: int = 0, agent: str = "main", **changes: Any) -> LedgerRecord:
    return replace(
        LedgerRecord(agent, "tool_call", "file_write", "ok", f"file_write: path=f{i}.txt", "a" * 32), **changes
    )


async def filled(directory: Path, n: int, agent: str = "main", **kwargs: Any) -> Ledger:
    """A ledger with ``n`` rows, each in its own group commit: every row carries its own signature."""
    ledger = Ledger(directory, **kwargs)
    for i in range(n):
        await ledger.append(record(i, agent))
        await ledger.flush()
    return ledger


def chain_file(ledger: Ledger, agent: str = "main") -> Path:
    return ledger._chain_paths(agent)[0]


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def rehash(row: dict[str, Any]) -> str:
    """The hash a forger without the key would give ``row`` after editing it (hex)."""
    fields = {k: v for k, v in LedgerRow.from_json(row).to_json().items() if k not in ("hash", "signature", "mark")}
    return row_hash(**fields | {"prev_hash": bytes.fromhex(row["prev_hash"] or "")}).hex()


# ---- appending ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_first_append_opens_the_chain_with_a_genesis_row(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 1)
    rows = ledger.rows("main")
    fp = ledger.keystore.signer("main").fingerprint
    assert [1, 2] == [r.seq for r in rows]
    assert ("identity_created", None, f"chain opened under key {fp}") == (
        rows[0].action,
        rows[0].prev_hash,
        rows[0].detail,
    )
    assert ("tool_call", "file_write", rows[0].hash) == (rows[1].action, rows[1].target, rows[1].prev_hash)
    assert ledger.verify("main").ok
    await ledger.aclose()


@pytest.mark.anyio
async def test_every_record_field_is_stored_and_hashed(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    rec = LedgerRecord("main", "approval_granted", "bash", "ok", "approved by the user [gate: bash]", "b" * 32, "alice")
    await ledger.append(replace(rec, result_fp="c" * 16, rule="bash(git *)"))
    await ledger.aclose()
    row = ledger.rows("main")[-1]
    assert ("alice", "c" * 16, "bash(git *)", "b" * 32) == (row.principal, row.result_fp, row.rule, row.args_fp)
    assert ledger.verify("main").ok


@pytest.mark.anyio
async def test_1000_concurrent_appends_lose_no_row_and_verify(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, checkpoint_every=64)
    async with anyio.create_task_group() as tg:
        for i in range(1000):
            tg.start_soon(ledger.append, record(i))
    await ledger.flush()
    rows = ledger.rows("main")
    assert 0 == ledger.lost_appends
    assert list(range(1, 1002)) == [r.seq for r in rows]
    assert {f"file_write: path=f{i}.txt" for i in range(1000)} == {r.detail for r in rows[1:]}
    report = ledger.verify("main")
    assert (True, 1001) == (report.ok, report.rows)
    await ledger.aclose()


@pytest.mark.anyio
async def test_appends_from_many_threads_never_interleave(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)

    def worker(t: int) -> None:
        for i in range(200):
            ledger.append_nowait(record(i, agent=f"agent{t % 2}", detail=f"t{t} i{i} " + "x" * 300))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    await ledger.aclose()
    assert 0 == ledger.lost_appends
    for agent in ("agent0", "agent1"):
        assert list(range(1, 602)) == [r.seq for r in ledger.rows(agent)]
        assert ledger.verify(agent).ok
    assert ["agent0", "agent1"] == ledger.agents()


@pytest.mark.anyio
async def test_two_ledger_objects_on_one_directory_keep_one_contiguous_chain(tmp_path: Path) -> None:
    first, second = Ledger(tmp_path), Ledger(tmp_path)
    for i in range(10):
        await (first if i % 2 else second).append(record(i))
        await (first if i % 2 else second).flush()
    await first.aclose()
    await second.aclose()
    assert list(range(1, 12)) == [r.seq for r in first.rows("main")]
    assert first.verify("main").ok


@pytest.mark.anyio
async def test_a_failing_store_never_raises_and_counts_lost_appends(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    ledger = Ledger(blocker)
    await ledger.append(record())
    ledger.append_nowait(record())
    await ledger.flush()
    assert 2 == ledger.lost_appends
    await ledger.aclose()
    await ledger.append(record())  # closed: still no exception
    assert 3 == ledger.lost_appends


@pytest.mark.anyio
async def test_a_deferred_record_that_cannot_be_built_is_counted_lost_and_the_chain_goes_on(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")

    def broken() -> LedgerRecord:
        raise ValueError("no summary")

    await ledger.append_later("main", lambda: record(detail="built by the writer"))
    await ledger.append_later("main", broken)
    await ledger.append_later("main", lambda: record(agent_id="other"))  # built for another chain
    await ledger.append(record(detail="after"))
    await ledger.flush()
    details = [r.detail for r in ledger.rows("main") if r.action == "tool_call"]
    assert (["built by the writer", "after"], 2) == (details, ledger.lost_appends)
    assert ledger.verify("main").ok
    await ledger.aclose()


@pytest.mark.anyio
async def test_oversized_fields_are_clipped_before_hashing(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    await ledger.append(record(detail="d" * 100_000, target="t" * 1000))
    await ledger.aclose()
    row = ledger.rows("main")[-1]
    assert row.detail.endswith("… [truncated]") and len(row.detail) == 4096
    assert 256 == len(row.target)
    assert ledger.verify("main").ok


@pytest.mark.anyio
async def test_files_are_private(tmp_path: Path) -> None:
    ledger = await filled(tmp_path / "ledger", 3)
    await ledger.aclose()
    directory = tmp_path / "ledger"
    assert {0o700} == {stat.S_IMODE(p.stat().st_mode) for p in (directory, directory / "chains", directory / "keys")}
    files = [*(directory / "chains").iterdir(), *(directory / "keys").iterdir()]
    assert {0o600} == {stat.S_IMODE(p.stat().st_mode) for p in files}


# ---- checkpoints --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_flush_and_the_close_seal_the_head_with_a_signed_checkpoint(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 3)
    ckpt = ledger._chain_paths("main")[1]
    assert [2, 3, 4] == [c["seq"] for c in read_rows(ckpt)]
    await ledger.append(record(5))
    await ledger.aclose()
    stored = read_rows(ckpt)
    assert [2, 3, 4, 5] == [c["seq"] for c in stored]
    assert ledger.rows("main")[-1].hash == stored[-1]["head_hash"]
    assert 5 == ledger.verify("main").checkpoint_seq


@pytest.mark.anyio
async def test_the_committer_seals_written_rows_without_being_asked(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    for i in range(30):
        await ledger.append(record(i))
    with anyio.fail_after(10):
        while ledger.verify("main").unsigned_tail:  # sealed within moments (SEAL_INTERVAL), no flush
            await anyio.sleep(0.005)
    assert (True, 31) == (ledger.verify("main").ok, ledger.verify("main").rows)
    await ledger.aclose()


@pytest.mark.anyio
async def test_a_deleted_tail_fails_against_the_stored_checkpoint(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 5)
    await ledger.aclose()
    path = chain_file(ledger)
    write_rows(path, read_rows(path)[:-2])
    report = ledger.verify("main")
    assert (False, 5) == (report.ok, report.first_bad_seq)
    assert "rows 5..6 were removed" in (report.reason or "")


@pytest.mark.anyio
async def test_an_exported_checkpoint_detects_truncation_even_without_the_side_file(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 5)
    out = tmp_path / "offsite.json"
    ledger.export_checkpoint("main", out)
    await ledger.aclose()
    exported = json.loads(out.read_text())
    assert {"agent_id", "seq", "head_hash", "signer_fp", "at_ms", "signature"} == set(exported)
    assert 6 == exported["seq"]
    path, ckpt = ledger._chain_paths("main")
    write_rows(path, read_rows(path)[:-1])
    ckpt.unlink()  # the attacker also removed the local checkpoints
    assert ledger.verify("main").ok  # a chain alone cannot show its missing tail ...
    report = ledger.verify("main", checkpoint=out)  # ... the checkpoint kept elsewhere can
    assert (False, 6) == (report.ok, report.first_bad_seq)
    assert "offsite.json" in (report.reason or "")


@pytest.mark.anyio
async def test_a_forged_checkpoint_is_rejected(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 3)
    out = tmp_path / "ck.json"
    ledger.export_checkpoint("main", out)
    await ledger.aclose()
    data = json.loads(out.read_text())
    out.write_text(json.dumps({**data, "seq": 2, "head_hash": ledger.rows("main")[1].hash}))
    report = ledger.verify("main", checkpoint=out)
    assert not report.ok and "bad signature" in (report.reason or "")


@pytest.mark.anyio
async def test_export_refuses_to_vouch_for_a_tampered_chain(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 3)
    await ledger.aclose()
    path = chain_file(ledger)
    rows = read_rows(path)
    rows[2]["detail"] = "nothing to see"
    write_rows(path, rows)
    with pytest.raises(LedgerError, match="hash mismatch"):
        ledger.export_checkpoint("main", tmp_path / "ck.json")


# ---- tampering ----------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("detail", "harmless"),
        ("target", "file_read"),
        ("action", "tool_denied"),
        ("outcome", "error"),
        ("args_fp", None),
        ("principal", "mallory"),
        ("result_fp", "00"),
        ("rule", "file_write(**)"),
        ("at_ms", 1),
        ("agent_id", "other"),
        ("signer_fp", "0" * 32),
    ],
)
async def test_an_edited_field_fails_verify_at_that_row(tmp_path: Path, name: str, value: Any) -> None:
    ledger = await filled(tmp_path, 4)
    await ledger.aclose()
    path = chain_file(ledger)
    rows = read_rows(path)
    rows[2][name] = value
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 3, 3) == (report.ok, report.first_bad_seq, report.first_bad_line)
    assert 2 == report.rows


@pytest.mark.anyio
async def test_an_edited_row_with_a_recomputed_hash_breaks_the_chain_at_the_next_row(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 4)
    await ledger.aclose()
    path = chain_file(ledger)
    rows = read_rows(path)
    rows[2]["detail"] = "harmless"
    rows[2]["hash"] = rehash(rows[2])
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 4) == (report.ok, report.first_bad_seq)
    assert "the chain is broken" in (report.reason or "")


@pytest.mark.anyio
async def test_reordered_rows_fail_at_the_first_moved_row(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 5)
    await ledger.aclose()
    path = chain_file(ledger)
    rows = read_rows(path)
    rows[2], rows[3] = rows[3], rows[2]
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 3) == (report.ok, report.first_bad_seq)
    assert "expected seq 3 but found seq 4" in (report.reason or "")


@pytest.mark.anyio
async def test_a_deleted_middle_row_fails_at_its_seq(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 5)
    await ledger.aclose()
    path = chain_file(ledger)
    rows = read_rows(path)
    del rows[3]
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 4, 4) == (report.ok, report.first_bad_seq, report.first_bad_line)
    assert "missing" in (report.reason or "")


@pytest.mark.anyio
async def test_a_renumbered_chain_after_deletion_still_fails_on_the_link(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 5)
    await ledger.aclose()
    path = chain_file(ledger)
    rows = read_rows(path)
    del rows[3]
    for i, row in enumerate(rows, start=1):
        row["seq"] = i
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 4) == (report.ok, report.first_bad_seq)


@pytest.mark.anyio
async def test_a_swapped_signature_fails(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 4)
    await ledger.aclose()
    path = chain_file(ledger)
    rows = read_rows(path)
    rows[3]["signature"] = rows[0]["signature"]  # the genesis row's signature on a tool row
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 2) == (report.ok, report.first_bad_seq)  # the first of the rows it would vouch for
    assert "bad signature" in (report.reason or "")


@pytest.mark.anyio
async def test_a_chain_signed_by_an_unknown_key_fails(tmp_path: Path) -> None:
    forger = await filled(tmp_path / "forger", 2)
    await forger.aclose()
    ledger = await filled(tmp_path / "real", 2)
    await ledger.aclose()
    chain_file(ledger).write_bytes(chain_file(forger).read_bytes())
    ledger._chain_paths("main")[1].unlink()
    report = ledger.verify("main")
    assert (False, 1) == (report.ok, report.first_bad_seq)
    assert "unknown signer" in (report.reason or "")


@pytest.mark.anyio
async def test_a_wrong_genesis_fails(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 2)
    await ledger.aclose()
    path = chain_file(ledger)
    rows = read_rows(path)
    rows[0]["prev_hash"] = rows[1]["hash"]
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 1) == (report.ok, report.first_bad_seq)
    assert "genesis" in (report.reason or "")


@pytest.mark.anyio
async def test_a_garbled_middle_row_is_named(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 4)
    await ledger.aclose()
    path = chain_file(ledger)
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:40] + "\n"
    path.write_text("".join(lines))
    report = ledger.verify("main")
    assert (False, 3, 3) == (report.ok, report.first_bad_seq, report.first_bad_line)
    assert "unreadable" in (report.reason or "")


# ---- rows written on the caller's thread, sealed by one signature per group ---------------------


def killed(directory: Path, n: int, **kwargs: Any) -> Ledger:
    """A ledger that wrote its genesis and ``n`` rows and died (``kill -9``) before its committer sealed them."""
    ledger = Ledger(directory, **kwargs)
    ledger._run_committer = lambda: None  # type: ignore[method-assign]  # the committer never runs
    for i in range(n):
        ledger.append_nowait(record(i))
    with ledger._lock:  # what the death leaves: the rows in the file, nothing sealed, no final checkpoint
        ledger._closed = True
        for chain in ledger._chains.values():
            os.close(chain.fd)
        ledger._chains.clear()
    return ledger


def test_a_row_is_in_the_file_when_append_returns_and_one_checkpoint_seals_the_group(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger._run_committer = lambda: None  # type: ignore[method-assign]  # seal only on the flush below
    for i in range(5):
        ledger.append_nowait(record(i))
    rows = read_rows(chain_file(ledger))
    assert [True, False, False, False, False, False] == [bool(r["signature"]) for r in rows]
    assert all(len(r["mark"]) == 32 for r in rows[1:]) and "mark" not in rows[0]
    report = ledger.verify("main")
    assert (True, 1, 5, None) == (report.ok, report.rows, report.unsigned_tail, report.checkpoint_seq)
    ledger.flush_sync()
    report = ledger.verify("main")
    assert (True, 6, 0, 6) == (report.ok, report.rows, report.unsigned_tail, report.checkpoint_seq)
    assert 1 == len(ledger._chain_paths("main")[1].read_text().splitlines())
    ledger.close()


def test_an_unsigned_row_edited_with_every_later_hash_recomputed_fails_on_the_seal_that_vouches_for_it(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path)
    for i in range(5):
        ledger.append_nowait(record(i))
    ledger.close()
    path = chain_file(ledger)
    rows = read_rows(path)
    rows[2]["detail"] = "harmless"
    for i in range(2, len(rows)):  # a forger without the key re-chains everything after the edit
        rows[i]["prev_hash"] = rows[i - 1]["hash"]
        rows[i]["hash"] = rehash(rows[i])
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 6) == (report.ok, report.first_bad_seq)
    assert "the checkpoint records" in (report.reason or "")


def test_an_identity_row_without_its_signature_fails(tmp_path: Path) -> None:
    ledger = killed(tmp_path, 2)
    path = chain_file(ledger)
    rows = read_rows(path)
    rows[0]["signature"] = ""
    write_rows(path, rows)
    report = ledger.verify("main")
    assert (False, 1, "identity_created row carries no signature") == (report.ok, report.first_bad_seq, report.reason)


@pytest.mark.anyio
async def test_rows_left_unsealed_by_a_kill_are_reported_then_kept_and_sealed_at_the_next_start(tmp_path: Path) -> None:
    killed(tmp_path, 4)
    ledger = Ledger(tmp_path)
    report = ledger.verify("main")
    assert (True, 1, 4, False) == (report.ok, report.rows, report.unsigned_tail, report.torn_tail)
    assert ["main"] == ledger.recover()  # what the runtime does at start
    report = ledger.verify("main")
    assert (True, 5, 0, 5) == (report.ok, report.rows, report.unsigned_tail, report.checkpoint_seq)
    await ledger.append(record(9))
    await ledger.aclose()
    assert list(range(1, 7)) == [r.seq for r in ledger.rows("main")]
    assert ledger.verify("main").ok


@pytest.mark.anyio
@pytest.mark.parametrize("forgery", ["no mark", "a mark of another key", "a mark of another row"])
async def test_unsealed_rows_without_the_writers_mark_are_cut_never_sealed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, forgery: str
) -> None:
    ledger = killed(tmp_path, 3)
    path = chain_file(ledger)
    good = path.read_bytes()
    rows = read_rows(path)
    forged = dict(rows[-1], seq=5, detail="rm -rf / was approved", prev_hash=rows[-1]["hash"])
    forged["hash"] = rehash(forged)  # anyone can chain a row; only the key holder can mark it
    if forgery == "no mark":
        del forged["mark"]
    elif forgery == "a mark of another key":
        forged["mark"] = Keystore(tmp_path / "other-keys").signer("main").mark(bytes.fromhex(forged["hash"]))
    else:
        forged["mark"] = rows[-1]["mark"]
    following = dict(forged, seq=6, prev_hash=forged["hash"], mark=rows[-1]["mark"])
    following["hash"] = rehash(following)
    write_rows(path, [*rows, forged, following])
    reopened = Ledger(tmp_path)
    reopened.recover()
    assert "never acknowledged" in caplog.text
    assert good == path.read_bytes()
    report = reopened.verify("main")
    assert (True, 4, 0) == (report.ok, report.rows, report.unsigned_tail)
    reopened.close()


def test_a_deleted_seal_leaves_its_rows_unvouched_and_the_exported_checkpoint_catches_a_deleted_tail(
    tmp_path: Path,
) -> None:
    ledger = Ledger(tmp_path)
    for i in range(4):
        ledger.append_nowait(record(i))
    ledger.close()
    exported = tmp_path / "exported.json"
    ledger.export_checkpoint("main", exported)
    ledger._chain_paths("main")[1].unlink()
    report = ledger.verify("main")
    assert (True, 1, 4) == (report.ok, report.rows, report.unsigned_tail)
    path = chain_file(ledger)
    write_rows(path, read_rows(path)[:3])
    report = ledger.verify("main", checkpoint=exported)
    assert (False, 4) == (report.ok, report.first_bad_seq)
    assert "rows 4..5 were removed" in (report.reason or "")


# ---- crashes ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_torn_final_row_is_ignored_by_verify_and_cut_on_the_next_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = await filled(tmp_path, 3)
    await ledger.aclose()
    path = chain_file(ledger)
    full = path.read_bytes()
    path.write_bytes(full + b'{"agent_id": "main", "seq": 5, "prev_ha')  # a crash mid-write
    report = ledger.verify("main")
    assert (True, True, 4) == (report.ok, report.torn_tail, report.rows)

    reopened = await filled(tmp_path, 2)
    await reopened.aclose()
    assert "a row torn by a crash" in caplog.text
    assert list(range(1, 7)) == [r.seq for r in reopened.rows("main")]
    assert path.read_bytes().startswith(full)
    assert reopened.verify("main").ok


@pytest.mark.anyio
async def test_a_write_that_fails_leaves_no_partial_row(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 2)
    chain = ledger._chains["main"]
    good = chain_file(ledger).read_bytes()
    real_fd = chain.fd
    chain.fd = os.open(chain_file(ledger), os.O_RDONLY)  # the next write fails like a lost disk would
    await ledger.append(record(9))
    await ledger.flush()
    os.close(chain.fd)
    chain.fd = real_fd
    assert 1 == ledger.lost_appends
    assert good == chain_file(ledger).read_bytes()
    await ledger.append(record(10))
    await ledger.aclose()
    assert ledger.verify("main").ok


# ---- identity lifecycle -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_rotation_is_recorded_under_the_old_key_and_keeps_verifying(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 2)
    old = ledger.keystore.signer("main").fingerprint
    new = await ledger.rotate_key("main")
    await ledger.append(record(3))
    await ledger.aclose()
    rows = ledger.rows("main")
    rotated = rows[3]
    assert ("identity_rotated", new, old) == (rotated.action, rotated.target, rotated.signer_fp)
    assert new == rows[-1].signer_fp
    report = ledger.verify("main")
    assert report.ok and [old, new] == report.signers


@pytest.mark.anyio
async def test_a_rotation_behind_the_ledgers_back_is_recorded_on_the_next_append(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 1)
    await ledger.aclose()
    new = Keystore(tmp_path / "keys").rotate("main")
    again = await filled(tmp_path, 1)
    await again.aclose()
    assert ["identity_rotated", "tool_call"] == [r.action for r in again.rows("main")[-2:]]
    assert new == again.rows("main")[-1].signer_fp
    assert again.verify("main").ok


@pytest.mark.anyio
async def test_a_revoked_agent_is_recorded_and_keeps_signing(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 1)
    await ledger.revoke_key("main")
    await ledger.append(record(2))
    await ledger.aclose()
    actions = [r.action for r in ledger.rows("main")]
    assert ["identity_created", "tool_call", "identity_revoked", "tool_call"] == actions
    assert ledger.verify("main").ok
    reopened = await filled(tmp_path, 1)  # the revocation is recorded once, not on every open
    await reopened.aclose()
    assert 1 == [r.action for r in reopened.rows("main")].count("identity_revoked")


@pytest.mark.anyio
async def test_odd_agent_ids_get_their_own_chain(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    for agent in ("team/lead", "ü ñ", "../x"):
        await ledger.append(record(agent=agent))
    await ledger.aclose()
    assert sorted(["team/lead", "ü ñ", "../x"]) == ledger.agents()
    assert all(ledger.verify(a).ok for a in ledger.agents())
    assert not (tmp_path.parent / "x").exists()


def test_verify_of_an_agent_without_rows_says_so(tmp_path: Path) -> None:
    report = Ledger(tmp_path).verify("ghost")
    assert (False, None) == (report.ok, report.first_bad_seq)
    assert "no ledger rows" in (report.reason or "")


@pytest.mark.anyio
async def test_chains_evicted_from_the_open_set_resume_correctly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("aleph._ledger._chainwriter._MAX_OPEN_CHAINS", 2)
    ledger = Ledger(tmp_path)
    for round_ in range(3):
        for agent in ("a", "b", "c", "d"):
            await ledger.append(record(round_, agent=agent))
            await ledger.flush()
    assert 2 >= len(ledger._chains)
    await ledger.aclose()
    for agent in ("a", "b", "c", "d"):
        assert [1, 2, 3, 4] == [r.seq for r in ledger.rows(agent)]
        assert ledger.verify(agent).ok


@pytest.mark.anyio
async def test_bad_records_are_counted_and_the_writer_keeps_going(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    await ledger.append(record(agent=""))
    await ledger.append(record(action="launch_missiles"))  # type: ignore[arg-type]
    await ledger.append("not a record")  # type: ignore[arg-type]
    await ledger.append(record(1))
    await ledger.flush()
    assert 3 == ledger.lost_appends
    await ledger.aclose()
    assert ["identity_created", "tool_call"] == [r.action for r in ledger.rows("main")]


@pytest.mark.anyio
async def test_flush_and_append_after_close_return_at_once(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 1)
    await ledger.aclose()
    await ledger.flush()
    assert ledger.flush_sync(timeout=1)
    ledger.append_nowait(record())
    assert 1 == ledger.lost_appends


def test_backpressure_keeps_every_row_across_event_loops(tmp_path: Path) -> None:
    # More appends than the queue holds, from tasks that never yield between them: callers must wait, not drop.
    # The same ledger serves two event loops in turn (built outside both).
    ledger = Ledger(tmp_path)

    async def burst(offset: int) -> None:
        async def worker(t: int) -> None:
            for i in range(150):
                await ledger.append(record(offset + t * 1000 + i))

        async with anyio.create_task_group() as tg:
            for t in range(20):
                tg.start_soon(worker, t)
        await ledger.flush()

    anyio.run(burst, 0)
    anyio.run(burst, 100_000)
    ledger.close()
    assert 0 == ledger.lost_appends
    assert list(range(1, 6002)) == [r.seq for r in ledger.rows("main")]
    assert ledger.verify("main").ok


@pytest.mark.anyio
async def test_a_row_appended_behind_a_running_ledger_without_its_mark_is_cut_before_the_next_row(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = Ledger(tmp_path)
    ledger._run_committer = lambda: None  # type: ignore[method-assign]  # nothing sealed: the forgery would be
    for i in range(2):
        await ledger.append(record(i))
    path = chain_file(ledger)
    rows = read_rows(path)
    forged = dict(rows[-1], seq=4, detail="file_write: path=backdoor.sh", prev_hash=rows[-1]["hash"])
    forged["hash"] = rehash(forged)
    del forged["mark"]
    with path.open("a") as fh:  # another "process" appends a well-chained row it could not mark
        fh.write(json.dumps(forged) + "\n")
    await ledger.append(record(7))
    ledger.flush_sync()
    assert "never acknowledged" in caplog.text
    assert ["f0.txt", "f1.txt", "f7.txt"] == [r.detail.split("=")[1] for r in ledger.rows("main")[1:]]
    report = ledger.verify("main")
    assert (True, 4, 0) == (report.ok, report.rows, report.unsigned_tail)
    ledger.close()


@pytest.mark.anyio
async def test_a_checkpoint_line_torn_by_a_crash_is_cut_before_the_next_seal(tmp_path: Path) -> None:
    ledger = await filled(tmp_path, 2)
    ckpt = ledger._chain_paths("main")[1]
    whole = ckpt.read_bytes()
    with ckpt.open("ab") as fh:
        fh.write(whole.splitlines()[-1][:50])  # a seal cut short: no newline
    await ledger.append(record(9))
    await ledger.aclose()
    assert ckpt.read_bytes().startswith(whole)
    assert [2, 3, 4] == [c["seq"] for c in read_rows(ckpt)]
    assert (True, 4) == (ledger.verify("main").ok, ledger.verify("main").checkpoint_seq)
