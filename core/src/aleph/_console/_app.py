"""The console's web app (Starlette, server-rendered, no build step) and its loopback server.

Only loopback addresses are served and every request must carry the console's random token (in the URL or
a form field): a request without it, or with a ``Host`` that is not this loopback listener (DNS rebinding),
is refused with 403 before any page is built.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import logging
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from aleph._console._inbox import ConsoleInbox
from aleph._console._pages import explain_page, inbox_page, ledger_page

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from aleph._runtime import Aleph

__all__ = ["Console"]

log = logging.getLogger("aleph.console")

MAX_ROWS = 500
"""Ledger rows one page shows (newest first)."""
MAX_FORM_BYTES = 16 * 1024
"""Largest form body the console reads."""


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
        self.port: int | None = None
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
            return HTMLResponse(inbox_page(self.token, self.inbox.pending(), request.query_params.get("note")))

        async def answer(request: Request) -> Response:
            form = await read_form(request)
            if not isinstance(form, dict):
                return form
            refused = await guard(request, form)
            if refused is not None:
                return refused
            problem = self.inbox.answer(form.get("id", ""), form.get("decision", ""), form.get("reason"))
            query = {"token": self.token} | ({"note": problem} if problem else {})
            return RedirectResponse(f"/?{urlencode(query)}", status_code=303)

        async def ledger(request: Request) -> Response:
            refused = await guard(request)
            if refused is not None:
                return refused
            filters = {k: request.query_params.get(k, "").strip() for k in ("agent", "principal", "tool", "outcome")}
            chains, rows = await asyncio.to_thread(self._ledger, filters)
            return HTMLResponse(ledger_page(self.token, chains, rows, filters))

        async def explain(request: Request) -> Response:
            refused = await guard(request)
            if refused is not None:
                return refused
            form = {k: request.query_params.get(k, "") for k in ("tool", "agent", "input")}
            result, problem = None, None
            if form["tool"]:
                try:
                    arguments = json.loads(form["input"] or "{}")
                    if not isinstance(arguments, dict):
                        raise ValueError("the input must be a JSON object")
                    service = self.rt.tool_service(agent=form["agent"] or None, discovery=False)
                    result = service.explain(form["tool"], arguments).to_json()
                except ValueError as exc:
                    problem = f"input is not a JSON object: {exc}"
            return HTMLResponse(explain_page(self.token, form, result, problem))

        return Starlette(
            routes=[
                Route("/", inbox),
                Route("/answer", answer, methods=["POST"]),
                Route("/ledger", ledger),
                Route("/explain", explain),
            ]
        )

    def _ledger(self, filters: dict[str, str]) -> tuple[list[tuple[str, bool, int, str | None]], list[dict[str, Any]]]:
        ledger = self.rt.chokepoint.ledger
        if ledger is None:
            return [], []
        chains: list[tuple[str, bool, int, str | None]] = []
        rows: list[dict[str, Any]] = []
        for agent in ledger.agents():
            report = ledger.verify(agent)
            chains.append((agent, report.ok, report.rows, report.reason))
            if filters["agent"] and agent != filters["agent"]:
                continue
            for row in ledger.rows(agent, limit=MAX_ROWS):
                # The principal field is the principal and its chain as JSON: match a name within it.
                if filters["principal"] and filters["principal"] not in (row.principal or ""):
                    continue
                if filters["tool"] and row.target != filters["tool"]:
                    continue
                if filters["outcome"] and row.outcome != filters["outcome"]:
                    continue
                item = row.to_json()
                item["when"] = dt.datetime.fromtimestamp(row.at_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
                rows.append(item)
        rows.sort(key=lambda r: r.get("at_ms", 0), reverse=True)
        return chains, rows[:MAX_ROWS]

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Serve the page on ``host`` (a loopback address only) and return its URL with the token."""
        import uvicorn

        if not _loopback(host):
            raise ValueError(f"the console serves loopback only, not {host!r}")
        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning", lifespan="off")
        self._server = server = uvicorn.Server(config)
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
