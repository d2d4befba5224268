"""HTTP for the egress proxy: the request head as a proxy reads it, and the answers it gives.

Strict on purpose: what could be read two ways (a bare CR or LF in a header, two ``Host`` headers,
conflicting ``Content-Length``, a ``Transfer-Encoding`` other than ``chunked``) is refused with ``400``
before anything is connected, so the host judged is the host reached.
"""

from __future__ import annotations

import base64
import binascii

__all__ = ["Head", "Refused", "answer", "framing", "split_host_port"]


class Refused(Exception):
    """A request the proxy answers itself: ``status`` and a ``reason`` the command (and the model) reads."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


_STATUS = {400: "Bad Request", 403: "Forbidden", 407: "Proxy Authentication Required", 429: "Too Many Requests"}
_STATUS.update({502: "Bad Gateway", 504: "Gateway Timeout"})


def answer(status: int, text: str, *, keep_alive: bool = False) -> bytes:
    """The proxy's own HTTP answer: ``text`` in the body and in ``X-Aleph-Egress`` (407s ask for Basic auth)."""
    body = f"Aleph egress proxy: {text}\n".encode()
    head = [f"HTTP/1.1 {status} {_STATUS.get(status, 'Error')}", "Content-Type: text/plain; charset=utf-8"]
    head.append(f"Content-Length: {len(body)}")
    head.append(f"X-Aleph-Egress: {text[:200]}".replace("\r", " ").replace("\n", " "))
    if status == 407:
        head.append('Proxy-Authenticate: Basic realm="aleph"')
    head.append("Connection: keep-alive" if keep_alive else "Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def split_host_port(text: str, default: int) -> tuple[str, int]:
    """``host[:port]`` / ``[v6]:port`` → (host lowercase without brackets or trailing dot, port)."""
    host, port = text, default
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise Refused(400, f"{text!r} is not a host")
        host, rest = text[1:end], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise Refused(400, f"{text!r} is not a host")
            port = _port(rest[1:])
    elif text.count(":") == 1:
        host, _, raw = text.partition(":")
        port = _port(raw)
    host = host.lower().rstrip(".")
    if not host or not host.isascii() or any(c in host for c in " /\\@%\t"):
        raise Refused(400, f"{text!r} is not a host name")
    return host, port


def _port(raw: str) -> int:
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise Refused(400, f"{raw!r} is not a port")
    return int(raw)


class Head:
    """A parsed request head: method, target, version and headers (as sent, in order)."""

    def __init__(self, raw: bytes) -> None:
        try:
            text = raw.decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
            raise Refused(400, "the request head is not text") from None
        lines = text.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise Refused(400, "not an HTTP request line")
        self.method, self.target, self.version = parts
        self.headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            # A bare CR, LF or NUL inside a line would become a header of its own upstream (smuggling).
            if not sep or not name or name != name.strip() or any(c in line for c in "\r\n\0"):
                raise Refused(400, f"malformed header line {line[:60]!r}")
            self.headers.append((name, value.strip()))

    def all(self, name: str) -> list[str]:
        """Every value of header ``name``."""
        lower = name.lower()
        return [v for n, v in self.headers if n.lower() == lower]

    def get(self, name: str) -> str | None:
        """The first value of header ``name``, or None."""
        lower = name.lower()
        return next((v for n, v in self.headers if n.lower() == lower), None)

    def token(self) -> str | None:
        """The password of ``Proxy-Authorization: Basic`` (the run's credential), or None."""
        value = self.get("Proxy-Authorization") or ""
        scheme, _, data = value.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            _, _, password = base64.b64decode(data.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password or None


def framing(head: Head) -> int | None:
    """The request body's length, or None when it is chunked; 400 when its end cannot be told for sure."""
    lengths = head.all("Content-Length")
    coding = head.all("Transfer-Encoding")
    if coding:
        if lengths or len(coding) > 1 or coding[0].strip().lower() != "chunked":
            raise Refused(400, "a request body framed in a way this proxy does not forward (use Content-Length)")
        return None
    if len(set(lengths)) > 1 or (lengths and not lengths[0].isdigit()):
        raise Refused(400, "a request with conflicting or malformed Content-Length headers")
    return int(lengths[0]) if lengths else 0
