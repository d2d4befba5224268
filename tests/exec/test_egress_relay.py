"""The egress proxy's relay: bytes arrive whole and unchanged, whichever loop serves the run.

A run driven by an event loop (``arun``, every tool call) has its connections served on that loop;
a blocking run (``WorkspaceSandbox.run``, from a thread) on the proxy's own thread. Both relay
through one reused buffer per direction, so a send that went out after the next read had overwritten
its buffer would show here as a wrong digest.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from aleph_exec._egress import EgressProxy
from aleph_exec._egress_rules import RunNetwork
from aleph_exec._sandbox import bwrap_available

from .conftest import make_runtime
from .egress_servers import network_toml, serve
from .test_egress import bash, needs

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot create namespaces here"),
]

SIZE = 3 * 1024 * 1024 + 12345  # several relay buffers, and not a multiple of one


@pytest.fixture
def random_site(tmp_path: Path) -> Any:
    root = tmp_path / "site"
    root.mkdir()
    data = os.urandom(SIZE)
    (root / "random.bin").write_bytes(data)
    with serve(root) as port:
        yield port, hashlib.sha256(data).hexdigest()


async def test_a_download_arrives_byte_exact_as_a_request_and_through_a_tunnel(
    workspace: Path, random_site: tuple[int, str]
) -> None:
    needs("curl")
    port, digest = random_site
    url = f"http://files.example:{port}/random.bin"
    async with make_runtime(workspace, network_toml()) as rt:
        # Two downloads at once in one call, one a plain request, one a CONNECT tunnel (-p): both directions
        # of both connections are relayed on the same loop at the same time.
        result = await bash(rt, f"(curl -sS --fail {url} | sha256sum) & curl -sS --fail -p {url} | sha256sum; wait")
    assert [digest, digest] == [line.split()[0] for line in result["stdout"].splitlines()], result
    net = result["connections"]
    assert (2, 0, 0) == (net["allowed"], net["refused"], net["cut"])
    assert all(c["bytes_down"] > SIZE for c in net["connections"])


async def test_a_blocking_run_is_served_by_the_proxys_own_thread(workspace: Path, random_site: tuple[int, str]) -> None:
    needs("curl")
    port, digest = random_site
    async with make_runtime(workspace, network_toml()) as rt:
        sandbox = rt.registry.get("bash").tool.sandbox  # type: ignore[union-attr]
        net = RunNetwork(sandbox.config.network)
        argv = ["bash", "-c", f"curl -sS --fail http://files.example:{port}/random.bin | sha256sum"]

        def blocking() -> Any:
            return sandbox.run(argv, cwd=workspace, timeout=60, network=net)

        result = await anyio.to_thread.run_sync(blocking)
    assert digest == result.stdout.split()[0], result
    assert net.loop is EgressProxy.shared().loop and net.closed
    assert [("files.example", port, "allowed")] == [(c.host, c.port, c.verdict) for c in net.log]
    assert net.bytes_down > SIZE


async def test_a_port_where_nothing_listens_is_a_502_naming_it_and_a_refused_connection(workspace: Path) -> None:
    needs("curl")
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with make_runtime(workspace, network_toml()) as rt:
        result = await bash(
            rt,
            f"curl -sS -w '%{{http_code}}' http://files.example:{port}/; echo; curl -sSp http://files.example:{port}/",
        )
    body, code = result["stdout"].splitlines()
    assert body.startswith(f"Aleph egress proxy: cannot connect to files.example:{port}: "), result
    assert ("Connection refused", "502") == (body[-len("Connection refused") :], code)
    assert "CONNECT tunnel failed, response 502" in result["stderr"]
    net = result["connections"]
    assert (0, 2) == (net["allowed"], net["refused"])
    assert all(c["reason"].startswith(f"cannot connect to files.example:{port}") for c in net["connections"])
