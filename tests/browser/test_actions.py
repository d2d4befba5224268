"""Actions on real pages in a real headless Chromium: forms, dialogs, drag, upload, tabs, frames, waits."""

from __future__ import annotations

import re
from typing import Any

import pytest

import aleph

pytestmark = pytest.mark.anyio


def ref_of(snapshot: str, line_text: str) -> str:
    """The ref on the first snapshot line containing ``line_text``."""
    for line in snapshot.splitlines():
        if line_text in line:
            m = re.search(r"\[ref=([a-z0-9]+)\]", line)
            if m:
                return m.group(1)
    raise AssertionError(f"no ref for {line_text!r} in:\n{snapshot}")


async def open_page(call: Any, site: Any, path: str) -> str:
    return await call("browser_navigate", {"url": site.url(path), "snapshot": "full"})


async def test_navigate_returns_a_snapshot_with_refs_and_the_page(call: Any, site: Any) -> None:
    out = await open_page(call, site, "/form")
    assert f"Page: 'Form' {site.url('/form')}" in out
    assert re.search(r'button "Send" \[ref=e\d+\]', out)
    # Chromium's own background requests (refused by the proxy) are not the page's business.
    assert "Blocked requests" not in out


async def test_fill_form_select_and_submit_with_refs(call: Any, site: Any) -> None:
    snap = await open_page(call, site, "/form")
    await call(
        "browser_fill_form",
        {
            "fields": [
                {"target": ref_of(snap, 'textbox "Name"'), "value": "Ada"},
                {"target": ref_of(snap, 'checkbox "Agree"'), "value": "true"},
                {"target": ref_of(snap, 'radio "Large"'), "value": "true"},
            ]
        },
    )
    await call("browser_select", {"target": ref_of(snap, 'combobox "Color"'), "values": ["Blue"]})
    out = await call("browser_click", {"target": ref_of(snap, 'button "Send"'), "element": "Send button"})
    assert "Clicked Send button" in out
    assert "name=Ada color=b agree=true size=l" in out


async def test_type_with_submit_and_press_key(call: Any, site: Any) -> None:
    snap = await open_page(call, site, "/form")
    out = await call("browser_type", {"target": ref_of(snap, 'textbox "Name"'), "text": "Bob", "submit": True})
    assert "name=Bob" in out
    out = await call("browser_press_key", {"key": "Enter", "target": "#counter"})
    assert "Clicked 1 times" in out


async def test_css_selector_targets_must_be_unique(call: Any, site: Any) -> None:
    await open_page(call, site, "/form")
    with pytest.raises(aleph.ExecutionFailed, match="matches 2 elements"):
        await call("browser_click", {"target": "input[type=radio]"})
    with pytest.raises(aleph.ExecutionFailed, match="no element matches selector"):
        await call("browser_click", {"target": "#missing"})


async def test_stale_ref_asks_for_a_new_snapshot(call: Any, site: Any) -> None:
    snap = await open_page(call, site, "/form")
    old = ref_of(snap, 'button "Send"')
    await open_page(call, site, "/dialogs")
    with pytest.raises(aleph.ExecutionFailed) as info:
        await call("browser_click", {"target": old})
    assert (
        f"ref {old} is not on the current page (it changed since the last snapshot); "
        "call browser_snapshot and use a fresh ref"
    ) in str(info.value)


async def test_alert_opens_a_modal_state_that_browser_dialog_answers(call: Any, site: Any) -> None:
    snap = await open_page(call, site, "/dialogs")
    out = await call("browser_click", {"target": ref_of(snap, 'button "Alert"')})
    assert "Dialog open: alert 'Hello there'" in out
    with pytest.raises(aleph.ExecutionFailed, match="alert dialog is open"):
        await call("browser_click", {"target": ref_of(snap, 'button "Confirm"')})
    out = await call("browser_dialog", {"action": "accept"})
    assert "Accepted the alert dialog 'Hello there'" in out
    await call("browser_wait_for", {"text": "alerted"})


async def test_confirm_dismissed_and_prompt_answered(call: Any, site: Any) -> None:
    snap = await open_page(call, site, "/dialogs")
    await call("browser_click", {"target": ref_of(snap, 'button "Confirm"')})
    await call("browser_dialog", {"action": "dismiss"})
    out = await call("browser_wait_for", {"text": "confirm=false"})
    assert "confirm=false" in out
    # Armed before the dialog opens: the prompt is answered as it appears.
    out = await call("browser_dialog", {"action": "accept", "prompt_text": "Grace"})
    assert "next dialog" in out
    out = await call("browser_click", {"target": ref_of(snap, 'button "Prompt"')})
    assert "Dialog open" not in out
    assert "prompt=Grace" in await call("browser_wait_for", {"text": "prompt=Grace"})


async def test_drag_and_drop(call: Any, site: Any) -> None:
    await open_page(call, site, "/drag")
    out = await call("browser_drag", {"source": "#src", "target": "#dst", "snapshot": "full"})
    assert "dropped card" in out


async def test_upload_from_the_workspace(call: Any, site: Any, shared_rt: aleph.Aleph) -> None:
    (shared_rt.config.workspace_root / "hello.txt").write_text("hello")
    await open_page(call, site, "/upload")
    out = await call("browser_upload", {"target": "#file", "paths": ["hello.txt"], "snapshot": "full"})
    assert "hello.txt:5" in out


@pytest.mark.parametrize(
    "path, reason",
    [("../outside.txt", "contains '..'"), ("/etc/passwd", "outside the workspace"), ("link.txt", "is a symlink")],
)
async def test_upload_escape_is_refused(
    call: Any, site: Any, shared_rt: aleph.Aleph, path: str, reason: str, tmp_path: Any
) -> None:
    ws = shared_rt.config.workspace_root
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    link = ws / "link.txt"
    if not link.is_symlink():
        link.symlink_to(secret)
    await open_page(call, site, "/upload")
    with pytest.raises(aleph.ExecutionFailed, match=re.escape(reason)):
        await call("browser_upload", {"target": "#file", "paths": [path]})


async def test_window_open_and_tabs_are_listed_selected_and_closed(call: Any, site: Any) -> None:
    snap = await open_page(call, site, "/tabs")
    await call("browser_click", {"target": ref_of(snap, 'button "Open form"')})
    await call("browser_wait_for", {"seconds": 0.3, "snapshot": "none"})
    listing = await call("browser_tabs", {"action": "list"})
    urls = [t["url"] for t in listing["tabs"]]
    assert site.url("/form") in urls
    new_id = next(t["id"] for t in listing["tabs"] if t["url"] == site.url("/form"))
    listing = await call("browser_tabs", {"action": "select", "tab": new_id})
    assert [t["id"] for t in listing["tabs"] if t["current"]] == [new_id]
    out = await call("browser_snapshot", {})
    assert 'button "Send"' in out
    listing = await call("browser_tabs", {"action": "close", "tab": new_id})
    assert new_id not in [t["id"] for t in listing["tabs"]]


async def test_iframe_content_is_in_the_snapshot_and_clickable(call: Any, site: Any) -> None:
    snap = await open_page(call, site, "/iframe")
    await call("browser_wait_for", {"text": "Outer"})
    snap = await call("browser_snapshot", {})
    ref = ref_of(snap, 'button "Inner button"')
    assert ref.startswith("f")
    out = await call("browser_click", {"target": ref, "snapshot": "full"})
    assert "Inner clicked" in out


async def test_wait_for_text_on_a_slow_page(call: Any, site: Any) -> None:
    out = await open_page(call, site, "/slow")
    assert "Ready now" not in out
    out = await call("browser_wait_for", {"text": "Ready now", "timeout_ms": 10_000, "snapshot": "full"})
    assert "Done: text 'Ready now' is visible." in out
    assert "Ready now" in out


async def test_wait_for_needs_a_condition(call: Any) -> None:
    with pytest.raises(aleph.ValidationFailed, match="give one of"):
        await call("browser_wait_for", {})


async def test_console_errors_reported_once_and_listed(call: Any, site: Any) -> None:
    out = await open_page(call, site, "/console")
    assert "New console errors:\n- boom error" in out
    out = await call("browser_click", {"target": "text=Err"})
    assert "clicked error" in out and "boom error" not in out
    listing = await call("browser_console", {"level": "error"})
    assert [m["text"] for m in listing["messages"]][-2:] == ["boom error", "clicked error"]
    listing = await call("browser_console", {"level": "all", "limit": 1})
    assert len(listing["messages"]) == 1


async def test_network_log_lists_requests(call: Any, site: Any) -> None:
    await open_page(call, site, "/form")
    listing = await call("browser_network", {"contains": "/form"})
    assert any(r["status"] == 200 and r["resource_type"] == "document" for r in listing["requests"])


async def test_download_is_saved_in_the_workspace(call: Any, site: Any, shared_rt: aleph.Aleph) -> None:
    await open_page(call, site, "/download")
    out = await call("browser_click", {"target": "text=Get file"})
    if "Downloaded" not in out:
        out = await call("browser_wait_for", {"seconds": 0.5})
    assert "Downloaded into the workspace: downloads/report.txt" in out
    assert (shared_rt.config.workspace_root / "downloads" / "report.txt").read_text() == "file body"


async def test_evaluate_screenshot_pdf_resize_emulate(call: Any, site: Any, shared_rt: aleph.Aleph) -> None:
    await open_page(call, site, "/form")
    out = await call("browser_evaluate", {"function": "() => document.title + ':' + window.n"})
    assert 'Result:\n"Form:0"' in out
    out = await call("browser_evaluate", {"function": "(e) => e.tagName", "target": "#counter"})
    assert '"BUTTON"' in out
    shot = await call("browser_screenshot", {"path": "shots/form.png"})
    assert (shared_rt.config.workspace_root / "shots" / "form.png").read_bytes()[:4] == b"\x89PNG"
    assert shot["bytes"] > 100
    inline = await call("browser_screenshot", {"target": "#counter", "format": "jpeg"})
    assert inline["format"] == "jpeg" and len(inline["base64"]) > 100
    pdf = await call("browser_pdf", {"path": "out/form.pdf"})
    assert (shared_rt.config.workspace_root / "out" / "form.pdf").read_bytes()[:5] == b"%PDF-"
    assert pdf["bytes"] > 100
    await call("browser_resize", {"width": 390, "height": 844})
    out = await call("browser_evaluate", {"function": "() => window.innerWidth"})
    assert out.startswith("Result:\n390\n")
    await call("browser_emulate", {"color_scheme": "dark"})
    out = await call("browser_evaluate", {"function": "() => matchMedia('(prefers-color-scheme: dark)').matches"})
    assert "Result:\ntrue" in out


async def test_cookies_set_get_clear(call: Any, site: Any) -> None:
    await open_page(call, site, "/form")
    await call("browser_cookies", {"action": "set", "cookies": [{"name": "k", "value": "v", "url": site.url("/")}]})
    got = await call("browser_cookies", {"action": "get", "urls": [site.url("/form")]})
    assert [(c["name"], c["value"]) for c in got["cookies"]] == [("k", "v")]
    cleared = await call("browser_cookies", {"action": "clear"})
    assert cleared["count"] == 0


async def test_scroll_and_hover(call: Any, site: Any) -> None:
    await open_page(call, site, "/big")
    out = await call("browser_scroll", {"direction": "down", "amount": 500, "snapshot": "none"})
    assert "y=500" in out
    out = await call("browser_scroll", {"direction": "top", "snapshot": "none"})
    assert "y=0" in out
    out = await call("browser_hover", {"target": "text=Toggle", "snapshot": "none"})
    assert out.startswith("Hovered text=Toggle.")


async def test_exec_runs_a_batch_and_stops_at_the_first_failure(call: Any, site: Any) -> None:
    out = await call(
        "browser_exec",
        {
            "steps": [
                {"action": "navigate", "url": site.url("/form")},
                {"action": "fill", "target": "input[name=name]", "text": "Lin"},
                {"action": "select", "target": "select", "values": ["g"]},
                {"action": "check", "target": "input[name=agree]"},
                {"action": "click", "target": "text=Send"},
                {"action": "wait_for", "text": "name=Lin"},
                {"action": "click", "target": "#nope"},
                {"action": "click", "target": "text=Send"},
            ],
            "snapshot": "full",
        },
    )
    assert "name=Lin color=g agree=true size=s" in out
    assert "7. click FAILED: no element matches selector '#nope'" in out
    assert "Stopped; 1 later step(s) not run." in out


@pytest.mark.parametrize(
    "tool, payload", [("browser_pdf", {"path": "aleph.toml"}), ("browser_screenshot", {"path": ".aleph-data/x.png"})]
)
async def test_captures_never_overwrite_alephs_own_files(
    call: Any, site: Any, tool: str, payload: dict[str, Any]
) -> None:
    await open_page(call, site, "/form")
    with pytest.raises(aleph.ExecutionFailed, match="protected paths"):
        await call(tool, payload)


async def test_alephs_own_files_are_never_uploaded(call: Any, site: Any) -> None:
    await open_page(call, site, "/upload")
    with pytest.raises(aleph.ExecutionFailed, match="protected paths"):
        await call("browser_upload", {"target": "#file", "paths": ["aleph.toml"]})


async def test_back_forward_and_reload(call: Any, site: Any) -> None:
    await open_page(call, site, "/form")
    await open_page(call, site, "/dialogs")
    out = await call("browser_navigate", {"action": "back", "snapshot": "none"})
    assert f"Page: 'Form' {site.url('/form')}" in out
    out = await call("browser_navigate", {"action": "forward", "snapshot": "none"})
    assert f"Page: 'Dialogs' {site.url('/dialogs')}" in out
    out = await call("browser_navigate", {"action": "reload", "snapshot": "none"})
    assert out.startswith("Reloaded.")
    with pytest.raises(aleph.ValidationFailed, match="url is required"):
        await call("browser_navigate", {})


async def test_console_log_is_a_bounded_ring_buffer(call: Any, site: Any) -> None:
    await open_page(call, site, "/form")
    await call("browser_evaluate", {"function": "() => { for (let i = 0; i < 700; i++) console.log('line ' + i); }"})
    await call("browser_wait_for", {"seconds": 0.3, "snapshot": "none"})
    listing = await call("browser_console", {"level": "all", "limit": 1000})
    assert len(listing["messages"]) == 500
    assert listing["messages"][-1]["text"] == "line 699"
    assert listing["dropped_before_buffer"] >= 200


async def test_tabs_new_opens_the_url_and_refuses_blocked_ones(call: Any, site: Any) -> None:
    listing = await call("browser_tabs", {"action": "new", "url": site.url("/dialogs")})
    current = [t for t in listing["tabs"] if t["current"]]
    assert [(t["url"], t["title"]) for t in current] == [(site.url("/dialogs"), "Dialogs")]
    before = len(listing["tabs"])
    with pytest.raises(aleph.PermissionDenied, match="is not in \\[browser\\] allowed_origins"):
        await call("browser_tabs", {"action": "new", "url": f"http://localhost:{site.port}/form"})
    assert len((await call("browser_tabs", {}))["tabs"]) == before
    await call("browser_tabs", {"action": "close"})


async def test_ref_of_a_removed_element_fails_as_stale_without_waiting(call: Any, site: Any) -> None:
    snap = await open_page(call, site, "/form")
    ref = ref_of(snap, 'button "Click me"')
    await call("browser_evaluate", {"function": "() => document.getElementById('counter').remove()"})
    for tool, extra in [("browser_click", {}), ("browser_type", {"text": "x"}), ("browser_hover", {})]:
        with pytest.raises(aleph.ExecutionFailed, match=f"ref {ref} is not on the current page"):
            await call(tool, {"target": ref, **extra})


async def test_a_batch_cannot_do_what_its_caller_may_not_and_explain_says_so(shared_rt: aleph.Aleph, site: Any) -> None:
    policy = {"overrides": {"browser_click": "deny", "browser_type": "deny"}}
    svc = shared_rt.tool_service(channel_permissions=policy)
    await svc.execute("browser_navigate", {"url": site.url("/form"), "snapshot": "none"})
    for steps in (
        [{"action": "type", "target": "input[name=name]", "text": "Mallory"}],
        [{"action": "fill", "target": "input[name=name]", "text": "Mallory"}],
        [{"action": "select", "target": "select", "values": ["g"]}, {"action": "check", "target": "input[name=agree]"}],
        [{"action": "click", "target": "text=Send"}],
    ):
        batch = {"steps": steps, "snapshot": "none"}
        assert svc.explain("browser_exec", batch).decision == "deny"
        with pytest.raises(aleph.PermissionDenied, match="action"):
            await svc.execute("browser_exec", batch)
    fields = {"fields": [{"target": "input[name=name]", "value": "Mallory"}], "snapshot": "none"}
    with pytest.raises(aleph.PermissionDenied):
        await svc.execute("browser_fill_form", fields)
    probe = {"function": "() => document.querySelector('input[name=name]').value"}
    reader = shared_rt.tool_service(requester=aleph.ScriptedRequester([aleph.ApprovalOutcome.APPROVED]))
    assert "Mallory" not in (await reader.execute("browser_evaluate", probe)).text
    # An allowed batch still runs, through the same service.
    out = await svc.execute("browser_exec", {"steps": [{"action": "hover", "target": "text=Send"}], "snapshot": "none"})
    assert "1 of 1" in out.text
