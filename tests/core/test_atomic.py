"""``aleph._atomic.write_atomic``: the old content or the new, never half, never a stray temporary file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import aleph._atomic
from aleph._atomic import create_atomic, remove_stale_temporaries, write_atomic


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


# Loads aleph/_atomic.py alone (it imports nothing of aleph), so 8 processes start in milliseconds.
_CREATOR = """
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("atomic", sys.argv[3])
atomic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(atomic)
create_atomic = atomic.create_atomic
path, index = sys.argv[1], sys.argv[2]
sys.stdin.read(1)  # every process starts creating at the same moment
created = create_atomic(path, f"key-{index}-" + "x" * 65_536)
print(int(created), Path(path).read_text())
"""


def test_processes_creating_one_file_together_agree_and_never_read_it_partial(tmp_path: Path) -> None:
    for round_ in range(5):
        path = str(tmp_path / f"round{round_}" / "request-state.key")
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _CREATOR, path, str(i), aleph._atomic.__file__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(8)
        ]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("g")
            proc.stdin.close()
        results = []
        for proc in procs:
            assert proc.stdout is not None
            with proc.stdout:
                results.append(proc.stdout.read().split())
            assert 0 == proc.wait(timeout=60)
        assert 1 == sum(int(created) for created, _ in results)  # exactly one creator won
        assert 1 == len({text for _, text in results})  # everyone read the winner's whole file
        assert results[0][1].endswith("x" * 65_536)
        assert ["request-state.key"] == [p.name for p in Path(path).parent.iterdir()]


def test_create_atomic_leaves_an_existing_file_alone(tmp_path: Path) -> None:
    target = tmp_path / "k"
    assert create_atomic(target, "first")
    assert not create_atomic(target, "second")
    assert ("first", ["k"]) == (target.read_text(), [p.name for p in tmp_path.iterdir()])


def test_temporaries_of_dead_writers_are_removed_and_a_live_writers_are_kept(tmp_path: Path) -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    dead = int(child.stdout)
    stale = tmp_path / f".grants.json.{dead}.k2j3h4.tmp"
    live = tmp_path / f".grants.json.{os.getpid()}.a8d7f6.tmp"
    other = tmp_path / ".notes.txt.tmp"  # not one of ours: no pid in its name
    for path in (stale, live, other):
        path.write_text("half")
    assert [stale.name] == remove_stale_temporaries(tmp_path)
    assert sorted([live.name, other.name]) == sorted(p.name for p in tmp_path.iterdir())
