"""``[exec.network]``: how sandboxed commands reach the network, and which hosts they may reach.

``network = "proxied"`` (the short form) or a table::

    [exec.network]
    mode = "proxied"                       # or "none", "host"
    allow = ["pypi.org", "files.pythonhosted.org", "*.github.com"]
    deny = ["gist.github.com"]

    [exec.network.agents.ci]               # this agent may reach less: only what both lists allow
    allow = ["pypi.org", "files.pythonhosted.org"]

    [exec.network.channels.public]
    deny = ["*"]

A host pattern is a name (``pypi.org``), ``*.`` and a domain (every subdomain, not the domain itself),
``*`` (any name, never an address), or an IP address (raw addresses are refused unless listed).
Across layers the most restrictive answer wins: a host must be allowed by the global list and by every
agent or channel layer that has an ``allow`` list, and a ``deny`` in any layer refuses it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# aleph-core is imported where a host is decided, not at import: the sandbox runs without it (the
# non-root tests run it as nobody from a copy of aleph_exec and its own dependencies only).

__all__ = ["NetworkConfig", "NetworkLayer", "check_pattern"]

KiB = 1024
MiB = 1024 * KiB
_NAME = re.compile(r"(\*\.)?([a-z0-9_]([a-z0-9_-]{0,62})\.)*[a-z0-9_][a-z0-9_-]{0,62}\.?")


def check_pattern(pattern: str) -> str:
    """The normalised host pattern (lowercase, no trailing dot); ``ValueError`` names a bad one."""
    import aleph

    text = pattern.strip().lower().rstrip(".")
    if text == "*":
        return text
    address = aleph.parse_address(text)
    if address is not None:
        return str(address)
    if len(text) > 253 or not _NAME.fullmatch(text):
        raise ValueError(f"{pattern!r} is not a host pattern (a name, *.domain, * or an IP address)")
    return text


class NetworkLayer(BaseModel):
    """One agent's or channel's restrictions on top of the global lists."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    allow: list[str] | None = Field(default=None, max_length=1024)
    """When set, a host must also match one of these."""
    deny: list[str] = Field(default_factory=list, max_length=1024)
    """Hosts refused for this agent or channel."""

    @field_validator("allow", "deny")
    @classmethod
    def _patterns(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else [check_pattern(p) for p in value]


class NetworkConfig(NetworkLayer):
    """``[exec.network]``: the mode, the allowlist and the bounds of the egress proxy."""

    mode: Literal["proxied", "none", "host"] = "proxied"
    """``proxied``: an empty network namespace whose one way out is Aleph's egress proxy (allowed hosts only);
    ``none``: no network at all; ``host``: the host's network (the call is then not contained)."""
    allow: list[str] | None = Field(default_factory=list, max_length=1024)  # type: ignore[assignment]
    """Hosts commands may reach through the proxy (empty: none, until the operator lists some)."""
    unlisted: Literal["ask", "refuse"] = "ask"
    """A host on no list: ask a person (through the ``exec_network`` approval; unattended: refused), or refuse."""
    private_hosts: list[str] = Field(default_factory=list, max_length=256)
    """Names allowed to resolve to private, loopback or link-local addresses (everything else non-public is refused)."""
    private_networks: list[str] = Field(default_factory=list, max_length=256)
    """Networks (``10.1.0.0/16``) whose addresses are allowed for any allowed name."""
    hosts: dict[str, str] = Field(default_factory=dict, max_length=256)
    """Names pinned to an address, decided by the proxy before DNS (like /etc/hosts). Tests use it to make
    servers on loopback look like named hosts; the address guard still applies to the pinned address."""
    max_bytes_mb: int = Field(default=1024, ge=1, le=1024 * 1024)
    """Bytes one call may move through the proxy, both directions together, in MiB; past it connections are cut."""
    max_connections: int = Field(default=256, ge=1, le=100_000)
    """Connections one call may open through the proxy."""
    host_rate_per_minute: int = Field(default=120, ge=1, le=100_000)
    """New connections one call may open to one host within a minute."""
    connect_timeout_seconds: float = Field(default=10.0, gt=0, le=120)
    """How long the proxy waits for a host's DNS answer and TCP connect."""
    idle_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    """A connection with no bytes either way for this long is closed."""
    agents: dict[str, NetworkLayer] = Field(default_factory=dict)
    """Per-agent restrictions (tighten only)."""
    channels: dict[str, NetworkLayer] = Field(default_factory=dict)
    """Per-channel restrictions (tighten only)."""

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        return {"mode": value} if isinstance(value, str) else value

    @field_validator("private_hosts")
    @classmethod
    def _private(cls, value: list[str]) -> list[str]:
        return [check_pattern(p) for p in value]

    @field_validator("private_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        import aleph

        aleph.AddressGuard.of(private_networks=value)  # raises, naming the bad one
        return value

    @field_validator("hosts")
    @classmethod
    def _pinned(cls, value: dict[str, str]) -> dict[str, str]:
        import aleph

        out = {}
        for name, address in value.items():
            parsed = aleph.parse_address(address)
            if parsed is None:
                raise ValueError(f"hosts: {name!r} = {address!r} is not an IP address")
            out[check_pattern(name)] = str(parsed)
        return out
