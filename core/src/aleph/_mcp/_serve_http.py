"""Which ``Host`` and ``Origin`` headers ``aleph serve --http`` answers (DNS rebinding protection).

The SDK turns its protection on only when the app is built for ``127.0.0.1``, ``localhost`` or ``::1``
exactly; on any other loopback address (``--host 127.0.0.2``) it served every ``Host`` and ``Origin``, so a
web page whose name an attacker re-points at that address could call every tool the server offers. The
settings are therefore built here for the address actually bound, whatever it is.
"""

from __future__ import annotations

from mcp.server.transport_security import TransportSecuritySettings

__all__ = ["transport_security"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def transport_security(host: str) -> TransportSecuritySettings:
    """Protection for a server bound to ``host``: only its own loopback names, on any port, pass."""
    bound = f"[{host.strip('[]')}]" if ":" in host else host
    names = list(dict.fromkeys((*_LOOPBACK_NAMES, bound)))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names],
        allowed_origins=[f"http://{name}:*" for name in names],
    )
