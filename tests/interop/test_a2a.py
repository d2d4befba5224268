"""A2A: a real remote agent (the SDK's server under uvicorn on loopback), cards, signatures and delegation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from a2a.utils.signing import create_agent_card_signer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import aleph

from .conftest import runtime
from .remote import RemoteAgent

pytestmark = pytest.mark.anyio


@pytest.fixture
def remote():
    agent = RemoteAgent()
    yield agent
    agent.stop()


def keypair() -> tuple[bytes, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public.decode()


def svc(rt: aleph.Aleph, agent: str = "alice", **kw: Any) -> aleph.ScopedToolService:
    return rt.tool_service(agent=agent, turn=aleph.TurnContext(session_key=f"s-{agent}"), tier="auto", **kw)


async def ok(service: aleph.ScopedToolService, tool: str, **payload: Any) -> Any:
    result = await service.call(tool, payload)
    assert result.success, result.error
    return json.loads(result.output)


async def test_add_an_agent_then_delegate_and_save_its_artifacts(workspace: Path, remote: RemoteAgent) -> None:
    async with runtime(workspace) as rt:
        added = await ok(svc(rt), "a2a_agents", action="add", name="helper", url=remote.url)
        assert added["agent"]["skills"][0]["id"] == "summarise" and added["agent"]["signed"] is False
        out = await ok(svc(rt), "a2a_delegate", agent="helper", task="summarise the notes", save_artifacts_to="in")
    assert out["state"] == "completed" and out["untrusted"] is True
    assert (workspace / "in" / "summary-0").read_text() == "remote did: summarise the notes"
    assert (workspace / "in" / "chart.png").read_bytes() == b"\x89PNG fake"
    # A file name with a path in it lands in the folder asked for, never outside it.
    assert (workspace / "in" / "escape.txt").read_bytes() == b"x" and not (workspace.parent / "escape.txt").exists()
    assert sorted(out["saved"]) == ["in/chart.png", "in/escape.txt", "in/summary-0"]


async def test_artifacts_obey_the_files_policy(workspace: Path, remote: RemoteAgent) -> None:
    policy = '[policies.tool_permissions.overrides]\n"file_write(in/**)" = "deny"\n'
    async with runtime(workspace, policy) as rt:
        await ok(svc(rt), "a2a_agents", action="add", name="helper", url=remote.url)
        result = await svc(rt).call("a2a_delegate", {"agent": "helper", "task": "go", "save_artifacts_to": "in"})
    assert not result.success and "permission denied for tool file_write" in result.error
    assert not (workspace / "in").exists()


async def test_a_failed_remote_task_is_reported_as_failed(workspace: Path, remote: RemoteAgent) -> None:
    async with runtime(workspace) as rt:
        await ok(svc(rt), "a2a_agents", action="add", name="helper", url=remote.url)
        out = await ok(svc(rt), "a2a_delegate", agent="helper", task="fail please")
    assert out["state"] == "failed" and "cannot do that" in out["reply"]


async def test_agent_lists_are_owned(workspace: Path, remote: RemoteAgent) -> None:
    async with runtime(workspace) as rt:
        await ok(svc(rt), "a2a_agents", action="add", name="helper", url=remote.url)
        assert await ok(svc(rt, "eve"), "a2a_agents", action="list") == {"agents": []}
        foreign = await svc(rt, "eve").call("a2a_delegate", {"agent": "helper", "task": "x"})
        missing = await svc(rt, "eve").call("a2a_delegate", {"agent": "nobody", "task": "x"})
        assert foreign.error.replace("helper", "N") == missing.error.replace("nobody", "N")
        gone = await svc(rt, "eve").call("a2a_agents", {"action": "remove", "name": "helper"})
        assert not gone.success
        assert len((await ok(svc(rt), "a2a_agents", action="list"))["agents"]) == 1


async def test_a_pinned_key_requires_a_valid_signature(workspace: Path) -> None:
    private, public = keypair()
    _, other_public = keypair()
    signed = RemoteAgent(signer=create_agent_card_signer(private, {"alg": "ES256", "kid": "k1"}))
    try:
        async with runtime(workspace) as rt:
            good = await ok(svc(rt), "a2a_agents", action="add", name="good", url=signed.url, public_key=public)
            assert good["agent"]["signed"] and good["agent"]["signature_verified"]
            bad = await svc(rt).call(
                "a2a_agents", {"action": "add", "name": "bad", "url": signed.url, "public_key": other_public}
            )
            assert not bad.success and "does not carry a valid signature" in bad.error
    finally:
        signed.stop()


async def test_an_unsigned_card_fails_a_pinned_key(workspace: Path, remote: RemoteAgent) -> None:
    _, public = keypair()
    async with runtime(workspace) as rt:
        result = await svc(rt).call(
            "a2a_agents", {"action": "add", "name": "x", "url": remote.url, "public_key": public}
        )
    assert not result.success and "valid signature" in result.error


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254/", "link-local"),
        ("file:///etc/passwd", "http or https"),
        ("http://metadata.google.internal/", "metadata"),
    ],
)
async def test_agent_urls_that_are_not_agents_are_refused(workspace: Path, url: str, why: str) -> None:
    async with runtime(workspace) as rt:
        result = await svc(rt).call("a2a_agents", {"action": "add", "name": "x", "url": url})
    assert not result.success and why in result.error


async def test_an_unreachable_agent_says_so(workspace: Path) -> None:
    async with runtime(workspace) as rt:
        result = await svc(rt).call("a2a_agents", {"action": "add", "name": "x", "url": "http://127.0.0.1:9"})
    assert not result.success and "not reachable" in result.error
