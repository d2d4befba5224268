"""``aleph._atomic.write_atomic``: the old content or the new, never half, never a stray temporary file."""

from __future__ import annotations

from pathlib import Path

import pytest

from aleph._atomic import write_atomic


def test_writes_with_the_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "secret.json"
    write_atomic(target, '{"a": 1}')
    assert '{"a": 1}' == target.read_text()
    assert 0o600 == target.stat().st_mode & 0o777
    assert ["secret.json"] == [p.name for p in target.parent.iterdir()]


def test_a_failing_check_keeps_the_old_content(tmp_path: Path) -> None:
    target = tmp_path / "aleph.toml"
    target.write_text("old\n")
    target.chmod(0o644)

    def refuse(tmp: Path) -> None:
        assert "new\n" == tmp.read_text()  # the check sees what would be written
        raise ValueError("not valid")

    with pytest.raises(ValueError, match="not valid"):
        write_atomic(target, "new\n", mode=None, check=refuse)
    assert "old\n" == target.read_text()
    assert ["aleph.toml"] == [p.name for p in tmp_path.iterdir()]
    write_atomic(target, "new\n", mode=None)
    assert 0o644 == target.stat().st_mode & 0o777  # mode=None keeps the existing file's bits
