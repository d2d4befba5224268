"""The address decision every tool that opens a network connection for a model makes (the SSRF guard).

A host name is resolved once by the tool (or its proxy), every address it resolves to is checked
here, and the connection goes to a checked address: a DNS answer that changes between the check and
the connect (rebinding) cannot redirect it. Public means globally routable unicast: private (RFC 1918,
ULA), loopback, link-local (and with it the cloud metadata address 169.254.169.254), CGNAT
(100.64.0.0/10), multicast, reserved, unspecified and documentation ranges are not, nor the metadata
address ``fd00:ec2::254``; an IPv4 address embedded in IPv6 (mapped, 6to4, NAT64) is judged as the IPv4
address it carries, and Teredo is refused outright.

:class:`AddressGuard` adds the operator's exceptions: host names (exact, or ``*.example.internal``) and
networks that may resolve to non-public addresses, because a setting names them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["AddressGuard", "IPAddress", "address_problem", "is_public_address", "parse_address"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
"""An IPv4 or IPv6 address."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_METADATA = (ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254"))


def parse_address(text: str) -> IPAddress | None:
    """The address ``text`` spells (``[::1]`` and a ``%zone`` suffix allowed), or None when it is a name."""
    try:
        return ipaddress.ip_address(text.strip().removeprefix("[").removesuffix("]").split("%", 1)[0])
    except ValueError:
        return None


def address_problem(addr: IPAddress) -> str | None:
    """Why ``addr`` is not a public unicast address (``"loopback"``, ``"private"``, ...), or None when it is."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return address_problem(addr.ipv4_mapped)
        if addr.sixtofour is not None:
            return address_problem(addr.sixtofour)
        if addr.teredo is not None:
            return "Teredo tunnel"
        if addr in _NAT64:
            return address_problem(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    if addr in _METADATA:
        return "cloud metadata"
    for kind, flag in (
        ("unspecified", addr.is_unspecified),
        ("loopback", addr.is_loopback),
        ("link-local", addr.is_link_local),
        ("multicast", addr.is_multicast),
        ("private", addr.is_private),
        ("reserved", addr.is_reserved),
    ):
        if flag:
            return kind
    return None if addr.is_global else "non-public"  # CGNAT 100.64.0.0/10 among others


def is_public_address(addr: IPAddress) -> bool:
    """True only for globally routable unicast addresses (see :func:`address_problem`)."""
    return address_problem(addr) is None


def _host_matches(host: str, pattern: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


@dataclass(frozen=True, slots=True)
class AddressGuard:
    """Decides whether a host may be reached at the addresses it resolved to.

    ``private_hosts``: names (``db.internal``, ``*.corp.example``) allowed to resolve to non-public
    addresses; ``private_networks``: networks (``10.1.0.0/16``) whose addresses are allowed whatever the
    name. Nothing else non-public passes, whatever a host name resolves to.
    """

    private_hosts: tuple[str, ...] = ()
    private_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @classmethod
    def of(cls, private_hosts: Iterable[str] = (), private_networks: Iterable[str] = ()) -> AddressGuard:
        """A guard from settings; ``ValueError`` names a network that is not one."""
        nets = []
        for text in private_networks:
            try:
                nets.append(ipaddress.ip_network(text, strict=False))
            except ValueError as exc:
                raise ValueError(f"{text!r} is not a network (e.g. 10.0.0.0/8): {exc}") from None
        return cls(tuple(h.lower().rstrip(".") for h in private_hosts), tuple(nets))

    def named(self, host: str) -> bool:
        """Whether a setting names ``host`` as one that may be private."""
        host = host.lower().rstrip(".")
        return any(_host_matches(host, pattern) for pattern in self.private_hosts)

    def problem(self, host: str, addresses: Iterable[IPAddress]) -> str | None:
        """None when ``host`` may be reached at every one of ``addresses``; else a sentence saying why not."""
        named = self.named(host)
        for addr in addresses:
            kind = address_problem(addr)
            listed = any(addr.version == net.version and addr in net for net in self.private_networks)
            if kind is None or named or listed:
                continue
            return f"{host} resolves to {addr}, a {kind} address"
        return None
