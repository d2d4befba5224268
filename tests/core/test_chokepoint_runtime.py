"""The chokepoint as `aleph.load()` wires it: config layers, the command-policy floor, argument rules, ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import ApprovalOutcome, ApprovalUnavailable, PermissionDenied, ScriptedRequester, ToolFacts


class ShellLike:
    """A plugin with a shell-class tool: it reports the command it was given instead of running it."""

    ALEPH_PLUGIN_NAME = "shell_fixture"

    class Bash(aleph.LoopTool):
        def shell_command(self, input: dict[str, Any]) -> str | None:
            command = input.get("command")
            return command if isinstance(command, str) else None

        def uncontained(self, input: dict[str, Any]) -> str | None:
            return None  # stands for a tool whose calls run as transactions

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        async def run(data: dict[str, Any]) -> dict[str, Any]:
            return {"ran": data["command"]}

        schema = {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
            "additionalProperties": False,
        }
        register(self.Bash("bash", "Run a shell command (fixture).", schema, run, facts=ToolFacts(tags=("exec",))))


def runtime(workspace: Path, toml: str) -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(toml)
    return aleph.load(plugins=[ShellLike()], entry_points=False, strict=True)


BASH_RULES = """
[policies.tool_permissions.overrides]
bash = "ask"
"bash(git status)" = "allow"
"bash(git log *)" = "allow"
"bash(curl *)" = "deny"
"""


@pytest.mark.anyio
async def test_command_allow_rule_covers_only_commands_it_fully_matches(workspace: Path) -> None:
    async with runtime(workspace, BASH_RULES) as rt:
        req = ScriptedRequester([ApprovalOutcome.APPROVED] * 5)
        svc = rt.tool_service(requester=req)
        assert (await svc.execute("bash", {"command": "git status"})).value == {"ran": "git status"}
        assert (await svc.execute("bash", {"command": "git log --oneline | git status"})).value["ran"]
        assert req.requests == []
        await svc.execute("bash", {"command": "git status && make"})
        assert len(req.requests) == 1
        with pytest.raises(PermissionDenied, match="bash\\(curl \\*\\)"):
            await svc.execute("bash", {"command": "git status; env FOO=1 /usr/bin/curl https://x"})


@pytest.mark.anyio
async def test_an_opaque_command_is_never_auto_allowed_even_by_a_blanket_allow(workspace: Path) -> None:
    async with runtime(
        workspace, '[policies]\nexec_tier = "full"\n[policies.tool_permissions.overrides]\nbash = "allow"\n'
    ) as rt:
        svc = rt.tool_service()
        explanation = svc.explain("bash", {"command": "$TOOL --version"})
        assert (explanation.decision, explanation.rule_id) == ("ask", "command_policy")
        with pytest.raises(ApprovalUnavailable, match="No approval channel is available"):
            await svc.execute("bash", {"command": 'eval "$PAYLOAD"'})


@pytest.mark.anyio
@pytest.mark.parametrize(
    "command", ["rm -rf /", "r''m -rf /*", "echo ok; :(){ :|:& };:", "sudo dd if=/dev/zero of=/dev/sda"]
)
async def test_hardline_commands_are_blocked_under_full_with_allow_and_the_floor_disabled(
    workspace: Path,
    command: str,
) -> None:
    toml = (
        '[policies]\nexec_tier = "full"\n[policies.tool_permissions.overrides]\nbash = "allow"\n'
        '[sandbox.command_policy]\nenabled = false\nenforcement = "off"\n'
    )
    async with runtime(workspace, toml) as rt:
        with pytest.raises(PermissionDenied) as info:
            await rt.tool_service().execute("bash", {"command": command})
        assert "blocked by command policy" in str(info.value)


@pytest.mark.anyio
async def test_refusals_land_in_the_signed_ledger_of_the_agent(workspace: Path) -> None:
    async with runtime(workspace, BASH_RULES) as rt:
        with pytest.raises(PermissionDenied):
            await rt.tool_service(agent="ana").execute("bash", {"command": "curl x"})
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        await ledger.flush()
        rows = ledger.rows("ana")
        assert [(r.action, r.target, r.outcome) for r in rows[1:]] == [("tool_denied", "bash", "denied")]
        assert ledger.verify("ana").ok


def test_a_bad_rule_in_an_agent_layer_fails_at_load_naming_it(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text('[agents.ana.tool_permissions.overrides]\n"web_fetch(domain:)" = "allow"\n')
    with pytest.raises(aleph.ConfigError) as info:
        aleph.load(entry_points=False)
    assert "agents.ana.tool_permissions" in str(info.value) and "web_fetch(domain:)" in str(info.value)


@pytest.mark.anyio
async def test_a_malformed_request_layer_denies_everything(workspace: Path) -> None:
    async with runtime(workspace, "") as rt:
        svc = rt.tool_service(channel_permissions={"default": "sometimes"})
        assert await svc.list() == []
        with pytest.raises(PermissionDenied, match="malformed"):
            await svc.execute("bash", {"command": "ls"})


@pytest.mark.anyio
async def test_guest_channels_are_clamped_to_auto(workspace: Path) -> None:
    toml = '[policies]\nexec_tier = "full"\n[channels.public]\nrole = "guest"\n'
    async with runtime(workspace, toml) as rt:
        assert rt.tool_service(channel="public").tier.id == "auto"
        assert rt.tool_service(channel="public", tier="full").tier.id == "auto"
        assert rt.tool_service().tier.id == "full"


def test_a_plugin_with_a_broken_command_rule_fails_alone(workspace: Path) -> None:
    class BadRules:
        ALEPH_PLUGIN_NAME = "bad_rules"

        @aleph.hookimpl
        def aleph_command_policy_rules(self, register: Any) -> None:
            register(aleph.CommandRule(name="custom_x", regex="(unclosed"))

        @aleph.hookimpl
        def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
            register(aleph.tool(name="bad_tool", description="Belongs to the broken plugin.", inline=True)(lambda: 1))

    rt = aleph.load(plugins=[ShellLike(), BadRules()], entry_points=False, strict=False)
    assert "bad_tool" not in rt.registry.names() and "bash" in rt.registry.names()
    assert [f["name"] for f in rt.plugins.report()["failed"]] == ["bad_rules"]


@pytest.mark.anyio
async def test_a_remembered_shell_verdict_follows_the_command_the_tier_and_the_turn(workspace: Path) -> None:
    # No rule names bash: only the command policy's verdict on the text varies from call to call,
    # so the chokepoint decides once per such verdict. Each call must still get its own.
    async with runtime(workspace, "") as rt:
        full = rt.tool_service(tier="full")
        ask = rt.tool_service(tier="ask")
        for _ in range(2):
            assert full.explain("bash", {"command": "true"}).rule_id == "allowed"
            assert full.explain("bash", {"command": "rm -rf /"}).rule_id == "command_blocked"
            assert full.explain("bash", {"command": "$TOOL --version"}).rule_id == "command_policy"
            assert ask.explain("bash", {"command": "true"}).rule_id == "tier_raised"
            for turn, rule_id in (
                (aleph.TurnContext(session_key="q", side_question=True), "side_question"),
                (aleph.TurnContext(session_key="p", plan_mode=True), "plan_mode"),
            ):
                assert rt.tool_service(tier="full", turn=turn).explain("bash", {"command": "true"}).rule_id == rule_id
        assert (await full.execute("bash", {"command": "true"})).value == {"ran": "true"}
        with pytest.raises(PermissionDenied, match="blocked by command policy"):
            await full.execute("bash", {"command": "rm -rf /"})
