"""The contract kit checks a plugin as pip installed it: through its entry point, with clear failures.

Each test puts a real distribution (a package plus its ``.dist-info`` with ``entry_points.txt``) on
``sys.path``, where :mod:`importlib.metadata` finds it exactly as it finds a pip-installed one.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from aleph.testing import ToolContractTests

PLUGIN = '''
import aleph


@aleph.tool(name="probe_echo", inline=True, idempotent=True)
def probe_echo(text: str) -> str:
    """Echo the text back unchanged, for the contract kit's own tests."""
    return text
'''


def install(site: Path, package: str, entry_points: str, *, marked: bool = True) -> ModuleType:
    """A distribution ``<package>`` 1.0 in ``site`` with ``entry_points`` as its entry_points.txt; its plugin module."""
    pkg = site / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    hook = "@aleph.hookimpl\n" if marked else ""
    register = f"\n\n{hook}def aleph_register_tools(register):\n    register(probe_echo)\n"
    (pkg / "plugin.py").write_text(PLUGIN + register)
    info = site / f"{package}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text(package + "\n")
    (info / "entry_points.txt").write_text(entry_points)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    return importlib.import_module(f"{package}.plugin")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sys, "path", list(sys.path))  # restored after the test, with the modules below
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    return tmp_path / "site"


def kit_for(plugin: ModuleType) -> ToolContractTests:
    class ProbeContract(ToolContractTests):
        family = "probe"

        def examples(self) -> list[tuple[str, dict[str, str]]]:
            return [("probe_echo", {"text": "hi"})]

    ProbeContract.plugin = plugin
    return ProbeContract()


def test_the_kit_passes_a_plugin_whose_entry_point_loads_it(site: Path) -> None:
    kit = kit_for(install(site, "probe_good", "[aleph]\nprobe = probe_good.plugin\n"))
    kit.test_entry_point_loads_the_plugin()


def test_an_entry_point_typo_fails_the_kit_naming_the_entry_point(site: Path) -> None:
    kit = kit_for(install(site, "probe_typo", "[aleph]\nprobe = probe_typo.plugn\n"))
    with pytest.raises(pytest.fail.Exception) as caught:
        kit.test_entry_point_loads_the_plugin()
    message = str(caught.value)
    assert "probe = 'probe_typo.plugn'" in message
    assert "does not load (ModuleNotFoundError" in message
    assert "[project.entry-points.aleph]" in message


def test_an_entry_point_to_another_object_fails_the_kit(site: Path) -> None:
    kit = kit_for(install(site, "probe_other", "[aleph]\nprobe = probe_other\n"))
    with pytest.raises(pytest.fail.Exception, match="no 'aleph' entry point of probe-other loads"):
        kit.test_entry_point_loads_the_plugin()


def test_a_distribution_without_an_aleph_entry_point_fails_the_kit(site: Path) -> None:
    kit = kit_for(install(site, "probe_none", "[console_scripts]\nprobe = probe_none.plugin:main\n"))
    with pytest.raises(pytest.fail.Exception, match="declares no entry point in the 'aleph' group"):
        kit.test_entry_point_loads_the_plugin()


def test_a_plugin_without_the_hookimpl_marker_fails_the_kit_saying_so(site: Path, tmp_path: Path) -> None:
    kit = kit_for(install(site, "probe_bare", "[aleph]\nprobe = probe_bare.plugin\n", marked=False))
    with pytest.raises(AssertionError, match=r"no @aleph\.hookimpl marker found on aleph_register_tools"):
        kit.test_plugin_registers_tools(tmp_path)
