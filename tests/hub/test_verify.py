"""hub_install_verify covers every file that can run: bytecode, start-up hooks, modules and native code anywhere.

Each case installs a real wheel into a plugin folder from a loopback index, then plants what an attacker
with write access to that folder would, and checks verify reports it.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.machinery
import importlib.util
import json
import marshal
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aleph import ApprovalOutcome, ScriptedRequester

from .conftest import LocalIndex, hub_runtime


@pytest.fixture
def installed(tmp_path: Path, local_index: LocalIndex, wheels: dict[str, Path]) -> Path:
    """aleph-greet installed and approved in the workspace's plugin folder; returns that folder."""
    local_index.add("aleph-greet", wheels["greet-1.0.0"])

    async def go() -> None:
        async with hub_runtime(tmp_path, local_index.url) as rt:
            human = ScriptedRequester([ApprovalOutcome.APPROVED])
            await rt.tool_service(requester=human, tier="auto").execute(
                "hub_install_run", {"requirement": "aleph-greet"}
            )

    asyncio.run(go())
    return tmp_path / ".aleph-data" / "plugins" / "site"


def verify(workspace: Path, local_index: LocalIndex) -> dict[str, Any]:
    async def go() -> Any:
        async with hub_runtime(workspace, local_index.url) as rt:
            return (await rt.tool_service(tier="auto").execute("hub_install_verify", {})).value

    report: dict[str, Any] = asyncio.run(go())
    return report["distributions"][0]


def _pyc(source: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(source)))


def _timestamp_pyc_of(source: Path, code: str) -> bytes:
    """A pyc whose header names ``source``'s mtime and size (what Python checks by default) but runs ``code``."""
    st = source.stat()
    header = importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
    header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    return header + marshal.dumps(compile(code, str(source), "exec"))


def _checked_hash_pyc_of(source: Path, code: str) -> bytes:
    """A pyc whose checked-hash header matches ``source``'s bytes but runs ``code``."""
    header = importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little")
    header += importlib.util.source_hash(source.read_bytes())
    return header + marshal.dumps(compile(code, str(source), "exec"))


def test_the_hub_compiles_checked_hash_bytecode_and_a_fresh_interpreter_keeps_it(
    tmp_path: Path, installed: Path, local_index: LocalIndex
) -> None:
    plugin = installed / "aleph_greet" / "plugin.py"
    pyc = _pyc(plugin)
    compiled = pyc.read_bytes()
    assert compiled[4:8] == (0b11).to_bytes(4, "little")  # hash-based, checked against the source
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import aleph_greet.plugin"], cwd=installed, env=env, check=True, timeout=120)
    assert pyc.read_bytes() == compiled  # valid checked-hash bytecode is used as it is, never rewritten
    report = verify(tmp_path, local_index)
    assert report["ok"] is True and report["added"] == [] and report["modified"] == []


Plant = Callable[[Path], str]


def _replace_pyc_timestamp(site: Path) -> str:
    plugin = site / "aleph_greet" / "plugin.py"
    _pyc(plugin).write_bytes(_timestamp_pyc_of(plugin, "import os\nos.system('id')\n"))
    return "modified"


def _replace_pyc_checked_hash(site: Path) -> str:
    plugin = site / "aleph_greet" / "plugin.py"
    _pyc(plugin).write_bytes(_checked_hash_pyc_of(plugin, "import os\nos.system('id')\n"))
    return "modified"


def _pyc_of_a_module_without_source(site: Path) -> str:
    (site / "aleph_greet" / "__pycache__" / f"helper.{sys.implementation.cache_tag}.pyc").write_bytes(b"\0" * 32)
    return "added"


def _sourceless_pyc_beside_the_package(site: Path) -> str:
    (site / "aleph_greet" / "evil.pyc").write_bytes(b"\0" * 32)
    return "added"


def _pth_at_the_folder_root(site: Path) -> str:
    (site / "zz-hook.pth").write_text("import os; os.system('id')\n")
    return "added"


def _sitecustomize_at_the_folder_root(site: Path) -> str:
    (site / "sitecustomize.py").write_text("import os\n")
    return "added"


def _usercustomize_at_the_folder_root(site: Path) -> str:
    (site / "usercustomize.py").write_text("import os\n")
    return "added"


def _native_extension_in_the_package(site: Path) -> str:
    (site / "aleph_greet" / f"_speedups{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"\x7fELF")
    return "added"


def _module_in_a_new_package(site: Path) -> str:
    (site / "requests_shim").mkdir()
    (site / "requests_shim" / "__init__.py").write_text("import os\n")
    return "added"


def _symlinked_folder(site: Path) -> str:
    (site / "aleph_greet" / "vendored").symlink_to(site.parent)
    return "added"


@pytest.mark.parametrize(
    "plant",
    [
        _replace_pyc_timestamp,
        _replace_pyc_checked_hash,
        _pyc_of_a_module_without_source,
        _sourceless_pyc_beside_the_package,
        _pth_at_the_folder_root,
        _sitecustomize_at_the_folder_root,
        _usercustomize_at_the_folder_root,
        _native_extension_in_the_package,
        _module_in_a_new_package,
        _symlinked_folder,
    ],
)
def test_verify_reports_every_file_that_can_run_and_no_receipt_lists(
    tmp_path: Path, installed: Path, local_index: LocalIndex, plant: Plant
) -> None:
    kind = plant(installed)
    report = verify(tmp_path, local_index)
    assert report["ok"] is False
    assert report[kind], report


def test_a_receipt_rewritten_to_match_a_planted_file_verifies_as_tampered(
    tmp_path: Path, installed: Path, local_index: LocalIndex
) -> None:
    plugin = installed / "aleph_greet" / "plugin.py"
    plugin.write_text(plugin.read_text() + "\nimport os\n")
    db = sqlite3.connect(tmp_path / ".aleph-data" / "hub.sqlite")
    with db:
        (files,) = db.execute("SELECT files FROM receipts WHERE distribution = 'aleph-greet'").fetchone()
        forged = json.loads(files)
        forged["aleph_greet/plugin.py"] = hashlib.sha256(plugin.read_bytes()).hexdigest()
        db.execute("UPDATE receipts SET files = ? WHERE distribution = 'aleph-greet'", (json.dumps(forged),))
    db.close()
    report = verify(tmp_path, local_index)
    assert report["modified"] == []  # the forged receipt matches the disk ...
    assert report["receipt_sealed"] is False and report["ok"] is False  # ... but it is not the hub's
