"""The teams family's own hooks (pluggy project ``aleph``), added to the plugin manager when the family loads.

Implement them in any Aleph plugin (an entry point, or an object passed to ``aleph.load(plugins=[...])``)
with ``@aleph.hookimpl``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from aleph_teams._runners import AgentRunner

__all__ = ["aleph_teams_agent_runners"]

hookspec = pluggy.HookspecMarker("aleph")


@hookspec
def aleph_teams_agent_runners(register: Callable[[str, AgentRunner], None]) -> None:
    """Called once per runtime, when the teams tools are registered, to collect who runs team members.

    :param register: call ``register(name, runner)`` once per runner. ``runner`` is an
        :class:`aleph_teams.AgentRunner` (e.g. :class:`aleph_teams.CallableRunner` around a function of
        the host's agent loop); a member uses it when its ``runner`` is ``name``, or when ``name`` is
        ``[teams] default_runner``. A name registered twice (or also configured under
        ``[teams.runners]``) is an error: that plugin's hook is logged and skipped (re-raised in strict mode).
    The result is ignored. Must do no I/O: runners do their work when a task runs, not here.
    """
