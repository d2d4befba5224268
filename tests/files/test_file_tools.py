"""file_read, file_write and file_edit on real files."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import stat
import threading
from pathlib import Path

import pytest

import aleph
from aleph import ExecutionFailed, ValidationFailed

from .conftest import make_runtime


@pytest.mark.anyio
async def test_file_read_numbers_lines_and_reads_ranges(call, workspace: Path) -> None:
    (workspace / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    whole = await call("file_read", path="f.txt")
    assert (1, 10, 10) == (whole["start_line"], whole["end_line"], whole["total_lines"])
    assert whole["content"].startswith("     1\tline 1\n     2\tline 2")
    part = await call("file_read", path="f.txt", offset=4, limit=3)
    assert "     4\tline 4\n     5\tline 5\n     6\tline 6" == part["content"]
    assert (4, 6) == (part["start_line"], part["end_line"])
    past = await call("file_read", path="f.txt", offset=50)
    assert "" == past["content"] and "past its end" in past["note"]


@pytest.mark.anyio
async def test_whole_and_ranged_reads_agree_on_lines_with_crlf_form_feeds_and_no_final_newline(
    call, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("one\r\ntwo\x0cstill two\r\nthree\u2028same", encoding="utf-8", newline="")
    whole = await call("file_read", path="f.txt")
    ranged = await call("file_read", path="f.txt", offset=1, limit=10)
    expected = "     1\tone\n     2\ttwo\x0cstill two\n     3\tthree\u2028same"
    assert (expected, 3) == (whole["content"], whole["total_lines"])
    assert (expected, 3) == (ranged["content"], ranged["end_line"])


@pytest.mark.anyio
async def test_a_read_longer_than_the_output_budget_stops_at_a_line_and_names_the_offset_to_go_on(
    workspace: Path,
) -> None:
    (workspace / "f.txt").write_text("".join(f"{n:04d} " + "x" * 95 + "\n" for n in range(1, 101)))  # 100 x 100 chars
    (workspace / "wide.txt").write_text("y" * 5000 + "\nshort\n")
    async with make_runtime(workspace, "[files]\nmax_read_chars = 2000\n") as rt:
        service = rt.tool_service()
        first = json.loads((await service.execute("file_read", {"path": "f.txt"})).text)
        assert (True, 1, 18, 100) == (first["truncated"], first["start_line"], first["end_line"], first["total_lines"])
        assert first["content"].endswith("    18\t0018 " + "x" * 95) and len(first["content"]) <= 2000
        assert "continue with offset=19" in first["note"]
        nxt = json.loads((await service.execute("file_read", {"path": "f.txt", "offset": 19})).text)
        assert (19, 36, True) == (nxt["start_line"], nxt["end_line"], nxt["truncated"])
        assert nxt["content"].startswith("    19\t0019 ")
        wide = json.loads((await service.execute("file_read", {"path": "wide.txt"})).text)
        assert (2000, 1, True) == (len(wide["content"]), wide["end_line"], wide["truncated"])
        assert "line 1 alone is longer than that" in wide["note"]


@pytest.mark.anyio
async def test_by_default_a_read_fits_the_chokepoints_output_limit_instead_of_being_spilled(workspace: Path) -> None:
    (workspace / "f.txt").write_text(("z" * 60 + "\n") * 100)  # 6,100 bytes, ~6,800 chars numbered
    async with make_runtime(workspace, "[tools]\nmax_output_chars = 5000\n") as rt:
        out = json.loads((await rt.tool_service().execute("file_read", {"path": "f.txt"})).text)
    assert (True, 100) == (out["truncated"], out["total_lines"])
    assert len(out["content"]) <= 4000 and "continue with offset=" in out["note"]


@pytest.mark.anyio
async def test_binary_file_is_refused_as_text_and_returned_as_base64(call, workspace: Path) -> None:
    blob = bytes(range(256)) * 4
    (workspace / "b.bin").write_bytes(blob)
    with pytest.raises(ExecutionFailed, match="looks binary"):
        await call("file_read", path="b.bin")
    (workspace / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ExecutionFailed, match="looks binary"):
        await call("file_read", path="latin1.txt")
    out = await call("file_read", path="b.bin", encoding="base64")
    assert blob == base64.b64decode(out["content"])


@pytest.mark.anyio
async def test_file_read_size_limit_is_configurable_and_ranges_still_work(workspace: Path) -> None:
    (workspace / "big.txt").write_text("x" * 100 + "\n" + "y" * 5000 + "\n")
    async with make_runtime(workspace, "[files]\nmax_read_bytes = 2048\n") as rt:
        service = aleph.UnscopedToolService(rt.registry)
        result = await service.call("file_read", {"path": "big.txt"})
        assert not result.success
        assert "larger than the 2048-byte read limit" in (result.error or "")
        assert "offset and limit" in (result.error or "")
        ranged = await service.call("file_read", {"path": "big.txt", "offset": 1, "limit": 1, "line_numbers": False})
        assert ranged.success and '"content":"' + "x" * 100 + '"' in (ranged.output or "")


@pytest.mark.anyio
async def test_file_write_preserves_mode_and_needs_create_dirs(call, workspace: Path) -> None:
    target = workspace / "script.sh"
    target.write_text("old")
    target.chmod(0o750)
    out = await call("file_write", path="script.sh", content="new")
    assert (False, "new", 0o750) == (out["created"], target.read_text(), stat.S_IMODE(target.stat().st_mode))
    with pytest.raises(ExecutionFailed, match="does not exist"):
        await call("file_write", path="no/such/dir/f.txt", content="x")
    await call("file_write", path="no/such/dir/f.txt", content="x", create_dirs=True)
    assert "x" == (workspace / "no/such/dir/f.txt").read_text()
    leftovers = [p.name for p in workspace.rglob("*aleph-tmp*")]
    assert [] == leftovers


@pytest.mark.anyio
async def test_concurrent_large_writes_never_expose_a_partial_file(call, workspace: Path) -> None:
    size = 2 * 1024 * 1024
    contents = [chr(ord("a") + i) * size for i in range(6)]
    target = workspace / "shared.txt"
    target.write_text(contents[0])
    stop = threading.Event()
    bad: list[str] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            data = target.read_text()
            reads += 1
            if len(data) != size or data != data[0] * size:
                bad.append(f"{len(data)} bytes, starts {data[:1]!r}, ends {data[-1:]!r}")

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(3):
            await asyncio.gather(*(call("file_write", path="shared.txt", content=c) for c in contents))
    finally:
        stop.set()
        thread.join()
    assert [] == bad
    assert reads > 0
    assert [] == [p.name for p in workspace.iterdir() if p.name not in ("shared.txt", "aleph.toml", ".aleph-data")]


@pytest.mark.anyio
async def test_file_edit_replaces_a_unique_match(call, workspace: Path) -> None:
    (workspace / "app.py").write_text("def main():\n    return 1\n")
    out = await call("file_edit", path="app.py", old_string="return 1", new_string="return 2")
    assert (1, 2) == (out["replacements"], out["first_line"])
    assert "def main():\n    return 2\n" == (workspace / "app.py").read_text()


@pytest.mark.anyio
async def test_file_edit_not_found_shows_nearest_lines_with_numbers(call, workspace: Path) -> None:
    (workspace / "app.py").write_text("import os\n\ndef compute_total(items):\n    return sum(items)\n")
    with pytest.raises(ExecutionFailed) as info:
        await call("file_edit", path="app.py", old_string="def compute_totals(items):", new_string="x")
    message = str(info.value)
    assert "old_string not found in app.py" in message
    assert "line 3: def compute_total(items):" in message
    with pytest.raises(ExecutionFailed, match="different whitespace"):
        await call("file_edit", path="app.py", old_string="def  compute_total(items):", new_string="x")


@pytest.mark.anyio
async def test_file_edit_ambiguous_match_names_lines_and_replace_all_works(call, workspace: Path) -> None:
    (workspace / "c.txt").write_text("a = 1\nb = 2\na = 1\n")
    with pytest.raises(ExecutionFailed, match=r"occurs 2 times in c.txt \(lines 1, 3\)"):
        await call("file_edit", path="c.txt", old_string="a = 1", new_string="a = 9")
    out = await call("file_edit", path="c.txt", old_string="a = 1", new_string="a = 9", replace_all=True)
    assert 2 == out["replacements"]
    assert "a = 9\nb = 2\na = 9\n" == (workspace / "c.txt").read_text()
    with pytest.raises(ValidationFailed, match="identical"):
        await call("file_edit", path="c.txt", old_string="b", new_string="b")


@pytest.mark.anyio
async def test_file_write_base64_round_trips_bytes(call, workspace: Path) -> None:
    blob = os.urandom(3000)
    await call("file_write", path="r.bin", content=base64.b64encode(blob).decode(), encoding="base64")
    assert blob == (workspace / "r.bin").read_bytes()
    with pytest.raises(ValidationFailed, match="base64"):
        await call("file_write", path="r.bin", content="***", encoding="base64")
