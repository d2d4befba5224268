"""An approval covers the exact values it was given for, secret-named ones included.

Arguments under secret-looking names (``password``, ``api_key``, ``token``, anything with ``auth`` in it)
are masked in the prompt and in the kept fingerprint, and approvals used that fingerprint: one grant then
covered every value under such a name (approving ``auth_mode="required"`` approved ``"disabled"``). The
approval fingerprint now binds those values under a key in the keystore, so a grant covers the same value
again (in a later runtime on the same data directory too) and never another; the grants file holds no
value. Every call goes through the real runtime (``aleph.load``) on a data directory of the test's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import ApprovalOutcome, ApprovalRequired, ApprovalResponse, DeferredApprovals, ScriptedRequester

pytestmark = pytest.mark.anyio


@aleph.tool(name="configure_server", description="Change how a server is set up.")
def configure_server(
    name: str, auth_mode: str = "required", api_key: str = "", mirrors: list[Any] | None = None
) -> str:
    return f"{name} configured"


def runtime(workspace: Path) -> aleph.Aleph:
    path = workspace / "aleph.toml"
    path.write_text("[workspace]\ndata_dir = '.d'\n[policies.tool_permissions.overrides]\nconfigure_server = 'ask'\n")
    rt = aleph.load(path, entry_points=False)
    rt.register(configure_server)
    return rt


async def asks(rt: aleph.Aleph, arguments: dict[str, Any], turn: aleph.TurnContext | None = None) -> bool:
    """Whether this call asks a human (who is not there) or runs on a grant."""
    nobody = ScriptedRequester()
    result = await rt.tool_service(turn=turn, requester=nobody).call("configure_server", arguments)
    assert result.success != bool(nobody.requests)
    return bool(nobody.requests)


@pytest.mark.parametrize(
    ("granted", "other"),
    [
        ({"name": "prod", "auth_mode": "required"}, {"name": "prod", "auth_mode": "disabled"}),
        ({"name": "prod", "api_key": "key-one"}, {"name": "prod", "api_key": "key-two"}),
        ({"name": "prod", "mirrors": [{"password": "a"}]}, {"name": "prod", "mirrors": [{"password": "b"}]}),
    ],
)
async def test_a_session_grant_covers_the_same_secret_value_and_no_other(
    workspace: Path, granted: dict[str, Any], other: dict[str, Any]
) -> None:
    async with runtime(workspace) as rt:
        turn = aleph.TurnContext(session_key="secret-values")
        human = ScriptedRequester([ApprovalOutcome.APPROVED_FOR_SESSION])
        assert (await rt.tool_service(turn=turn, requester=human).call("configure_server", granted)).success
        assert "***" in human.requests[0].summary  # the human saw the value masked, and approved that call
        assert not await asks(rt, granted, turn)
        assert await asks(rt, other, turn)


async def test_an_always_grant_holds_in_a_later_runtime_for_its_value_only_and_stores_none(workspace: Path) -> None:
    granted = {"name": "prod", "api_key": "sk-live-value-one"}
    async with runtime(workspace) as rt:
        human = ScriptedRequester([ApprovalOutcome.APPROVED_ALWAYS])
        assert (await rt.tool_service(requester=human).call("configure_server", granted)).success
    async with runtime(workspace) as later:  # another runtime on the same data directory
        assert not await asks(later, granted)
        assert await asks(later, {**granted, "api_key": "sk-live-value-two"})
    stored = "".join(p.read_text(errors="replace") for p in (workspace / ".d").rglob("*.json"))
    assert "sk-live-value-one" not in stored


async def test_a_deferred_answer_for_one_secret_value_does_not_approve_another(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        call = {"name": "prod", "auth_mode": "required"}
        with pytest.raises(ApprovalRequired) as pending:
            await rt.tool_service(requester=DeferredApprovals()).execute("configure_server", call)
        answers = {pending.value.request.fingerprint: ApprovalResponse(ApprovalOutcome.APPROVED)}
        with pytest.raises(ApprovalRequired):
            await rt.tool_service(requester=DeferredApprovals(answers)).execute(
                "configure_server", {**call, "auth_mode": "disabled"}
            )
        assert (await rt.tool_service(requester=DeferredApprovals(answers)).execute("configure_server", call)).text
