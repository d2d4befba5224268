"""The contract kit every tool family runs against itself (needs pytest).

Subclass :class:`ToolContractTests` in your plugin's tests::

    from aleph.testing import ToolContractTests
    import aleph_example.plugin

    class TestExampleContract(ToolContractTests):
        plugin = aleph_example.plugin
        family = "text"            # tool names must be "text" or start with "text_"
        families = ("text", "clock")   # or several prefixes

        def examples(self):
            return [("text_stats", {"text": "hello world"})]

The kit's ``test_*`` methods must not be overridden; a subclass that does fails at import.

A family that stores objects for a principal also subclasses :class:`OwnershipContractTests` once per
kind of object (see its module docstring): objects one principal creates are invisible and immutable
to another, and a foreign object answers exactly like a missing one.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from jsonschema import Draft202012Validator

from aleph._contract._schema import schema_problems
from aleph._contract._service import UnscopedToolService
from aleph._contract._tool import facts_declared
from aleph._contract._types import ToolDefinition, ToolFacts
from aleph._errors import ValidationFailed
from aleph._runtime import Aleph, load
from aleph.testing._ownership import OwnershipContractTests

__all__ = ["OwnershipContractTests", "ToolContractTests", "isolated_runtime", "strict_schema_problems"]


def strict_schema_problems(schema: dict[str, Any], where: str = "$") -> list[str]:
    """Why ``schema`` would be refused by strict function-calling subsets (empty list when accepted)."""
    problems = list(schema_problems(schema)) if where == "$" else []
    defs = schema.get("$defs", {}) if where == "$" else {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")
            return
        if not isinstance(node, dict):
            return
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#/$defs/") or ref[len("#/$defs/") :] not in defs:
                problems.append(f"{path}: $ref {ref!r} does not resolve inside the schema")
        if node.get("type") == "object" or "properties" in node:
            if node.get("additionalProperties") is not False:
                problems.append(f"{path}: objects must set additionalProperties: false")
            props = node.get("properties", {})
            for name in node.get("required", []):
                if name not in props:
                    problems.append(f"{path}: required field {name!r} is not a declared property")
        for key, value in node.items():
            if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
                for name, sub in value.items():
                    walk(sub, f"{path}.{key}.{name}")
            elif key in ("items", "anyOf", "oneOf", "allOf", "prefixItems", "additionalProperties", "not"):
                walk(value, f"{path}.{key}")

    walk(schema, where)
    return problems


def isolated_runtime(workspace: Path, *plugins: object, config_toml: str = "") -> Aleph:
    """A strict runtime with only ``plugins``, its data directory inside ``workspace``, and ``config_toml`` appended.

    No installed entry point is loaded, so a test sees exactly the plugins it names.
    """
    (workspace / "aleph.toml").write_text(
        f'[workspace]\ndata_dir = "{(workspace / ".aleph-data").as_posix()}"\n{config_toml}'
    )
    return load(workspace / "aleph.toml", workspace=workspace, plugins=list(plugins), entry_points=False, strict=True)


class ToolContractTests:
    """Contract tests for one plugin's tools. Set ``plugin`` and ``family``/``families``; give examples."""

    plugin: ClassVar[object]
    """The plugin object or module holding the ``@aleph.hookimpl`` functions."""
    family: ClassVar[str] = ""
    """Tool-name prefix: each tool is named ``family`` or ``family_<something>``."""
    families: ClassVar[Sequence[str]] = ()
    """Several accepted prefixes, when a distribution ships more than one family."""
    no_example: ClassVar[dict[str, str]] = {}
    """Tool → why it has no runnable example here (e.g. needs a paid API)."""
    config_toml: ClassVar[str] = ""
    """Extra ``aleph.toml`` text for the runtime under test."""
    distribution: ClassVar[str] = ""
    """The installed distribution whose ``aleph`` entry point loads ``plugin`` (found from it when empty)."""

    _KIT_TESTS: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        overridden = sorted(name for name in ToolContractTests._KIT_TESTS if name in vars(cls))
        if overridden:
            raise TypeError(f"{cls.__name__} overrides contract tests {overridden}; add new tests instead")

    # -- hooks for subclasses ---------------------------------------------------------------

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        """Calls that must succeed, run in order against one runtime."""
        return []

    def make_runtime(self, workspace: Path) -> Aleph:
        """The runtime under test: only this plugin, in a fresh workspace and data directory."""
        return isolated_runtime(workspace, self.plugin, config_toml=self.config_toml)

    # -- helpers ----------------------------------------------------------------------------

    def _prefixes(self) -> tuple[str, ...]:
        return tuple(self.families) or ((self.family,) if self.family else ())

    def _definitions(self, tmp_path: Path) -> list[ToolDefinition]:
        rt = self.make_runtime(tmp_path)
        try:
            return list(rt.registry.definitions())
        finally:
            asyncio.run(rt.aclose())

    def _installed(self) -> tuple[str, list[importlib.metadata.EntryPoint]]:
        """The distribution that ships ``plugin`` and its ``aleph`` entry points, as pip installed them."""
        module = self.plugin if inspect.ismodule(self.plugin) else inspect.getmodule(type(self.plugin))
        where = module.__name__ if module is not None else repr(self.plugin)
        top = where.split(".")[0]
        names = [self.distribution] if self.distribution else []
        everywhere = list(importlib.metadata.entry_points(group="aleph"))
        # The distribution whose aleph entry point names this package (editable installs list no files).
        names = names or sorted({ep.dist.name for ep in everywhere if ep.dist and ep.module.split(".")[0] == top})
        names = names or importlib.metadata.packages_distributions().get(top, [])
        if not names:
            seen = ", ".join(f"{ep.name} = {ep.value!r}" for ep in everywhere) or "none"
            pytest.fail(
                f"no installed distribution ships {where} with an 'aleph' entry point (entry points in the 'aleph' "
                f"group: {seen}): install your plugin (`pip install -e .`, or the wheel) where the kit runs, "
                "and check `[project.entry-points.aleph]` in its pyproject.toml"
            )
        try:
            dist = importlib.metadata.distribution(names[0])
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"distribution {names[0]!r} is not installed (pip install it, or fix `distribution`)")
        eps = [ep for ep in dist.entry_points if ep.group == "aleph"]
        if not eps:
            pytest.fail(
                f"distribution {names[0]!r} declares no entry point in the 'aleph' group, so Aleph never loads it: "
                f'add `[project.entry-points.aleph]` with `<family> = "{where}"` to its pyproject.toml and reinstall'
            )
        return names[0], eps

    # -- the contract -----------------------------------------------------------------------

    def test_entry_point_loads_the_plugin(self) -> None:
        """The installed distribution's ``aleph`` entry point imports, and it is the plugin under test."""
        dist, eps = self._installed()
        loaded = []
        for ep in eps:
            try:
                loaded.append(ep.load())
            except Exception as exc:
                pytest.fail(
                    f"the entry point `{ep.name} = {ep.value!r}` of {dist} does not load "
                    f"({type(exc).__name__}: {exc}); fix `[project.entry-points.aleph]` in pyproject.toml and reinstall"
                )
        if not any(obj is self.plugin for obj in loaded):
            values = ", ".join(f"{ep.name} = {ep.value!r}" for ep in eps)
            pytest.fail(f"no 'aleph' entry point of {dist} loads {self.plugin!r} (it has {values})")

    def test_plugin_registers_tools(self, tmp_path: Path) -> None:
        """The plugin registers at least one tool, holds none and fails nothing."""
        rt = self.make_runtime(tmp_path)
        asyncio.run(rt.aclose())
        failed = [f"{f.name} at {f.stage}: {f.error}" for f in rt.plugins.failed]
        assert failed == [], f"the plugin failed to load: {failed}"
        held = {t: why for p in rt.plugins.loaded.values() for t, why in p.held_tools.items()}
        assert held == {}, f"tools held for breaking the tool contract: {held}"
        notes = [p.note for p in rt.plugins.loaded.values() if p.note]
        assert len(rt.registry) > 0, f"the plugin registered no tools: {'; '.join(notes) or 'its hook added none'}"

    def test_every_tool_has_a_description(self, tmp_path: Path) -> None:
        """Descriptions are non-empty prose a model can act on."""
        for d in self._definitions(tmp_path):
            assert len(d.description.strip()) >= 20, f"{d.name}: description too short to act on"

    def test_names_are_family_prefixed(self, tmp_path: Path) -> None:
        """Names are lowercase ``[a-z0-9_]``, family-prefixed, and never contain ``__`` (reserved for MCP)."""
        prefixes = self._prefixes()
        assert prefixes, "set `family` or `families` on the contract test class"
        for d in self._definitions(tmp_path):
            assert d.name == d.name.lower() and "__" not in d.name, d.name
            assert any(d.name == p or d.name.startswith(p + "_") for p in prefixes), (
                f"{d.name} does not start with one of {prefixes}"
            )

    def test_schemas_are_valid_and_strict(self, tmp_path: Path) -> None:
        """Schemas are Draft 2020-12 objects accepted by strict function-calling subsets."""
        for d in self._definitions(tmp_path):
            Draft202012Validator.check_schema(d.input_schema)
            assert strict_schema_problems(d.input_schema) == [], d.name
            json.dumps(d.input_schema)

    def test_facts_are_declared(self, tmp_path: Path) -> None:
        """Each tool states its facts instead of inheriting the defaults silently."""
        rt = self.make_runtime(tmp_path)
        try:
            for entry in rt.registry:
                assert isinstance(entry.facts, ToolFacts)
                assert facts_declared(entry.tool), f"{entry.name}: declare FACTS (even if all defaults)"
        finally:
            asyncio.run(rt.aclose())

    def test_every_tool_has_an_example(self, tmp_path: Path) -> None:
        """Every tool is exercised by an example, or says why it cannot be here."""
        covered = {name for name, _ in self.examples()} | set(self.no_example)
        missing = sorted(d.name for d in self._definitions(tmp_path) if d.name not in covered)
        assert missing == [], f"tools without an example or a no_example reason: {missing}"

    def test_examples_run(self, tmp_path: Path) -> None:
        """Each example call succeeds and its output is JSON."""
        rt = self.make_runtime(tmp_path)

        async def run() -> None:
            async with rt:
                service = UnscopedToolService(rt.registry)
                for name, payload in self.examples():
                    result = await service.call(name, payload)
                    assert result.success, f"{name}({payload}) failed: {result.error}"
                    assert result.output is not None

        asyncio.run(run())

    def test_unknown_field_is_rejected_by_name(self, tmp_path: Path) -> None:
        """An input with an undeclared field fails validation naming that field, before the tool runs."""
        rt = self.make_runtime(tmp_path)

        async def run() -> None:
            async with rt:
                for entry in rt.registry:
                    with pytest.raises(ValidationFailed) as info:
                        await entry.tool.call_json({"__bogus_field__": 1})
                    assert "__bogus_field__" in str(info.value), entry.name

        asyncio.run(run())


ToolContractTests._KIT_TESTS = frozenset(n for n in vars(ToolContractTests) if n.startswith("test_"))
