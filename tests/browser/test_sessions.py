"""Sessions, profiles, idle close, a missing browser, declared facts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import aleph
from aleph._turn import _TURN, TurnContext

pytestmark = pytest.mark.anyio


@contextlib.contextmanager
def turn(session_key: str) -> Iterator[None]:
    token = _TURN.set(TurnContext(session_key=session_key))
    try:
        yield
    finally:
        _TURN.reset(token)


async def test_two_agent_sessions_never_see_each_others_tabs(call: Any, site: Any) -> None:
    with turn("alice"):
        await call("browser_open", {"url": site.url("/form"), "snapshot": "none"})
        alice = await call("browser_tabs", {})
    with turn("bob"):
        await call("browser_open", {"url": site.url("/dialogs"), "snapshot": "none"})
        bob = await call("browser_tabs", {})
        info = await call("browser_session", {})
    assert [t["url"] for t in alice["tabs"]] == [site.url("/form")]
    assert [t["url"] for t in bob["tabs"]] == [site.url("/dialogs")]
    assert info["session"] == "bob"
    with turn("alice"):
        await call(
            "browser_cookies", {"action": "set", "cookies": [{"name": "who", "value": "alice", "url": site.url("/")}]}
        )
        assert (await call("browser_snapshot", {})).startswith(f"Page: {site.url('/form')}")
    with turn("bob"):
        assert (await call("browser_cookies", {"action": "get"}))["cookies"] == []
        reset = await call("browser_session", {"action": "reset"})
        assert reset["closed"] is True
    with turn("alice"):
        assert [t["url"] for t in (await call("browser_tabs", {}))["tabs"]] == [site.url("/form")]


async def test_missing_browser_says_what_to_install(make_rt: Any, tmp_path: Path) -> None:
    async with make_rt(tmp_path, 'executable = "/nonexistent"') as rt:
        service = aleph.UnscopedToolService(rt.registry)
        result = await service.call("browser_open", {"url": "about:blank"})
    assert result.success is False
    assert result.error is not None and "browser not available" in result.error
    assert "apt-get install chromium" in result.error


async def test_browser_closes_when_idle_and_relaunches_on_next_use(make_rt: Any, tmp_path: Path, site: Any) -> None:
    async with make_rt(tmp_path, f'idle_timeout_seconds = 0.5\nallowed_origins = ["{site.origin}"]') as rt:
        service = aleph.UnscopedToolService(rt.registry)
        manager = rt.registry.get("browser_open").tool.manager  # type: ignore[union-attr]
        await service.execute("browser_open", {"url": site.url("/form"), "snapshot": "none"})
        assert manager.running
        with anyio.fail_after(30):
            while manager.running:
                await anyio.sleep(0.1)
        out = (await service.execute("browser_open", {"url": site.url("/form"), "snapshot": "none"})).value
        assert "Navigated" in out
        assert "The browser had closed after 0.5 s without use" in out
        assert manager.launches == 2


async def test_named_profile_keeps_cookies_across_restarts(make_rt: Any, tmp_path: Path, site: Any) -> None:
    cookie = {"name": "keep", "value": "me", "url": site.url("/"), "expires": 4_000_000_000}
    for round_ in range(2):
        async with make_rt(tmp_path, f'allowed_origins = ["{site.origin}"]') as rt:
            service = aleph.UnscopedToolService(rt.registry)
            used = (await service.execute("browser_profile", {"action": "use", "name": "work"})).value
            assert used["session_profile"] == "work"
            await service.execute("browser_open", {"url": site.url("/form"), "snapshot": "none"})
            if round_ == 0:
                await service.execute("browser_cookies", {"action": "set", "cookies": [cookie]})
            else:
                got = (await service.execute("browser_cookies", {"action": "get"})).value
                assert [(c["name"], c["value"]) for c in got["cookies"]] == [("keep", "me")]
    assert (tmp_path / ".aleph-data" / "browser" / "profiles" / "work").is_dir()


async def test_profile_names_are_validated_and_in_use_profiles_are_not_deleted(
    make_rt: Any, tmp_path: Path, site: Any
) -> None:
    async with make_rt(tmp_path, f'allowed_origins = ["{site.origin}"]') as rt:
        service = aleph.UnscopedToolService(rt.registry)
        with pytest.raises(aleph.ExecutionFailed, match="bad profile name"):
            await service.execute("browser_profile", {"action": "create", "name": "../etc"})
        await service.execute("browser_profile", {"action": "use", "name": "p1"})
        await service.execute("browser_open", {"url": site.url("/form"), "snapshot": "none"})
        with turn("other"), pytest.raises(aleph.ExecutionFailed, match="in use by another session"):
            await service.execute("browser_profile", {"action": "use", "name": "p1"})
        with pytest.raises(aleph.ExecutionFailed, match="is open in a session"):
            await service.execute("browser_profile", {"action": "delete", "name": "p1"})
        await service.execute("browser_profile", {"action": "ephemeral"})
        listing = (await service.execute("browser_profile", {"action": "delete", "name": "p1"})).value
        assert listing["profiles"] == []


def test_evaluate_requires_approval_by_default_and_is_configurable(make_rt: Any, tmp_path: Path) -> None:
    rt = make_rt(tmp_path, "")
    assert rt.registry.get("browser_evaluate").facts.requires_approval is True
    assert rt.registry.get("browser_evaluate").definition.facts.requires_approval is True
    (tmp_path / "off").mkdir()
    rt2 = make_rt(tmp_path / "off", "evaluate_requires_approval = false")
    assert rt2.registry.get("browser_evaluate").facts.requires_approval is False


def test_read_tools_are_idempotent_and_mixed_ones_are_not(make_rt: Any, tmp_path: Path) -> None:
    rt = make_rt(tmp_path, "")
    facts = {entry.name: entry.facts for entry in rt.registry}
    assert len(facts) == 26
    for name in ("browser_snapshot", "browser_console", "browser_network", "browser_wait_for"):
        assert facts[name].idempotent, name
    for name in ("browser_tabs", "browser_cookies", "browser_click", "browser_navigate", "browser_screenshot"):
        assert not facts[name].idempotent, name


async def test_profiles_and_the_default_session_are_each_agents_own(make_rt: Any, tmp_path: Path, site: Any) -> None:
    cookie = {"name": "bank", "value": "alice-token", "url": site.url("/"), "expires": 4_000_000_000}
    async with make_rt(tmp_path, f'allowed_origins = ["{site.origin}"]') as rt:
        alice, mallory = rt.tool_service(agent="alice"), rt.tool_service(agent="mallory")
        used = (await alice.execute("browser_profile", {"action": "use", "name": "bank"})).value
        assert used["session_profile"] == "bank" and used["in_use"] == {}
        await alice.execute("browser_open", {"url": site.url("/form"), "snapshot": "none"})
        await alice.execute("browser_cookies", {"action": "set", "cookies": [cookie]})
        listed = (await mallory.execute("browser_profile", {"action": "list"})).value
        assert listed["profiles"] == [] and listed["in_use"] == {}
        # mallory's "bank" is a profile of her own: empty, and not "in use" by alice's session
        await mallory.execute("browser_profile", {"action": "use", "name": "bank"})
        await mallory.execute("browser_open", {"url": site.url("/form"), "snapshot": "none"})
        assert (await mallory.execute("browser_cookies", {"action": "get"})).value["cookies"] == []
        with pytest.raises(aleph.ExecutionFailed, match="is open in a session"):
            await mallory.execute("browser_profile", {"action": "delete", "name": "bank"})  # her own, open
        await alice.execute("browser_profile", {"action": "ephemeral"})
        await mallory.execute("browser_profile", {"action": "ephemeral"})
        # without a session key, each agent still has its own default session
        await alice.execute("browser_cookies", {"action": "set", "cookies": [{**cookie, "name": "eph"}]})
        assert (await mallory.execute("browser_cookies", {"action": "get"})).value["cookies"] == []
        info = (await mallory.execute("browser_session", {})).value
        assert info["session"] == "default:mallory"
    assert (tmp_path / ".aleph-data" / "browser" / "profiles" / ".agents").is_dir()
