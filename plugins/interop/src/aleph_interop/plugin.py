"""The ``interop`` plugin: ACP coding agents, A2A agents, mixture of agents and ClawHub skills."""

from __future__ import annotations

from pathlib import Path

import aleph
from aleph.integrations.a2a import A2AClient
from aleph_interop._a2a import A2AAgents, A2ADelegate, AgentBook
from aleph_interop._acp_tools import AcpDelegate, AcpSessions, AcpSwitch
from aleph_interop._clawhub import Clawhub
from aleph_interop._config import InteropSettings
from aleph_interop._moa import Moa

__all__ = ["aleph_register_tools"]


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Register acp_delegate, acp_switch, a2a_agents, a2a_delegate, moa and clawhub."""
    settings = context.config.section("interop", InteropSettings)
    # What an ACP agent must not even read: Aleph's data directory (keys, ledger) and config folder.
    hidden = [context.data_dir.resolve(), Path("~/.config/aleph").expanduser()]
    sessions = AcpSessions(dict(settings.acp_agents), context.workspace, hidden)
    context.add_cleanup(sessions.close_all)
    book = AgentBook(context.data_dir / "interop" / "a2a_agents.sqlite3")

    async def close_book() -> None:
        book.close()

    context.add_cleanup(close_book)
    client = A2AClient()
    register(
        AcpDelegate(sessions),
        AcpSwitch(sessions),
        A2AAgents(book, client),
        A2ADelegate(book, client),
        Moa(settings.moa),
        Clawhub(settings.clawhub, context.data_dir / "interop" / "clawhub-staging"),
    )
