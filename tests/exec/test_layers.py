"""Where transaction layers live: on the workspace's filesystem (commits rename), hidden from commands.

The data directory is put on another filesystem than the workspace (a tmpfs the test mounts, as root,
as CI runs): the layers still land in the workspace's ``.aleph-tx`` and a commit renames each file (the
committed file is the layer's inode). Real bubblewrap and overlayfs for what a command can see; a real
killed process for the crash clean-up.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import aleph_exec.plugin
import pytest
from aleph_exec._config import ExecConfig
from aleph_exec._layers import LAYERS_DIR, LayerRoot, layers_check, placement
from aleph_exec._sandbox import WorkspaceSandbox
from aleph_exec._transaction import Transactions

import aleph


def _need(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture
def other_fs(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs mounted for the test: another filesystem than the workspace's (tmp_path's)."""
    _need(os.geteuid() == 0, "mounting a tmpfs needs root")
    where = tmp_path / "tmpfs"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)], check=True)
    try:
        assert where.stat().st_dev != tmp_path.stat().st_dev
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "old.py").write_text("x = 1\n")
    return ws


def _bwrap_transactions(workspace: Path) -> None:
    sandbox = WorkspaceSandbox(workspace, ExecConfig())
    try:
        _need(sandbox.transaction_support() is None, f"no transactions here: {sandbox.transaction_support()}")
    finally:
        sandbox.close()


def test_layers_sit_in_the_workspace_and_a_commit_renames_with_the_data_dir_elsewhere(
    workspace: Path, other_fs: Path
) -> None:
    txn = Transactions(workspace, other_fs / "data", ExecConfig())
    layer = txn.new_layer()
    assert layer.is_relative_to(workspace / LAYERS_DIR), layer
    assert layer.stat().st_dev == workspace.stat().st_dev
    assert (workspace / LAYERS_DIR).stat().st_mode & 0o777 == 0o700
    upper = layer / "upper"
    (upper / "gen").mkdir(parents=True)
    (upper / "gen" / "new.py").write_text("y = 2\n")
    (upper / "src").mkdir()
    (upper / "src" / "added.py").write_text("z = 3\n")
    inodes = {p: (upper / p).stat().st_ino for p in ("gen/new.py", "src/added.py")}
    cs = txn.read(layer)
    manifest = txn.commit(cs, "bash", "call1", cs.digest())
    assert manifest["entry"]
    # Renamed, not copied: the committed files are the layer's own inodes.
    assert inodes == {p: (workspace / p).stat().st_ino for p in inodes}
    assert (workspace / "gen" / "new.py").read_text() == "y = 2\n"
    txn.discard(layer)
    txn.close()
    assert [".gitignore"] == os.listdir(workspace / LAYERS_DIR)


@pytest.mark.anyio
async def test_a_command_cannot_see_or_write_any_layer(workspace: Path, other_fs: Path) -> None:
    _bwrap_transactions(workspace)
    # Another (live) runtime's layer, on the host: no command may read it or plant anything in it.
    other = LayerRoot(workspace, other_fs / "fallback")
    rt_other = other.mine()
    foreign = rt_other / "layer-x" / "upper"
    foreign.mkdir(parents=True)
    (foreign / "secret.txt").write_text("judged already\n")
    probe = (
        f"ls -A {LAYERS_DIR}; cat {LAYERS_DIR}/{rt_other.name}/layer-x/upper/secret.txt; "
        f"echo planted > {LAYERS_DIR}/{rt_other.name}/layer-x/upper/evil.txt; mkdir {LAYERS_DIR}/mine; "
        f"rm -rf {LAYERS_DIR}; echo ok > kept.txt"
    )
    (workspace / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(other_fs / "data").as_posix()}"\n')
    rt = aleph.load(
        workspace / "aleph.toml", workspace=workspace, plugins=[aleph_exec.plugin], entry_points=False, strict=True
    )
    try:
        service = aleph.UnscopedToolService(rt.registry)
        out = json.loads((await service.execute("bash", {"command": probe})).text)
    finally:
        await rt.aclose()
    assert out["transaction"] is True, out
    assert "judged already" not in out["stdout"], out
    assert "" == out["stdout"].split("\n")[0], out  # .aleph-tx shows empty
    assert "Read-only file system" in out["stderr"] or "Device or resource busy" in out["stderr"], out
    assert out["changes"]["status"] == "committed" and out["changes"]["paths"] == ["create kept.txt"], out
    assert not (foreign / "evil.txt").exists() and not (workspace / LAYERS_DIR / "mine").exists()
    assert (foreign / "secret.txt").read_text() == "judged already\n"
    other.close()


def test_the_sandbox_masks_the_layers_without_a_transaction_too(workspace: Path) -> None:
    _need(WorkspaceSandbox(workspace, ExecConfig()).bwrap is not None, "bubblewrap is not available")
    hidden = workspace / LAYERS_DIR / "rt-other"
    hidden.mkdir(parents=True)
    (hidden / "secret.txt").write_text("s\n")
    sandbox = WorkspaceSandbox(workspace, ExecConfig())
    try:
        result = sandbox.run(
            ["bash", "-c", f"ls -A {LAYERS_DIR}; echo x > {LAYERS_DIR}/rt-other/planted || echo refused"],
            cwd=workspace,
            timeout=30,
        )
    finally:
        sandbox.close()
    assert ["refused"] == result.stdout.split(), result
    assert ["secret.txt"] == os.listdir(hidden)


def _hold_layer(root: Path, data: Path) -> subprocess.Popen[str]:
    """Another process with a runtime's layer (content in its upper directory), waiting to be killed."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from aleph_exec._config import ExecConfig
        from aleph_exec._transaction import Transactions
        txn = Transactions(Path({str(root)!r}), Path({str(data)!r}), ExecConfig())
        layer = txn.new_layer()
        (layer / "upper").mkdir()
        (layer / "upper" / "half.txt").write_text("a run in flight\\n")
        print(layer, flush=True)
        time.sleep(600)
        """
    )
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_the_layers_of_a_killed_runtime_are_removed_at_the_next_start(workspace: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    killed = _hold_layer(workspace, data)
    alive = _hold_layer(workspace, data)
    try:
        assert killed.stdout is not None and alive.stdout is not None
        dead_layer, live_layer = Path(killed.stdout.readline().strip()), Path(alive.stdout.readline().strip())
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        assert (dead_layer / "upper" / "half.txt").exists()
        # The next runtime's start sweeps what the killed one left, never a live runtime's layer.
        txn = Transactions(workspace, data, ExecConfig())
        txn.recover()
        assert not dead_layer.parent.exists()
        assert (live_layer / "upper" / "half.txt").read_text() == "a run in flight\n"
        txn.close()
    finally:
        for proc in (killed, alive):
            proc.kill()
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()
    Transactions(workspace, data, ExecConfig()).recover()
    assert [".gitignore"] == os.listdir(workspace / LAYERS_DIR)


def test_a_sweep_leaves_directories_it_did_not_make_alone(workspace: Path, tmp_path: Path) -> None:
    (workspace / LAYERS_DIR).mkdir(mode=0o700)
    (workspace / LAYERS_DIR / "notes").mkdir()
    fallback = tmp_path / "fallback"
    root = LayerRoot(workspace, fallback)
    assert [] == root.sweep()
    assert (workspace / LAYERS_DIR / "notes").is_dir()


def test_a_workspace_of_another_user_puts_the_layers_in_the_fallback_with_a_note(
    workspace: Path, other_fs: Path
) -> None:
    os.chown(workspace, 65534, 65534)
    fallback = other_fs / "data" / "exec" / "layers"
    root, note = placement(workspace, fallback, create=True)
    assert root == fallback
    assert note is not None and "belongs to uid 65534" in note and "copies each file" in note, note
    assert not (workspace / LAYERS_DIR).exists()
    status, detail = layers_check(workspace, other_fs / "data")
    assert ("warn", note) == (status, detail)


def test_a_read_only_workspace_puts_the_layers_in_the_fallback(workspace: Path, other_fs: Path) -> None:
    ro = other_fs / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], check=True)
    try:
        root, note = placement(ro, workspace / "fallback", create=True)
    finally:
        subprocess.run(["umount", "-l", str(ro)], check=True)
    assert root == workspace / "fallback"
    assert note is not None and "Read-only file system" in note, note


def test_a_planted_aleph_tx_symlink_is_not_followed(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / LAYERS_DIR).symlink_to(elsewhere)
    txn = Transactions(workspace, tmp_path / "data", ExecConfig())
    layer = txn.new_layer()
    assert layer.is_relative_to(tmp_path / "data" / "exec" / "layers"), layer
    assert txn.layers.note is not None and "not a directory" in txn.layers.note
    assert [] == os.listdir(elsewhere)
    txn.close()


def test_git_ignores_the_layers(workspace: Path, tmp_path: Path) -> None:
    _need(subprocess.run(["git", "--version"], capture_output=True).returncode == 0, "git is not installed")
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    txn = Transactions(workspace, tmp_path / "data", ExecConfig())
    layer = txn.new_layer()
    (layer / "upper").mkdir()
    (layer / "upper" / "x.txt").write_text("x\n")
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=workspace,
        capture_output=True,
        text=True,
        check=True,
    )
    assert ["?? src/old.py"] == status.stdout.splitlines()
    txn.close()


def test_the_layers_are_never_part_of_a_changeset(workspace: Path, tmp_path: Path) -> None:
    txn = Transactions(workspace, tmp_path / "data", ExecConfig())
    layer = txn.new_layer()
    upper = layer / "upper"
    upper.mkdir()
    os.setxattr(upper, "user.overlay.opaque", b"y")  # the whole workspace removed and made again
    (upper / "fresh.txt").write_text("f\n")
    cs = txn.read(layer)
    assert not any(c.path.startswith(LAYERS_DIR) for c in cs.changes), cs.changes
    # A changeset that names the layers is refused (a sandbox cannot make one; the rule still holds).
    planted = txn.new_layer()
    (planted / "upper" / LAYERS_DIR).mkdir(parents=True)
    (planted / "upper" / LAYERS_DIR / "x").write_text("x\n")
    decision = txn.judge(txn.read(planted))
    assert decision.action == "refuse" and LAYERS_DIR in decision.reason, decision
    txn.close()


def test_exec_registers_the_layers_as_a_protected_path(workspace: Path) -> None:
    seen: list[str] = []
    aleph_exec.plugin.aleph_protected_paths(seen.append)
    assert [LAYERS_DIR] == seen
    assert LAYERS_DIR in aleph.ProtectedPaths.INTERNAL  # what aleph-files leaves out of its listings


def test_the_changeset_digest_is_the_documented_row_format(workspace: Path, tmp_path: Path) -> None:
    # The ledger binds this digest: SHA-256 over a header and one json.dumps([path, action, kind, content]) a row.
    import hashlib

    txn = Transactions(workspace, tmp_path / "data", ExecConfig())
    layer = txn.new_layer()
    upper = layer / "upper"
    (upper / "src").mkdir(parents=True)
    for i in range(80):  # past the point where the lower directory is listed instead of probed
        (upper / "src" / f'n\u00e9w "{i}".py').write_text(f"{i}\n")
    (upper / "src" / "old.py").write_text("x = 2\n")
    os.symlink("../src/old.py", upper / "link")
    cs = txn.read(layer)
    assert {"created": 81, "modified": 1} == {k: v for k, v in cs.counts().items() if v}
    h = hashlib.sha256(b"aleph-exec-changeset-1\n")
    for c in cs.changes:
        h.update(json.dumps([c.path, c.action, c.kind, c.content()]).encode() + b"\n")
    assert h.hexdigest() == cs.digest()
    txn.close()


NOBODY_LAYER_PROBE = """
import json, os, sys, tempfile
from pathlib import Path
from aleph_exec._config import ExecConfig
from aleph_exec._layers import LayerRoot
from aleph_exec._sandbox import WorkspaceSandbox
ws = Path(sys.argv[1])
layers = LayerRoot(ws, ws.parent / "fallback")
layer = Path(tempfile.mkdtemp(prefix="layer-", dir=layers.mine()))
box = WorkspaceSandbox(ws, ExecConfig(isolation="bwrap"))
command = "ls -A .aleph-tx; echo x > .aleph-tx/p 2>/dev/null; echo w=$?; echo new > created.txt; ls"
result = box.run(["bash", "-c", command], cwd=ws, timeout=60, layer=layer)
print(json.dumps({"out": result.stdout, "err": result.stderr, "transaction": result.transaction,
                  "upper": sorted(os.listdir(layer / "upper")), "in": str(layer.relative_to(ws)),
                  "zygote_error": box.zygote_error}))
box.close()
layers.close()
"""


def test_as_a_user_a_layer_in_the_workspace_works_and_stays_hidden(tmp_path: Path) -> None:
    from .test_hardening import Nobody

    _need(os.geteuid() == 0, "switching to nobody needs root")
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="aleph-nonroot-"))  # nobody must reach it (tmp_path is root's alone)
    try:
        nobody = Nobody(root)
        (nobody.ws / "base.txt").write_text("base\n")
        got = nobody.run(NOBODY_LAYER_PROBE, str(nobody.ws))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert got["transaction"] is True, got
    assert got["in"].startswith(f"{LAYERS_DIR}/rt-"), got
    # .aleph-tx shows empty and read-only; the command's write is in its layer, seen through the overlay.
    assert got["out"].split("\n") == ["w=1", "base.txt", "created.txt", ""], got
    assert got["upper"] == ["created.txt"], got
