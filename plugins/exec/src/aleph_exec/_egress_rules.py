"""What one call's commands may reach through the egress proxy, and what they did reach.

:class:`RunNetwork` is made per run (per call) from ``[exec.network]`` and the caller's agent and
channel: it decides hosts (:meth:`RunNetwork.judge`), admits connections within the call's bounds
(:meth:`RunNetwork.admit`) and keeps the log of every connection the proxy saw for it. It is used by
the proxy's event loop only, and read by the sandbox once the run is over.
"""

from __future__ import annotations

import secrets
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from aleph_exec._netconfig import MiB, NetworkConfig, NetworkLayer

# aleph-core is imported where a host is decided, not at import: the sandbox runs without it (the
# non-root tests run it as nobody from a copy of aleph_exec and its own dependencies only).

__all__ = ["Connection", "RunNetwork"]

_MAX_LOGGED = 1000  # connections kept in a run's log (the counts stay complete)
_MAX_SHOWN = 50  # entries a result lists
MAX_ASKS = 8
"""Hosts one call may ask a person about; past them, unlisted hosts are refused."""

Ask = Callable[[str, int], Awaitable[bool]]
"""Asks a person whether this call may reach ``host:port``; True when approved."""


@dataclass(slots=True)
class Connection:
    """One connection (or refused attempt) a run's command made through the proxy."""

    host: str
    port: int
    verdict: str  # "allowed", "refused", or "cut" (allowed, then stopped at a bound)
    reason: str = ""
    address: str = ""
    up: int = 0
    down: int = 0
    last: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The result's and the ledger's view."""
        out: dict[str, Any] = {"host": self.host, "port": self.port, "verdict": self.verdict}
        if self.address:
            out["address"] = self.address
        out["bytes_up"], out["bytes_down"] = self.up, self.down
        if self.reason:
            out["reason"] = self.reason
        return out


def _is_address(host: str) -> bool:
    """An IP address in any spelling a resolver takes as one (``10.0.0.1``, ``[::1]``, ``0x7f.1``, ``2130706433``)."""
    import aleph

    if aleph.parse_address(host) is not None:
        return True
    try:
        socket.inet_aton(host)  # the classic forms getaddrinfo reads as an address, never as a name
    except OSError:
        return False
    return True


def _matches(host: str, is_ip: bool, pattern: str, *, deny: bool = False) -> bool:
    if pattern == "*":
        return deny or not is_ip  # "*" allows any name, never an address; denies everything
    if pattern.startswith("*."):
        return not is_ip and host.endswith(pattern[1:])
    return host == pattern


class RunNetwork:
    """One run's network: its proxy credential, its rules, its bounds and its connection log."""

    def __init__(
        self,
        config: NetworkConfig,
        *,
        agents: Iterable[str] = (),
        channels: Iterable[str] = (),
        ask: Ask | None = None,
    ) -> None:
        self.config = config
        self.token = secrets.token_urlsafe(24)
        """The run's proxy password (``HTTP_PROXY=http://aleph:<token>@...``): connections are attributed by it."""
        # Every agent and channel of the caller's chain restricts (acting for another only narrows).
        self.layers: list[tuple[str, NetworkLayer]] = []
        for agent in dict.fromkeys(agents):
            if agent in config.agents:
                self.layers.append((f"[exec.network.agents.{agent}]", config.agents[agent]))
        for channel in dict.fromkeys(channels):
            if channel in config.channels:
                self.layers.append((f"[exec.network.channels.{channel}]", config.channels[channel]))
        self._guard: Any = None
        self.ask = ask
        self.asked: dict[tuple[str, int], bool] = {}
        self.log: list[Connection] = []
        self.counts = {"allowed": 0, "refused": 0, "cut": 0}
        self.bytes_up = 0
        self.bytes_down = 0
        self.opened = 0
        self.notes: list[str] = []
        self.closed = False
        self.loop: Any = None
        """The event loop its connections are served on (the run's own, or the proxy's), once served."""
        self._recent: dict[str, deque[float]] = {}

    @property
    def guard(self) -> Any:
        """The address guard (``aleph.AddressGuard``) of ``private_hosts`` and ``private_networks``."""
        if self._guard is None:
            import aleph

            self._guard = aleph.AddressGuard.of(self.config.private_hosts, self.config.private_networks)
        return self._guard

    @property
    def max_bytes(self) -> int:
        """Bytes (both directions) the call may move."""
        return self.config.max_bytes_mb * MiB

    def judge(self, host: str) -> tuple[str, str]:
        """``("allow" | "ask" | "deny", why)`` for ``host`` (lowercase, no trailing dot) by the lists alone."""
        is_ip = _is_address(host)
        layers: list[tuple[str, NetworkLayer]] = [("[exec.network]", self.config), *self.layers]
        for where, layer in layers:
            if any(_matches(host, is_ip, p, deny=True) for p in layer.deny):
                return "deny", f"host {host} is denied by {where} deny"
        for where, layer in self.layers:
            if layer.allow is not None and not any(_matches(host, is_ip, p) for p in layer.allow):
                return "deny", f"host {host} is not in {where} allow"
        if any(_matches(host, is_ip, p) for p in self.config.allow or ()):
            return "allow", "listed in [exec.network] allow"
        if is_ip:
            return "deny", (
                f"{host} is a raw IP address; addresses are refused unless listed in [exec.network] allow "
                "(use the host's name)"
            )
        if self.config.unlisted == "ask" and self.ask is not None:
            return "ask", "not listed in [exec.network] allow"
        return "deny", f"host {host} is not in [exec.network] allow; ask the user to add it"

    def admit(self, host: str) -> str | None:
        """Count one new connection to ``host``; why it is refused by the call's bounds, or None."""
        cfg = self.config
        if self.opened >= cfg.max_connections:
            return f"the call opened {cfg.max_connections} connections, [exec.network] max_connections"
        if self.bytes_up + self.bytes_down >= self.max_bytes:
            return f"the call moved {cfg.max_bytes_mb} MiB, [exec.network] max_bytes_mb"
        now = time.monotonic()
        recent = self._recent.setdefault(host, deque())
        while recent and recent[0] <= now - 60:
            recent.popleft()
        if len(recent) >= cfg.host_rate_per_minute:
            return (
                f"{cfg.host_rate_per_minute} connections to {host} within a minute, [exec.network] host_rate_per_minute"
            )
        recent.append(now)
        self.opened += 1
        return None

    def record(self, host: str, port: int, verdict: str, reason: str = "", address: str = "") -> Connection:
        """A new log entry (kept for the first connections; the counts cover all)."""
        conn = Connection(host, port, verdict, reason, address, last=time.monotonic())
        self.counts[verdict] += 1
        if len(self.log) < _MAX_LOGGED:
            self.log.append(conn)
        return conn

    def refuse(self, conn: Connection, reason: str) -> None:
        """An allowed connection refused after all (no address, a bound, a failed connect)."""
        self.counts[conn.verdict] -= 1
        conn.verdict, conn.reason = "refused", reason
        self.counts["refused"] += 1

    def cut(self, conn: Connection, reason: str) -> None:
        """An allowed connection stopped at a bound; the note says so in the result."""
        if conn.verdict == "cut":
            return
        self.counts[conn.verdict] -= 1
        conn.verdict, conn.reason = "cut", reason
        self.counts["cut"] += 1
        note = f"a connection to {conn.host}:{conn.port} was cut: {reason}"
        if len(self.notes) < 10 and note not in self.notes:
            self.notes.append(note)

    def moved(self, conn: Connection, up: int, down: int) -> str | None:
        """Count bytes of ``conn`` about to be forwarded; why they must not be (the cut), or None.

        Bytes past the bound are neither forwarded nor counted: what a call moves never exceeds it.
        """
        if self.bytes_up + self.bytes_down + up + down > self.max_bytes:
            return f"the call moved more than {self.config.max_bytes_mb} MiB, [exec.network] max_bytes_mb"
        conn.up += up
        conn.down += down
        conn.last = time.monotonic()
        self.bytes_up += up
        self.bytes_down += down
        return None

    def to_json(self) -> dict[str, Any]:
        """The ``network`` part of a run's result: the log (first entries) and complete counts."""
        shown = [c.to_json() for c in self.log[:_MAX_SHOWN]]
        total = sum(self.counts.values())
        out: dict[str, Any] = {
            "mode": "proxied",
            "connections": shown,
            "allowed": self.counts["allowed"],
            "refused": self.counts["refused"],
            "cut": self.counts["cut"],
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
        }
        if total > len(shown):
            out["connections_not_listed"] = total - len(shown)
        if self.notes:
            out["notes"] = list(self.notes)
        return out

    def ledger_refs(self) -> dict[str, str | int]:
        """References for the call's ledger row: counts, bytes, and the hosts with their verdicts."""
        refs: dict[str, str | int] = {
            "net_allowed": self.counts["allowed"],
            "net_refused": self.counts["refused"],
            "net_cut": self.counts["cut"],
            "net_bytes_up": self.bytes_up,
            "net_bytes_down": self.bytes_down,
        }
        seen: dict[tuple[str, int, str], list[int]] = {}
        for c in self.log:
            totals = seen.setdefault((c.host, c.port, c.verdict), [0, 0, 0])
            totals[0] += 1
            totals[1] += c.up
            totals[2] += c.down
        parts = [f"{h}:{p} {v} x{n} {up}/{down}" for (h, p, v), (n, up, down) in seen.items()]
        text = "; ".join(parts)
        refs["net_hosts"] = text if len(text) <= 256 else text[:240].rsplit(";", 1)[0] + "; ..."
        return refs
