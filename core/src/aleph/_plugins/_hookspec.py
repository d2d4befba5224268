"""Aleph's hook specifications (pluggy project ``aleph``, entry-point group ``aleph``).

Hooks are few, typed and synchronous: they register things and make decisions, and do no
I/O. Runtime behaviour lives on :class:`~aleph.ToolService`. Core never calls ``pm.hook``
directly; it goes through ``aleph._plugins._loader.PluginManager``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from aleph._chokepoint._approval import ApprovalRequester
    from aleph._chokepoint._verdict import PolicyVote
    from aleph._config import AlephConfig
    from aleph._contract._types import ToolFacts, ToolSource
    from aleph._floor._policy import CommandRule
    from aleph._plugins._context import PluginContext, ToolRegistrar
    from aleph._turn import TurnContext

__all__ = ["NAME", "hookimpl", "hookspec"]

NAME = "aleph"
hookspec = pluggy.HookspecMarker(NAME)
hookimpl = pluggy.HookimplMarker(NAME)


@hookspec(historic=True)
def aleph_configure(config: AlephConfig) -> None:
    """Called once, right after the configuration is loaded, for every plugin (late ones too).

    :param config: the validated configuration; read your own section with ``config.section(name, Model)``.
    Raise :class:`~aleph.ConfigError` for a bad section; the plugin is then recorded as failed.
    """


@hookspec
def aleph_register_tools(register: ToolRegistrar, context: PluginContext) -> None:
    """Called once per runtime to let a plugin add its tools.

    :param register: call ``register(tool, ...)`` with :class:`~aleph.AlephTool` or :class:`~aleph.LoopTool`
        instances; the registrar records that this plugin owns them. A name clash raises
        :class:`~aleph.DuplicateTool`, which fails this plugin only.
    :param context: the runtime's configuration, workspace and data directory, and
        ``context.add_cleanup(async_fn)`` for resources to release when the runtime closes.
    The result is ignored.
    """


@hookspec
def aleph_tool_policy(
    tool: str,
    input: Mapping[str, Any],
    facts: ToolFacts,
    source: ToolSource,
    turn: TurnContext | None,
    agent: str | None,
    channel: str | None,
) -> PolicyVote | None:
    """Called by the chokepoint for every call that reaches the policy stage, before any human is asked.

    Return ``PolicyVote("deny", reason)`` or ``PolicyVote("ask", reason)`` to tighten the decision, or None
    to abstain. Votes can only tighten: "allow" does not exist, and a deny from any plugin wins. A hook
    that raises is treated as an "ask" vote (fail closed); a result that is neither None nor such a vote
    (``PolicyVote("Deny", ...)``, a tuple, a string) refuses the call, naming the plugin and this hook.
    Must be fast and do no I/O.
    """


@hookspec
def aleph_protected_paths(register: Callable[[str], None]) -> None:
    """Called when a family builds its file-writing tools, to collect files no tool may write.

    :param register: call ``register("glob")`` for each workspace-relative glob (``*``, ``?`` in one
        component, ``**`` across) naming a file a program on the host runs code from (its config,
        hooks, start-up scripts). Added to :attr:`aleph.ProtectedPaths.HOST_EXECUTED` and
        ``[workspace] protected`` in :attr:`aleph.PluginContext.protected_patterns`; a bad glob is an error.
    The result is ignored.
    """


@hookspec
def aleph_command_policy_rules(register: Callable[[CommandRule], None]) -> None:
    """Called once per runtime, when the command-policy floor is built, to collect extra tunable rules.

    :param register: call ``register(CommandRule(...))`` for each rule. Plugin rules can only add
        restrictions: they block, ask or warn; nothing can lower a hardline rule. They obey
        ``[sandbox.command_policy] enforcement`` like ``custom_rules``. A name already used is an error.
    The result is ignored.
    """


@hookspec
def aleph_cli_commands(register: Callable[[str, Callable[[Any], None]], None]) -> None:
    """Called when the ``aleph`` command line is built, to let a plugin add sub-commands (``aleph undo``).

    :param register: call ``register(name, add_parser)`` once per command; ``add_parser(subparsers)`` adds an
        argparse sub-parser named ``name`` exactly like core's ``aleph._cli.*_cmd.add_parser`` and sets
        ``func(args) -> int`` on it. A name core or another plugin already uses is an error for this plugin.
    The result is ignored. Must do no I/O: the parser is built on every start of the command line.
    """


@hookspec(firstresult=True)
def aleph_approval_requester(config: AlephConfig) -> ApprovalRequester | None:
    """Called once per runtime to find the default approval requester (a chat card, a desktop prompt).

    Stops at the first non-None result. A requester passed to ``rt.tool_service(requester=...)`` wins over
    it. With no requester at all, calls that need approval are refused ("no approval channel is available").
    """


@hookspec
def aleph_doctor_checks(register: Callable[[str, Callable[[], tuple[str, str]]], None], config: AlephConfig) -> None:
    """Called by ``aleph doctor`` (and by ``aleph serve`` for its start line) to collect a plugin's health checks.

    :param register: call ``register(name, check)`` once per check, ``name`` like ``"exec.isolation"``
        (``<family>.<what>``; ``aleph serve`` prints the detail of every ``*.isolation`` check on its start
        line). ``check()`` runs later, may do I/O (probe a namespace, read ``/proc``) and returns
        ``(status, detail)``: status ``"ok"``, ``"warn"`` (works, with less protection than it could
        have) or ``"fail"`` (broken); detail is one line a human reads. A check that raises counts as
        ``"fail"``.
    :param config: the runtime's configuration.
    Registration itself must do no I/O. The result is ignored.
    """


@hookspec
def aleph_mcp_resources(register: Callable[..., None], config: AlephConfig) -> None:
    """Called when ``aleph serve`` starts serving a runtime, to collect what a family offers MCP clients as resources.

    :param register: call ``register(scheme, list_resources, read_resource)`` once per URI scheme the
        plugin owns (``"aleph-artifact"`` serves ``aleph-artifact://...``). At request time
        ``await list_resources(service)`` returns ``[{"uri", "name", "mime_type"?, "size"?, "description"?}]``
        and ``await read_resource(service, uri)`` returns ``(data, mime_type)`` (``bytes``, or ``str`` for
        text) or None when there is no such resource. ``service`` is the connection's scoped tool service:
        both callables act only through it (by calling the family's own tools), so the principal's
        permissions, approvals and the ledger apply exactly as for ``tools/call``; a :class:`~aleph.ToolError`
        they raise reaches the client as an error. A scheme registered twice is an error.
    :param config: the served runtime's configuration (its data directory, the family's section).
    Registration itself must do no I/O. The result is ignored. Without any registration ``aleph serve``
    advertises no resources capability.
    """
