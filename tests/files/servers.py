"""Small HTTP servers on loopback for the web_fetch and search tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

Route = Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]


@contextmanager
def serve(routes: dict[str, Route]) -> Iterator[str]:
    """Serve ``routes`` (path → handler) on 127.0.0.1; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = routes.get(urlparse(self.path).path)
            status, headers, body = route(self) if route else (404, {"Content-Type": "text/plain"}, b"not found")
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def searxng_routes(results: list[dict[str, str]]) -> dict[str, Route]:
    """A SearXNG-compatible ``/search?q=...&format=json`` endpoint.

    This is the one allowed stand-in: the real search engines SearXNG queries are on the internet,
    which this machine cannot reach. It speaks SearXNG's JSON shape and echoes the query.
    """

    def search(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        query = parse_qs(urlparse(handler.path).query)
        if query.get("format") != ["json"]:
            return 403, {"Content-Type": "text/plain"}, b"format not allowed"
        q = query.get("q", [""])[0]
        body = {"query": q, "results": [{**r, "content": f"{r['content']} ({q})"} for r in results]}
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()

    return {"/search": search}
