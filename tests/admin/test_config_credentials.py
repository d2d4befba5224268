"""Reading the configuration never hands out the credentials it holds for servers and child processes.

``self_config read`` is open to every caller (a guest included), and ``[mcp.servers.<id>] env`` / ``headers``
often hold an API token written out: their values read as ``***``, their names stay.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

import aleph

from .helpers import approving, output

pytestmark = pytest.mark.anyio

TOKEN, BEARER = "ghp_literal_token_123", "sk-header-456"
TOML = f"""
[mcp.servers.gh]
command = "true"
enabled = false
env = {{ GITHUB_TOKEN = "{TOKEN}" }}
[mcp.servers.web]
url = "http://127.0.0.1:9/mcp"
enabled = false
headers = {{ Authorization = "Bearer {BEARER}" }}
[channels.pub]
role = "guest"
"""


@pytest.mark.parametrize(
    "path",
    [None, "mcp", "mcp.servers.gh", "mcp.servers.gh.env", "mcp.servers.gh.env.GITHUB_TOKEN", "mcp.servers.web.headers"],
)
async def test_a_guest_reading_the_configuration_sees_no_server_credential(
    make_runtime: Callable[..., aleph.Aleph], path: str | None
) -> None:
    async with make_runtime(TOML) as rt:
        guest = rt.tool_service(agent="mallory", channel="pub")
        read = output(await guest.call("self_config", {"action": "read", **({"config_path": path} if path else {})}))
        text = json.dumps(read)
        assert TOKEN not in text and BEARER not in text
        if path == "mcp.servers.gh.env":
            assert read["value"] == {"GITHUB_TOKEN": "***"}  # the names stay readable


async def test_a_credential_an_operator_writes_is_not_shown_in_the_change_history(
    make_runtime: Callable[..., aleph.Aleph],
) -> None:
    async with make_runtime(TOML) as rt:
        operator = rt.tool_service(agent="root", requester=approving())
        path = "mcp.servers.gh.env.GITHUB_TOKEN"
        output(
            await operator.call("self_config", {"action": "update_config", "config_path": path, "value": "ghp_new_999"})
        )
        guest = rt.tool_service(agent="mallory", channel="pub")
        audit = json.dumps(output(await guest.call("config_audit", {})))
        assert path in audit and "ghp_new_999" not in audit and TOKEN not in audit
