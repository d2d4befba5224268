"""Refusing an ``aleph serve`` that its own configuration would start again (and again...).

An ``aleph.toml`` that lists ``aleph serve`` among its own MCP servers made every child start another.
Every runtime passes its stdio MCP servers ``ALEPH_SERVE_CHAIN``: the identities (a hash of the
configuration files read and the workspace) of the runtimes above it. ``aleph serve`` refuses to start
when its own identity is already in the chain, or when the chain is implausibly deep.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping

from aleph._config import AlephConfig

__all__ = ["CHAIN_ENV", "MAX_DEPTH", "child_chain", "config_identity", "nested_serve_problem"]

CHAIN_ENV = "ALEPH_SERVE_CHAIN"
MAX_DEPTH = 8
"""Runtimes above one ``aleph serve`` beyond which it refuses even with a new configuration."""


def config_identity(config: AlephConfig) -> str:
    """16 hex characters naming this configuration: the files read and the workspace."""
    parts = [os.path.realpath(path) for path in config.files] + [str(config.workspace_root)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _chain(env: Mapping[str, str]) -> list[str]:
    raw = env.get(CHAIN_ENV, "")
    return [part for part in raw.split(":") if part][: MAX_DEPTH * 4]


def child_chain(identity: str, env: Mapping[str, str] | None = None) -> str:
    """The value of ``ALEPH_SERVE_CHAIN`` for a child of the runtime ``identity``."""
    return ":".join([*_chain(os.environ if env is None else env), identity])


def nested_serve_problem(config: AlephConfig, env: Mapping[str, str] | None = None) -> str | None:
    """Why this ``aleph serve`` must not start (it would serve itself), or None."""
    chain = _chain(os.environ if env is None else env)
    where = ", ".join(config.files) or "the built-in defaults"
    if config_identity(config) in chain:
        return (
            f"this configuration ({where}) is already running higher up: an [mcp.servers.*] entry starts "
            "`aleph serve` with the same configuration, which would start itself again and again. "
            "Remove that entry, or give the nested server its own --config"
        )
    if len(chain) >= MAX_DEPTH:
        return f"{len(chain)} Aleph runtimes already run above this one; MCP servers nest no deeper than {MAX_DEPTH}"
    return None
