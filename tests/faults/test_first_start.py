"""Eight servers starting together on a new data directory, twenty times: every one starts, loads every
plugin, and serves; the files they all create (request-state key, ledger keys, stores) are whole.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp import Client

from ._servers import Server, call, write_config

pytestmark = pytest.mark.anyio

ROUNDS = int(os.environ.get("ALEPH_TEST_FIRST_START_ROUNDS", "20"))
SERVERS = 8


async def check_server(server: Server, index: int, problems: list[str]) -> None:
    url = await server.wait_ready()
    async with Client(url) as client:  # the 2026-07-28 handshake, which seals request state with the shared key
        names = {t.name for t in (await client.list_tools()).tools}
        for wanted in ("file_write", "remember"):
            if wanted not in names:
                problems.append(f"server {index} offers no {wanted}: {server.stderr[-5:]}")
        ok, text = await call(client, "file_write", {"path": f"s{index}.txt", "content": f"server {index}"})
        if not ok:
            problems.append(f"server {index}: file_write failed: {text}")
        ok, text = await call(client, "remember", {"action": "add", "content": f"Server {index} started at dawn"})
        if not ok:
            problems.append(f"server {index}: remember failed: {text}")


async def test_eight_servers_starting_together_on_a_new_data_directory_all_start_whole(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        workspace = tmp_path / f"ws{round_}"
        workspace.mkdir()
        write_config(workspace, tmp_path / f"data{round_}")  # a new data directory every round
        servers = [Server.start(workspace) for _ in range(SERVERS)]
        problems: list[str] = []
        try:
            with anyio.fail_after(120):
                async with anyio.create_task_group() as tg:
                    for index, server in enumerate(servers):
                        tg.start_soon(check_server, server, index, problems)
        finally:
            for server in servers:
                server.stop()
        for index, server in enumerate(servers):
            failed = [line for line in server.stderr if "did not load" in line or "Traceback" in line]
            if failed:
                problems.append(f"server {index}: {failed}")
        assert [] == problems, f"round {round_}"
        key = (tmp_path / f"data{round_}" / "mcp" / "request-state.key").read_text()
        assert 64 == len(key.strip())
