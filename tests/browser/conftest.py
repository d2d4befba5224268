"""Browser tests: pages served on loopback by the tests themselves, one real headless Chromium per module."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aleph_browser.plugin
import pytest

import aleph

PAGES: dict[str, str] = {
    "/form": """<!doctype html><title>Form</title>
<form onsubmit="event.preventDefault(); document.getElementById('out').textContent = 'name=' + this.name.value
  + ' color=' + this.color.value + ' agree=' + this.agree.checked + ' size=' + this.size.value;">
<label>Name <input name="name"></label>
<label>Color <select name="color">
  <option value="r">Red</option><option value="g">Green</option><option value="b">Blue</option></select></label>
<label><input type="checkbox" name="agree"> Agree</label>
<label><input type="radio" name="size" value="s" checked> Small</label>
<label><input type="radio" name="size" value="l"> Large</label>
<button type="submit">Send</button></form><p id="out">nothing yet</p>
<button id="counter" onclick="this.textContent = 'Clicked ' + (++window.n) + ' times'">Click me</button>
<script>window.n = 0;</script>""",
    "/dialogs": """<!doctype html><title>Dialogs</title>
<button onclick="alert('Hello there'); document.getElementById('out').textContent = 'alerted'">Alert</button>
<button onclick="document.getElementById('out').textContent = 'confirm=' + confirm('Sure?')">Confirm</button>
<button onclick="document.getElementById('out').textContent = 'prompt=' + prompt('Your name?')">Prompt</button>
<p id="out">none</p>""",
    "/drag": """<!doctype html><title>Drag</title>
<div id="src" draggable="true" style="width:80px;height:40px;background:#ccc"
  ondragstart="event.dataTransfer.setData('text/plain', 'card')">Card</div>
<div id="dst" style="width:200px;height:100px;background:#eef;margin-top:40px" ondragover="event.preventDefault()"
  ondrop="event.preventDefault(); this.textContent = 'dropped ' + event.dataTransfer.getData('text/plain')"
  >Drop here</div>""",
    "/upload": """<!doctype html><title>Upload</title>
<input type="file" id="file" multiple onchange="document.getElementById('out').textContent =
  Array.from(this.files).map(f => f.name + ':' + f.size).join(',')"><p id="out">no file</p>""",
    "/tabs": """<!doctype html><title>Opener</title>
<button onclick="window.open('/form', '_blank')">Open form</button>""",
    "/iframe": """<!doctype html><title>Frames</title><h1>Outer</h1>
<iframe src="/inner" width="400" height="200"></iframe>""",
    "/inner": """<!doctype html><title>Inner</title>
<button onclick="this.textContent = 'Inner clicked'">Inner button</button>""",
    "/slow": """<!doctype html><title>Slow</title><p>Loading...</p>
<script>setTimeout(() => { document.body.insertAdjacentHTML('beforeend', '<p>Ready now</p>'); }, 800);</script>""",
    "/console": """<!doctype html><title>Console</title>
<script>console.log('hello log'); console.error('boom error');</script>
<button onclick="console.error('clicked error')">Err</button>""",
    "/download": """<!doctype html><title>Download</title><a href="/file.txt" download>Get file</a>""",
    "/subresource": """<!doctype html><title>Sub</title><p>Text</p>
<img src="http://localhost:{port}/pixel.png" alt="pixel"><script src="/script-redirect"></script>""",
    "/link-redirect": """<!doctype html><title>Link</title><a href="/r1">Go away</a>""",
}


def big_page() -> str:
    """About 10,000 DOM nodes: 2,500 rows of a div with a link, a span and text, plus a toggle at the top."""
    rows = "".join(f'<div><a href="#r{i}">row {i}</a> <span>value {i}</span></div>' for i in range(2500))
    return (
        "<!doctype html><title>Big</title>"
        "<button onclick=\"document.getElementById('st').textContent = 'on'\">Toggle</button>"
        f'<p id="st">off</p>{rows}'
    )


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        path = self.path.split("?", 1)[0]
        if path == "/r1":
            self._send(302, b"", Location="/r2")
        elif path == "/r2":
            self._send(302, b"", Location=f"http://localhost:{port}/final")
        elif path == "/script-redirect":
            self._send(302, b"", Location=f"http://localhost:{port}/evil.js")
        elif path == "/big":
            self._send(200, big_page().encode())
        elif path == "/file.txt":
            self._send(200, b"file body", "text/plain", Content_Disposition='attachment; filename="report.txt"')
        elif path in PAGES:
            self._send(200, PAGES[path].replace("{port}", str(port)).encode())
        else:
            self._send(404, b"<title>Not found</title>not found")


@dataclass
class Site:
    origin: str
    port: int

    def url(self, path: str) -> str:
        return self.origin + path


@pytest.fixture(scope="session")
def site() -> Iterator[Site]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    yield Site(f"http://127.0.0.1:{port}", port)
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    # Module scope: the module's tests share one event loop, so they can share one browser.
    return "asyncio"


def make_runtime(workspace: Path, browser_toml: str) -> aleph.Aleph:
    """A runtime with only the browser plugin, its data directory inside ``workspace``."""
    (workspace / "aleph.toml").write_text(
        f'[workspace]\ndata_dir = "{(workspace / ".aleph-data").as_posix()}"\n\n[browser]\n{browser_toml}\n'
    )
    return aleph.load(
        workspace / "aleph.toml", workspace=workspace, plugins=[aleph_browser.plugin], entry_points=False, strict=True
    )


@pytest.fixture
def make_rt() -> Callable[[Path, str], aleph.Aleph]:
    """``make_rt(workspace, browser_toml)``: a fresh runtime with its own browser (close it when done)."""
    return make_runtime


@pytest.fixture(scope="module")
async def shared_rt(site: Site, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[aleph.Aleph]:
    """One runtime (and so one browser) for the whole module; only the test server's origin is allowed."""
    workspace = tmp_path_factory.mktemp("ws")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(workspace / ".config"))
        rt = make_runtime(workspace, f'allowed_origins = ["{site.origin}"]\nmax_tabs = 100')
    try:
        yield rt
    finally:
        await rt.aclose()


@pytest.fixture
def service(shared_rt: aleph.Aleph) -> aleph.ToolService:
    return aleph.UnscopedToolService(shared_rt.registry)


Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


@pytest.fixture
def call(service: aleph.ToolService) -> Call:
    """``await call(name, input)``: execute a tool, return its output value (text for actions, JSON for listings)."""

    async def run(name: str, payload: dict[str, Any]) -> Any:
        return (await service.execute(name, payload)).value

    return run
