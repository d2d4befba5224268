"""Which connected servers a caller may reach through the capability tools (resources, templates, prompts).

A rule that covers every tool of a server (``"github__*" = "deny"``, ``"*__*" = "deny"``) shuts the caller
out of that server, yet ``mcp_list_resources``, ``mcp_read_resource``, ``mcp_list_resource_templates``,
``mcp_list_prompts``, ``mcp_get_prompt`` and ``mcp_login`` are core tools of their own: they listed and read the denied
server's resources and prompts all the same, and ``mcp_read_resource`` read the very URI its denied template
tool (``github__tpl_issue``) expands to. The capability tools therefore ask here, for the calling principal's
merged policy, whether a server-wide rule denies the server: its entries are left out of every listing, and
a read, a prompt or a login answers exactly as for a server that is not there.
"""

from __future__ import annotations

from collections.abc import Callable

from aleph._chokepoint._call import current_call
from aleph._contract._types import ToolSource

__all__ = ["reachable_servers"]


def _denies_whole_server(policy: object, server_id: str) -> bool:
    """Whether some layer of ``policy`` has a deny rule covering every tool of ``server_id``."""
    probe = f"{server_id}__resources"
    source = ToolSource.mcp(server_id)
    for layer in getattr(policy, "layers", ()):
        for rule in getattr(layer, "globs", ()):
            if rule.action != "deny" or "__" not in rule.name_pattern:
                continue
            if rule.name_pattern.partition("__")[2] == "*" and rule.matches_name(probe, source):
                return True
    return False


def reachable_servers() -> Callable[[str], bool]:
    """A test of server ids for the call running now: False for a server its policy denies as a whole.

    Outside a scoped call (an :class:`~aleph.UnscopedToolService`, which has no policy) every server is
    reachable.
    """
    call = current_call()
    policy = getattr(getattr(call, "_service", None), "policy", None) if call is not None else None
    if policy is None:
        return lambda _server_id: True
    denied: dict[str, bool] = {}

    def reachable(server_id: str) -> bool:
        found = denied.get(server_id)
        if found is None:
            found = denied[server_id] = _denies_whole_server(policy, server_id)
        return not found

    return reachable
