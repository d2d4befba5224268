"""Malformed plugin output fails closed and is named: votes, registrations, hook results.

Every plugin here is a real in-process plugin module loaded by a real runtime (``aleph.load``), and
calls go through the real chokepoint; nothing is stubbed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import aleph
from aleph import PermissionDenied, PluginError


def plugin_module(name: str, body: str) -> ModuleType:
    mod = ModuleType(name)
    mod.__dict__["aleph"] = aleph
    exec(body, mod.__dict__)  # a throwaway in-process plugin, as a third party would write one
    return mod


TOOLS = """
@aleph.hookimpl
def aleph_register_tools(register):
    register(aleph.tool(name="touch_it", description="Record that it ran.", inline=True)(lambda: RAN.append("ran")))
"""


def _voter(result: str) -> ModuleType:
    body = f"from aleph import PolicyVote\n\n@aleph.hookimpl\ndef aleph_tool_policy(tool):\n    return {result}\n"
    return plugin_module("typo_guard", body)


MALFORMED_VOTES = {
    "capitalised action": 'PolicyVote("Deny", "no")',
    "unknown action": 'PolicyVote("block", "no")',
    "allow is not a vote": 'PolicyVote("allow", "fine")',
    "reason not text": 'PolicyVote("deny", 42)',
    "a tuple": '("deny", "no")',
    "a string": '"deny"',
    "a dict": '{"action": "deny", "reason": "no"}',
    "a bool": "False",
}


@pytest.mark.anyio
@pytest.mark.parametrize("result", list(MALFORMED_VOTES.values()), ids=list(MALFORMED_VOTES))
async def test_a_malformed_vote_refuses_the_call_naming_the_plugin_and_the_hook(workspace: Path, result: str) -> None:
    tools = plugin_module("tools", TOOLS)
    tools.__dict__["RAN"] = ran = []
    async with aleph.load(plugins=[tools, _voter(result)], entry_points=False, strict=False) as rt:
        service = rt.tool_service()
        with pytest.raises(PermissionDenied) as caught:
            await service.execute("touch_it", {})
        explained = service.explain("touch_it", {})
    assert ran == []
    message = str(caught.value)
    assert "typo_guard" in message
    assert "aleph_tool_policy" in message
    assert explained.decision == "deny"
    assert explained.decided_by == "plugin"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("result", "decision"),
    [("None", "allow"), ('PolicyVote("ask", "a person decides")', "ask"), ('PolicyVote("deny", "off")', "deny")],
)
async def test_a_well_formed_vote_is_read_as_it_says(workspace: Path, result: str, decision: str) -> None:
    tools = plugin_module("tools", TOOLS)
    tools.__dict__["RAN"] = []
    async with aleph.load(plugins=[tools, _voter(result)], entry_points=False, strict=False) as rt:
        assert rt.tool_service().explain("touch_it", {}).decision == decision


def test_a_registration_of_something_not_a_tool_fails_the_plugin_naming_it(workspace: Path) -> None:
    bad = plugin_module(
        "wrong_type",
        "@aleph.hookimpl\ndef aleph_register_tools(register):\n    register(aleph.tool(name='ok_one', "
        "description='Fine.', inline=True)(lambda: 1))\n    register({'name': 'not_a_tool'})\n",
    )
    rt = aleph.load(plugins=[bad], entry_points=False, strict=False)
    report = rt.plugins.report()
    assert rt.registry.names() == []  # its half-done registration is rolled back
    assert report["loaded"] == []
    (failed,) = report["failed"]
    assert (failed["name"], failed["stage"]) == ("wrong_type", "register")
    assert "aleph_register_tools passed dict" in failed["error"]
    assert "wrong_type" in failed["error"]


HALF_GOOD = """
class NoDescription(aleph.AlephTool):
    NAME = "no_description"
    DESCRIPTION = ""

    class Args(aleph.ToolArgs):
        n: int

    async def call(self, args):
        return args.n


def undocumented(x: int) -> int:
    return x


@aleph.hookimpl
def aleph_register_tools(register):
    register(aleph.tool(name="first_good", description="Good.", inline=True)(lambda: 1))
    register(NoDescription(), aleph.tool(undocumented))
    register(aleph.tool(name="second_good", description="Also good.", inline=True)(lambda: 2))
"""


def test_a_tool_failing_its_contract_is_held_and_named_while_the_others_load(workspace: Path) -> None:
    rt = aleph.load(plugins=[plugin_module("half_good", HALF_GOOD)], entry_points=False, strict=False)
    assert rt.registry.names() == ["first_good", "second_good"]
    (loaded,) = rt.plugins.report()["loaded"]
    assert loaded["tools"] == ["first_good", "second_good"]
    assert sorted(loaded["held_tools"]) == ["no_description", "undocumented"]
    assert "DESCRIPTION must be a non-empty string" in loaded["held_tools"]["no_description"]
    assert "give it a docstring or a description" in loaded["held_tools"]["undocumented"]


def test_strict_mode_refuses_a_plugin_with_a_held_tool(workspace: Path) -> None:
    with pytest.raises(PluginError, match="no_description"):
        aleph.load(plugins=[plugin_module("half_good", HALF_GOOD)], entry_points=False, strict=True)


UNMARKED = """
def aleph_register_tools(register):
    register(aleph.tool(name="never_seen", description="Never registered.", inline=True)(lambda: 1))
"""

POLICY_ONLY = """
@aleph.hookimpl
def aleph_tool_policy(tool):
    return None
"""


def test_a_plugin_registering_nothing_says_why(workspace: Path) -> None:
    rt = aleph.load(
        plugins=[plugin_module("unmarked", UNMARKED), plugin_module("policy_only", POLICY_ONLY)],
        entry_points=False,
        strict=False,
    )
    loaded = {p["name"]: p for p in rt.plugins.report()["loaded"]}
    assert "no @aleph.hookimpl marker found on aleph_register_tools" in loaded["unmarked"]["note"]
    assert loaded["policy_only"]["hooks"] == ["aleph_tool_policy"]
    assert "policy-only" in loaded["policy_only"]["note"]
    assert "no @aleph.hookimpl" not in loaded["policy_only"]["note"]
    assert rt.registry.names() == []


def test_aleph_plugins_and_doctor_name_the_unmarked_and_the_policy_only_plugin(workspace: Path) -> None:
    # The real CLI in a child process; the two plugins are a distribution on its path (metadata + entry points).
    site = workspace / "site"
    site.mkdir()
    (site / "unmarked_plugin.py").write_text("import aleph\n" + UNMARKED)
    (site / "policy_plugin.py").write_text("import aleph\n" + POLICY_ONLY)
    dist = site / "aleph_house_probe-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: aleph-house-probe\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[aleph]\nunmarked = unmarked_plugin\npolicy_only = policy_plugin\n")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(workspace.parent)}
    env.update({k: v for k, v in os.environ.items() if k.startswith("XDG_")})
    listed = subprocess.run(
        [sys.executable, "-m", "aleph", "plugins", "--json"], capture_output=True, text=True, env=env, check=True
    )
    loaded = {p["name"]: p for p in json.loads(listed.stdout)["loaded"]}
    assert "no @aleph.hookimpl marker found" in loaded["unmarked"]["note"]
    assert "policy-only" in loaded["policy_only"]["note"]
    text = subprocess.run([sys.executable, "-m", "aleph", "plugins"], capture_output=True, text=True, env=env)
    assert "unmarked" in text.stdout and "no @aleph.hookimpl marker found" in text.stdout
    doctor = subprocess.run([sys.executable, "-m", "aleph", "doctor"], capture_output=True, text=True, env=env)
    line = next(ln for ln in doctor.stdout.splitlines() if "core.plugins" in ln)
    assert "unmarked registers nothing: no @aleph.hookimpl marker found" in line
    assert "warn" in line.lower()


def test_a_malformed_approval_requester_fails_its_plugin_named(workspace: Path) -> None:
    bad = plugin_module(
        "bad_requester", "@aleph.hookimpl\ndef aleph_approval_requester(config):\n    return 'yes please'\n"
    )
    rt = aleph.load(plugins=[bad], entry_points=False, strict=False)
    (failed,) = rt.plugins.report()["failed"]
    assert failed["name"] == "bad_requester"
    assert "aleph_approval_requester hook returned str" in failed["error"]
    assert rt.chokepoint.default_requester is None


def test_a_malformed_command_rule_fails_its_plugin_named(workspace: Path) -> None:
    bad = plugin_module(
        "bad_rules", "@aleph.hookimpl\ndef aleph_command_policy_rules(register):\n    register(('rm', 'deny'))\n"
    )
    rt = aleph.load(plugins=[bad], entry_points=False, strict=False)
    (failed,) = rt.plugins.report()["failed"]
    assert failed["name"] == "bad_rules"
    assert "aleph_command_policy_rules hook registered tuple" in failed["error"]
