"""Per-run copy-on-write overlays (``layer=``): what the command sees, what lands in the layer, what stays put.

The contract is in aleph_exec._sandbox (``WorkspaceSandbox.run(..., layer=)``, ``transaction_support()``,
``TransactionUnavailable``). Real bubblewrap, real overlayfs, real files; runs as root (as CI does), where
the layer reaches the sandbox as an idmapped mount.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from aleph_exec._config import ExecConfig
from aleph_exec._sandbox import TransactionUnavailable, WorkspaceSandbox


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: relative path → kind and content (files), target (links) or device."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = f"link:{os.readlink(path)}"
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "dir"
            elif stat.S_ISCHR(st.st_mode):
                out[rel] = f"chr:{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
            else:
                out[rel] = f"file:{path.read_bytes().decode(errors='replace')}"
    return out


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[WorkspaceSandbox]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("keep\n")
    (ws / "edit.txt").write_text("old\n")
    (ws / "gone.txt").write_text("bye\n")
    (ws / "src").mkdir()
    (ws / "src" / "a.py").write_text("a = 1\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".aleph").mkdir()
    (ws / ".aleph" / "approvals.json").write_text("{}\n")
    box = WorkspaceSandbox(ws, ExecConfig(), [ws / ".aleph"])
    reason = box.transaction_support()
    if reason is not None:
        box.close()
        pytest.skip(f"no transactions here: {reason}")
    try:
        yield box
    finally:
        box.close()


def _layer(tmp_path: Path, name: str = "layer") -> Path:
    layer = tmp_path / name
    layer.mkdir()
    return layer


def test_writes_land_in_the_upper_layer_and_the_real_workspace_is_untouched(
    sandbox: WorkspaceSandbox, tmp_path: Path
) -> None:
    ws = sandbox.workspace
    before = _tree(ws)
    layer = _layer(tmp_path)
    command = (
        "echo new > new.txt; echo more >> edit.txt; rm gone.txt; rm -rf src; mkdir src; echo b > src/b.py;"
        " ln -s new.txt link; mkdir -p deep/er; echo x > deep/er/x; cat new.txt edit.txt; ls src"
    )
    result = sandbox.run(["bash", "-c", command], cwd=ws, timeout=30, layer=layer)
    assert (result.exit_code, result.transaction) == (0, True), result.stderr
    # The command saw its own writes.
    assert result.stdout == "new\nold\nmore\nb.py\n"
    # The real workspace did not change at all.
    assert _tree(ws) == before
    upper = layer / "upper"
    # The upper layer holds exactly the created, modified and deleted entries (no copy of the untouched ones).
    assert _tree(upper) == {
        "new.txt": "file:new\n",
        "edit.txt": "file:old\nmore\n",
        "gone.txt": "chr:0:0",
        "src": "dir",
        "src/b.py": "file:b\n",
        "link": "link:new.txt",
        "deep": "dir",
        "deep/er": "dir",
        "deep/er/x": "file:x\n",
    }
    # A directory removed and made again is opaque: the old src/a.py does not show through.
    assert os.getxattr(upper / "src", "user.overlay.opaque") == b"y"
    # Files are whole in the upper layer and owned as the workspace is (host root): Aleph can move them in.
    assert (upper / "edit.txt").stat().st_uid == (ws / "edit.txt").stat().st_uid
    os.rename(upper / "new.txt", tmp_path / "moved.txt")


def test_the_layer_itself_is_hidden_from_the_command(sandbox: WorkspaceSandbox, tmp_path: Path) -> None:
    layer = _layer(tmp_path)
    probe = (
        f"ls -A /run/aleph-layer; test -e {layer} && echo visible; grep -c ' {sandbox.workspace} ' /proc/self/mounts"
    )
    result = sandbox.run(["bash", "-c", probe], cwd=sandbox.workspace, timeout=30, layer=layer)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.split()
    # The staging point is empty, the host path of the layer does not exist inside, one overlay on the workspace.
    assert "visible" not in lines and "upper" not in lines and "work" not in lines
    assert (
        "overlay"
        in sandbox.run(
            ["bash", "-c", f"grep ' {sandbox.workspace} ' /proc/self/mounts"],
            cwd=sandbox.workspace,
            timeout=30,
            layer=_layer(tmp_path, "l2"),
        ).stdout
    )


def test_protected_paths_stay_read_only_inside_the_view(sandbox: WorkspaceSandbox, tmp_path: Path) -> None:
    ws = sandbox.workspace
    layer = _layer(tmp_path)
    command = (
        "echo owned > .git/config; echo e1=$?; echo owned > .aleph/approvals.json; echo e2=$?;"
        " touch .aleph/new; echo e3=$?; cat .git/config"
    )
    result = sandbox.run(["bash", "-c", command], cwd=ws, timeout=30, layer=layer)
    assert "e1=1" in result.stdout and "e2=1" in result.stdout and "e3=1" in result.stdout, result.stdout
    assert "Read-only file system" in result.stderr
    assert result.stdout.endswith("[core]\n")
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (layer / "upper" / ".git").exists() and not (layer / "upper" / ".aleph").exists()


def test_working_directory_inside_the_workspace_is_on_the_view(sandbox: WorkspaceSandbox, tmp_path: Path) -> None:
    layer = _layer(tmp_path)
    result = sandbox.run(["bash", "-c", "echo hi > here.txt"], cwd=sandbox.workspace / "src", timeout=30, layer=layer)
    assert result.exit_code == 0, result.stderr
    assert not (sandbox.workspace / "src" / "here.txt").exists()
    assert (layer / "upper" / "src" / "here.txt").read_text() == "hi\n"


def test_concurrent_runs_get_separate_layers(sandbox: WorkspaceSandbox, tmp_path: Path) -> None:
    layers = [_layer(tmp_path, f"l{i}") for i in range(4)]

    async def main() -> list[str]:
        outs: list[str] = [""] * len(layers)

        async def one(i: int) -> None:
            # Each writes its own file, waits for the others to have written theirs, then lists the workspace.
            command = f"echo {i} > mine{i}.txt; sleep 0.5; ls"
            result = await sandbox.arun(["bash", "-c", command], cwd=sandbox.workspace, timeout=30, layer=layers[i])
            assert result.transaction, result.stderr
            outs[i] = result.stdout

        async with anyio.create_task_group() as tg:
            for i in range(len(layers)):
                tg.start_soon(one, i)
        return outs

    outs = anyio.run(main)
    for i, out in enumerate(outs):
        mine = [name for name in out.split() if name.startswith("mine")]
        assert mine == [f"mine{i}.txt"], out
        assert sorted(os.listdir(layers[i] / "upper")) == [f"mine{i}.txt"]
    assert not any(name.startswith("mine") for name in os.listdir(sandbox.workspace))


def test_a_run_without_a_layer_still_writes_the_workspace(sandbox: WorkspaceSandbox, tmp_path: Path) -> None:
    # Also right after runs on layers: the server is back in its own mount namespace.
    for i in range(2):
        sandbox.run(
            ["bash", "-c", "echo l > l.txt"], cwd=sandbox.workspace, timeout=30, layer=_layer(tmp_path, f"l{i}")
        )
    assert not (sandbox.workspace / "l.txt").exists()
    result = sandbox.run(["bash", "-c", "echo direct > direct.txt"], cwd=sandbox.workspace, timeout=30)
    assert (result.exit_code, result.transaction) == (0, False)
    assert (sandbox.workspace / "direct.txt").read_text() == "direct\n"
    assert result.to_json()["transaction"] is False


def test_a_layer_that_cannot_be_mounted_raises_and_the_command_never_runs(
    sandbox: WorkspaceSandbox, tmp_path: Path
) -> None:
    # A layer on a filesystem that cannot be idmapped (ramfs): it cannot reach the sandbox, and nothing runs.
    marker = tmp_path / "ran"
    ws = sandbox.workspace
    ramfs = _layer(tmp_path, "ramfs")
    subprocess.run(["mount", "-t", "ramfs", "none", str(ramfs)], check=True)
    try:
        with pytest.raises(TransactionUnavailable, match="cannot be handed to the sandbox"):
            sandbox.run(["bash", "-c", f"touch {ws}/ran-inside; touch {marker}"], cwd=ws, timeout=30, layer=ramfs)
    finally:
        subprocess.run(["umount", "-l", str(ramfs)], check=True)
    assert not (ws / "ran-inside").exists()
    # Bad layers are refused before anything starts, with the reason.
    with pytest.raises(ValueError, match="outside the workspace"):
        sandbox.run(["true"], cwd=ws, timeout=30, layer=ws / "src")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ValueError, match="not empty"):
        sandbox.run(["true"], cwd=ws, timeout=30, layer=tmp_path / "full")
    assert not marker.exists()


def test_without_bubblewrap_there_are_no_transactions_and_a_layer_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    box = WorkspaceSandbox(ws, ExecConfig(isolation="none"))
    try:
        assert "isolation is none" in (box.transaction_support() or "")
        with pytest.raises(TransactionUnavailable, match="isolation is none"):
            box.run(["bash", "-c", "touch ran"], cwd=ws, timeout=30, layer=_layer(tmp_path))
        assert not (ws / "ran").exists()
    finally:
        box.close()


def test_when_the_sandbox_server_cannot_mount_the_overlay_the_command_never_runs(
    sandbox: WorkspaceSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The zygote's side: hand it something that is not a mount (a plain file) as the layer. Its
    # move_mount fails in the run's namespace, and the run is refused before the spawn.
    ws = sandbox.workspace
    marker = tmp_path / "not-a-mount"
    marker.write_text("")
    monkeypatch.setattr(WorkspaceSandbox, "_layer_fd", lambda self, layer: os.open(marker, os.O_RDONLY))
    with pytest.raises(TransactionUnavailable, match="copy-on-write view could not be set up"):
        sandbox.run(["bash", "-c", "touch ran-inside"], cwd=ws, timeout=30, layer=_layer(tmp_path))
    assert not (ws / "ran-inside").exists()
    monkeypatch.undo()
    # The server is fine afterwards, with and without a layer.
    assert sandbox.run(["true"], cwd=ws, timeout=30, layer=_layer(tmp_path, "after")).exit_code == 0
    assert sandbox.run(["true"], cwd=ws, timeout=30).exit_code == 0


def test_a_run_on_a_layer_that_times_out_is_killed_and_the_next_one_runs(
    sandbox: WorkspaceSandbox, tmp_path: Path
) -> None:
    ws = sandbox.workspace
    slow = sandbox.run(["bash", "-c", "echo x > partial.txt; sleep 30"], cwd=ws, timeout=1, layer=_layer(tmp_path))
    assert (slow.timed_out, slow.transaction) == (True, True)
    assert not (ws / "partial.txt").exists()
    layer = _layer(tmp_path, "next")
    nxt = sandbox.run(["bash", "-c", "echo y > next.txt"], cwd=ws, timeout=30, layer=layer)
    assert nxt.exit_code == 0 and (layer / "upper" / "next.txt").read_text() == "y\n"
