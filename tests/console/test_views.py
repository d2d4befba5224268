"""What the console's pages show, in a real Chromium: cards say what a call would do (a changeset, a
permission diff, else the arguments), the ledger shows each row's verification, each chain's checkpoint
and a timeline, and explain lists every rule in force with where it came from. Markup from a tool, an
argument or a rule stays text on every page."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

import aleph
from aleph._console import Console

from .conftest import until

pytestmark = pytest.mark.anyio

XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
CONFIG = """
[ledger]
checkpoint_every = 4

[policies.tool_permissions.overrides]
deploy = "ask"
exec_commit = "ask"
self_config = "ask"
publish = "allow"
"deploy(<img src=x onerror=window.__xss=3>)" = "deny"

[agents.ops.tool_permissions.overrides]
publish = "ask"

[agents.helper.tool_permissions.overrides]
bash = "ask"

[channels.chat.tool_permissions]
default = "ask"

[agents.guest.tool_permissions.overrides]
deploy = "deny"
"""


class Plugin:
    ALEPH_PLUGIN_NAME = "views_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        @aleph.tool
        def deploy(target: str) -> str:
            """Deploy (fixture)."""
            return f"deployed {target}"

        @aleph.tool
        def publish(text: str) -> str:
            """Publish (fixture): fails with the text it was given, as a tool's error may."""
            raise aleph.ExecutionFailed("publish", f"could not publish {text}")

        @aleph.tool
        def exec_commit(
            tool: str, about: str, created: int, modified: int, deleted: int, top_dirs: list[str], network: bool
        ) -> str:
            """The approval of a changeset (fixture, the shape aleph-exec asks with)."""
            return "committed"

        @aleph.tool
        def self_config(action: str, config_path: str, value: Any) -> str:
            """Change the configuration (fixture: the shape aleph-admin's tool takes; changes nothing)."""
            return "changed"

        register(deploy)
        register(publish)
        register(exec_commit)
        register(self_config)

    @aleph.hookimpl
    def aleph_tool_policy(
        self, tool: str, input: Any, facts: Any, source: Any, turn: Any, agent: Any, channel: Any
    ) -> Any:
        return None


@pytest.fixture
async def rt(workspace: Path) -> AsyncIterator[aleph.Aleph]:
    (workspace / "aleph.toml").write_text(CONFIG)
    async with aleph.load(plugins=[Plugin()], entry_points=False, strict=True) as runtime:
        yield runtime


@pytest.fixture
async def console(rt: aleph.Aleph) -> AsyncIterator[Console]:
    con = Console(rt, timeout_s=60)
    await con.start()
    yield con
    await con.stop()


def url(console: Console, path: str, **query: str) -> str:
    return f"http://127.0.0.1:{console.port}{path}?{urlencode({'token': console.token, **query})}"


async def ask(rt: aleph.Aleph, console: Console, tool: str, arguments: dict[str, Any]) -> asyncio.Task[Any]:
    task = asyncio.create_task(rt.tool_service(agent="ops", requester=console.inbox).execute(tool, arguments))
    while not console.inbox.pending():
        await console.inbox.changed.wait()
    return task


async def refuse_all(console: Console, *tasks: asyncio.Task[Any]) -> None:
    for pending in console.inbox.pending():
        console.inbox.answer(pending.id, "deny")
    for task in tasks:
        with pytest.raises(aleph.ApprovalDenied):
            await task


async def test_a_changeset_card_shows_what_the_command_would_change(
    rt: aleph.Aleph, console: Console, page: Any
) -> None:
    arguments = {
        "tool": "bash",
        "about": f"deletes 1,204 files under src/ {XSS}",
        "created": 3,
        "modified": 2,
        "deleted": 1204,
        "top_dirs": ["src/", "docs/"],
        "network": True,
    }
    task = await ask(rt, console, "exec_commit", arguments)
    assert len(console.cards()) == 1  # the console's own inbox: not offered to the shared one as well
    await page.goto(console.url)
    card = page.locator("section.ask .changeset")
    shown = await card.inner_text()
    assert "Changeset of bash" in shown
    assert "created: 3" in shown and "modified: 2" in shown and "deleted: 1204" in shown
    assert "network: used" in shown and "src/, docs/" in shown
    assert "<script>" in shown and await page.evaluate("window.__xss") is None
    await refuse_all(console, task)


async def test_a_permission_change_card_shows_the_diff_against_what_is_in_force(
    rt: aleph.Aleph, console: Console, page: Any
) -> None:
    change = {"bash": "allow", "file_write": "allow"}
    task = await ask(
        rt,
        console,
        "self_config",
        {"action": "update_config", "config_path": "agents.helper.tool_permissions.overrides", "value": change},
    )
    await page.goto(console.url)
    rows = await page.locator("section.ask .diff tr").all_inner_texts()
    assert 'agents.helper.tool_permissions.overrides.bash\t"ask"\t"allow"' in rows
    assert 'agents.helper.tool_permissions.overrides.file_write\t(unset)\t"allow"' in rows
    await refuse_all(console, task)


async def test_an_ask_from_another_process_carries_its_diff_to_the_console(workspace: Path) -> None:
    (workspace / "aleph.toml").write_text(CONFIG + "\n[console]\ninbox = true\n")
    async with aleph.load(plugins=[Plugin()], entry_points=False, strict=True) as asking:
        value = {"action": "update_config", "config_path": "agents.helper.tool_permissions.overrides.bash"}
        task = asyncio.create_task(asking.tool_service().execute("self_config", {**value, "value": "allow"}))
        async with aleph.load(plugins=[Plugin()], entry_points=False, strict=True) as other:
            console = Console(other)
            cards = await until(console.cards, "the ask in the shared inbox")
            assert cards[0].preview is not None
            assert cards[0].preview["changes"] == [
                {"key": "agents.helper.tool_permissions.overrides.bash", "before": '"ask"', "after": '"allow"'}
            ]
            console.answer(cards[0].id, "deny")
        with pytest.raises(aleph.ApprovalDenied):
            await task


async def test_any_other_card_shows_its_arguments_escaped_and_clipped(
    rt: aleph.Aleph, console: Console, page: Any
) -> None:
    task = await ask(rt, console, "deploy", {"target": XSS + "x" * 10_000})
    await page.goto(console.url)
    shown = await page.inner_text("section.ask pre.args")
    assert "<script>" in shown and shown.endswith("… (cut)") and len(shown) < 5_000
    assert await page.locator("section.ask img").count() == 0
    await refuse_all(console, task)


async def calls(rt: aleph.Aleph) -> None:
    """A few calls by three principals: allowed, asked (approved and refused), denied, failed."""
    yes = aleph.ScriptedRequester([aleph.ApprovalOutcome.APPROVED])
    await rt.tool_service(agent="ops", requester=yes).execute("deploy", {"target": "a"})
    with pytest.raises(aleph.PermissionDenied):
        await rt.tool_service(agent="guest").execute("deploy", {"target": "b"})
    with pytest.raises(aleph.ExecutionFailed):
        await rt.tool_service(agent="writer").execute("publish", {"text": XSS})
    no = aleph.ScriptedRequester([aleph.ApprovalOutcome.DENIED])
    with pytest.raises(aleph.ApprovalDenied):
        await rt.tool_service(agent="ops", requester=no).execute("deploy", {"target": "c"})
    ledger = rt.chokepoint.ledger
    assert ledger is not None
    await ledger.flush()


async def test_each_row_shows_its_verification_and_each_chain_its_checkpoint(
    rt: aleph.Aleph, console: Console, page: Any
) -> None:
    await calls(rt)
    await page.goto(url(console, "/ledger"))
    chains = await page.inner_text("#chains")
    assert "ops" in chains and "verified" in chains and "matches the chain" in chains
    states = await page.locator("#rows td.state").all_inner_texts()
    assert states and set(states) <= {"checkpointed", "verified"} and "checkpointed" in states
    # An edited row fails verification there, and nothing after it can be vouched for.
    ledger = rt.chokepoint.ledger
    assert ledger is not None
    chain = next(p for p in ledger.chains_dir.glob("*.jsonl") if not p.name.endswith(".ckpt.jsonl") and "ops" in p.name)
    lines = chain.read_text().splitlines()
    row = json.loads(lines[1])
    row["detail"] = "nothing happened here"
    lines[1] = json.dumps(row)
    chain.write_text("\n".join(lines) + "\n")
    await page.goto(url(console, "/ledger", agent="ops"))
    assert "FAILED" in await page.inner_text("#chains")
    states = await page.locator("#rows td.state").all_inner_texts()
    assert "FAILED" in states and "unverifiable" in states and "checkpointed" not in states


async def test_the_timeline_draws_a_lane_per_principal_coloured_by_decision(
    rt: aleph.Aleph, console: Console, page: Any
) -> None:
    await calls(rt)
    await page.goto(url(console, "/ledger"))
    lanes = await page.locator("#timeline text.lane").evaluate_all("ts => ts.map(t => t.textContent)")
    assert {"ops", "guest", "writer"} <= set(lanes)
    decisions = await page.locator("#timeline circle").evaluate_all("cs => cs.map(c => c.dataset.decision)")
    assert {"allow", "ask", "deny", "error"} <= set(decisions)
    titles = await page.locator("#timeline circle title").evaluate_all("ts => ts.map(t => t.textContent)")
    assert any("could not publish <img" in t for t in titles)
    assert await page.evaluate("window.__xss") is None


async def test_the_ledger_filters_by_decision_principal_and_time(rt: aleph.Aleph, console: Console, page: Any) -> None:
    await calls(rt)
    await page.goto(url(console, "/ledger", decision="deny"))
    shown = await page.locator("#rows tr[data-decision]").evaluate_all("rs => rs.map(r => r.dataset.decision)")
    assert shown and set(shown) == {"deny"}
    await page.goto(url(console, "/ledger", principal="writer"))
    assert set(await page.locator("#rows tr[data-decision] td:nth-child(2)").all_inner_texts()) == {"writer"}
    await page.goto(url(console, "/ledger", since="2999-01-01T00:00"))
    assert await page.locator("#rows tr[data-decision]").count() == 0
    assert await page.locator("#timeline-empty").count() == 1
    await page.goto(url(console, "/ledger", since="yesterday<script>"))
    assert "since must be a date and time" in await page.inner_text("[role=alert]")


async def test_explain_lists_every_rule_in_force_with_where_it_came_from(
    rt: aleph.Aleph, console: Console, workspace: Path, page: Any
) -> None:
    managed = rt.config.managed_file
    managed.parent.mkdir(parents=True, exist_ok=True)
    managed.write_text('[agents.ops.tool_permissions.overrides]\nexec_commit = "deny"\n')
    os.chmod(managed, 0o600)
    rt.reload_config()
    request = json.dumps({"overrides": {"deploy(prod)": "deny"}})
    await page.goto(
        url(console, "/explain", tool="deploy", agent="ops", channel="chat", input='{"target": "x"}', request=request)
    )
    rows = [r.split("\t") for r in await page.locator("#rules tr[data-kind]").all_inner_texts()]
    by_rule = {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}
    project = str(workspace / "aleph.toml")
    assert by_rule[("global", "deploy")] == ("ask", "project file", project)
    assert by_rule[("agent:ops", "publish")] == ("ask", "project file", project)
    assert by_rule[("agent:ops", "exec_commit")] == ("deny", "managed config", str(managed))
    assert by_rule[("channel:chat", "(default)")] == ("ask", "project file", project)
    assert by_rule[("request", "deploy(prod)")][:2] == ("deny", "per-request")
    assert by_rule[("plugin", "(votes on every call)")] == ("ask/deny only", "plugin", "views_fixture")
    assert ("agent:helper", "bash") not in by_rule  # another agent's layer does not judge this call
    assert "deploy(<img src=x onerror=window.__xss=3>)" in await page.inner_text("#rules")
    assert await page.evaluate("window.__xss") is None
    assert "ask" in await page.inner_text("#explain")
    await page.goto(url(console, "/explain", tool="deploy", request="[1]"))
    assert "the request layer is not a JSON object" in await page.inner_text("[role=alert]")
