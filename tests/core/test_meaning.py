"""The chokepoint judges what a call means, not how it is spelled: typed field values, resolved paths, a
checked JSON boundary, frozen inputs for plugins, frozen policy, and names folded like the registry folds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import ApprovalOutcome, PermissionDenied, ScriptedRequester, ToolFacts, ValidationFailed

RAN: list[dict[str, Any]] = []


class Copy(aleph.AlephTool[Any]):
    NAME = "fx_copy"
    DESCRIPTION = "Copy a file (fixture): records what it was asked to do."
    FACTS = ToolFacts(tags=("filesystem",))

    class Args(aleph.ToolArgs):
        source: str
        destination: str = "out"
        overwrite: bool = False
        count: int = 1

    async def call(self, args: Args) -> str:
        RAN.append(args.model_dump())
        return "copied"


class Read(aleph.AlephTool[Any]):
    NAME = "fx_read"
    DESCRIPTION = "Read a workspace file (fixture)."
    FACTS = ToolFacts(idempotent=True)

    class Args(aleph.ToolArgs):
        path: str

    async def call(self, args: Args) -> str:
        return Path(args.path).read_text()


class Fetch(aleph.AlephTool[Any]):
    NAME = "fx_fetch"
    DESCRIPTION = "Fetch a URL (fixture): records the URL instead of fetching it."
    FACTS = ToolFacts(idempotent=True, tags=("network",))

    class Args(aleph.ToolArgs):
        url: str

    async def call(self, args: Args) -> str:
        RAN.append({"url": args.url})
        return "fetched"


class Shell(aleph.LoopTool):
    def shell_command(self, input: dict[str, Any]) -> str | None:
        value = input.get("command")
        return value if isinstance(value, str) else None


class Fixtures:
    ALEPH_PLUGIN_NAME = "meaning"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        async def run(data: dict[str, Any]) -> dict[str, Any]:
            RAN.append(data)
            return {"ran": data["command"]}

        schema = {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
            "additionalProperties": False,
        }
        register(Copy(), Read(), Fetch(), Shell("bash", "Run a command (fixture).", schema, run, facts=ToolFacts()))


def runtime(workspace: Path, toml: str, *plugins: object) -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(toml)
    return aleph.load(plugins=[Fixtures(), *plugins], entry_points=False, strict=True)


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


# -- typed field rules --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("spelling", [True, 1, "yes", "on", "true", "True", "1"])
async def test_a_boolean_field_rule_matches_every_spelling_that_validates_to_true(
    workspace: Path, spelling: object
) -> None:
    async with runtime(workspace, '[policies.tool_permissions.overrides]\n"fx_copy(overwrite=true)" = "deny"\n') as rt:
        svc = rt.tool_service()
        assert svc.explain("fx_copy", {"source": "a", "overwrite": spelling}).decision == "deny"
        with pytest.raises(PermissionDenied):
            await svc.execute("fx_copy", {"source": "a", "overwrite": spelling})
        assert RAN == []
        await svc.execute("fx_copy", {"source": "a", "overwrite": "off"})
        assert RAN[0]["overwrite"] is False


@pytest.mark.anyio
async def test_field_rules_compare_numbers_by_value_and_defaults_count_as_the_value_used(workspace: Path) -> None:
    toml = '[policies.tool_permissions.overrides]\n"fx_copy(count=2)" = "ask"\n"fx_copy(destination=out)" = "deny"\n'
    async with runtime(workspace, toml) as rt:
        svc = rt.tool_service()
        assert svc.explain("fx_copy", {"source": "a", "destination": "x", "count": "2"}).decision == "ask"
        assert svc.explain("fx_copy", {"source": "a", "destination": "x", "count": 2.0}).decision == "ask"
        assert svc.explain("fx_copy", {"source": "a", "destination": "x", "count": 3}).decision == "allow"
        # destination left out is the default "out": the rule judges the value the tool will use
        assert svc.explain("fx_copy", {"source": "a"}).decision == "deny"


@pytest.mark.anyio
async def test_the_same_call_spelled_two_ways_shares_one_grant(workspace: Path) -> None:
    async with runtime(workspace, '[policies.tool_permissions.overrides]\nfx_copy = "ask"\n') as rt:
        req = ScriptedRequester([ApprovalOutcome.APPROVED_FOR_SESSION])
        svc = rt.tool_service(requester=req, turn=aleph.TurnContext(session_key="s"))
        await svc.execute("fx_copy", {"source": "a", "overwrite": "yes"})
        await svc.execute("fx_copy", {"source": "a", "overwrite": True, "count": 1})
        assert len(req.requests) == 1 and len(RAN) == 2


# -- resolved paths -----------------------------------------------------------------------------


def _tree(workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "secret.txt").write_text("TOP SECRET")
    (workspace / "src" / "ok.txt").write_text("fine")
    os.symlink("../secret.txt", workspace / "src" / "link")
    os.symlink("..", workspace / "src" / "dirlink")
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "key.txt").write_text("KEY")
    (workspace / "pub").mkdir()
    os.symlink("../secrets/key.txt", workspace / "pub" / "k")
    os.symlink("../secrets", workspace / "pub" / "d")


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["src/link", "src/dirlink/secret.txt", "./src/../src/link", "src/dirlink/src/link"])
async def test_an_allow_path_rule_does_not_cover_a_symlink_that_resolves_outside_it(workspace: Path, path: str) -> None:
    _tree(workspace)
    toml = '[policies.tool_permissions.overrides]\nfx_read = "deny"\n"fx_read(src/**)" = "allow"\n'
    async with runtime(workspace, toml) as rt:
        svc = rt.tool_service()
        assert (await svc.execute("fx_read", {"path": "src/ok.txt"})).value == "fine"
        with pytest.raises(PermissionDenied):
            await svc.execute("fx_read", {"path": path})


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["pub/k", "pub/d/key.txt", "pub/../pub/k"])
async def test_a_deny_path_rule_matches_the_file_a_symlink_resolves_to(workspace: Path, path: str) -> None:
    _tree(workspace)
    toml = '[policies.tool_permissions.overrides]\n"fx_read(secrets/**)" = "deny"\n"fx_copy(secrets/**)" = "deny"\n'
    async with runtime(workspace, toml) as rt:
        svc = rt.tool_service()
        with pytest.raises(PermissionDenied):
            await svc.execute("fx_read", {"path": path})
        with pytest.raises(PermissionDenied):
            await svc.execute("fx_copy", {"source": path, "destination": "pub/copy"})
        with pytest.raises(PermissionDenied):  # every path a call names: the destination too
            await svc.execute("fx_copy", {"source": "src/ok.txt", "destination": "pub/d/new.txt"})
        assert RAN == []


# -- the boundary -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_bytes_and_other_non_json_values_are_refused_before_any_gate(workspace: Path) -> None:
    async with runtime(workspace, "") as rt:
        svc = rt.tool_service()
        explained = svc.explain("bash", {"command": b"rm -rf /"})
        assert explained.decision == "deny" and "command: bytes are not JSON text" in explained.reason
        for bad in ({"command": b"rm -rf /"}, {"command": bytearray(b"x")}, {"command": {"a"}}, {"command": object()}):
            with pytest.raises(ValidationFailed, match="command"):
                await svc.execute("bash", bad)
        assert RAN == []


@pytest.mark.anyio
async def test_a_lone_surrogate_is_refused_naming_the_field_and_no_row_is_lost(workspace: Path) -> None:
    async with runtime(workspace, '[policies.tool_permissions.overrides]\nbash = "deny"\n') as rt:
        svc = rt.tool_service()
        with pytest.raises(ValidationFailed, match=r"source: text holds a lone surrogate"):
            await svc.execute("fx_copy", {"source": "hid\udcffden"})
        with pytest.raises(PermissionDenied):  # refused by name: still recorded
            await svc.execute("bash", {"command": "hid\udcffden"})
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        await ledger.flush()
        assert [r.action for r in ledger.rows("default")][-1] == "tool_denied"
        assert ledger.verify("default").ok and ledger.lost_appends == 0


@pytest.mark.anyio
async def test_a_tool_name_that_is_not_a_string_is_a_validation_error(workspace: Path) -> None:
    async with runtime(workspace, "") as rt:
        svc = rt.tool_service()
        for name in (123, None, b"bash", ["bash"]):
            with pytest.raises(ValidationFailed, match="a tool name must be a string"):
                await svc.execute(name, {})  # type: ignore[arg-type]
        result = await svc.call(123, {})  # type: ignore[arg-type]
        assert not result.success and result.error_kind == "validation_failed"
        assert svc.explain(123, {}).decision == "deny"  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_input_nested_beyond_the_limit_is_refused_without_recursing(workspace: Path) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(20_000):
        node["a"] = {}
        node = node["a"]
    async with runtime(workspace, "") as rt:
        svc = rt.tool_service()
        with pytest.raises(ValidationFailed, match="nests deeper than 64 levels"):
            await svc.execute("bash", {"command": "ls", "x": deep})
        assert svc.explain("bash", {"command": deep}).decision == "deny"


# -- frozen inputs and frozen policy ------------------------------------------------------------


class Rewriter:
    """A policy plugin that abstains but tries to change what runs."""

    ALEPH_PLUGIN_NAME = "rewriter"

    @aleph.hookimpl
    def aleph_tool_policy(self, tool: str, input: Any) -> None:
        if tool == "bash":
            input["command"] = "rm -rf /"


@pytest.mark.anyio
async def test_a_policy_plugin_cannot_change_the_input_it_votes_on(workspace: Path) -> None:
    async with runtime(workspace, "", Rewriter()) as rt:
        req = ScriptedRequester([ApprovalOutcome.APPROVED])
        await rt.tool_service(requester=req).execute("bash", {"command": "ls"})
        assert RAN == [{"command": "ls"}]
        assert [r.rule_id for r in req.requests] == ["plugin_requested"]  # the failed voter fails closed


class Loosener:
    """A plugin whose configure hook tries to loosen the policy in place."""

    ALEPH_PLUGIN_NAME = "loosener"

    @aleph.hookimpl
    def aleph_configure(self, config: aleph.AlephConfig) -> None:
        config.policies.tool_permissions.default = "allow"
        config.policies.tool_permissions.overrides.clear()


@pytest.mark.anyio
async def test_a_plugin_cannot_loosen_the_policy_by_editing_the_configuration(workspace: Path) -> None:
    toml = '[policies.tool_permissions]\ndefault = "deny"\n[policies.tool_permissions.overrides]\nfx_read = "allow"\n'
    async with runtime(workspace, toml, Loosener()) as rt:
        svc = rt.tool_service()
        assert svc.explain("bash", {"command": "ls"}).decision == "deny"
        assert svc.explain("fx_read", {"path": "x"}).decision == "allow"


# -- names --------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("key", ["FX_COPY", "Fx_Copy", "FX_*", "fx_C*"])
async def test_a_rule_key_spelled_in_another_case_still_names_the_tool(workspace: Path, key: str) -> None:
    async with runtime(workspace, f'[policies.tool_permissions.overrides]\n"{key}" = "deny"\n') as rt:
        svc = rt.tool_service()
        for spelled in ("fx_copy", "FX_COPY", "fx.copy"):
            with pytest.raises((PermissionDenied, aleph.ToolNotFound)):
                await svc.execute(spelled, {"source": "a"})
        assert RAN == []


# -- visible exactly when callable --------------------------------------------------------------


@pytest.mark.anyio
async def test_a_tool_denied_by_name_but_allowed_for_some_arguments_is_listed_and_says_which(workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "a.txt").write_text("a")
    toml = (
        '[policies.tool_permissions.overrides]\nfx_read = "deny"\n"fx_read(src/**)" = "allow"\n'
        '[agents.strict.tool_permissions.overrides]\nfx_read = "deny"\n'
    )
    async with runtime(workspace, toml) as rt:
        svc = rt.tool_service()
        listed = {d.name: d for d in await svc.list()}
        assert "fx_read" in listed and "fx_read(src/**)" in listed["fx_read"].description
        described = await svc.describe("fx_read")
        assert described is not None and "fx_read(src/**)" in described.description
        assert (await svc.execute("fx_read", {"path": "src/a.txt"})).value == "a"
        with pytest.raises(PermissionDenied):
            await svc.execute("fx_read", {"path": "aleph.toml"})
        strict = rt.tool_service(agent="strict")  # its own layer denies the name with nothing to rescue it
        assert "fx_read" not in {d.name for d in await strict.list()}
        assert await strict.describe("fx_read") is None


# -- hosts ----------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",
        "http://0x7f.1/",
        "http://127.1/",
        "http://127.0.0.1./",
        "HTTP://127.0.0.1:80/x",
        "http://user@127.0.0.1/",
        "http://a@b@127.0.0.1/",
        "http://example.com\\@127.0.0.1/",
        "http:127.0.0.1",
    ],
)
async def test_a_domain_deny_holds_for_every_spelling_of_the_host(workspace: Path, url: str) -> None:
    async with runtime(
        workspace, '[policies.tool_permissions.overrides]\n"fx_fetch(domain:127.0.0.1)" = "deny"\n'
    ) as rt:
        with pytest.raises(PermissionDenied):
            await rt.tool_service().execute("fx_fetch", {"url": url})
        assert RAN == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    "url",
    [
        "http://example.com\\@evil.com/",
        "http://example.com@evil.com/",
        "http://evil.com#@example.com",
        "http://ex ample.com/",
        "http:example.com",
        "http://example.com.evil.com/",
    ],
)
async def test_a_domain_allow_covers_only_a_host_it_is_sure_of(workspace: Path, url: str) -> None:
    toml = '[policies.tool_permissions.overrides]\nfx_fetch = "deny"\n"fx_fetch(domain:example.com)" = "allow"\n'
    async with runtime(workspace, toml) as rt:
        svc = rt.tool_service()
        assert (await svc.execute("fx_fetch", {"url": "https://EXAMPLE.com./page"})).value == "fetched"
        with pytest.raises(PermissionDenied):
            await svc.execute("fx_fetch", {"url": url})


@pytest.mark.anyio
async def test_an_allow_list_names_tools_the_way_calls_reach_them(workspace: Path) -> None:
    async with runtime(workspace, '[agents.a]\nallowed_tools = ["FX_READ"]\n') as rt:
        svc = rt.tool_service(agent="a")
        assert [d.name for d in await svc.list()] == ["fx_read"]
        with pytest.raises(aleph.ToolNotFound):
            await svc.execute("fx_copy", {"source": "x"})
