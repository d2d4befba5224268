"""apply_patch: the V4A format, applied all or nothing."""

from __future__ import annotations

from pathlib import Path

import aleph_files._patch
import pytest

from aleph import ExecutionFailed, ValidationFailed

PATCH = """*** Begin Patch
*** Add File: docs/new.md
+# New
+text
*** Update File: src/app.py
*** Move to: src/main.py
@@ def main():
     x = 1
-    return x
+    return x + 1
*** Delete File: old.txt
*** End Patch
"""


@pytest.fixture
def project(workspace: Path) -> Path:
    (workspace / "src").mkdir()
    (workspace / "src/app.py").write_text("import os\n\ndef main():\n    x = 1\n    return x\n")
    (workspace / "old.txt").write_text("bye\n")
    return workspace


@pytest.mark.anyio
async def test_patch_adds_updates_moves_and_deletes(call, project: Path) -> None:
    out = await call("apply_patch", patch=PATCH)
    assert ["added", "moved", "deleted"] == [f["action"] for f in out["files"]]
    assert "# New\ntext\n" == (project / "docs/new.md").read_text()
    assert "import os\n\ndef main():\n    x = 1\n    return x + 1\n" == (project / "src/main.py").read_text()
    assert not (project / "src/app.py").exists() and not (project / "old.txt").exists()


def _state(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.anyio
async def test_a_hunk_that_does_not_apply_changes_no_file(call, project: Path) -> None:
    before = _state(project)
    bad = PATCH.replace("-    return x\n", "-    return y\n")
    with pytest.raises(ExecutionFailed, match=r"hunk 1 does not apply.*no file was changed"):
        await call("apply_patch", patch=bad)
    assert before == _state(project)


@pytest.mark.anyio
async def test_a_write_failure_midway_rolls_back_every_file(call, project: Path, monkeypatch) -> None:
    # Root ignores permissions, so a disk error on the second write is injected: the journal is what is tested.
    real = aleph_files._patch.atomic_write
    calls = 0

    def failing(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(aleph_files._patch, "atomic_write", failing)
    before = _state(project)
    with pytest.raises(ExecutionFailed, match="every file was restored"):
        await call("apply_patch", patch=PATCH)
    assert before == _state(project)


@pytest.mark.anyio
async def test_malformed_patches_are_rejected_with_the_reason(call, project: Path) -> None:
    with pytest.raises(ValidationFailed, match="must start with"):
        await call("apply_patch", patch="--- a/x\n+++ b/x\n")
    with pytest.raises(ValidationFailed, match="line 3"):
        await call("apply_patch", patch="*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch")
    with pytest.raises(ExecutionFailed, match="already exists"):
        await call("apply_patch", patch="*** Begin Patch\n*** Add File: old.txt\n+x\n*** End Patch")
    with pytest.raises(ExecutionFailed, match="does not exist"):
        await call("apply_patch", patch="*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch")


@pytest.mark.anyio
async def test_hunks_tolerate_trailing_whitespace_and_use_context_anchors(call, project: Path) -> None:
    body = "class A:\n    def f(self):  \n        return 1\n" + "class B:\n    def f(self):\n        return 1\n"
    (project / "t.py").write_text(body)
    hunk = "@@ class B:\n     def f(self):\n-        return 1\n+        return 2\n"
    await call("apply_patch", patch=f"*** Begin Patch\n*** Update File: t.py\n{hunk}*** End Patch")
    assert (project / "t.py").read_text().endswith("class B:\n    def f(self):\n        return 2\n")
    assert "        return 1\nclass B" in (project / "t.py").read_text()


def test_subject_paths_name_every_file_a_patch_or_batch_move_touches(tmp_path: Path) -> None:
    from .conftest import make_runtime

    rt = make_runtime(tmp_path)
    patch_tool = rt.registry.get("apply_patch").tool
    ops_tool = rt.registry.get("file_ops").tool
    assert ["docs/new.md", "src/app.py", "src/main.py", "old.txt"] == patch_tool.subject_paths({"patch": PATCH})
    assert [] == patch_tool.subject_paths({"patch": "not a patch"})
    moves = [{"source": "a", "destination": "b"}, {"source": "c", "destination": "d"}]
    assert [".", "a", "b", "c", "d"] == ops_tool.subject_paths({"operation": "batch_move", "moves": moves})
