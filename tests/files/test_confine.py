"""Workspace confinement: escapes by '..', absolute paths, symlinks, prefix confusion, swaps, special files."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from aleph_files._confine import PathError, Workspace

from aleph import ExecutionFailed, PermissionDenied, ValidationFailed


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret").write_text("OUTSIDE")
    return out


@pytest.mark.anyio
async def test_dotdot_escape_is_refused(call, workspace: Path, outside: Path) -> None:
    with pytest.raises(PermissionDenied, match="escapes the workspace"):
        await call("file_read", path="../outside/secret")
    with pytest.raises(PermissionDenied, match="escapes the workspace"):
        await call("file_read", path="a/../../outside/secret")


@pytest.mark.anyio
async def test_absolute_path_outside_is_refused_and_inside_is_accepted(call, workspace: Path, outside: Path) -> None:
    (workspace / "in.txt").write_text("IN")
    with pytest.raises(PermissionDenied, match="outside the workspace"):
        await call("file_read", path=str(outside / "secret"))
    out = await call("file_read", path=str(workspace / "in.txt"), line_numbers=False)
    assert "IN" == out["content"]


@pytest.mark.anyio
async def test_prefix_confusion_sibling_is_refused(call, workspace: Path) -> None:
    sibling = workspace.parent / (workspace.name + "_evil")
    sibling.mkdir()
    (sibling / "secret").write_text("EVIL")
    with pytest.raises(PermissionDenied):
        await call("file_read", path=str(sibling / "secret"))
    with pytest.raises(PermissionDenied):
        await call("file_read", path=f"../{sibling.name}/secret")
    with pytest.raises(PermissionDenied):
        await call("file_write", path=str(sibling / "planted"), content="x")
    assert not (sibling / "planted").exists()


@pytest.mark.anyio
async def test_symlink_pointing_outside_is_refused_for_read_and_write(call, workspace: Path, outside: Path) -> None:
    (workspace / "to_dir").symlink_to(outside)
    (workspace / "to_file").symlink_to(outside / "secret")
    (workspace / "relative").symlink_to("../outside")
    for path in ("to_dir/secret", "to_file", "relative/secret"):
        with pytest.raises(PermissionDenied):
            await call("file_read", path=path)
    with pytest.raises(PermissionDenied):
        await call("file_write", path="to_dir/planted", content="x")
    with pytest.raises(PermissionDenied):
        await call("file_write", path="to_file", content="overwritten")
    assert "OUTSIDE" == (outside / "secret").read_text()
    assert not (outside / "planted").exists()


@pytest.mark.anyio
async def test_symlink_inside_the_workspace_is_followed(call, workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "real" / "f.txt").write_text("hello")
    (workspace / "alias").symlink_to("real")
    (workspace / "abs_alias").symlink_to(workspace / "real" / "f.txt")
    out = await call("file_read", path="alias/f.txt", line_numbers=False)
    assert ("hello", "real/f.txt") == (out["content"], out["path"])
    out = await call("file_read", path="abs_alias", line_numbers=False)
    assert "hello" == out["content"]


def test_dir_fd_walk_holds_when_a_directory_is_swapped_for_a_symlink(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "secret").write_text("INSIDE")
    ws = Workspace(root)
    try:
        target = ws.resolve("sub/secret")
        # Swap after the walk: the held descriptor still names the original directory.
        os.rename(root / "sub", root / "sub_moved")
        (root / "sub").symlink_to(outside)
        fd = os.open(target.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=target.parent_fd)
        try:
            assert b"INSIDE" == os.read(fd, 100)
        finally:
            os.close(fd)
            target.close()
        with pytest.raises(PathError) as info:
            ws.resolve("sub/secret")
        assert "denied" == info.value.kind
    finally:
        ws.close()


def test_racing_symlink_swaps_never_reveal_outside_content(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    real = root / "real"
    real.mkdir()
    (real / "secret").write_text("INSIDE")
    link = root / "link_to_outside"
    link.symlink_to(outside)
    ws = Workspace(root)
    stop = threading.Event()

    def swapper() -> None:
        # Atomically flip "sub" between the real directory and a symlink that escapes.
        tmp_link = root / "tmp_link"
        while not stop.is_set():
            tmp_link.unlink(missing_ok=True)
            tmp_link.symlink_to(outside)
            os.rename(tmp_link, root / "sub")  # sub -> outside
            if real.exists():
                os.rename(real, root / "sub_real")
            (root / "sub").unlink()
            os.rename(root / "sub_real", root / "sub")  # sub is the real directory
            os.rename(root / "sub", real)

    seen: set[str] = set()
    thread = threading.Thread(target=swapper)
    thread.start()
    try:
        # At least 3,000 rounds, and on until a read has caught the real directory mid-race (bounded at 20 s),
        # so the test never passes without having raced.
        deadline = time.monotonic() + 20
        rounds = 0
        while rounds < 3000 or ("INSIDE" not in seen and time.monotonic() < deadline):
            rounds += 1
            for path in ("sub/secret", "real/secret"):
                try:
                    with ws.open_regular(path) as (fd, _):
                        seen.add(os.read(fd, 100).decode())
                except (PathError, FileNotFoundError):
                    pass
    finally:
        stop.set()
        thread.join()
        ws.close()
    assert "OUTSIDE" not in seen
    assert "INSIDE" in seen


@pytest.mark.anyio
async def test_nul_bytes_and_overlong_paths_are_invalid(call, workspace: Path) -> None:
    with pytest.raises(ValidationFailed, match="NUL"):
        await call("file_read", path="a\x00b")
    with pytest.raises(ValidationFailed, match="longer than"):
        await call("file_read", path="x" * 300)
    with pytest.raises(ValidationFailed):
        await call("file_read", path="/".join(["d"] * 2100))


@pytest.mark.anyio
async def test_fifo_and_device_files_are_refused_where_a_file_is_expected(call, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    with pytest.raises(ExecutionFailed, match="FIFO"):
        await call("file_read", path="pipe")
    os.mknod(workspace / "null", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    with pytest.raises(ExecutionFailed, match="device"):
        await call("file_read", path="null")
    with pytest.raises(ExecutionFailed, match="not a regular file"):
        await call("file_write", path="pipe", content="x")


@pytest.mark.anyio
async def test_protected_paths_are_refused_for_writes(call, workspace: Path) -> None:
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n")
    (workspace / "ok.txt").write_text("x")
    for path in ("aleph.toml", ".aleph-data/ledger/x", ".git/hooks/pre-commit", ".git/config"):
        with pytest.raises(PermissionDenied, match="protected path"):
            await call("file_write", path=path, content="pwned", create_dirs=True)
    with pytest.raises(PermissionDenied, match="protected path"):
        await call("file_ops", operation="delete", path=".git", recursive=True)
    with pytest.raises(PermissionDenied, match="protected path"):
        await call("file_ops", operation="move", path="ok.txt", destination=".git/config", overwrite=True)
    with pytest.raises(PermissionDenied, match="protected path"):
        await call("apply_patch", patch="*** Begin Patch\n*** Add File: .git/hooks/post-checkout\n+evil\n*** End Patch")
    assert "[core]\n" == (workspace / ".git" / "config").read_text()
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    # Reading a protected path is fine; only writes are refused.
    assert (await call("file_read", path="aleph.toml"))["total_lines"] >= 1


@pytest.mark.anyio
async def test_a_nested_repository_config_and_hooks_are_protected_too(call, workspace: Path) -> None:
    (workspace / "vendor" / "lib" / ".git").mkdir(parents=True)
    (workspace / "vendor" / "lib" / ".git" / "config").write_text("[core]\n")
    fsmonitor = "[core]\n\tfsmonitor = touch PWN\n"
    for path in ("vendor/lib/.git/config", "sub/.git/hooks/pre-commit", "sub/.git"):
        with pytest.raises(PermissionDenied, match="protected path"):
            await call("file_write", path=path, content=fsmonitor, create_dirs=True)
    with pytest.raises(PermissionDenied, match="protected path"):
        await call(
            "apply_patch", patch="*** Begin Patch\n*** Add File: a/.git/hooks/post-checkout\n+evil\n*** End Patch"
        )
    assert "[core]\n" == (workspace / "vendor" / "lib" / ".git" / "config").read_text()
    # Names that only look alike stay writable.
    for path in ("sub/.gitignore", "sub/git/config", "sub/.github/hooks/x"):
        await call("file_write", path=path, content="ok", create_dirs=True)
