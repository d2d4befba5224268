"""Servers on loopback for the egress tests: a static file server, a package index, a git repository.

The proxy is told (``[exec.network] hosts``) that names like ``files.example`` live at 127.0.0.1, so
these servers stand for hosts on the internet; the sandbox itself cannot reach them any other way.
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

NAMES = ("files.example", "pypi.example", "git.example", "internal.example")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(root: Path) -> Iterator[int]:
    """Serve ``root`` over HTTP on 127.0.0.1; yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def network_toml(allow: tuple[str, ...] = ("files.example", "pypi.example", "git.example"), extra: str = "") -> str:
    """``[exec.network]`` pinning the test names to loopback and allowing ``allow``."""
    hosts = "\n".join(f'"{name}" = "127.0.0.1"' for name in NAMES)
    listed = ", ".join(f'"{h}"' for h in allow)
    private = ", ".join(f'"{h}"' for h in NAMES if h != "internal.example")
    return f"[exec.network]\nallow = [{listed}]\nprivate_hosts = [{private}]\n{extra}\n[exec.network.hosts]\n{hosts}\n"


def build_wheel(directory: Path, name: str = "egresspkg", version: str = "1.0") -> Path:
    """A minimal, valid pure-Python wheel."""
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "VALUE = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: aleph-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
        zf.writestr(f"{info}/RECORD", "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n")
    return wheel


def package_index(root: Path, name: str = "egresspkg") -> Path:
    """A PEP 503 simple index under ``root/simple`` holding one wheel under ``root/packages``."""
    (root / "packages").mkdir(parents=True)
    wheel = build_wheel(root / "packages", name)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    page = root / "simple" / name
    page.mkdir(parents=True)
    link = f'<a href="../../packages/{wheel.name}#sha256={digest}">{wheel.name}</a>'
    (page / "index.html").write_text(f"<!DOCTYPE html><html><body>{link}</body></html>\n")
    return wheel


def git_repository(root: Path) -> Path:
    """A bare repository served over dumb HTTP (``update-server-info``) at ``root/repo.git``, one commit."""
    src = root / "src"
    src.mkdir(parents=True)
    (src / "README").write_text("cloned through the proxy\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    env |= {"HOME": str(root), "PATH": "/usr/bin:/bin"}

    def git(*args: str, cwd: Path = src) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "README")
    git("commit", "-q", "-m", "one")
    git("clone", "-q", "--bare", str(src), str(root / "repo.git"), cwd=root)
    git("update-server-info", cwd=root / "repo.git")
    return root / "repo.git"


class KeepAliveRecorder:
    """A raw HTTP server that answers the first request and keeps the connection open, recording every byte.

    It ignores ``Connection: close`` on purpose (as some servers and CDNs do): whatever a proxy forwards
    after the first request reaches it, and :attr:`received` shows it once the proxy closes the connection.
    """

    def __init__(self, answer_after: bytes = b"\r\n\r\n") -> None:
        import socket

        self.answer_after = answer_after  # what the request must hold before the answer goes out
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            answered = False
            while chunk := conn.recv(65536):
                self.received += chunk
                if not answered and self.answer_after in self.received:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    answered = True
        self.closed.set()

    def close(self) -> None:
        self.sock.close()
