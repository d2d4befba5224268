"""The origin policy: which URLs the browser may request, and why a refused one was refused.

A pattern is ``[scheme://]host[:port]``:

- ``https://example.com`` — that scheme and host, on the scheme's default port;
- ``*.example.com`` — the domain and every subdomain, any of http/https/ws/wss, any port;
- ``http://127.0.0.1:*`` — any port; ``[::1]`` for IPv6 literals.

Order of the checks: ``blocked_origins`` first (a match refuses), then ``allowed_origins`` (when the list
is non-empty, no match refuses), then private addresses (refused unless an allowed pattern names the
origin explicitly). Hostnames are resolved by the policy proxy, which connects to the checked address.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

import aleph

__all__ = ["NETWORK_SCHEMES", "OriginPattern", "OriginPolicy", "ip_problem"]

NETWORK_SCHEMES = ("http", "https", "ws", "wss")
_LOCAL_SCHEMES = ("about", "data", "blob")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_PATTERN = re.compile(
    r"^(?:(?P<scheme>[a-z*]+)://)?(?P<host>\*|(?:\*\.)?[a-z0-9_.-]+|\[[0-9a-f:.]+\])(?::(?P<port>\d{1,5}|\*))?/?$",
    re.IGNORECASE,
)


def ip_problem(address: str) -> str | None:
    """Why ``address`` is not a public address (``loopback``, ``private`` ...), or None if it is public or a name."""
    ip = aleph.parse_address(address)
    return None if ip is None else aleph.address_problem(ip)


@dataclass(frozen=True, slots=True)
class OriginPattern:
    """One ``allowed_origins`` / ``blocked_origins`` entry."""

    text: str
    schemes: tuple[str, ...]
    host: str
    subdomains: bool
    port: int | None
    """None matches any port."""

    @classmethod
    def parse(cls, text: str) -> OriginPattern:
        """Parse a pattern; a malformed one raises ValueError saying what is accepted."""
        m = _PATTERN.match(text.strip()) if isinstance(text, str) and len(text) <= 300 else None
        if m is None:
            raise ValueError(
                f"bad origin pattern {text!r}: use [scheme://]host[:port] such as 'https://example.com', "
                "'*.example.com' or 'http://127.0.0.1:*' (no paths)"
            )
        scheme = (m.group("scheme") or "*").lower()
        if scheme != "*" and scheme not in NETWORK_SCHEMES:
            raise ValueError(f"bad origin pattern {text!r}: scheme must be one of {', '.join(NETWORK_SCHEMES)} or *")
        host = m.group("host").lower().strip("[]")
        subdomains = host.startswith("*.")
        if subdomains:
            host = host[2:]
        port_text = m.group("port")
        if port_text is None:
            port = _DEFAULT_PORTS[scheme] if scheme != "*" else None
        elif port_text == "*":
            port = None
        else:
            port = int(port_text)
            if not 0 < port < 65536:
                raise ValueError(f"bad origin pattern {text!r}: port out of range")
        # ws/wss share http/https origins: a page's websocket to its own origin follows the same rule
        schemes = (
            NETWORK_SCHEMES
            if scheme == "*"
            else {"http": ("http", "ws"), "https": ("https", "wss")}.get(scheme, (scheme,))
        )
        if scheme in ("ws", "wss"):
            schemes = (scheme, "http" if scheme == "ws" else "https")
        return cls(text.strip(), tuple(schemes), host, subdomains, port)

    def matches(self, scheme: str, host: str, port: int) -> bool:
        """Whether the origin ``scheme://host:port`` matches this pattern."""
        if scheme not in self.schemes:
            return False
        if self.port is not None and port != self.port:
            return False
        if self.host == "*":
            return True
        return host == self.host or (self.subdomains and host.endswith("." + self.host))


def _origin(scheme: str, host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


class OriginPolicy:
    """Decides whether the browser may talk to an origin; every refusal names the rule that fired."""

    def __init__(
        self,
        allowed: list[str] | tuple[str, ...] = (),
        blocked: list[str] | tuple[str, ...] = (),
        *,
        block_private: bool = True,
    ) -> None:
        self.allowed = [OriginPattern.parse(p) for p in allowed]
        self.blocked = [OriginPattern.parse(p) for p in blocked]
        self.block_private = block_private

    def check_url(self, url: str) -> str | None:
        """Why ``url`` may not be requested, or None when it may (no DNS; the proxy resolves names)."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return f"{url[:200]!r} is not a valid URL"
        scheme = parts.scheme.lower()
        if scheme in _LOCAL_SCHEMES:
            return None
        if scheme not in NETWORK_SCHEMES:
            return f"scheme {scheme or '(none)'!r} is not allowed (only http, https, ws, wss, data: and about:blank)"
        host = (parts.hostname or "").lower()
        if not host:
            return f"{url[:200]!r} has no host"
        return self.check_origin((scheme,), host, port or _DEFAULT_PORTS[scheme])

    def explicitly_allowed(self, schemes: tuple[str, ...], host: str, port: int) -> bool:
        """An ``allowed_origins`` pattern names this origin (which also lifts the private-address block)."""
        return any(p.matches(s, host, port) for p in self.allowed for s in schemes)

    def check_origin(
        self, schemes: tuple[str, ...], host: str, port: int, addresses: tuple[str, ...] = ()
    ) -> str | None:
        """Why the origin may not be contacted, or None. ``schemes`` lists what the connection may carry.

        ``addresses`` are the resolved IPs (from the proxy); without them only literal IPs and
        ``localhost`` names are checked for the private-address rule.
        """
        host = host.lower().rstrip(".")
        origin = _origin(schemes[0], host, port)
        for pattern in self.blocked:
            if any(pattern.matches(s, host, port) for s in schemes):
                return f"{origin} matches [browser] blocked_origins pattern {pattern.text!r}"
        allowed = self.explicitly_allowed(schemes, host, port)
        if self.allowed and not allowed:
            shown = ", ".join(repr(p.text) for p in self.allowed[:5]) + (" ..." if len(self.allowed) > 5 else "")
            return f"{origin} is not in [browser] allowed_origins ({shown})"
        if self.block_private and not allowed:
            if host == "localhost" or host.endswith(".localhost"):
                kind: str | None = "loopback"
                address = host
            else:
                kind, address = ip_problem(host), host
                for resolved in addresses:
                    if kind is None:
                        kind, address = ip_problem(resolved), resolved
            if kind is not None:
                return (
                    f"{origin} is a {kind} address ({address}) and [browser] block_private_addresses is on; "
                    "add the origin to [browser] allowed_origins to permit it"
                )
        return None
