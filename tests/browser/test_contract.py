"""The contract kit, with a runnable example for every browser tool (pages are data: URLs, no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import aleph_browser.plugin

import aleph
from aleph.testing import ToolContractTests

PAGE = "data:text/html," + quote(
    "<title>Contract</title><h1>Hello</h1>"
    "<button id=go onclick=\"document.title='clicked'\">Go</button>"
    "<input id=name aria-label=Name><input id=agree type=checkbox aria-label=Agree>"
    "<select id=color aria-label=Color><option value=r>Red</option><option value=g>Green</option></select>"
    "<input id=file type=file aria-label=File>"
    "<div id=src draggable=true>Card</div><div id=dst>Drop</div>"
    "<script>console.log('ready')</script>"
)


class TestBrowserContract(ToolContractTests):
    plugin = aleph_browser.plugin
    family = "browser"

    def make_runtime(self, workspace: Path) -> aleph.Aleph:
        (workspace / "upload.txt").write_text("uploaded")
        return super().make_runtime(workspace)

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("browser_open", {"url": PAGE}),
            ("browser_snapshot", {}),
            ("browser_click", {"target": "#go", "element": "Go button"}),
            ("browser_type", {"target": "#name", "text": "Ada"}),
            (
                "browser_fill_form",
                {"fields": [{"target": "#name", "value": "Bob"}, {"target": "#agree", "value": "true"}]},
            ),
            ("browser_select", {"target": "#color", "values": ["g"]}),
            ("browser_press_key", {"key": "Tab"}),
            ("browser_hover", {"target": "#go"}),
            ("browser_drag", {"source": "#src", "target": "#dst"}),
            ("browser_scroll", {"direction": "down", "amount": 100}),
            ("browser_upload", {"target": "#file", "paths": ["upload.txt"]}),
            ("browser_dialog", {"action": "accept"}),
            ("browser_wait_for", {"text": "Hello"}),
            ("browser_evaluate", {"function": "() => document.title"}),
            ("browser_console", {}),
            ("browser_network", {}),
            ("browser_tabs", {"action": "list"}),
            ("browser_screenshot", {"path": "shot.png"}),
            ("browser_pdf", {"path": "page.pdf"}),
            ("browser_resize", {"width": 800, "height": 600}),
            ("browser_emulate", {"color_scheme": "dark"}),
            (
                "browser_cookies",
                {"action": "set", "cookies": [{"name": "a", "value": "b", "url": "https://example.com"}]},
            ),
            ("browser_session", {}),
            ("browser_profile", {"action": "list"}),
            (
                "browser_exec",
                {"steps": [{"action": "click", "target": "#go"}, {"action": "fill", "target": "#name", "text": "x"}]},
            ),
            ("browser_navigate", {"url": PAGE}),
        ]
