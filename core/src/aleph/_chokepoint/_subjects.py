"""What a call's arguments name, in the one spelling rules compare: URL hosts, paths and globs.

A host is canonicalised the way resolvers will read it (or judged unknown when parsers could
disagree); a path has ``.``/``..``/duplicate separators folded and is workspace-relative when inside
the workspace; a glob translates so that ``*`` never crosses ``/`` in paths (compiled when first matched).
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
import socket
from urllib.parse import urlsplit

__all__ = ["UNKNOWN_HOST", "Glob", "canonical_host", "glob_regex", "normalise_path"]

UNKNOWN_HOST = "\x00unknown-host"
"""The host of a URL whose host cannot be determined beyond doubt (domain deny and ask rules match it)."""

_AMBIGUOUS_URL = re.compile(r"[\s\\\x00-\x1f\x7f]")


def canonical_host(url: str) -> str | None:
    """The host ``url`` will reach, in one canonical spelling; None when parsers could disagree about it.

    Lowercased, trailing dots dropped, IDNA-encoded; IPv4 in any legacy spelling (``2130706433``,
    ``0x7f.1``) and IPv6 become their standard text. A URL with a backslash, whitespace or control
    characters, several ``@``, or a scheme without ``//`` has no canonical host.
    """
    if _AMBIGUOUS_URL.search(url):
        return None
    if "://" not in url:
        if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:(?!\d+(?:/|$))", url):
            return None  # "http:evil.com" or "mailto:x": no authority to judge
        url = url if url.startswith("//") else f"//{url}"
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if not host or parts.netloc.count("@") > 1:
        return None
    host = host.rstrip(".")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if re.fullmatch(r"[0-9a-fA-FxX.]+", host) and host[0].isdigit():
        try:
            return socket.inet_ntoa(socket.inet_aton(host))  # the legacy spellings resolvers still accept
        except OSError:
            return None
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None


_GLOB_TOKEN = re.compile(r"\*\*/?|\*|\?")


class Glob:
    """A glob translated to a regular expression, compiled on its first match.

    Rules arrive by the thousand (a gateway's per-request layer) and most of them are never tried against a
    call, while compiling a regular expression costs tens of µs: parsing a rule only translates its globs,
    so a layer's parse is linear and cheap, and the few patterns a call meets are compiled then, once.
    """

    __slots__ = ("_compiled", "pattern")

    def __init__(self, source: str) -> None:
        self.pattern = source
        """The regular expression's source (``re.DOTALL``, matched whole)."""
        self._compiled: re.Pattern[str] | None = None

    def fullmatch(self, text: str) -> re.Match[str] | None:
        """``re.fullmatch`` of the glob against ``text``."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, re.DOTALL)
        return compiled.fullmatch(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Glob) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


def glob_regex(pattern: str, *, path: bool) -> Glob:
    """A glob as a :class:`Glob`: with ``path``, ``*``/``?`` stay inside one ``/`` segment and ``**`` crosses them."""
    out: list[str] = []
    last = 0
    for token in _GLOB_TOKEN.finditer(pattern):
        out.append(re.escape(pattern[last : token.start()]))
        last = token.end()
        text = token.group()
        if text == "?":
            out.append("[^/]" if path else ".")
        elif text == "*":
            out.append("[^/]*" if path else ".*")
        elif path:  # "**" crosses segments; "**/" also matches zero directories
            out.append(".*" if text == "**" else "(?:.*/)?")
        else:  # outside paths "*" is ".*" already, so "**" is two of them
            out.append(".*.*" if text == "**" else ".*.*/")
    out.append(re.escape(pattern[last:]))
    return Glob("".join(out))


def normalise_path(value: str, workspace: str = "") -> str:
    """A path as rules see it: ``.``/``..``/duplicate separators folded; workspace-relative when inside it."""
    if not value:
        return value
    if value.startswith("~"):
        return posixpath.normpath(value)
    if posixpath.isabs(value):
        normal = posixpath.normpath(value)
        if workspace and (normal == workspace or normal.startswith(workspace.rstrip("/") + "/")):
            rel = posixpath.relpath(normal, workspace)
            return "." if rel == "." else rel
        return normal
    return posixpath.normpath(value)
