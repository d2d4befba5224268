"""The console's web app (Starlette, server-rendered, no build step) and its loopback server.

The inbox shows the asks of this process (:attr:`Console.inbox`) and those every other process on the
same data directory offered to its durable inbox (``aleph serve``, a runtime with ``[console] inbox``);
an answer from the page goes back to whichever holds the ask. While it runs, the console holds the
inbox's presence lock, so runtimes in ``auto`` mode offer their asks to it.

Only loopback addresses are served and every request must carry the console's random token (in the URL or
a form field): a request without it, or with a ``Host`` that is not this loopback listener (DNS rebinding),
is refused with 403 before any page is built.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aleph._chokepoint._askstore import AskStore, StoredAsk, hold_console_lock, inbox_directory
from aleph._console._inbox import ConsoleInbox, PendingAsk
from aleph._console._ledger_view import LedgerFilters, ledger_page, read_ledger
from aleph._console._pages import Card, asks_digest, explain_page, inbox_page
from aleph._console._preview import preview_for
from aleph._console._rules import active_rules
from aleph._turn import TurnContext

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from aleph._runtime import Aleph

__all__ = ["Console"]

log = logging.getLogger("aleph.console")

MAX_ROWS = 500
"""Ledger rows one page shows (newest first)."""
MAX_FORM_BYTES = 16 * 1024
"""Largest form body (and explain field) the console reads."""
EXPLAIN_FIELDS = ("tool", "agent", "channel", "session", "input", "request")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Console:
    """The approval inbox, the ledger and policy explain for one runtime, on a loopback web page.

    Pass :attr:`inbox` as the ``requester`` of the services whose asks the page should answer.
    """

    def __init__(self, rt: Aleph, *, token: str | None = None, timeout_s: float = 300.0) -> None:
        """:param timeout_s: how long an ask waits in the inbox before it is answered TIMEOUT."""
        self.rt = rt
        self.token = token or secrets.token_urlsafe(24)
        self.inbox = ConsoleInbox(timeout_s=timeout_s)
        """The asks of services in this process that use it as their requester."""
        self.shared = AskStore(inbox_directory(rt.config.data_dir))
        """The data directory's inbox: the asks of every process that offered one."""
        self.port: int | None = None
        self._presence: int | None = None
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self.app = self._build()

    @property
    def url(self) -> str:
        """The page's address with its token (only once :meth:`start` has bound the port)."""
        if self.port is None:
            raise RuntimeError("the console is not started")
        return f"http://127.0.0.1:{self.port}/?{urlencode({'token': self.token})}"

    def _build(self) -> Any:
        from starlette.applications import Starlette
        from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse
        from starlette.routing import Route

        async def guard(request: Request, form: dict[str, str] | None = None) -> Response | None:
            host = (request.headers.get("host") or "").rsplit(":", 1)[0].strip("[]")
            if not _loopback(host):
                return PlainTextResponse("refused: not a loopback host", status_code=403)
            given = request.query_params.get("token") or (form or {}).get("token") or ""
            if not secrets.compare_digest(given.encode(), self.token.encode()):
                return PlainTextResponse("refused: this page needs the console's token in its URL", status_code=403)
            return None

        async def read_form(request: Request) -> dict[str, str] | Response:
            body = await request.body()
            if len(body) > MAX_FORM_BYTES:
                return PlainTextResponse("refused: form too large", status_code=413)
            from urllib.parse import parse_qs

            return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}

        async def inbox(request: Request) -> Response:
            refused = await guard(request)
            if refused is not None:
                return refused
            cards = self._local_cards() + await asyncio.to_thread(self._shared_cards)
            return HTMLResponse(inbox_page(self.token, cards, request.query_params.get("note")))

        async def asks(request: Request) -> Response:
            refused = await guard(request)
            if refused is not None:
                return refused
            return PlainTextResponse(asks_digest(self._local_cards() + await asyncio.to_thread(self._shared_cards)))

        async def answer(request: Request) -> Response:
            form = await read_form(request)
            if not isinstance(form, dict):
                return form
            refused = await guard(request, form)
            if refused is not None:
                return refused
            ask_id, decision, reason = form.get("id", ""), form.get("decision", ""), form.get("reason")
            if any(ask.id == ask_id for ask in self.inbox.pending()):  # this process's: answered on its loop
                problem = self.inbox.answer(ask_id, decision, reason)
            else:
                problem = await asyncio.to_thread(self._answer_shared, ask_id, decision, reason)
            query = {"token": self.token} | ({"note": problem} if problem else {})
            return RedirectResponse(f"/?{urlencode(query)}", status_code=303)

        async def ledger(request: Request) -> Response:
            refused = await guard(request)
            if refused is not None:
                return refused
            filters = LedgerFilters.parse(request.query_params)
            chains, rows = await asyncio.to_thread(read_ledger, self.rt.chokepoint.ledger, filters, MAX_ROWS)
            return HTMLResponse(ledger_page(self.token, chains, rows, filters))

        async def explain(request: Request) -> Response:
            refused = await guard(request)
            if refused is not None:
                return refused
            form = {k: request.query_params.get(k, "")[:MAX_FORM_BYTES] for k in EXPLAIN_FIELDS}
            result, problem, rules = self._explain(form)
            return HTMLResponse(explain_page(self.token, form, result, problem, rules))

        return Starlette(
            routes=[
                Route("/", inbox),
                Route("/asks", asks),
                Route("/answer", answer, methods=["POST"]),
                Route("/ledger", ledger),
                Route("/explain", explain),
            ]
        )

    def cards(self) -> list[Card]:
        """Every waiting ask: this process's, then the data directory's inbox, oldest first in each.

        Call it on the event loop of the services that use :attr:`inbox`.
        """
        return self._local_cards() + self._shared_cards()

    def _local_cards(self) -> list[Card]:
        return [_local_card(ask, self.rt.config) for ask in self.inbox.pending()]

    def _shared_cards(self) -> list[Card]:
        return [_shared_card(ask) for ask in self.shared.pending()]

    def answer(self, ask_id: str, decision: str, reason: str | None = None) -> str | None:
        """Answer the ask ``ask_id`` wherever it waits; returns why not when it cannot be answered.

        Call it on the event loop of the services that use :attr:`inbox` (its asks wait on futures of it).
        """
        if any(ask.id == ask_id for ask in self.inbox.pending()):
            return self.inbox.answer(ask_id, decision, reason)
        return self._answer_shared(ask_id, decision, reason)

    def _answer_shared(self, ask_id: str, decision: str, reason: str | None) -> str | None:
        return self.shared.answer(ask_id, decision, reason, by=f"aleph console (pid {os.getpid()})")

    def _explain(self, form: dict[str, str]) -> tuple[dict[str, Any] | None, str | None, list[Any]]:
        agent, channel = form["agent"] or None, form["channel"] or None
        result: dict[str, Any] | None = None
        problem: str | None = None
        layer = None
        try:
            request_layer = _json_object(form["request"], "the request layer") if form["request"] else None
            # A live session's key: its data-flow state (what it read from untrusted sources) judges sinks too.
            turn = TurnContext(session_key=form["session"]) if form.get("session") else None
            service = self.rt.tool_service(
                agent=agent, channel=channel, discovery=False, channel_permissions=request_layer, turn=turn
            )
            if request_layer is not None:  # its own layer (left out of the policy when it changes nothing)
                layer = next((x for x in service.policy.layers if x.name.startswith("request")), None)
            if form["tool"]:
                arguments = _json_object(form["input"] or "{}", "the input")
                result = service.explain(form["tool"], arguments).to_json()
        except ValueError as exc:
            problem = str(exc)
        return result, problem, active_rules(self.rt, agent, channel, layer)

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve the page on ``host`` (a loopback address only) and return its URL with the token."""
        import uvicorn

        if not _loopback(host):
            raise ValueError(f"the console serves loopback only, not {host!r}")
        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning", lifespan="off")
        self._server = server = uvicorn.Server(config)
        self._presence = hold_console_lock(self.shared.directory)  # runtimes in "auto" mode now offer their asks
        self._task = asyncio.create_task(server.serve())
        while not server.started:
            if self._task.done():
                await self._task  # raises why it could not start
                raise RuntimeError("the console stopped before it started")
            await asyncio.sleep(0.01)  # uvicorn offers no started event; this polls its flag
        self.port = server.servers[0].sockets[0].getsockname()[1]
        return self.url

    async def stop(self) -> None:
        """Stop serving (waiting asks keep waiting for another requester's answer or their timeout)."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
            self._server = self._task = None
        if self._presence is not None:
            os.close(self._presence)
            self._presence = None


def _json_object(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{what} is not a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f'{what} is not a JSON object: it must be one, e.g. {{"path": "a.txt"}}')
    return value


def _local_card(ask: PendingAsk, config: Any) -> Card:
    req, turn = ask.request, ask.request.turn
    who = {
        "principal": turn.principal if turn else None,
        "channel": turn.channel_id if turn else None,
        "session": turn.session_key if turn else None,
    }
    return Card(
        ask.id,
        req.tool_name,
        req.summary,
        req.reason,
        req.rule_id,
        tuple(d.value for d in req.allowed_decisions),
        req.arguments,
        who,
        ask.asked_at,
        "this console's process",
        preview=preview_for(req.tool_name, req.arguments, config),
    )


def _shared_card(ask: StoredAsk) -> Card:
    r = ask.request
    who, preview = r.get("who"), r.get("preview")
    return Card(
        ask.id,
        ask.tool,
        str(r.get("summary", "")),
        str(r.get("reason", "")),
        str(r.get("rule_id", "")),
        ask.allowed,
        r.get("arguments", {}),
        who if isinstance(who, dict) else {},
        ask.asked_at,
        f"{ask.process} (pid {ask.pid})",
        ask.expires_at,
        preview if isinstance(preview, dict) else None,
    )
