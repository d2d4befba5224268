"""Layers offered ahead: the zygote mounts the next run's overlay while idle, and the run only enters it.

Real bubblewrap, real overlayfs, real files (as root, as CI runs). What a user relies on: a run on a
layer mounted ahead sees the workspace as it is when the run starts (commits and edits made after the
mount included), its writes land in its layer only, a layer is not reused with another run's writes in
it, and a layer offered to a server that is gone since still works.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from aleph_exec._config import ExecConfig
from aleph_exec._offers import fresh_layer
from aleph_exec._sandbox import WorkspaceSandbox

import aleph

from .conftest import make_runtime


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[WorkspaceSandbox]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "edit.txt").write_text("old\n")
    (ws / "gone.txt").write_text("bye\n")
    box = WorkspaceSandbox(ws, ExecConfig())
    reason = box.transaction_support()  # also starts the zygote
    if reason is not None:
        box.close()
        pytest.skip(f"no transactions here: {reason}")
    try:
        yield box
    finally:
        box.close()


def _offer(sandbox: WorkspaceSandbox, layer: Path) -> None:
    """Offer ``layer`` and wait until the zygote has mounted its overlay (it makes upper/ and work/ there)."""
    layer.mkdir()
    sandbox.offer_layer(layer)
    deadline = time.monotonic() + 10
    while sorted(os.listdir(layer)) != ["upper", "work"]:
        assert time.monotonic() < deadline, f"the zygote did not mount the offered layer: {os.listdir(layer)}"
        time.sleep(0.001)


def test_a_run_on_a_layer_mounted_ahead_sees_the_workspace_as_it_is_when_it_starts(
    sandbox: WorkspaceSandbox, tmp_path: Path
) -> None:
    ws = sandbox.workspace
    layer = tmp_path / "layer"
    _offer(sandbox, layer)
    # Changes after the overlay was mounted (as the previous call's commit makes them).
    (ws / "edit.txt").write_text("new\n")
    (ws / "gone.txt").unlink()
    (ws / "later").mkdir()
    (ws / "later" / "made.txt").write_text("made\n")
    result = sandbox.run(
        ["bash", "-c", "cat edit.txt later/made.txt; ls; echo out > out.txt"], cwd=ws, timeout=30, layer=layer
    )
    assert result.exit_code == 0 and result.transaction, result.stderr
    assert result.stdout.split() == ["new", "made", "edit.txt", "later"]
    assert (layer / "upper" / "out.txt").read_text() == "out\n"
    assert not (ws / "out.txt").exists()


def test_a_layer_with_a_runs_writes_in_it_is_refused_for_the_next_run(
    sandbox: WorkspaceSandbox, tmp_path: Path
) -> None:
    ws = sandbox.workspace
    layer = tmp_path / "layer"
    _offer(sandbox, layer)
    assert sandbox.run(["bash", "-c", "echo x > x"], cwd=ws, timeout=30, layer=layer).exit_code == 0
    with pytest.raises(ValueError, match="not empty"):
        sandbox.run(["true"], cwd=ws, timeout=30, layer=layer)
    # An upper/ that is a symlink is never taken for one the overlay left.
    other = tmp_path / "other"
    other.mkdir()
    (other / "work").mkdir()
    (other / "upper").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="not empty"):
        sandbox.run(["true"], cwd=ws, timeout=30, layer=other)


def test_a_layer_offered_to_a_server_gone_since_is_mounted_by_the_next_one(
    sandbox: WorkspaceSandbox, tmp_path: Path
) -> None:
    ws = sandbox.workspace
    layer = tmp_path / "layer"
    _offer(sandbox, layer)
    first = sandbox.zygote_pid
    sandbox.close()  # the next run starts a new server, which never heard of the layer
    result = sandbox.run(["bash", "-c", "cat edit.txt; echo y > y"], cwd=ws, timeout=30, layer=layer)
    assert result.exit_code == 0 and result.transaction, result.stderr
    assert sandbox.zygote_pid not in (None, first)
    assert result.stdout == "old\n"
    assert (layer / "upper" / "y").read_text() == "y\n"
    assert not (ws / "y").exists()


@pytest.mark.anyio
async def test_consecutive_calls_each_see_the_last_ones_commit(tmp_path: Path) -> None:
    """Through the runtime: each next layer is offered (mounted) before the last call's commit lands."""
    ws = tmp_path / "ws"
    # The data directory (a protected path, bound read-only) exists from the start: no zygote restarts
    # when the first commit would make it, and every layer made ahead is offered to the one that runs.
    (ws / ".aleph-data" / "ledger").mkdir(parents=True)
    async with make_runtime(ws) as rt:
        tool = rt.registry.get("bash").tool
        sandbox, transactions = tool.sandbox, tool.transactions  # type: ignore[union-attr]
        if sandbox.transaction_support() is not None:
            pytest.skip("no transactions here")
        service = aleph.UnscopedToolService(rt.registry)
        assert json.loads((await service.execute("bash", {"command": "true"})).text)["transaction"]
        claimed: list[bytes] = []
        claim = sandbox._claim_offer

        def spy(layer: Path, zygote: object) -> bytes:
            claimed.append(claim(layer, zygote))
            return claimed[-1]

        sandbox._claim_offer = spy
        for i in range(6):
            # Between calls, as between an agent's turns: the next layer is made (and offered) meanwhile.
            deadline = time.monotonic() + 10
            while not transactions._ready:
                assert time.monotonic() < deadline, "no layer was made ahead"
                await anyio.sleep(0.001)
            out = json.loads((await service.execute("bash", {"command": f"echo {i} >> log.txt; cat log.txt"})).text)
            assert out["transaction"] and out["changes"]["status"] == "committed", out
            assert out["stdout"].split() == [str(n) for n in range(i + 1)]
    assert (ws / "log.txt").read_text().split() == [str(n) for n in range(6)]
    assert len(claimed) == 6 and all(claimed), claimed  # every call went on a layer mounted ahead


def test_only_what_an_overlay_mount_leaves_counts_as_a_fresh_layer(tmp_path: Path) -> None:
    layer = tmp_path / "layer"
    (layer / "upper").mkdir(parents=True)
    assert fresh_layer(layer)  # the zygote is between its two mkdirs: it mounts before it reads the run
    (layer / "work" / "work").mkdir(parents=True)
    assert fresh_layer(layer)
    (layer / "upper" / "x").write_text("x")
    assert not fresh_layer(layer)  # a write in upper/ is a changeset
    (layer / "upper" / "x").unlink()
    (layer / "other").mkdir()
    assert not fresh_layer(layer)
    (layer / "other").rmdir()
    (layer / "work").rename(tmp_path / "w")
    (layer / "work").symlink_to(tmp_path / "w")
    assert not fresh_layer(layer)
