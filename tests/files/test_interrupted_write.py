"""A file_write killed between writing its temporary file and renaming it leaves nothing behind after a restart."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import aleph_files.plugin
import pytest

import aleph
from aleph.testing import isolated_runtime

# A real process runs file_write through the runtime and is killed (SIGKILL, by itself, so the instant is
# exact) after the temporary file is complete and before it is renamed into place.
_KILLED_WRITER = """
import asyncio, os, signal, sys
from pathlib import Path
import aleph, aleph_files.plugin
from aleph.testing import isolated_runtime

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

async def main():
    async with isolated_runtime(Path(sys.argv[1]), aleph_files.plugin) as rt:
        os.rename = die
        await aleph.UnscopedToolService(rt.registry).execute(
            "file_write", {"path": "notes/today.md", "content": "x" * 100000, "create_dirs": True}
        )

asyncio.run(main())
"""


def temporaries(workspace: Path) -> list[str]:
    return sorted(p.name for p in workspace.rglob("*.aleph-tmp"))


@pytest.mark.anyio
async def test_a_temporary_file_a_killed_write_left_is_removed_when_the_files_plugin_next_starts(
    workspace: Path,
) -> None:
    (workspace / "notes").mkdir()
    (workspace / "notes" / ".keep.aleph-tmp").write_text("a user's own file that only looks like ours")
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(workspace)], capture_output=True, timeout=120)
    assert -signal.SIGKILL == proc.returncode, proc.stderr.decode()
    left = [name for name in temporaries(workspace) if name.startswith(".today.md.")]
    assert 1 == len(left)  # the kill happened where we meant it to
    assert not (workspace / "notes" / "today.md").exists()
    async with isolated_runtime(workspace, aleph_files.plugin) as rt:
        assert [".keep.aleph-tmp"] == temporaries(workspace)  # only what a note named is removed
        out = await aleph.UnscopedToolService(rt.registry).execute(
            "file_write", {"path": "notes/today.md", "content": "done"}
        )
        assert json.loads(out.text)["created"]
    assert [] == list((workspace / ".aleph-data" / "files" / "inflight").iterdir())
