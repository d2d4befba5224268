"""Hostile and broken servers: none of them crashes the host or stalls the others."""

from __future__ import annotations

import sys

import pytest
from mcp.server import MCPServer

from aleph import UnscopedToolService
from aleph._config import McpServerConfig
from aleph._mcp._hygiene import MAX_RESULT_CHARS

from .conftest import MakeManager, python_server

pytestmark = pytest.mark.anyio


def good_server() -> MCPServer:
    srv = MCPServer("good")

    @srv.tool()
    def ping_me() -> str:
        """Answer pong."""
        return "pong"

    return srv


async def test_malformed_tools_are_quarantined_and_the_good_one_works(make_manager: MakeManager) -> None:
    manager = await make_manager({"h": python_server("hostile.py", protocol="legacy")})
    status = manager.servers()[0]
    assert "connected" == status.state
    assert ["h__flood"] == manager.registry.names()
    assert {"stringy", "listy"} == {q["tool"] for q in status.quarantined}


async def test_oversized_results_are_cut_with_a_marker(make_manager: MakeManager) -> None:
    manager = await make_manager({"h": python_server("hostile.py", protocol="legacy")})
    out = await UnscopedToolService(manager.registry).execute("h__flood", {})
    assert out.text.startswith("y" * 1000)
    assert len(out.text) < MAX_RESULT_CHARS + 200
    assert "[truncated: 2000000 more characters]" in out.text


async def test_a_hanging_server_times_out_while_the_others_connect(make_manager: MakeManager) -> None:
    servers = {
        "silent": python_server("silent.py", timeout_seconds=1.0),
        "good": McpServerConfig(command="in-process"),
    }
    manager = await make_manager(servers, inprocess={"good": good_server()})
    states = {s.id: s for s in manager.servers()}
    assert "connected" == states["good"].state
    assert states["silent"].state in ("restarting", "dead")
    assert "no answer within 1s" in (states["silent"].reason or "")
    assert "good__ping_me" in manager.registry.names()
    assert not any(n.startswith("silent__") for n in manager.registry.names())


async def test_a_server_printing_garbage_never_connects_and_never_crashes_the_host(make_manager: MakeManager) -> None:
    servers = {
        "junk": python_server("garbage.py", timeout_seconds=1.0),
        "good": McpServerConfig(command="in-process"),
    }
    manager = await make_manager(servers, inprocess={"good": good_server()})
    states = {s.id: s.state for s in manager.servers()}
    assert "connected" == states["good"]
    assert states["junk"] in ("restarting", "dead")
    assert "pong" == (await UnscopedToolService(manager.registry).execute("good__ping_me", {})).value


async def test_a_server_that_cannot_start_ends_dead_with_its_reason(make_manager: MakeManager) -> None:
    manager = await make_manager(
        {"gone": McpServerConfig(command=sys.executable, args=["-c", "import sys; sys.exit(3)"])}
    )
    conn = manager.server("gone")
    assert conn is not None
    with __import__("anyio").fail_after(30):
        while conn.state != "dead":
            await __import__("anyio").sleep(0.05)
    status = manager.servers()[0]
    assert 3 == status.restarts
    assert "gave up after 3 restarts" in (status.reason or "")


async def test_a_disabled_server_is_listed_but_not_started(make_manager: MakeManager) -> None:
    manager = await make_manager({"off": McpServerConfig(command="/nonexistent", enabled=False)})
    assert ["disabled"] == [s.state for s in manager.servers()]


async def test_a_description_changed_mid_session_is_regated(make_manager: MakeManager) -> None:
    from aleph._mcp._hygiene import injection_markers

    from .conftest import wait_until

    manager = await make_manager({"dyn": python_server("dynamic.py")})
    registry = manager.registry
    assert not registry.get("dyn__stable").facts.requires_approval  # type: ignore[union-attr]
    await UnscopedToolService(registry).execute("dyn__rename_description", {})
    await wait_until(registry, lambda: "definition_changed" in registry.get("dyn__stable").facts.tags)  # type: ignore[union-attr]
    entry = registry.get("dyn__stable")
    assert entry is not None and entry.facts.requires_approval
    status = manager.servers()[0]
    assert ["stable"] == status.changed_tools
    assert injection_markers(entry.definition.description)
    assert any("possible prompt injection" in w for w in status.warnings)
    assert ["stable"] == manager.trust("dyn", "dyn__stable")
    assert not registry.get("dyn__stable").facts.requires_approval  # type: ignore[union-attr]


async def test_an_endless_line_is_dropped_in_bounded_memory_and_the_server_keeps_answering(
    make_manager: MakeManager,
) -> None:
    """A server writing one 256 MiB line: the host keeps at most the 64 MiB limit of it, then reads on."""
    import resource

    manager = await make_manager({"s": python_server("spilling.py", protocol="legacy", timeout_seconds=60)})
    service = UnscopedToolService(manager.registry)
    assert "hi" == (await service.execute("s__echo", {"text": "hi"})).text
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    assert "spilled" == (await service.execute("s__spill", {"megabytes": 256})).text
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 160, f"the host grew by {grown_mib:.0f} MiB reading a 256 MiB line"
    assert "again" == (await service.execute("s__echo", {"text": "again"})).text
    assert ["connected"] == [s.state for s in manager.servers()]
