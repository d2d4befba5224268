"""agent_identity: rotate then verify rows signed by the old and the new key; cards another Aleph verifies."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from aleph_admin._identity import verify_card

import aleph

from .helpers import approving, output

pytestmark = pytest.mark.anyio


async def test_rows_signed_before_and_after_a_rotation_both_verify(make_runtime: Callable[..., aleph.Aleph]) -> None:
    async with make_runtime() as rt:
        alice = rt.tool_service(agent="alice", requester=approving())
        before = output(await alice.call("agent_identity", {"action": "show"}))
        output(await alice.call("agent_create", {"name": "old-rows"}))  # a row signed by the first key
        rotated = output(await alice.call("agent_identity", {"action": "rotate"}))
        assert rotated["old_fingerprint"] == before["fingerprint"] != rotated["fingerprint"]
        output(await alice.call("agent_create", {"name": "new-rows"}))  # a row signed by the new key
        report = output(await alice.call("agent_identity", {"action": "verify"}))
        assert report["ok"] is True, report
        assert {before["fingerprint"], rotated["fingerprint"]} <= set(report["signers"])
        shown = output(await alice.call("agent_identity", {"action": "show"}))
        assert set(shown["keys"]) == {before["fingerprint"], rotated["fingerprint"]}


async def test_an_exported_card_verifies_elsewhere_and_an_edited_one_does_not(
    make_runtime: Callable[..., aleph.Aleph], tmp_path: Path
) -> None:
    async with make_runtime() as rt:
        alice = rt.tool_service(agent="alice", requester=approving())
        output(await alice.call("agent_create", {"name": "courier"}))
        card = output(await alice.call("agent_identity", {"action": "export", "agent": "courier"}))["card"]
        assert card["created_by"].startswith("alice") and len(card["policy_digest"]) == 64
        checked = output(await alice.call("agent_identity", {"action": "verify_card", "card": json.dumps(card)}))
        assert checked["valid"] is True
        bob = rt.tool_service(agent="bob", requester=approving())
        refused = await bob.call("agent_identity", {"action": "export", "agent": "courier"})
        assert not refused.success and "no agent 'courier' of yours" in (refused.error or "")
    forged = {**card, "policy_digest": "0" * 64}
    assert verify_card(forged)[0] is False
    # Another process, with nothing but the card: the CLI.
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    good = subprocess.run(
        [sys.executable, "-m", "aleph_admin", "verify-card", str(path)], capture_output=True, text=True
    )
    assert good.returncode == 0 and good.stdout.startswith("valid")
    path.write_text(json.dumps(forged))
    bad = subprocess.run(
        [sys.executable, "-m", "aleph_admin", "verify-card", str(path)], capture_output=True, text=True
    )
    assert bad.returncode == 1 and "INVALID" in bad.stdout
