"""Typing into a page sends text to the site: browser_type, browser_fill_form and browser_exec's type steps
are data-flow sinks, judged against what the session read from web pages (untrusted).

A link the page showed, typed into a field, asks (unattended here, so it is refused); the user's own
text runs; a batch's navigate step to that link (not a sink) runs. Real Chromium, the test's own server.
"""

from __future__ import annotations

from typing import Any

import pytest

import aleph
from aleph import ApprovalUnavailable

pytestmark = pytest.mark.anyio

NAME = "input[name=name]"


async def test_a_link_read_from_a_page_cannot_be_typed_into_it_unasked(shared_rt: aleph.Aleph, site: Any) -> None:
    svc = shared_rt.tool_service(agent="surfer", turn=aleph.TurnContext(session_key="flow"))
    page = site.url("/form")
    assert page in (await svc.execute("browser_open", {"url": page})).text
    await svc.execute("browser_type", {"target": NAME, "text": "Ada Lovelace"})
    with pytest.raises(ApprovalUnavailable, match="came from `browser_open`"):
        await svc.execute("browser_type", {"target": NAME, "text": page})
    with pytest.raises(ApprovalUnavailable, match=r"in `browser_fill_form\.fields"):
        await svc.execute("browser_fill_form", {"fields": [{"target": NAME, "value": page}]})
    typed = {"steps": [{"action": "navigate", "url": page}, {"action": "type", "target": NAME, "text": page}]}
    with pytest.raises(ApprovalUnavailable, match=r"in `browser_type\.text` came from `browser_open`"):
        await svc.execute("browser_exec", typed)
    await svc.execute("browser_exec", {"steps": [{"action": "navigate", "url": page}]})
