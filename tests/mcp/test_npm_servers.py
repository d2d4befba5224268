"""Real MCP servers from npm: server-everything (stdio and Streamable HTTP) and server-filesystem (stdio)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from aleph import UnscopedToolService
from aleph._config import McpServerConfig

from .conftest import MakeManager, child_pids, free_port, npm_bin, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RESOURCE_TOOLS = {"mcp_list_resources", "mcp_read_resource", "mcp_list_resource_templates"}
PROMPT_TOOLS = {"mcp_list_prompts", "mcp_get_prompt"}


def everything() -> McpServerConfig:
    return McpServerConfig(command=npm_bin("mcp-server-everything"), args=["stdio"])


async def test_everything_brings_capability_tools_and_filesystem_does_not(
    make_manager: MakeManager, tmp_path: Path
) -> None:
    fs = McpServerConfig(command=npm_bin("mcp-server-filesystem"), args=[str(tmp_path)])
    only_fs = await make_manager({"fs": fs})
    names = set(only_fs.registry.names())
    assert "fs__read_text_file" in names
    assert not any(n.startswith("mcp_") for n in names)
    await only_fs.aclose()

    both = await make_manager({"ev": everything(), "fs": fs})
    names = set(both.registry.names())
    assert RESOURCE_TOOLS | PROMPT_TOOLS <= names
    assert "mcp_login" not in names  # no remote server
    assert {"connected"} == {s.state for s in both.servers()}, [(s.id, s.reason) for s in both.servers()]
    ev = next(s for s in both.servers() if s.id == "ev")
    assert ev.tools > 10 and ev.resources > 0 and ev.templates > 0 and ev.prompts > 0


async def test_resources_templates_and_prompts_work_through_the_gated_tools(make_manager: MakeManager) -> None:
    manager = await make_manager({"ev": everything()})
    service = UnscopedToolService(manager.registry)
    resources = (await service.execute("mcp_list_resources", {})).value
    assert resources["count"] > 0
    first = resources["resources"][0]
    read = (await service.execute("mcp_read_resource", {"uri": first["id"]})).value
    assert read["content_type"] in ("text", "binary", "image")

    templates = (await service.execute("mcp_list_resource_templates", {})).value
    text_template = next(t for t in templates["templates"] if "text" in t["uri_template"].lower())
    args = dict.fromkeys(text_template["variables"], "1")
    via_tool = (await service.execute(text_template["tool"], args)).value
    assert "text" == via_tool["content_type"]

    prompts = (await service.execute("mcp_list_prompts", {})).value
    simple = next(p for p in prompts["prompts"] if not any(a["required"] for a in p["arguments"]))
    got = (await service.execute("mcp_get_prompt", {"name": simple["id"]})).value
    assert got["messages"]

    echo = await service.execute("ev__echo", {"message": "hi"})
    assert "Echo: hi" == echo.text


async def test_a_killed_server_loses_its_tools_and_gets_them_back_on_restart(make_manager: MakeManager) -> None:
    manager = await make_manager({"ev": everything()})
    registry = manager.registry
    assert "ev__echo" in registry and "mcp_list_resources" in registry
    [pid] = child_pids("mcp-server-everything")
    os.kill(pid, signal.SIGKILL)
    await wait_until(registry, lambda: "ev__echo" not in registry)
    assert "mcp_list_resources" not in registry
    await wait_until(registry, lambda: "ev__echo" in registry and "mcp_list_resources" in registry)
    status = manager.servers()[0]
    assert ("connected", 1) == (status.state, status.restarts)
    assert "Echo: again" == (await UnscopedToolService(registry).execute("ev__echo", {"message": "again"})).text


@pytest.fixture
def everything_http() -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    proc = subprocess.Popen(
        [npm_bin("mcp-server-everything"), "streamableHttp"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


async def test_streamable_http_server_everything_connects_and_offers_login(
    make_manager: MakeManager, everything_http: str
) -> None:
    port = int(everything_http.rsplit(":", 1)[1].split("/")[0])
    with anyio.fail_after(30):  # the node process needs a moment before it listens
        while True:
            try:
                await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                break
            except OSError:
                await anyio.sleep(0.1)
    manager = await make_manager({"web": McpServerConfig(url=everything_http, timeout_seconds=10)})
    names = set(manager.registry.names())
    assert {"web__echo", "mcp_login"} | RESOURCE_TOOLS <= names
    assert "http" == manager.servers()[0].transport
    out = await UnscopedToolService(manager.registry).execute("web__echo", {"message": "over http"})
    assert "Echo: over http" == out.text


async def test_env_variables_are_expanded_for_the_child(
    make_manager: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALEPH_MCP_TEST_SECRET", "s3cr3t")
    cfg = everything().model_copy(update={"env": {"ALEPH_MCP_PROBE": "${ALEPH_MCP_TEST_SECRET}-${ALEPH_MCP_UNSET}"}})
    manager = await make_manager({"ev": cfg})
    out = await UnscopedToolService(manager.registry).execute("ev__get-env", {})
    assert "s3cr3t-${ALEPH_MCP_UNSET}" in out.text  # known variable expanded, unknown one left as written
    assert "s3cr3t" not in str([s.to_json() for s in manager.servers()])
