"""The capability-gated builtins (R17.6-R17.7) and resource templates as typed tools.

Ids handed to the model are opaque: ``{server}:{uri}`` for resources and ``{server}:{name}`` for
prompts. They are passed back unchanged; the first ``:`` whose prefix is a known server splits them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aleph._contract._tool import LoopTool
from aleph._contract._types import ToolFacts
from aleph._errors import ExecutionFailed, ValidationFailed
from aleph._mcp._hygiene import expand_template, template_variables, truncate_description
from aleph._mcp._oauth import start_login
from aleph._mcp._reach import reachable_servers
from aleph._mcp._roles import Connection, ConnectionRegistry

if TYPE_CHECKING:
    import mcp_types as types


__all__ = ["CAPABILITY_TOOLS", "build_capability_tool", "build_template_tool"]

_READING = ToolFacts(idempotent=True, concurrent_safe=True, max_duration_ms=60_000, tags=("mcp",))
_EMPTY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _list_resources(manager: ConnectionRegistry) -> Callable[[dict[str, Any]], Any]:
    async def run(_: dict[str, Any]) -> Any:
        reachable = reachable_servers()
        items = [
            {
                "id": f"{c.id}:{r.uri}",
                "server": c.id,
                "uri": str(r.uri),
                "name": r.name,
                "description": truncate_description(r.description) or None,
                "mime_type": r.mime_type,
            }
            for c in manager.connected()
            if reachable(c.id)
            for r in c.resources
        ]
        return {"count": len(items), "resources": items}

    return run


def _list_templates(manager: ConnectionRegistry) -> Callable[[dict[str, Any]], Any]:
    async def run(_: dict[str, Any]) -> Any:
        reachable = reachable_servers()
        items = [
            {
                "server": c.id,
                "uri_template": t.uri_template,
                "name": t.name,
                "description": truncate_description(t.description) or None,
                "mime_type": t.mime_type,
                "variables": template_variables(t.uri_template),
                "tool": manager.template_tool_name(c.id, t.name),
            }
            for c in manager.connected()
            if reachable(c.id)
            for t in c.templates
        ]
        return {"count": len(items), "templates": items}

    return run


def _read_resource(manager: ConnectionRegistry) -> Callable[[dict[str, Any]], Any]:
    async def run(args: dict[str, Any]) -> Any:
        found = manager.find_server_prefix(args["uri"])
        if found is None or not reachable_servers()(found[0].id):
            raise ExecutionFailed("mcp_read_resource", f"No MCP server found for URI: {args['uri']}")
        conn, uri = found
        return await conn.read_resource("mcp_read_resource", uri)

    return run


def _list_prompts(manager: ConnectionRegistry) -> Callable[[dict[str, Any]], Any]:
    async def run(_: dict[str, Any]) -> Any:
        reachable = reachable_servers()
        items = [
            {
                "id": f"{c.id}:{p.name}",
                "server": c.id,
                "name": p.name,
                "description": truncate_description(p.description) or None,
                "arguments": [
                    {"name": a.name, "description": a.description, "required": bool(a.required)}
                    for a in (p.arguments or [])
                ],
            }
            for c in manager.connected()
            if reachable(c.id)
            for p in c.prompts
        ]
        return {"count": len(items), "prompts": items}

    return run


def _get_prompt(manager: ConnectionRegistry) -> Callable[[dict[str, Any]], Any]:
    async def run(args: dict[str, Any]) -> Any:
        found = manager.find_server_prefix(args["name"])
        if found is None or not reachable_servers()(found[0].id):
            raise ExecutionFailed("mcp_get_prompt", f"No MCP server found for prompt: {args['name']}")
        conn, name = found
        return await conn.get_prompt("mcp_get_prompt", name, args.get("arguments") or {})

    return run


def _login(manager: ConnectionRegistry) -> Callable[[dict[str, Any]], Any]:
    async def run(args: dict[str, Any]) -> Any:
        if not reachable_servers()(args["server"]):  # shut out of the server: it is not there for this caller
            raise ExecutionFailed("mcp_login", f"MCP server not found: {args['server']}")
        return await start_login(manager, args["server"], args.get("scope"))

    return run


_SPECS: dict[
    str, tuple[str, dict[str, Any], ToolFacts, Callable[[ConnectionRegistry], Callable[[dict[str, Any]], Any]]]
] = {
    "mcp_list_resources": (
        "List the resources offered by connected MCP servers. Each has an opaque `id`; pass it unchanged as "
        "`uri` to mcp_read_resource.",
        _EMPTY,
        _READING,
        _list_resources,
    ),
    "mcp_read_resource": (
        "Read one MCP resource by the opaque `id` that mcp_list_resources returned (pass it as `uri`). "
        "Text comes back as text; images and binaries base64-encoded.",
        {
            "type": "object",
            "properties": {
                "uri": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 8192,
                    "description": "The resource id from mcp_list_resources.",
                }
            },
            "required": ["uri"],
            "additionalProperties": False,
        },
        _READING,
        _read_resource,
    ),
    "mcp_list_resource_templates": (
        "List the resource URI templates offered by connected MCP servers, with their variables and the typed "
        "tool that reads each one.",
        _EMPTY,
        _READING,
        _list_templates,
    ),
    "mcp_list_prompts": (
        "List the prompts offered by connected MCP servers. Pass a prompt's opaque `id` as `name` to mcp_get_prompt.",
        _EMPTY,
        _READING,
        _list_prompts,
    ),
    "mcp_get_prompt": (
        "Get one MCP prompt (its messages) by the opaque `id` from mcp_list_prompts, with its string arguments.",
        {
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "description": "The prompt id from mcp_list_prompts.",
                },
                "arguments": {
                    "type": "object",
                    "additionalProperties": {"type": "string", "maxLength": 100_000},
                    "maxProperties": 64,
                    "description": "Prompt arguments by name.",
                },
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        _READING,
        _get_prompt,
    ),
    "mcp_login": (
        "Start an OAuth login for a remote (HTTP) MCP server. Returns an authorization URL for the user to open; "
        "the login completes in the background within 5 minutes and the server reconnects.",
        {
            "type": "object",
            "properties": {
                "server": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The MCP server id."},
                "scope": {"type": "string", "maxLength": 1024, "description": "OAuth scopes to request."},
            },
            "required": ["server"],
            "additionalProperties": False,
        },
        ToolFacts(max_duration_ms=60_000, tags=("mcp", "network")),
        _login,
    ),
}

CAPABILITY_TOOLS: tuple[str, ...] = tuple(sorted(_SPECS))
"""The names of the capability-gated builtins."""


def build_capability_tool(manager: ConnectionRegistry, name: str) -> LoopTool:
    """The capability tool ``name`` bound to ``manager``."""
    description, schema, facts, factory = _SPECS[name]
    return LoopTool(name, description, schema, factory(manager), facts=facts)


def build_template_tool(manager: ConnectionRegistry, conn: Connection, template: types.ResourceTemplate) -> LoopTool:
    """A typed tool for one resource template: one required string per RFC 6570 variable."""
    variables = template_variables(template.uri_template)
    if not variables:
        raise ValueError(f"resource template {template.uri_template!r} has no variables")
    name = manager.template_tool_name(conn.id, template.name)
    summary = truncate_description(template.description) or f"Read the resource {template.uri_template}."
    description = f"{summary} (MCP resource template {template.uri_template} on server {conn.id})"
    schema = {
        "type": "object",
        "properties": {
            v: {"type": "string", "minLength": 1, "maxLength": 2048, "description": f"Value of {{{v}}}."}
            for v in variables
        },
        "required": variables,
        "additionalProperties": False,
    }
    uri_template = template.uri_template

    async def run(args: dict[str, Any]) -> Any:
        values = {k: str(v) for k, v in args.items()}
        uri = expand_template(uri_template, values)
        if not uri:
            raise ValidationFailed(name, "the template expanded to an empty URI")
        return await conn.read_resource(name, uri)

    facts = ToolFacts(
        idempotent=True, concurrent_safe=True, max_duration_ms=60_000, tags=("mcp", f"mcp:{conn.id}", "mcp_resource")
    )
    return LoopTool(name, description, schema, run, facts=facts)
