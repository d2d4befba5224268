"""A small Aleph MCP client for the conformance suite's client scenarios.

The suite passes the server URL as the last argument and the scenario in MCP_CONFORMANCE_SCENARIO.
The client connects through Aleph's runtime (McpManager), lists tools and, for ``tools_call``, calls
``add_numbers`` through the tool service like an agent would.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import anyio

import aleph


async def main(url: str, scenario: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "aleph.toml").write_text(
            f"[mcp.servers.conf]\nurl = {json.dumps(url)}\ntimeout_seconds = 20\n"
            f"[workspace]\ndata_dir = {json.dumps(str(root / 'data'))}\n"
        )
        async with aleph.load(root / "aleph.toml", entry_points=False) as rt:
            [status] = rt.mcp.servers()
            print(f"state={status.state} protocol={status.protocol_version} tools={status.tools}", file=sys.stderr)
            if status.state != "connected":
                return 1
            service = rt.tool_service(tier="full")
            names = [d.name for d in await service.list()]
            print("tools:", names, file=sys.stderr)
            if scenario == "tools_call" and "conf__add_numbers" in names:
                result = await service.call("conf__add_numbers", {"a": 5, "b": 3})
                print("result:", result.to_json(), file=sys.stderr)
                return 0 if result.success else 1
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
