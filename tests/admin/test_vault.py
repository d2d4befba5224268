"""The vault: a secret reaches a tool only through a handle, after the verdict, and never leaves in the clear.

web_fetch (aleph-files) calls a real HTTP server on loopback that checks the header it was sent; then
every byte the runtime wrote (data directory, workspace, ledger, event log, results, stderr, logs) is
scanned for the plaintext.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import aleph

from .helpers import approving, output

pytestmark = pytest.mark.anyio

SECRET = "ghp_s3cr3t-Value-9d7c1e5a"


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        got = self.headers.get("Authorization", "")
        type(self).seen.append(got)
        ok = got == f"Bearer {SECRET}"
        body = (f"header ok, you sent {got}" if ok else "wrong header").encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/user"
    finally:
        httpd.shutdown()
        httpd.server_close()


CONFIG = '[files]\nallowed_hosts = ["127.0.0.1"]\n'


class _Chunks:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_tool_start(self, tool_name: str, args_summary: str) -> None:
        self.seen.append(args_summary)

    def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None:
        self.seen.append(result_summary)

    def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
        self.seen.append(chunk)


@aleph.tool
def echo_text(text: str, fail: bool = False) -> str:
    """Stream ``text`` as progress, then return it (or fail with it)."""
    aleph.notify_tool_streaming_chunk("echo_text", f"working on {text}")
    if fail:
        raise aleph.ExecutionFailed("echo_text", f"could not use {text}")
    return f"used {text}"


async def test_a_stored_secret_reaches_the_server_and_no_byte_written_holds_it(
    make_runtime: Callable[..., aleph.Aleph],
    server: str,
    workspace: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    chunks = _Chunks()
    previous = aleph.set_tool_progress_handler(chunks)
    results: list[str] = []
    try:
        async with make_runtime(CONFIG, files=True) as rt:
            rt.register(echo_text)
            human = approving()
            alice = rt.tool_service(agent="alice", requester=human, turn=aleph.TurnContext(session_key="alice-s"))
            stored = await alice.call(
                "vault_store",
                {
                    "action": "store",
                    "name": "gh",
                    "secret": SECRET,
                    "allow": ["web_fetch(domain:127.0.0.1)", "echo_text"],
                    "fields": ["headers", "text"],
                },
            )
            assert output(stored)["handle"] == "{{vault:gh}}"
            fetched = await alice.call(
                "web_fetch",
                {"url": server, "raw": True, "headers": [{"name": "Authorization", "value": "Bearer {{vault:gh}}"}]},
            )
            assert _Handler.seen == [f"Bearer {SECRET}"]  # the server got the value
            body = output(fetched)
            assert "header ok, you sent Bearer {{vault:gh}}" in json.dumps(body)  # the echo came back scrubbed
            echoed = await alice.call("echo_text", {"text": "{{vault:gh}}"})
            failed = await alice.call("echo_text", {"text": "{{vault:gh}}", "fail": True})
            assert echoed.success and echoed.output == "used {{vault:gh}}"
            assert not failed.success and "could not use {{vault:gh}}" in (failed.error or "")
            assert "working on {{vault:gh}}" in chunks.seen
            listed = await alice.call("vault_store", {"action": "list"})
            results += [stored.output, fetched.output, echoed.output, str(failed.error), listed.output]
            results += [r.summary + r.reason + json.dumps(r.arguments) for r in human.requests]
            ledger_dir = rt.chokepoint.ledger.directory if rt.chokepoint.ledger is not None else None
            data_dir = rt.config.data_dir
    finally:
        aleph.set_tool_progress_handler(previous)
    out, err = capfd.readouterr()
    written = [out, err, caplog.text, *results, *chunks.seen]
    roots = [data_dir, workspace, *([ledger_dir] if ledger_dir else [])]
    files = [p for root in roots for p in root.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".sqlite3") for p in files) and any("ledger" in str(p) for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), f"{path} holds the secret's plaintext"
    for text in written:
        assert SECRET not in text


async def test_a_handle_is_refused_outside_its_rule_and_for_another_principal_like_a_missing_one(
    make_runtime: Callable[..., aleph.Aleph], server: str
) -> None:
    async with make_runtime(CONFIG, files=True) as rt:
        rt.register(echo_text)
        alice = rt.tool_service(agent="alice", requester=approving())
        bob = rt.tool_service(agent="bob", requester=approving())
        output(
            await alice.call(
                "vault_store",
                {"action": "store", "name": "gh", "secret": SECRET, "allow": ["web_fetch(domain:api.github.com)"]},
            )
        )
        other_domain = await alice.call(
            "web_fetch", {"url": server, "headers": [{"name": "Authorization", "value": "{{vault:gh}}"}]}
        )
        other_tool = await alice.call("echo_text", {"text": "{{vault:gh}}"})
        foreign = await bob.call("echo_text", {"text": "{{vault:gh}}"})
        missing = await bob.call("echo_text", {"text": "{{vault:gx}}"})
        assert _Handler.seen == []
        for refused in (other_domain, other_tool, foreign, missing):
            assert not refused.success and refused.error_kind == "permission_denied"
        assert foreign.error.replace("gh", "N") == missing.error.replace("gx", "N")
