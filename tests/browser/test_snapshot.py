"""Snapshot budgets, subtree and depth limits, and delta snapshots."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aleph_browser._snapshot import budget, delta, find

import aleph

pytestmark = pytest.mark.anyio

OLD = """- generic [ref=e1]:
  - button "Go" [ref=e2]
  - paragraph [ref=e3]: none
  - link "Home" [ref=e4] [cursor=pointer]:
    - /url: /home
  - text: plain"""


def test_budget_keeps_short_text_and_marks_what_it_cut() -> None:
    assert budget("short", 100) == "short"
    text = "\n".join(f"- item {i} [ref=e{i}]" for i in range(1000))
    out = budget(text, 2000)
    assert len(out) <= 2000
    assert re.search(r"\[\.\.\. truncated: showing [\d,]+ of [\d,]+ characters \([\d,]+ of 1,000 lines cut\)", out)
    assert "target=<ref of a section>" in out


def test_delta_marks_changed_added_and_removed_nodes_by_ref() -> None:
    new = (
        OLD.replace("paragraph [ref=e3]: none", "paragraph [ref=e3]: clicked").replace(
            '  - link "Home" [ref=e4] [cursor=pointer]:\n    - /url: /home\n', ""
        )
        + '\n  - button "New" [ref=e9]'
    )
    d = delta(OLD, new)
    assert (d.changed, d.added, d.removed) == (1, 1, 1)
    assert "~ - paragraph [ref=e3]: clicked" in d.text
    assert '+ - button "New" [ref=e9] (in e1)' in d.text
    assert "- removed: e4" in d.text


def test_find_keeps_matching_lines_under_their_ancestors() -> None:
    assert find(OLD, "HOME") == (
        "# 2 line(s) contain 'HOME' (shown with their ancestors)\n"
        '- generic [ref=e1]:\n  - link "Home" [ref=e4] [cursor=pointer]:\n    - /url: /home'
    )
    assert find(OLD, "go").splitlines()[1:] == ["- generic [ref=e1]:", '  - button "Go" [ref=e2]']
    assert find(OLD, "nowhere") == "# no line of the snapshot contains 'nowhere'"


def test_delta_of_identical_snapshots_says_no_changes() -> None:
    assert delta(OLD, OLD).text == "# delta since the previous snapshot of this tab: no changes"


def test_ref_less_child_lines_change_their_parent_node() -> None:
    d = delta(OLD, OLD.replace("/url: /home", "/url: /away"))
    assert d.changed == 1
    assert '~ - link "Home" [ref=e4] [cursor=pointer]:\n    - /url: /away' in d.text


async def test_large_page_snapshot_stays_within_the_default_budget(call: Any, site: Any) -> None:
    out = await call("browser_navigate", {"url": site.url("/big"), "snapshot": "none"})
    snap = await call("browser_snapshot", {})
    body = snap.split("\n", 1)[1]
    assert len(body) <= 20_000
    assert "[... truncated: showing" in body
    assert "To see the rest" in body
    assert "Navigated" in out


async def test_max_chars_depth_and_target_narrow_the_snapshot(call: Any, site: Any) -> None:
    await call("browser_navigate", {"url": site.url("/form"), "snapshot": "none"})
    small = await call("browser_snapshot", {"max_chars": 500})
    assert len(small.split("\n", 1)[1]) <= 500
    shallow = await call("browser_snapshot", {"depth": 1})
    assert "option" not in shallow
    full = await call("browser_snapshot", {})
    ref = re.search(r'combobox "Color" \[ref=(\w+)\]', full)
    assert ref is not None
    sub = await call("browser_snapshot", {"target": ref.group(1)})
    assert 'option "Green"' in sub and 'button "Send"' not in sub


async def test_delta_after_one_click_is_much_smaller_than_the_full_snapshot(call: Any, site: Any) -> None:
    await call("browser_navigate", {"url": site.url("/big"), "snapshot": "none"})
    full = await call("browser_snapshot", {"max_chars": 2_000_000})
    out = await call("browser_click", {"target": "text=Toggle"})
    snapshot = out.split("Snapshot (delta):\n", 1)[1]
    assert "~ - paragraph" in snapshot and ': "on"' in snapshot
    assert len(snapshot) * 10 < len(full)
    again = await call("browser_snapshot", {"mode": "delta"})
    assert "no changes" in again


async def test_find_picks_one_row_out_of_a_large_page(call: Any, site: Any) -> None:
    await call("browser_navigate", {"url": site.url("/big"), "snapshot": "none"})
    out = await call("browser_snapshot", {"find": "row 2345"})
    assert len(out) < 500
    ref = re.search(r'link "row 2345" \[ref=(\w+)\]', out)
    assert ref is not None
    clicked = await call("browser_click", {"target": ref.group(1), "snapshot": "none"})
    assert clicked.startswith(f"Clicked {ref.group(1)}.")
    with pytest.raises(aleph.ValidationFailed, match="mode delta compares whole-page snapshots"):
        await call("browser_snapshot", {"mode": "delta", "find": "row"})
