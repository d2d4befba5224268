"""What a commit carries into the workspace besides content and mode: no ACLs (red-team round, "redfloor").

A changeset shows each file's content and mode. An ACL set in the sandbox (``setfacl``, or the xattr
written directly) grants another user access that neither shows, and it landed with the file: a
"modifies run.sh" (or, with the mode unchanged, a mere "touched") that quietly gave uid 65534 write
access. A commit now drops ACLs (and file capabilities) from everything it installs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import aleph

from .txn_helpers import needs_overlay, overlay_call, overlay_runtime

_ENTRIES = "[(1, 7, 0xFFFFFFFF), (2, 7, 65534), (4, 7, 0xFFFFFFFF), (0x10, 7, 0xFFFFFFFF), (0x20, 5, 0xFFFFFFFF)]"
_ACL = f"struct.pack('<I', 2) + b''.join(struct.pack('<HHI', t, p, i) for t, p, i in {_ENTRIES})"


def _set_acl(path: str, name: str = "system.posix_acl_access") -> str:
    return f"python3 -c \"import os, struct; os.setxattr('{path}', '{name}', {_ACL})\""


def _acls(root: Path) -> list[str]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".aleph-tx", ".aleph-data")]
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            found += [f"{path}: {x}" for x in os.listxattr(path, follow_symlinks=False) if "posix_acl" in x]
    return found


@needs_overlay
@pytest.mark.anyio
@pytest.mark.parametrize(
    "command",
    [
        _set_acl("run.sh"),
        f"echo 'echo new' > new.sh && {_set_acl('new.sh')}",
        f"mkdir -p d/e && echo x > d/e/f && {_set_acl('d')} && {_set_acl('d', 'system.posix_acl_default')}"
        f" && {_set_acl('d/e/f')}",
    ],
)
async def test_an_acl_set_in_the_sandbox_never_lands_in_the_workspace(workspace: Path, command: str) -> None:
    (workspace / "run.sh").write_text("echo hi\n")
    os.chmod(workspace / "run.sh", 0o775)
    rt, _ = overlay_runtime(workspace)
    async with rt:
        result = await overlay_call(rt, command, requester=aleph.ScriptedRequester([]))
    assert result["exit_code"] == 0, result["stderr"]
    assert result["changes"]["status"] == "committed", result["changes"]
    assert _acls(workspace) == []
    assert (workspace / "run.sh").read_text() == "echo hi\n"
