"""Warm starts for ``scripts/run-main``: a start server forks ``aleph serve`` already imported.

Importing the MCP SDK alone costs about 1.5 s of CPU, so a cold ``aleph serve`` cannot answer its first
``tools/list`` within 2 s. The main job keeps one start server per virtualenv: a process that has imported
Aleph, the SDK and every plugin module (and started nothing: no thread, no loop, no runtime) and waits on
a unix socket. A launch connects with a small stdlib-only client (this file run as a script), hands over
its stdin, stdout and stderr (``SCM_RIGHTS``), its argv, working directory and environment; the server
forks, and the child becomes that ``aleph serve``: same descriptors, directory and environment as a cold
start, only without the imports. The client waits, forwards signals to the child and exits with its code.

Safety: the socket lives in a 0700 directory of the virtualenv and the server serves only its own user
(``SO_PEERCRED``). The sources' fingerprint (paths, sizes, mtimes) is checked on every launch: a server
started from other sources refuses, exits, and the launch starts cold. One server at a time (a lock file);
it exits after ``ALEPH_WARM_IDLE_S`` seconds (default 900) without a launch or a running child.
Without a usable server a launch simply starts cold and, in the background, a new server.

Top-level imports are the standard library only: the client runs with ``python -I -S``.
"""

from __future__ import annotations

import array
import fcntl
import hashlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

MAX_REQUEST = 1 << 20
"""Largest request a client may send (argv, cwd, environment)."""
DEFAULT_IDLE_S = 900.0


def fingerprint(roots: list[str]) -> str:
    """A hash of every source file's path, size and mtime under ``roots`` (what a server was imported from)."""
    digest = hashlib.sha256()
    for root in sorted(roots):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.endswith(".egg-info"))
            for name in sorted(filenames):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:32]


def _frame(payload: dict[str, object]) -> bytes:
    body = json.dumps(payload).encode()
    return struct.pack(">I", len(body)) + body


def _read_frame(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    """One length-prefixed JSON request and the descriptors sent with its first bytes."""
    fds = array.array("i")
    data = b""
    first = True
    while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
        if len(data) >= 4 and struct.unpack(">I", data[:4])[0] > MAX_REQUEST:
            raise ValueError("request too large")
        if first:
            msg, ancdata, _flags, _addr = conn.recvmsg(65536, socket.CMSG_LEN(3 * fds.itemsize))
            for level, kind, cdata in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(cdata[: len(cdata) - (len(cdata) % fds.itemsize)])
            first = False
        else:
            msg = conn.recv(65536)
        if not msg:
            raise ValueError("connection closed mid-request")
        data += msg
    size = struct.unpack(">I", data[:4])[0]
    return json.loads(data[4 : 4 + size]), list(fds)


# -- the client (run as a script by scripts/run-main) ------------------------------------------------


def client(sock_path: str, roots: list[str], argv: list[str], cold: list[str]) -> int:
    """Hand this process's stdio to the start server's fork; start cold (and a new server) without one."""
    want = fingerprint(roots)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(sock_path)
        request = {"v": 1, "fingerprint": want, "argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
        conn.sendmsg([_frame(request)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        reader = conn.makefile("r", encoding="utf-8")
        first = json.loads(reader.readline() or "{}")
    except (OSError, ValueError):
        first = {}
    if "pid" not in first:
        conn.close()
        _spawn_daemon([sys.executable, "-m", "aleph._cli._warm", "daemon", sock_path, *roots], Path(sock_path).parent)
        os.execv(cold[0], cold)  # this launch starts cold; the next finds a warm server
    pid = int(str(first["pid"]))
    # The child has the client's pipes now; this process keeps none of them open.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    line = reader.readline()
    try:
        return int(json.loads(line)["exit"]) if line else 1
    except (ValueError, KeyError, TypeError):
        return 1


def _spawn_daemon(command: list[str], directory: Path) -> None:
    """Start a start server in its own session, detached from this launch's descriptors."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(directory / "server.log", "ab") as log:
            subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
    except OSError:
        pass  # no warm start next time either; every launch still works cold


# -- the start server -------------------------------------------------------------------------------


def _preload() -> None:
    """Import what ``aleph serve`` imports: Aleph, the MCP SDK, every installed plugin module."""
    from importlib.metadata import entry_points

    import mcp.server.stdio  # noqa: F401

    import aleph._cli
    import aleph._cli.serve_cmd
    import aleph._mcp.serve

    for ep in entry_points(group="aleph"):
        try:
            ep.load()
        except Exception:  # a broken plugin fails in the child, as on a cold start, with its message
            continue
    del aleph


def daemon(sock_path: str, roots: list[str]) -> int:
    """Serve warm starts on ``sock_path`` until idle; ``roots`` are the source trees it imports from."""
    want = fingerprint(roots)  # before importing: a later edit shows as a mismatch, never the reverse
    directory = Path(sock_path).parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    lock = os.open(str(directory / "lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another start server runs
    _preload()
    Path(sock_path).unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    listener.listen(16)
    (directory / "pid").write_text(str(os.getpid()))
    idle_s = float(os.environ.get("ALEPH_WARM_IDLE_S", DEFAULT_IDLE_S))
    children: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    last = time.monotonic()
    accepting = True
    stop = []
    signal.signal(signal.SIGTERM, lambda _sig, _frame: stop.append(True))
    while accepting or children:
        if stop and accepting:  # asked to stop: take no more launches, let the running ones finish
            accepting = False
            selector.unregister(listener)
            listener.close()
            Path(sock_path).unlink(missing_ok=True)
        for key, _ in selector.select(timeout=0.25):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                child = _start(conn, want, listener, lock)
                if child is None:
                    conn.close()
                elif child == -1:  # stale sources: stop taking launches, finish the running ones
                    accepting = False
                    selector.unregister(listener)
                    listener.close()
                    Path(sock_path).unlink(missing_ok=True)
                    os.close(lock)  # a new server for the new sources may start now
                    conn.close()
                else:
                    children[child] = conn
                    selector.register(conn, selectors.EVENT_READ, child)
                last = time.monotonic()
            else:
                # The client went away (or wrote something): its child must not outlive it unnoticed.
                selector.unregister(key.fileobj)
                try:
                    os.kill(key.data, signal.SIGTERM)
                except OSError:
                    pass
        _reap(children, selector)
        if accepting and not children and time.monotonic() - last > idle_s:
            break
    if accepting:
        listener.close()
        Path(sock_path).unlink(missing_ok=True)
    return 0


def _start(conn: socket.socket, want: str, listener: socket.socket, lock: int) -> int | None:
    """Fork the child of one launch; its pid, -1 for stale sources, None for a request refused."""
    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            return None
        conn.settimeout(5)
        request, fds = _read_frame(conn)
        conn.settimeout(None)
    except (OSError, ValueError):
        return None
    try:
        if len(fds) != 3 or request.get("v") != 1:
            return None
        if request.get("fingerprint") != want:
            conn.sendall(b'{"stale": true}\n')
            return -1
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become(request, fds, conn, listener, lock)
        conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
        return pid
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def _become(
    request: dict[str, object], fds: list[int], conn: socket.socket, listener: socket.socket, lock: int
) -> None:
    """In the fork: take the launch's descriptors, directory and environment, and run ``aleph``."""
    code = 1
    try:
        listener.close()
        conn.close()
        os.close(lock)
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)  # the copies on 0-2 are the ones this process uses
        env = request.get("env")
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in (env.items() if isinstance(env, dict) else [])})
        os.environ["ALEPH_WARM_START"] = "1"
        os.chdir(str(request.get("cwd")))
        argv = [str(a) for a in request.get("argv") or []]  # type: ignore[attr-defined]
        from aleph._cli import main

        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        try:
            conn.sendall((json.dumps({"exit": code if code >= 0 else 128 - code}) + "\n").encode())
        except OSError:
            pass
        try:
            selector.unregister(conn)
        except (KeyError, ValueError):
            pass  # unregistered when its client went away
        conn.close()


def _main(args: list[str]) -> int:
    """``_warm.py client SOCK ROOT... --cold CMD... -- ARGV...`` or ``-m aleph._cli._warm daemon SOCK ROOT...``."""
    if args[:1] == ["daemon"] and len(args) >= 3:
        return daemon(args[1], args[2:])
    if args[:1] == ["client"] and "--cold" in args and "--" in args and args.index("--cold") > 2:
        cold = args[args.index("--cold") + 1 : args.index("--")]
        return client(args[1], args[2 : args.index("--cold")], args[args.index("--") + 1 :], cold)
    print(_main.__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
