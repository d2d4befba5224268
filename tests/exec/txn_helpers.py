"""Real overlay runs for the transaction tests: a command on a copy-on-write view of a canary workspace.

Until every machine's sandbox mounts the layer itself, these tests mount overlayfs the way the sandbox
does (util-linux ``unshare`` as root: a private mount namespace, the overlay over the workspace path),
so the upper directory they judge is the kernel's own.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aleph_exec.plugin
import pytest
from aleph_exec._config import ExecConfig
from aleph_exec._layers import LAYERS_DIR
from aleph_exec._transaction import Transactions

import aleph
from aleph.testing import isolated_runtime

needs_overlay = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="mounting overlayfs here needs root and unshare"
)


def overlay_run(workspace: Path, layer: Path, command: str, cwd: str = ".") -> subprocess.CompletedProcess[str]:
    """Run ``command`` (bash) in ``workspace/cwd`` on an overlay whose writes land in ``layer/upper``."""
    (layer / "upper").mkdir(parents=True, exist_ok=True)
    (layer / "work").mkdir(exist_ok=True)
    options = (
        f"lowerdir={workspace},upperdir={layer / 'upper'},workdir={layer / 'work'},"
        "redirect_dir=off,metacopy=off,index=off,xino=off"
    )
    # The layers (.aleph-tx, this one among them) under an empty read-only tmpfs, as the sandbox does.
    script = (
        'mount -t overlay overlay -o "$1" "$2" && { [ ! -d "$2/.aleph-tx" ] || '
        'mount -t tmpfs -o ro,size=0,mode=0555 tmpfs "$2/.aleph-tx"; } && cd "$2/$3" && exec bash -c "$4"'
    )
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        script,
        "sh",
        options,
        str(workspace),
        cwd,
        command,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def canary(workspace: Path, files: int = 20) -> dict[str, bytes]:
    """Fill ``workspace`` with a small project; returns its files and contents (to compare afterwards)."""
    (workspace / "src" / "pkg").mkdir(parents=True, exist_ok=True)
    (workspace / "docs").mkdir(exist_ok=True)
    for i in range(files):
        where = ("src/pkg", "src", "docs")[i % 3]
        (workspace / where / f"f{i}.txt").write_text(f"canary {i}\n")
    (workspace / "README.md").write_text("# canary\n")
    return snapshot(workspace)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every entry under ``root``: files by content, links by target, directories as b'<dir>'.

    The transactions' layers (``.aleph-tx``) are not the project's files: left out.
    """
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and LAYERS_DIR in dirnames:
            dirnames.remove(LAYERS_DIR)
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = b"->" + os.readlink(path).encode()
            elif path.is_dir():
                out[rel] = b"<dir>"
            else:
                out[rel] = path.read_bytes()
    return out


class OverlayArgs(aleph.ToolArgs):
    command: str
    working_dir: str = "."


class OverlayBash(aleph.AlephTool[OverlayArgs]):
    """``bash`` as the transaction runs it: the command on a real overlay, then the plugin's settle().

    It stands in for the sandbox's own ``layer=`` mount only; reading, judging, asking (through the real
    chokepoint) and committing are aleph-exec's code.
    """

    NAME = "overlay_bash"
    DESCRIPTION = "Run a command on an overlay of the workspace and settle its changeset (tests only)."
    Args = OverlayArgs
    FACTS = aleph.ToolFacts(max_duration_ms=60_000, tags=("test",))

    def __init__(self, transactions: Transactions) -> None:
        self.transactions = transactions

    async def call(self, args: OverlayArgs) -> dict[str, Any]:
        layer = self.transactions.new_layer()
        run = overlay_run(self.transactions.workspace, layer, args.command, args.working_dir)
        changes = await self.transactions.settle(self.NAME, layer)
        return {"exit_code": run.returncode, "stderr": run.stderr, "changes": changes}


class OverlayPlugin:
    """Registers ``overlay_bash`` over the runtime's own Transactions settings."""

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
        config = context.config.section("exec", ExecConfig)
        self.transactions = Transactions(context.workspace, context.data_dir, config, context.protected_paths)
        register(OverlayBash(self.transactions))


def overlay_runtime(workspace: Path, toml: str = "") -> tuple[aleph.Aleph, OverlayPlugin]:
    """A runtime with aleph-exec (for exec_commit) and overlay_bash."""
    plugin = OverlayPlugin()
    return isolated_runtime(workspace, aleph_exec.plugin, plugin, config_toml=toml), plugin


async def overlay_call(
    rt: aleph.Aleph,
    command: str,
    *,
    working_dir: str = ".",
    requester: aleph.ApprovalRequester | None = None,
    unattended: bool = False,
) -> dict[str, Any]:
    """One overlay_bash call through the chokepoint; the ``changes`` of its result."""
    turn = aleph.TurnContext(unattended=unattended, call_id=f"c{secrets.token_hex(4)}")
    service = rt.tool_service(requester=requester, turn=turn)
    out = await service.execute("overlay_bash", {"command": command, "working_dir": working_dir})
    result: dict[str, Any] = json.loads(out.text)
    return result
