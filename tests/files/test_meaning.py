"""The file tools under the real chokepoint: rules judge the files a call will really touch, typed values,
each action of a batch, every redirect hop, and what a listing or search may show."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import aleph
from aleph import ApprovalOutcome, PermissionDenied, ScriptedRequester

from .conftest import make_runtime
from .servers import serve


def tree(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "ok.txt").write_text("fine\n")
    (ws / "secret.txt").write_text("TOP SECRET\n")
    os.symlink("../secret.txt", ws / "src" / "link")
    os.symlink("..", ws / "src" / "up")
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key.txt").write_text("KEY=hunter2\n")
    (ws / "pub").mkdir()
    (ws / "pub" / "note.txt").write_text("KEY=public\n")
    os.symlink("../secrets/key.txt", ws / "pub" / "k")


DENY_SECRETS = """
[policies.tool_permissions.overrides]
"file_read(secrets/**)" = "deny"
"file_ops(secrets/**)" = "deny"
"apply_patch(secrets/**)" = "deny"
"""


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["src/link", "src/up/secret.txt", "src/up/src/link"])
async def test_reading_through_a_symlink_out_of_an_allowed_tree_is_refused(workspace: Path, path: str) -> None:
    tree(workspace)
    toml = '[policies.tool_permissions.overrides]\nfile_read = "deny"\n"file_read(src/**)" = "allow"\n'
    async with make_runtime(workspace, toml) as rt:
        svc = rt.tool_service()
        assert "fine" in (await svc.execute("file_read", {"path": "src/ok.txt"})).text
        with pytest.raises(PermissionDenied):
            await svc.execute("file_read", {"path": path})


@pytest.mark.anyio
async def test_a_denied_tree_stays_denied_through_a_symlink_for_read_copy_and_patch(workspace: Path) -> None:
    tree(workspace)
    async with make_runtime(workspace, DENY_SECRETS) as rt:
        svc = rt.tool_service()
        with pytest.raises(PermissionDenied):
            await svc.execute("file_read", {"path": "pub/k"})
        with pytest.raises(PermissionDenied):
            await svc.execute("file_ops", {"operation": "copy", "path": "pub/k", "destination": "pub/copy.txt"})
        patch = "*** Begin Patch\n*** Update File: pub/k\n@@\n-KEY=hunter2\n+KEY=owned\n*** End Patch"
        with pytest.raises(PermissionDenied):
            await svc.execute("apply_patch", {"patch": patch})
    assert (workspace / "secrets" / "key.txt").read_text() == "KEY=hunter2\n"
    assert not (workspace / "pub" / "copy.txt").exists()


@pytest.mark.anyio
async def test_listing_and_searching_from_the_root_show_nothing_of_a_denied_tree(workspace: Path) -> None:
    tree(workspace)
    async with make_runtime(workspace, DENY_SECRETS) as rt:
        svc = rt.tool_service()
        listed = json.loads((await svc.execute("file_ops", {"operation": "list", "path": ".", "recursive": True})).text)
        names = [e["path"] for e in listed["entries"]]
        assert "src/ok.txt" in names and "pub/note.txt" in names
        assert not [n for n in names if n.startswith("secrets/") or n == "pub/k"]
        found = json.loads(
            (await svc.execute("file_ops", {"operation": "search", "path": ".", "content_regex": "KEY="})).text
        )
        assert [m["path"] for m in found["matches"]] == ["pub/note.txt"]
        by_name = json.loads((await svc.execute("file_ops", {"operation": "search", "pattern": "*.txt"})).text)
        assert not [m for m in by_name["matches"] if "key" in m["path"]]


@pytest.mark.anyio
@pytest.mark.parametrize("spelling", [True, 1, "yes", "on"])
async def test_an_overwrite_rule_and_the_auto_tier_see_every_spelling_of_true(
    workspace: Path, spelling: object
) -> None:
    (workspace / "a.txt").write_text("a")
    (workspace / "b.txt").write_text("b")
    copy = {"operation": "copy", "path": "a.txt", "destination": "b.txt", "overwrite": spelling}
    toml = '[policies.tool_permissions.overrides]\n"file_ops(overwrite=true)" = "deny"\n'
    async with make_runtime(workspace, toml) as rt:
        with pytest.raises(PermissionDenied):
            await rt.tool_service().execute("file_ops", copy)
    async with make_runtime(workspace, "") as rt:
        explained = rt.tool_service(tier="auto").explain("file_ops", copy)
        assert (explained.decision, explained.rule_id) == ("ask", "destructive_arguments")
    assert (workspace / "b.txt").read_text() == "b"


@pytest.mark.anyio
async def test_each_move_of_a_batch_is_judged_as_a_move_before_any_runs(workspace: Path) -> None:
    for name in ("one", "two"):
        (workspace / name).write_text(name)
    (workspace / "secrets").mkdir()
    moves = [{"source": "one", "destination": "uno"}, {"source": "two", "destination": "secrets/two"}]
    batch = {"operation": "batch_move", "moves": moves}
    async with make_runtime(
        workspace, '[policies.tool_permissions.overrides]\n"file_ops(secrets/**)" = "deny"\n'
    ) as rt:
        svc = rt.tool_service(tier="full")
        assert svc.explain("file_ops", batch).decision == "deny"
        with pytest.raises(PermissionDenied, match=r"secrets/\*\*"):
            await svc.execute("file_ops", batch)
    assert (workspace / "one").exists() and not (workspace / "uno").exists()
    toml = '[policies.tool_permissions.overrides]\n"file_ops(operation=move)" = "deny"\n'
    async with make_runtime(workspace, toml) as rt:  # a rule on moves holds for the moves of a batch
        explained = rt.tool_service(tier="full").explain("file_ops", batch)
        assert explained.decision == "deny" and "action 1 (`file_ops`)" in explained.reason
    toml = '[policies.tool_permissions.overrides]\n"file_ops(operation=move)" = "ask"\n'
    async with make_runtime(workspace, toml) as rt:
        req = ScriptedRequester([ApprovalOutcome.APPROVED])
        moves[1]["destination"] = "dos"
        await rt.tool_service(tier="full", requester=req).execute("file_ops", batch)
        assert [r.rule_id for r in req.requests] == ["action_asks"]
    assert (workspace / "uno").exists() and (workspace / "dos").exists()


@pytest.mark.anyio
async def test_every_redirect_hop_must_pass_the_domain_rule_of_the_first_url(workspace: Path) -> None:
    holder: list[str] = []
    routes = {
        "/page": lambda h: (200, {"Content-Type": "text/plain"}, b"hello"),
        "/away": lambda h: (302, {"Location": f"http://127.0.0.2:{holder[0].rsplit(':', 1)[1]}/page"}, b""),
        "/stay": lambda h: (302, {"Location": f"http://localhost:{holder[0].rsplit(':', 1)[1]}/page"}, b""),
    }
    toml = (
        "[files]\nallow_private_networks = true\n"
        '[policies.tool_permissions.overrides]\nweb_fetch = "deny"\n"web_fetch(domain:localhost)" = "allow"\n'
    )
    with serve(routes) as base:
        holder.append(base)
        port = base.rsplit(":", 1)[1]
        async with make_runtime(workspace, toml) as rt:
            svc = rt.tool_service()
            ok = json.loads((await svc.execute("web_fetch", {"url": f"http://localhost:{port}/stay"})).text)
            assert ok["content"].strip() == "hello"
            with pytest.raises(PermissionDenied, match="web_fetch"):
                await svc.execute("web_fetch", {"url": f"http://localhost:{port}/away"})
            ledger = rt.chokepoint.ledger
            assert ledger is not None
            await ledger.flush()
            assert [r.action for r in ledger.rows("default")].count("tool_denied") == 1


@pytest.mark.anyio
async def test_the_unscoped_service_still_works_for_tools_that_ask_the_running_call(workspace: Path) -> None:
    tree(workspace)
    async with make_runtime(workspace, DENY_SECRETS) as rt:
        listed = await aleph.UnscopedToolService(rt.registry).execute("file_ops", {"operation": "list"})
        assert "entries" in json.loads(listed.text)
