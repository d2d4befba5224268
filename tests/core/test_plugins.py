from __future__ import annotations

import sqlite3
import sys
import threading
from pathlib import Path
from types import ModuleType

import pytest

import aleph
from aleph import PluginError


def plugin_module(name: str, body: str) -> ModuleType:
    mod = ModuleType(name)
    mod.__dict__["aleph"] = aleph
    exec(body, mod.__dict__)  # a throwaway in-process plugin, as a third party would write one
    return mod


GOOD = """
@aleph.hookimpl
def aleph_register_tools(register):
    register(aleph.tool(name="good_one", description="A good tool.", inline=True)(lambda: 1))
"""

BROKEN_REGISTER = """
@aleph.hookimpl
def aleph_register_tools(register):
    register(aleph.tool(name="half_one", description="Registered before the crash.", inline=True)(lambda: 1))
    raise RuntimeError("plugin bug")
"""


def test_a_plugin_that_fails_to_register_is_rolled_back_and_reported(workspace: Path) -> None:
    rt = aleph.load(
        plugins=[plugin_module("good", GOOD), plugin_module("bad", BROKEN_REGISTER)], entry_points=False, strict=False
    )
    assert rt.registry.names() == ["good_one"]
    report = rt.plugins.report()
    assert [p["name"] for p in report["loaded"]] == ["good"]
    assert report["failed"][0]["name"] == "bad"
    assert report["failed"][0]["stage"] == "register"
    assert "plugin bug" in report["failed"][0]["error"]


LOCKED_STORE = """
import sqlite3

@aleph.hookimpl
def aleph_register_tools(register):
    register(aleph.tool(name="store_tool", description="Needs its store.", inline=True)(lambda: 1))
    db = sqlite3.connect(DB, timeout=0)  # another process's first open holds the file for a moment
    try:
        db.execute("CREATE TABLE IF NOT EXISTS facts (x)")
    except sqlite3.OperationalError:
        ATTEMPTS.append("locked")
        FIRST_FAILURE.set()
        raise
    finally:
        db.close()
    ATTEMPTS.append("ok")
"""


def test_a_plugin_whose_store_is_locked_by_another_process_at_start_is_retried_not_lost(
    workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "store.sqlite3"
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")  # a real lock, as a concurrent first start holds it
    first_failure = threading.Event()

    def release() -> None:
        first_failure.wait(60)
        holder.execute("COMMIT")

    releaser = threading.Thread(target=release)
    releaser.start()
    mod = plugin_module("memoryish", "")
    mod.__dict__.update(DB=str(db), ATTEMPTS=[], FIRST_FAILURE=first_failure)
    exec(LOCKED_STORE, mod.__dict__)
    try:
        rt = aleph.load(plugins=[mod], entry_points=False, strict=False)
    finally:
        first_failure.set()
        releaser.join()
        holder.close()
    assert "store_tool" in rt.registry.names()
    assert [] == rt.plugins.report()["failed"]
    assert ["locked", "ok"] == mod.ATTEMPTS[-2:] and mod.ATTEMPTS[0] == "locked"


def test_strict_mode_re_raises(workspace: Path) -> None:
    with pytest.raises(PluginError, match="plugin bug"):
        aleph.load(plugins=[plugin_module("bad", BROKEN_REGISTER)], entry_points=False, strict=True)


def test_unknown_hook_is_a_validation_failure(workspace: Path) -> None:
    mod = plugin_module("typo", "@aleph.hookimpl\ndef aleph_register_tool(register):\n    pass\n")
    rt = aleph.load(plugins=[mod], entry_points=False, strict=False)
    assert rt.plugins.report()["failed"][0]["stage"] == "validate"
    assert "aleph_register_tool" in rt.plugins.report()["failed"][0]["error"]


def test_duplicate_tool_between_plugins_fails_only_the_second(workspace: Path) -> None:
    rt = aleph.load(
        plugins=[plugin_module("first", GOOD), plugin_module("second", GOOD)], entry_points=False, strict=False
    )
    assert rt.registry.names() == ["good_one"]
    failed = rt.plugins.report()["failed"]
    assert failed[0]["name"] == "second" and "plugin 'first'" in failed[0]["error"]


def _fake_distribution(root: Path, dist: str, ep_name: str, module: str, source: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(source)
    info = root / f"{dist.replace('-', '_')}-9.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 9.9\n")
    (info / "entry_points.txt").write_text(f"[aleph]\n{ep_name} = {module}\n")


def test_entry_point_import_failure_is_recorded_with_its_distribution(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    _fake_distribution(site, "aleph-broken", "broken", "aleph_broken_mod", "raise ImportError('missing native lib')\n")
    _fake_distribution(
        site, "aleph-fine", "fine", "aleph_fine_mod", "import aleph\n" + GOOD.replace("good_one", "fine_one")
    )
    monkeypatch.syspath_prepend(str(site))
    rt = aleph.load(strict=False)
    report = rt.plugins.report()
    broken = next(f for f in report["failed"] if f["name"] == "broken")
    assert broken == {
        "name": "broken",
        "stage": "import",
        "error": "ImportError: missing native lib",
        "distribution": "aleph-broken",
        "version": "9.9",
    }
    assert "fine_one" in rt.registry.names()
    loaded = {p["name"]: p for p in report["loaded"]}
    assert loaded["fine"]["distribution"] == "aleph-fine" and loaded["fine"]["tools"] == ["fine_one"]
    sys.modules.pop("aleph_fine_mod", None)


def test_disabled_plugins_are_blocked(tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    _fake_distribution(
        site, "aleph-fine2", "fine2", "aleph_fine2_mod", "import aleph\n" + GOOD.replace("good_one", "f2")
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("ALEPH_DISABLE_PLUGINS", "fine2, other")
    rt = aleph.load(strict=False)
    assert "f2" not in rt.registry.names()
    assert "fine2" in rt.plugins.report()["blocked"]


@pytest.mark.anyio
async def test_configure_runs_before_registration_and_cleanups_run_on_close(workspace: Path) -> None:
    events: list[str] = []

    class Stateful:
        ALEPH_PLUGIN_NAME = "stateful"

        @aleph.hookimpl
        def aleph_configure(self, config: aleph.AlephConfig) -> None:
            events.append(f"configure {config.policies.exec_tier}")

        @aleph.hookimpl
        def aleph_register_tools(self, register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
            events.append(f"register {context.plugin_name}")

            async def close() -> None:
                events.append("closed")

            context.add_cleanup(close)

    async with aleph.load(plugins=[Stateful()], entry_points=False, strict=True) as rt:
        assert rt.plugins.report()["loaded"][0]["name"] == "stateful"
    assert events == ["configure auto", "register stateful", "closed"]


@pytest.mark.anyio
async def test_program_registers_its_own_tool(workspace: Path) -> None:
    @aleph.tool(inline=True)
    def mine(x: int) -> int:
        """Return x."""
        return x

    async with aleph.load(entry_points=False) as rt:
        rt.register(mine)
        result = await rt.tool_service().call("mine", {"x": 7})
    assert result.output == "7"
