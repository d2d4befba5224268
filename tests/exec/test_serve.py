"""bash through ``aleph serve`` and a real ``mcp.Client`` over stdio: runs driven by the server's own event loop."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

ALEPH = str(Path(sys.executable).parent / "aleph")


def serve_params(workspace: Path) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("XDG_", "ALEPH_", "HOME", "PATH", "LANG"))}
    return StdioServerParameters(command=ALEPH, args=["serve"], cwd=str(workspace), env=env)


async def test_bash_calls_through_aleph_serve_run_in_the_sandbox_one_after_another_and_at_once(
    workspace: Path,
) -> None:
    (workspace / "aleph.toml").write_text('[policies]\nexec_tier = "full"\n')
    results: dict[str, dict] = {}
    with anyio.fail_after(60):
        async with Client(serve_params(workspace)) as client:

            async def bash(key: str, command: str) -> None:
                out = await client.call_tool("bash", {"command": command})
                assert not out.is_error, out.content
                results[key] = json.loads(out.content[0].text)  # type: ignore[union-attr]

            await bash("first", "echo one")
            await bash("second", "echo two >&2; exit 3")
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(bash, f"together{i}", f"sleep 0.2; echo {i}; pwd")
    assert ("one\n", 0) == (results["first"]["stdout"], results["first"]["exit_code"])
    assert ("two\n", 3) == (results["second"]["stderr"], results["second"]["exit_code"])
    for i in range(4):
        together = results[f"together{i}"]
        assert (f"{i}\n{workspace.resolve()}\n", 0) == (together["stdout"], together["exit_code"])


async def test_a_tool_name_that_is_not_text_never_crashes_the_server(workspace: Path) -> None:
    # Raw JSON-RPC over stdio: the JSON escape "\\udcff" decodes to a lone surrogate (no client library
    # sends it). The MCP SDK's parser rejects such a frame as invalid JSON and drops it unanswered; what
    # Aleph owns is that nothing raises and the next call is served.
    (workspace / "aleph.toml").write_text('[policies]\nexec_tier = "full"\n')
    params = serve_params(workspace)
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    text = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}) + "\n"
    text += json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
    names = ["\\udcff", "bash\\udcff", "ba\\ud800sh", "bash"]
    for i, name in enumerate(names, start=1):
        call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "%s", "arguments": %s}}\n'
        text += call % (i, name, json.dumps({"command": "echo still"}))
    answers: dict[int, dict] = {}
    with anyio.fail_after(60):
        async with await anyio.open_process([params.command, *params.args], cwd=workspace, env=params.env) as proc:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            await proc.stdin.send(text.encode())
            buffer = b""
            while len(names) not in answers:
                buffer += await proc.stdout.receive()
                *lines, buffer = buffer.split(b"\n")
                answers.update((m["id"], m) for m in map(json.loads, lines) if "id" in m)
            await proc.stdin.aclose()
            errors = b"".join([chunk async for chunk in proc.stderr])
    for i in range(1, len(names)):
        assert i not in answers or "not found" in json.dumps(answers[i]), answers[i]
    assert "still\n" == json.loads(answers[len(names)]["result"]["content"][0]["text"])["stdout"]
    assert b"Traceback" not in errors and b"UnicodeEncodeError" not in errors, errors[-2000:]
