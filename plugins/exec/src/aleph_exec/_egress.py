"""The egress proxy: the one way out of a ``proxied`` sandbox, run by Aleph outside it.

Every run of the sandbox has a network namespace of its own with only a loopback. The zygote makes a
listening socket on ``127.0.0.1`` there and hands it to the host with the run (see
:mod:`aleph_exec._zygote_net`); this proxy accepts on it, so a command reaches it as
``http://127.0.0.1:<port>`` while every outward connection is made here, on the host's network, by the
proxy. A connection belongs to the run whose listener it arrived on: no other run can reach that one.
The run's credential in its proxy URL (``HTTP_PROXY=http://aleph:<token>@127.0.0.1:<port>``) is a second
factor: a request without it gets ``407``, one with another run's is refused and recorded on this run.

Per request (``CONNECT host:port`` for HTTPS and other tunnels, absolute-form ``GET http://...`` for
plain HTTP):

1. the host is judged by the call's lists (:meth:`RunNetwork.judge`): refused, asked about (the
   ``exec_network`` approval on the caller's own chokepoint), or allowed; the HTTP ``Host`` header must
   name the URL's host;
2. the call's bounds admit it (connections per call, new connections per host per minute, bytes);
3. the proxy resolves the name itself (``[exec.network] hosts`` first, then DNS: the sandbox has no
   DNS) and the address guard checks every address; it connects to a checked one (no rebinding);
4. bytes are streamed both ways in chunks (never a whole body), counted against the call's byte bound,
   and the connection is cut when it is reached or when both directions are idle too long.

A refusal is an HTTP answer the command (and through its output, the model) can act on: ``403`` with
a body naming the host and the setting, ``429`` for a bound, ``502`` when the host cannot be reached.
A run driven by an event loop (``arun``) has its connections served on that loop, awake for the run
already; the proxy's own loop, in a daemon thread shared by every sandbox of the process, serves the
runs driven by a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from aleph_exec._egress_http import Head, Refused, answer, framing, split_host_port
from aleph_exec._egress_rules import MAX_ASKS, Connection, RunNetwork
from aleph_exec._egress_sock import Stream, connect

# aleph-core is imported where a host is decided, not at import: the sandbox runs without it (the
# non-root tests run it as nobody from a copy of aleph_exec and its own dependencies only).

__all__ = ["EgressProxy", "proxy_env"]

_HEAD_LIMIT = 64 * 1024
_CHUNK = 256 * 1024  # a relay's buffer per direction: what one read brings at most
_HEAD_TIMEOUT_S = 30.0
_MAX_CLIENTS = 4096  # connections from sandboxes open at once, across all runs (each costs a task)
_ACCEPT_RETRY = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_HOP_HEADERS = frozenset({"proxy-authorization", "proxy-connection", "connection", "keep-alive", "te", "upgrade"})


def proxy_env(port: int, token: str) -> dict[str, str]:
    """The variables that point a run's tools at the proxy (curl, pip, git, npm, Python, Node, Go ...)."""
    url = f"http://aleph:{token}@127.0.0.1:{port}"
    local = "localhost,127.0.0.1,::1"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")}
    env.update(NO_PROXY=local, no_proxy=local, PIP_PROXY=url)
    env.update(npm_config_proxy=url, npm_config_https_proxy=url, NPM_CONFIG_PROXY=url, NPM_CONFIG_HTTPS_PROXY=url)
    env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="http.proxy", GIT_CONFIG_VALUE_0=url)
    return env


class EgressProxy:
    """The proxy's event loop (a daemon thread), its listeners and the runs it serves."""

    _shared: EgressProxy | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._runs: dict[str, RunNetwork] = {}
        self._tasks: dict[RunNetwork, set[asyncio.Task[None]]] = {}
        self._clients = 0
        self._count = threading.Lock()
        self._accepted: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._main, name="aleph-egress-proxy", daemon=True)
        self._thread.start()

    @classmethod
    def shared(cls) -> EgressProxy:
        """The process's proxy (started at first use)."""
        with cls._shared_lock:
            if cls._shared is None or not cls._shared._thread.is_alive():
                cls._shared = cls()
            return cls._shared

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    # -- listeners and runs (called from any thread) ----------------------------------------------

    def serve(
        self, listener: socket.socket, run: RunNetwork, loop: asyncio.AbstractEventLoop | None = None
    ) -> Callable[[], None]:
        """Accept on ``listener``, ``run``'s own socket in its own network namespace; returns what stops it.

        The connections are served on ``loop`` when given (the loop driving the run, called on its
        thread), else on the proxy's own. Does not wait for the proxy's loop (this is on the run's way):
        the first connections wait in the listener's backlog meanwhile. The listener is closed when
        stopped, or at once if it cannot be served.
        """
        listener.setblocking(False)
        serving = loop if loop is not None else self.loop
        run.loop = serving
        started: list[asyncio.Task[None]] = []

        def begin() -> None:
            # The connection that made the run hand its listener over is waiting: its task starts now,
            # one turn of the loop before the accepting task's first.
            with contextlib.suppress(OSError):  # nothing there after all, or an error the task meets again
                self._start_client(listener.accept()[0], run, serving)
            started.append(serving.create_task(self._accept(listener, run)))
            started[0].add_done_callback(lambda _: listener.close())

        def end() -> None:
            if started:
                started[0].cancel()  # its end closes the listener
            else:
                listener.close()

        if loop is not None:
            begin()
            return functools.partial(_on_loop, loop, end)
        try:
            self.loop.call_soon_threadsafe(begin)
        except RuntimeError:  # the proxy's loop is closed: the run has no way out
            listener.close()
            return lambda: None
        return functools.partial(_on_loop, self.loop, end)

    def open_run(self, run: RunNetwork) -> None:
        """Accept requests carrying ``run``'s token from now on."""
        self._runs[run.token] = run  # a dict store: atomic; read on the loop

    async def aclose_run(self, run: RunNetwork) -> None:
        """Stop accepting ``run``'s token and end its connections (from the caller's event loop)."""
        if self._retire(run):
            serving = run.loop or self.loop
            if serving is asyncio.get_running_loop():
                await self._close_run(run)
            else:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._close_run(run), serving))

    def close_run(self, run: RunNetwork) -> None:
        """:meth:`aclose_run` for a thread: waits for the proxy's loop, not for a run's own."""
        if not self._retire(run):
            return
        if run.loop is None or run.loop is self.loop:
            asyncio.run_coroutine_threadsafe(self._close_run(run), self.loop).result(30)
            return
        # The run's own loop may be busy waiting for this thread, or ending: its connections are cancelled on
        # its next turn (or with it), without anyone waiting here.
        serving = run.loop
        with contextlib.suppress(RuntimeError):  # the loop is closed: its tasks went with it
            serving.call_soon_threadsafe(lambda: serving.create_task(self._close_run(run)))

    def _retire(self, run: RunNetwork) -> bool:
        """Refuse ``run``'s token from now on; True when connections of it are open (the loop must end them).

        ``closed`` is set first: a connection registering itself afterwards sees it and ends on its own.
        """
        run.closed = True
        self._runs.pop(run.token, None)
        return bool(self._tasks.get(run))

    async def _close_run(self, run: RunNetwork) -> None:
        tasks = self._tasks.pop(run, set())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- one client connection ------------------------------------------------------------------

    async def _accept(self, listener: socket.socket, run: RunNetwork) -> None:
        """Accept on ``run``'s listener until it is stopped; each connection is a task of its own."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue
            except OSError as exc:
                if exc.errno not in _ACCEPT_RETRY:
                    return  # the listener is gone: its run has no way out any more
                await asyncio.sleep(0.1)  # out of descriptors or memory: the connection waits in the backlog
                continue
            self._start_client(sock, run, loop)

    def _start_client(self, sock: socket.socket, run: RunNetwork, loop: asyncio.AbstractEventLoop) -> None:
        task = loop.create_task(self._client(Stream(sock, loop), run))
        self._accepted.add(task)  # a strong reference until it ends
        task.add_done_callback(self._accepted.discard)

    async def _client(self, client: Stream, bound: RunNetwork) -> None:
        """One connection to ``bound``'s own listener: it came from that run's network namespace."""
        task = asyncio.current_task()
        run: RunNetwork | None = None
        with self._count:  # connections are served on several loops (threads)
            self._clients += 1
            too_many = self._clients > _MAX_CLIENTS
        try:
            if too_many:
                await client.send(answer(429, f"more than {_MAX_CLIENTS} connections to the proxy are open"))
                return
            while True:
                try:
                    async with asyncio.timeout(_HEAD_TIMEOUT_S):
                        raw = await client.readuntil(b"\r\n\r\n", _HEAD_LIMIT)
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
                    return
                try:
                    head = Head(raw[:-4])
                except Refused as exc:
                    await client.send(answer(exc.status, exc.reason))
                    return
                token = head.token()
                if token is not None and token != bound.token:
                    # Another run's credential (read from /proc/<pid>/environ, or passed on) or a made-up
                    # one: the connection is this run's by the socket it came in on, and is refused on its row.
                    reason = "the proxy credential is not this command's own (a command has only its own)"
                    bound.record(*self._target_of(head), "refused", reason)
                    await client.send(answer(407, reason))
                    return
                found = self._runs.get(token) if token else None
                if found is None or found.closed:
                    # No body to skip: the client may retry with credentials on this connection (libcurl does).
                    bodyless = head.method == "CONNECT" or head.get("Content-Length") in (None, "0")
                    bodyless = bodyless and head.get("Transfer-Encoding") is None
                    await client.send(
                        answer(
                            407,
                            "this proxy serves only the commands Aleph runs (use the HTTP_PROXY it sets)",
                            keep_alive=bodyless,
                        )
                    )
                    if not bodyless:
                        return
                    continue
                if run is None:
                    run = found
                    if task is not None:
                        self._tasks.setdefault(run, set()).add(task)
                    if run.closed:  # closed while we registered: its close may not have seen us
                        return
                await self._request(run, head, client)
                return
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            with self._count:
                self._clients -= 1
            if run is not None and task is not None:
                open_tasks = self._tasks.get(run)
                if open_tasks is not None:
                    open_tasks.discard(task)
                    if not open_tasks:
                        self._tasks.pop(run, None)
            client.close()

    async def _request(self, run: RunNetwork, head: Head, client: Stream) -> None:
        conn: Connection | None = None
        try:
            if head.method == "CONNECT":
                host, port = split_host_port(head.target, 443)
            else:
                host, port, path = self._origin(head)
            conn = await self._decide(run, host, port)
            upstream = await self._connect(run, conn)
        except Refused as exc:
            if conn is None:
                conn = run.record(*self._target_of(head), "refused", exc.reason)
            elif conn.verdict != "refused":
                run.refuse(conn, exc.reason)
            await client.send(answer(exc.status, exc.reason))
            return
        try:
            if head.method == "CONNECT":
                await client.send(b"HTTP/1.1 200 Connection established\r\n\r\n")
                upward = None
            else:
                kept = [(n, v) for n, v in head.headers if n.lower() not in _HOP_HEADERS]
                lines = [f"{head.method} {path} {head.version}", *(f"{n}: {v}" for n, v in kept), "Connection: close"]
                request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
                over = run.moved(conn, len(request), 0)
                if over is not None:
                    run.cut(conn, over)
                    raise ConnectionAbortedError(over)
                await upstream.send(request)
                # Exactly this request's body goes up; nothing after it (a pipelined request for another host).
                upward = functools.partial(self._body, run, conn, client, upstream, framing(head))
            await self._relay(run, conn, client, upstream, upward)
        finally:
            upstream.close()

    @staticmethod
    def _target_of(head: Head) -> tuple[str, int]:
        """Host and port of a refused request, for its log entry (as written, when it does not parse)."""
        target = head.target if head.method == "CONNECT" else (urlsplit(head.target).netloc or head.get("Host") or "")
        host, _, port = target.rpartition(":")
        if not host or not port.isdigit():
            return target[:200] or "?", 443 if head.method == "CONNECT" else 80
        return host.strip("[]").lower()[:200], int(port)

    @staticmethod
    def _origin(head: Head) -> tuple[str, int, str]:
        """Host, port and origin-form path of a plain-HTTP proxy request; the Host header must agree."""
        if len(head.all("Host")) > 1:
            raise Refused(400, "a request with more than one Host header")
        host_header = head.get("Host")
        if head.target.startswith("/"):
            if not host_header:
                raise Refused(400, "a request without a host")
            host, port = split_host_port(host_header, 80)
            return host, port, head.target
        url = urlsplit(head.target)
        if url.scheme != "http":
            raise Refused(400, f"only http:// URLs are forwarded as requests; use CONNECT for {url.scheme or 'this'}")
        if url.username or url.password:
            raise Refused(400, "URLs with credentials in them are refused")
        host, port = split_host_port(url.netloc, 80)
        if host_header is not None:
            named, named_port = split_host_port(host_header, port)
            if (named, named_port) != (host, port):
                raise Refused(403, f"the Host header names {host_header}, but the URL names {url.netloc}")
        path = url.path or "/"
        framing(head)  # a body whose end cannot be told is refused before anything is connected
        return host, port, path + (f"?{url.query}" if url.query else "")

    async def _decide(self, run: RunNetwork, host: str, port: int) -> Connection:
        verdict, why = run.judge(host)
        if verdict == "ask":
            key = (host, port)
            if key not in run.asked and len(run.asked) >= MAX_ASKS:
                why = f"host {host} is not in [exec.network] allow, and this call asked about {MAX_ASKS} hosts already"
                raise Refused(403, f"{why}; ask the user to add the hosts it needs")
            if key not in run.asked:
                assert run.ask is not None
                try:
                    run.asked[key] = await run.ask(host, port)
                except Exception:
                    run.asked[key] = False
            if run.asked[key]:
                verdict, why = "allow", "approved by a person"
            else:
                verdict = "deny"
                why = f"host {host} is not in [exec.network] allow and was not approved; ask the user to add it"
        if verdict != "allow":
            raise Refused(403, why)
        bound = run.admit(host)
        if bound is not None:
            raise Refused(429, f"connection to {host} refused: {bound}")
        return run.record(host, port, "allowed")

    async def _connect(self, run: RunNetwork, conn: Connection) -> Stream:
        import aleph

        cfg = run.config
        loop = asyncio.get_running_loop()
        pinned = cfg.hosts.get(conn.host)
        literal = aleph.parse_address(conn.host)
        try:
            async with asyncio.timeout(cfg.connect_timeout_seconds):
                if pinned is not None or literal is not None:
                    texts = [pinned or str(literal)]
                else:
                    try:
                        infos = await loop.getaddrinfo(conn.host, conn.port, type=socket.SOCK_STREAM)
                    except OSError as exc:
                        raise Refused(502, f"cannot resolve {conn.host}: {exc.strerror or exc}") from None
                    texts = list(dict.fromkeys(str(info[4][0]) for info in infos))
                addresses = [a for t in texts if (a := aleph.parse_address(t)) is not None]
                if not addresses:
                    raise Refused(502, f"{conn.host} resolved to no address")
                problem = run.guard.problem(conn.host, addresses)
                if problem is not None:
                    raise Refused(
                        403, f"{problem}; list the name in [exec.network] private_hosts to reach internal hosts"
                    )
                last: OSError | None = None
                for addr in addresses:
                    try:
                        family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
                        upstream = await connect(loop, str(addr), conn.port, family)
                    except OSError as exc:
                        last = exc
                        continue
                    conn.address = str(addr)
                    return upstream
                raise Refused(502, f"cannot connect to {conn.host}:{conn.port}: {last}")
        except TimeoutError:
            raise Refused(
                504, f"{conn.host}:{conn.port} did not answer within {cfg.connect_timeout_seconds:g} s"
            ) from None

    async def _body(
        self,
        run: RunNetwork,
        conn: Connection,
        src: Stream,
        dst: Stream,
        length: int | None,
    ) -> None:
        """Forward one request body (``length`` bytes, or chunked when None), counted like the rest."""

        async def copy(n: int) -> None:
            while n > 0:
                data = await src.read(min(n, _CHUNK))
                if not data:
                    raise ConnectionResetError("the request body ended early")
                n -= len(data)
                await send(data)

        async def send(data: bytes) -> None:
            over = run.moved(conn, len(data), 0)
            if over is not None:
                run.cut(conn, over)
                raise ConnectionAbortedError(over)
            await dst.send(data)

        if length is not None:
            await copy(length)
            return
        while True:
            line = await src.readuntil(b"\r\n", _HEAD_LIMIT)
            await send(line)
            size_text = line.split(b";", 1)[0].strip()
            if not size_text or len(size_text) > 16 or any(c not in b"0123456789abcdefABCDEF" for c in size_text):
                raise ConnectionAbortedError("a malformed chunk size in the request body")
            size = int(size_text, 16)
            if size == 0:
                while (trailer := await src.readuntil(b"\r\n", _HEAD_LIMIT)) != b"\r\n":
                    await send(trailer)
                await send(trailer)
                return
            await copy(size + 2)  # the chunk and its CRLF

    async def _relay(
        self,
        run: RunNetwork,
        conn: Connection,
        client: Stream,
        upstream: Stream,
        upward: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Stream both ways until the host's side ends, a bound is reached, or both sides stay idle.

        ``upward`` replaces the client-to-host stream (a plain HTTP request's body, see :meth:`_body`).
        """

        async def pump(src: Stream, dst: Stream, upward: bool) -> None:
            buffer = bytearray(_CHUNK)  # one per direction, reused: the next read waits for this send
            view = memoryview(buffer)
            while True:
                n = await src.recv_into(buffer)
                if not n:
                    dst.write_eof()
                    return
                over = run.moved(conn, n, 0) if upward else run.moved(conn, 0, n)
                if over is not None:
                    run.cut(conn, over)
                    raise ConnectionAbortedError(over)
                await dst.send(view[:n])

        async def idle_watch() -> None:
            limit = run.config.idle_timeout_seconds
            while True:
                await asyncio.sleep(min(limit, 5.0))
                if time.monotonic() - conn.last >= limit:
                    run.cut(conn, f"no bytes either way for {limit:g} s, [exec.network] idle_timeout_seconds")
                    return

        pumps = [
            asyncio.ensure_future(upward() if upward is not None else pump(client, upstream, True)),
            asyncio.ensure_future(pump(upstream, client, False)),
        ]
        watch = asyncio.ensure_future(idle_watch())
        try:
            pending: set[asyncio.Future[Any]] = {*pumps, watch}
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                failed = any(f.exception() is not None for f in done if not f.cancelled())
                # Over when the host's side has ended (a plain HTTP answer ends the exchange: Connection: close).
                if watch in done or failed or pumps[1] in done:
                    break
        finally:
            for f in (*pumps, watch):
                f.cancel()
            await asyncio.gather(*pumps, watch, return_exceptions=True)


def _on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    """Call ``fn`` on ``loop``: now when this is its thread, else on its next turn (never when it is closed)."""
    try:
        here = asyncio.get_running_loop() is loop
    except RuntimeError:
        here = False
    if here:
        fn()
        return
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn)


def attach(zygote: Any, mode: str) -> None:
    """Give a freshly started zygote's runs the proxy (network ``proxied``, when it offers their listeners)."""
    if mode != "proxied" or not zygote.offered_port:
        return
    try:
        EgressProxy.shared()
    except RuntimeError as exc:  # runs then get no network: closed, never open
        zygote.proxy_error = f"the egress proxy could not start: {exc}"
        return
    zygote.proxy_port = zygote.offered_port


def serve_run(
    listener: socket.socket, run: RunNetwork, loop: asyncio.AbstractEventLoop | None = None
) -> Callable[[], None]:
    """Serve ``run``'s own listener (from its network namespace); returns what stops it (from any thread).

    With ``loop``, the event loop driving the run (on its thread), that loop watches the listener
    until the first connection comes and then serves the run's connections itself: it is awake for
    the run already, so a request crosses no thread on its way out and its answer none on its way
    back; a run that opens no connection costs one reader, no task. Without it (a run driven by a
    thread), the proxy's own loop serves them.
    """
    if loop is None:
        return EgressProxy.shared().serve(listener, run)
    fd = listener.fileno()
    served: list[Callable[[], None]] = []  # the proxy's stop, once handed over
    ended = threading.Event()

    def hand_over() -> None:
        loop.remove_reader(fd)
        if not served and not ended.is_set():
            # Served on this loop, awake for it now: no hand-over to the proxy's thread on the request's way.
            served.append(EgressProxy.shared().serve(listener, run, loop))

    def end() -> None:  # on the loop's thread
        if served:
            served[0]()
        else:
            loop.remove_reader(fd)
            listener.close()

    def stop() -> None:
        if ended.is_set():
            return
        ended.set()
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            end()
            return
        try:
            loop.call_soon_threadsafe(end)
        except RuntimeError:  # the loop is closed: nothing watches the listener any more
            if served:
                served[0]()
            else:
                listener.close()

    loop.add_reader(fd, hand_over)
    return stop


def open_net(zygote: Any, mode: str, network: RunNetwork | None, config: Any, env: dict[str, str]) -> RunNetwork | None:
    """Register a run with the proxy and point its environment at it; None when the run has no proxy."""
    if mode != "proxied" or not getattr(zygote, "proxy_port", 0):
        return None
    net = network if network is not None else RunNetwork(config)
    env.update(proxy_env(zygote.proxy_port, net.token))
    EgressProxy.shared().open_run(net)
    return net


@contextlib.contextmanager
def closing_on_error(net: RunNetwork | None) -> Iterator[None]:
    """Take ``net`` off the proxy when the run it was opened for does not start."""
    try:
        yield
    except BaseException:
        if net is not None:
            EgressProxy.shared().close_run(net)
        raise
