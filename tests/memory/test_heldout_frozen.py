"""The held-out sets stay frozen: each committed file equals what its generator writes with its fixed seed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("directory", ["heldout", "heldout2"])
def test_held_out_files_equal_what_their_generator_writes(directory: str) -> None:
    script = HERE / directory / "generate.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
