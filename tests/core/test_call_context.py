"""The running call's context: composite sub-calls, ledger references, provenance events, deferred approval,
plugin contexts at call time, background services and family hookspecs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pluggy
import pytest

import aleph
from aleph import (
    ApprovalDenied,
    ApprovalOutcome,
    ApprovalRequired,
    ApprovalResponse,
    DeferredApprovals,
    PermissionDenied,
    ScriptedRequester,
)

ACTIONS: list[str] = []


class Batch(aleph.ToolArgs):
    steps: list[dict[str, Any]]


class Family:
    """A plugin with two plain actions and a composite tool that runs a batch of them through the chokepoint."""

    ALEPH_PLUGIN_NAME = "family_fixture"

    def __init__(self) -> None:
        self.context: aleph.PluginContext | None = None

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
        self.context = context

        @aleph.tool
        def act_click(target: str) -> str:
            """Click a target."""
            ACTIONS.append(f"click {target}")
            return "clicked"

        @aleph.tool
        def act_type(target: str, text: str) -> str:
            """Type into a target."""
            ACTIONS.append(f"type {target} {text}")
            return "typed"

        @aleph.tool(idempotent=True)
        def act_look(target: str) -> str:
            """Look at a target (read-only), noting what it looked at."""
            call = aleph.current_call()
            assert call is not None
            call.annotate(target_id=target)
            return "seen"

        @aleph.tool
        async def act_batch(steps: list[dict[str, Any]]) -> list[str]:
            """Run several actions, each through the chokepoint."""
            call = aleph.current_call()
            assert call is not None
            call.annotate(batch_size=len(steps))
            return [(await call.subcall(s["tool"], s["args"])).text for s in steps]

        @aleph.tool(idempotent=True)
        async def act_recall(query: str) -> str:
            """Recall something, recording what was fed into the turn."""
            call = aleph.current_call()
            assert call is not None
            await call.record("memory_injected", f"for {query}", memory_ids="m1,m2")
            return "m1 m2"

        @aleph.tool
        async def act_recurse(depth: int) -> str:
            """Call itself (to show the nesting bound)."""
            call = aleph.current_call()
            assert call is not None
            return (await call.subcall("act_recurse", {"depth": depth + 1})).text

        register(act_click, act_type, act_look, act_batch, act_recall, act_recurse)


def runtime(workspace: Path, toml: str = "", plugin: Family | None = None) -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(toml)
    return aleph.load(plugins=[plugin or Family()], entry_points=False, strict=True)


def rows(rt: aleph.Aleph, agent: str = "default") -> list[aleph.LedgerRow]:
    assert rt.chokepoint.ledger is not None
    rt.chokepoint.ledger.flush_sync()
    return rt.chokepoint.ledger.rows(agent)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ACTIONS.clear()


@pytest.mark.anyio
async def test_a_composite_tool_cannot_run_an_action_its_caller_may_not(workspace: Path) -> None:
    toml = '[policies.tool_permissions.overrides]\nact_type = "deny"\n'
    async with runtime(workspace, toml) as rt:
        svc = rt.tool_service()
        batch = {
            "steps": [
                {"tool": "act_click", "args": {"target": "ok"}},
                {"tool": "act_type", "args": {"target": "x", "text": "pw"}},
            ]
        }
        with pytest.raises(PermissionDenied, match="act_type"):
            await svc.execute("act_batch", batch)
        assert ACTIONS == ["click ok"]
        denied = [r for r in rows(rt) if r.action == "tool_denied"]
        assert [r.target for r in denied] == ["act_type"]
        assert denied[0].refs is not None and "parent_call" in denied[0].refs


@pytest.mark.anyio
async def test_each_action_of_a_composite_call_asks_under_its_own_name(workspace: Path) -> None:
    toml = '[policies.tool_permissions.overrides]\nact_click = "ask"\n'
    async with runtime(workspace, toml) as rt:
        req = ScriptedRequester([ApprovalOutcome.APPROVED])
        svc = rt.tool_service(requester=req)
        out = await svc.execute("act_batch", {"steps": [{"tool": "act_click", "args": {"target": "b"}}]})
        assert out.value == ["clicked"]
        assert [r.tool_name for r in req.requests] == ["act_click"]


@pytest.mark.anyio
async def test_actions_and_their_composite_are_linked_in_the_signed_ledger(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        svc = rt.tool_service(turn=aleph.TurnContext(session_key="s", call_id="call-7"))
        await svc.execute("act_batch", {"steps": [{"tool": "act_click", "args": {"target": "a"}}]})
        calls = [r for r in rows(rt) if r.action == "tool_call"]
        assert [r.target for r in calls] == ["act_click", "act_batch"]
        action, batch = calls
        assert batch.refs == {"batch_size": "1"}
        assert action.refs is not None and action.refs["parent_call"] == "call-7"
        assert rt.chokepoint.ledger is not None and rt.chokepoint.ledger.verify("default").ok


@pytest.mark.anyio
async def test_an_edited_reference_breaks_verification(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        await rt.tool_service().execute("act_look", {"target": "t1"})
        (row,) = rows(rt)[-1:]
        assert row.refs == {"target_id": "t1"}
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        path = next(p for p in ledger.chains_dir.glob("*.jsonl") if not p.name.endswith(".ckpt.jsonl"))
        text = path.read_text()
        path.write_text(text.replace('"target_id": "t1"', '"target_id": "t2"'))
        report = ledger.verify("default")
        assert not report.ok and report.first_bad_seq == row.seq


@pytest.mark.anyio
async def test_a_read_only_call_that_annotates_gets_a_row_and_one_that_does_not_gets_none(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        svc = rt.tool_service()
        await svc.execute("act_look", {"target": "t"})
        assert [r.target for r in rows(rt) if r.action == "tool_call"] == ["act_look"]
        await svc.execute("act_recall", {"query": "q"})
        events = [r for r in rows(rt) if r.action == "tool_event"]
        assert len(events) == 1 and events[0].target == "act_recall"
        assert events[0].refs is not None
        assert events[0].refs["event"] == "memory_injected" and events[0].refs["memory_ids"] == "m1,m2"
        assert [r.target for r in rows(rt) if r.action == "tool_call"] == ["act_look"]


@pytest.mark.anyio
async def test_composite_calls_nest_only_so_deep(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        with pytest.raises(aleph.ExecutionFailed, match="nest at most 8 deep"):
            await rt.tool_service().execute("act_recurse", {"depth": 0})


def test_bad_references_are_refused_naming_them() -> None:
    from aleph._chokepoint._call import check_refs

    with pytest.raises(ValueError, match="'Team'"):
        check_refs({"Team": "x"})
    with pytest.raises(ValueError, match="'team' must be a string or a number"):
        check_refs({"team": ["x"]})
    with pytest.raises(ValueError, match="limit is 256"):
        check_refs({"team": "x" * 257})


@pytest.mark.anyio
async def test_deferred_approval_suspends_and_an_answer_resumes_only_that_call(workspace: Path) -> None:
    toml = '[policies.tool_permissions.overrides]\nact_click = "ask"\n'
    async with runtime(workspace, toml) as rt:
        with pytest.raises(ApprovalRequired) as info:
            await rt.tool_service(requester=DeferredApprovals()).execute("act_click", {"target": "a"})
        assert ACTIONS == [] and info.value.kind == "approval_required"
        request = info.value.request
        assert request.tool_name == "act_click" and request.arguments == {"target": "a"}
        answers = DeferredApprovals({request.fingerprint: ApprovalResponse(ApprovalOutcome.APPROVED)})
        with pytest.raises(ApprovalRequired):  # other arguments: the answer does not cover it
            await rt.tool_service(requester=answers).execute("act_click", {"target": "b"})
        await rt.tool_service(requester=answers).execute("act_click", {"target": "a"})
        assert ACTIONS == ["click a"]
        denied = DeferredApprovals().answer(request.fingerprint, ApprovalResponse(ApprovalOutcome.DENIED, "no"))
        with pytest.raises(ApprovalDenied, match='The user said: "no"'):
            await rt.tool_service(requester=denied).execute("act_click", {"target": "a"})
        result = await rt.tool_service(requester=DeferredApprovals()).call("act_click", {"target": "c"})
        assert not result.success and result.error_kind == "approval_required"


@pytest.mark.anyio
async def test_a_plugin_context_reaches_the_runtime_at_call_time_only(workspace: Path) -> None:
    plugin = Family()
    async with runtime(workspace, plugin=plugin) as rt:
        context = plugin.context
        assert context is not None
        member = context.tool_service(agent="member")
        await member.execute("act_click", {"target": "m"})
        assert [r.target for r in rows(rt, "member") if r.action == "tool_call"] == ["act_click"]
        assert context.ledger is rt.chokepoint.ledger and context.events is rt.chokepoint.events

    class Early:
        ALEPH_PLUGIN_NAME = "early"

        @aleph.hookimpl
        def aleph_register_tools(self, context: aleph.PluginContext) -> None:
            context.tool_service()

    with pytest.raises(aleph.PluginError, match="not built yet"):
        aleph.load(plugins=[Early()], entry_points=False, strict=True)


@pytest.mark.anyio
async def test_services_run_only_when_started_restart_after_a_failure_and_stop_at_close(workspace: Path) -> None:
    runs: list[str] = []
    stopped = asyncio.Event()

    class Scheduler:
        ALEPH_PLUGIN_NAME = "scheduler"

        @aleph.hookimpl
        def aleph_register_tools(self, context: aleph.PluginContext) -> None:
            async def tick() -> None:
                runs.append("run")
                if len(runs) == 1:
                    raise RuntimeError("first run fails")
                try:
                    await asyncio.Event().wait()
                finally:
                    stopped.set()

            context.add_service("tick", tick)

    rt = aleph.load(plugins=[Scheduler()], entry_points=False, strict=True)
    async with rt:
        await asyncio.sleep(0.05)
        assert runs == []
        assert await rt.start_services() == ["scheduler:tick"]
        for _ in range(60):
            if len(runs) == 2:
                break
            await asyncio.sleep(0.05)
        assert runs == ["run", "run"]
    assert stopped.is_set()


class FamilySpec:
    """A family's own extension point, shipped in the family."""

    @pluggy.HookspecMarker("aleph")
    def aleph_fixture_embedders(self, register: Any) -> None:
        """Collect embedders."""


class Provider:
    ALEPH_PLUGIN_NAME = "a_provider"  # loads before the family that specifies its hook

    @aleph.hookimpl
    def aleph_fixture_embedders(self, register: Any) -> None:
        register("tiny")


class FamilyWithHooks:
    ALEPH_PLUGIN_NAME = "b_family"
    ALEPH_HOOKSPECS = (FamilySpec,)


class Stray:
    ALEPH_PLUGIN_NAME = "stray"

    @aleph.hookimpl
    def aleph_no_such_hook(self) -> None:
        """Implements a hook nobody specifies."""


def test_a_family_brings_its_own_hookspec_and_a_hook_nobody_specifies_fails_its_plugin(workspace: Path) -> None:
    rt = aleph.load(plugins=[Provider(), FamilyWithHooks(), Stray()], entry_points=False, strict=False)
    names: list[str] = []
    rt.plugins.call_each("aleph_fixture_embedders", register=names.append)
    assert names == ["tiny"]
    report = rt.plugins.report()
    assert [f["name"] for f in report["failed"]] == ["stray"]
    assert "aleph_no_such_hook" in report["failed"][0]["error"]
    assert json.dumps(report)
