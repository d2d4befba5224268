"""Ingest hygiene for what MCP servers send: names, schemas, descriptions, templates, pins (R17.1-R17.3).

Everything here is pure: no I/O, no server access. A server is an untrusted party, so every
function bounds what it reads and never trusts a shape it has not checked.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

__all__ = [
    "MAX_DESCRIPTION_BYTES",
    "MAX_NAME_CHARS",
    "MAX_RESULT_CHARS",
    "Quarantined",
    "cap_text",
    "definition_hash",
    "expand_template",
    "expand_vars",
    "injection_markers",
    "normalize_schema",
    "sanitize_name",
    "template_variables",
    "truncate_description",
    "wire_name",
]

MAX_DESCRIPTION_BYTES = 8192
"""Descriptions longer than this (UTF-8 bytes) are cut with a marker (R17.3)."""
MAX_NAME_CHARS = 64
"""Registered tool names are cut to this many characters (R17.1)."""
MAX_RESULT_CHARS = 1_000_000
"""Tool results and resource texts longer than this are cut with a marker."""
_MAX_SCHEMA_DEPTH = 64

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]", re.ASCII)


class Quarantined(ValueError):
    """A tool definition Aleph will not offer to a model; the message says why."""


def sanitize_name(text: str) -> str:
    """Replace every character outside ``[A-Za-z0-9_-]`` with ``_`` and keep the first 64."""
    return _UNSAFE.sub("_", text)[:MAX_NAME_CHARS]


def wire_name(server_id: str, tool_name: str) -> str:
    """The registry name of ``tool_name`` on ``server_id``: ``{server}__{short}`` sanitised (R17.1).

    ``short`` drops the tool's own ``{server}:`` prefix; other prefixes are kept and sanitised.
    """
    short = tool_name[len(server_id) + 1 :] if tool_name.startswith(f"{server_id}:") else tool_name
    return sanitize_name(f"{server_id}__{short}")


def truncate_description(text: str | None) -> str:
    """``text`` cut to :data:`MAX_DESCRIPTION_BYTES` UTF-8 bytes with ``… [truncated]`` appended."""
    text = text or ""
    raw = text.encode("utf-8")
    if len(raw) <= MAX_DESCRIPTION_BYTES:
        return text
    return raw[:MAX_DESCRIPTION_BYTES].decode("utf-8", errors="ignore") + "… [truncated]"


def cap_text(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [truncated: {len(text) - limit} more characters]"


_INJECTION = [
    (re.compile(p, re.IGNORECASE), label)
    for p, label in (
        (r"ignore (all |any )?(previous|prior|above) (instructions|prompts)", "ignore-previous-instructions"),
        (r"disregard (all |any )?(previous|prior|above)", "disregard-previous"),
        (r"<\s*/?\s*(system|system-reminder|important)\s*>", "fake-system-tag"),
        (r"\byou (must|should) (now )?(always )?(call|run|use|invoke)\b", "imperative-to-model"),
        (r"do not (tell|inform|mention).{0,40}(user|human)", "conceal-from-user"),
        (r"\b(ssh|id_rsa|\.env|api[_ -]?key|password)s?\b.{0,40}\b(send|upload|include|read)\b", "exfiltration"),
        (r"[\u200b-\u200f\u202a-\u202e\u2066-\u2069]", "invisible-or-bidi-characters"),
    )
]


def injection_markers(text: str) -> list[str]:
    """Labels of prompt-injection markers found in ``text`` (a warning, never a refusal)."""
    sample = text[: MAX_DESCRIPTION_BYTES * 2]
    return [label for pattern, label in _INJECTION if pattern.search(sample)]


_SUB_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_SUB_LIST = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUB_MAP = ("properties", "patternProperties", "$defs", "dependentSchemas")


def _check_object_type(schema: Mapping[str, Any]) -> None:
    kind = schema.get("type", "object")
    if isinstance(kind, str):
        if kind != "object":
            raise Quarantined(f'input schema type is "{kind}", not "object"')
    elif isinstance(kind, list):
        if "object" not in kind:
            raise Quarantined(f"input schema type {kind!r} does not include object")
    else:
        raise Quarantined("input schema type is neither a string nor a list")


def normalize_schema(schema: Any) -> dict[str, Any]:
    """A usable object schema built from a server's ``inputSchema``, or :class:`Quarantined`.

    ``definitions`` → ``$defs`` (with ``$ref`` rewritten), ``type: object`` added where
    ``properties`` exist, ``properties: {}`` added where only ``required`` exists, ``required``
    pruned to declared properties and dropped when empty; recursively (R17.3).
    """
    if not isinstance(schema, Mapping):
        raise Quarantined("input schema is not a JSON object")
    _check_object_type(schema)

    def walk(node: Any, depth: int) -> Any:
        if depth > _MAX_SCHEMA_DEPTH:
            raise Quarantined(f"input schema nests deeper than {_MAX_SCHEMA_DEPTH} levels")
        if isinstance(node, list):
            return [walk(item, depth + 1) for item in node]
        if not isinstance(node, Mapping):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "definitions":
                key = "$defs"
            if key == "$ref" and isinstance(value, str) and value.startswith("#/definitions/"):
                value = "#/$defs/" + value[len("#/definitions/") :]
            if key in _SUB_MAP and isinstance(value, Mapping):
                merged = dict(out.get(key, {}))
                merged.update({str(k): walk(v, depth + 1) for k, v in value.items()})
                out[key] = merged
            elif key in _SUB_ONE or key in _SUB_LIST:
                out[key] = walk(value, depth + 1)
            else:
                out[key] = copy.deepcopy(value) if isinstance(value, dict | list) else value
        if "properties" in out and "type" not in out:
            out["type"] = "object"
        if "required" in out:
            if "properties" not in out:
                out["properties"] = {}
            props = out["properties"] if isinstance(out["properties"], Mapping) else {}
            required = out["required"] if isinstance(out["required"], list) else []
            pruned = [r for r in dict.fromkeys(required) if isinstance(r, str) and r in props]
            if pruned:
                out["required"] = pruned
            else:
                del out["required"]
        return out

    result: dict[str, Any] = walk(schema, 0)
    result["type"] = "object"
    result.setdefault("properties", {})
    return result


def definition_hash(name: str, description: str | None, input_schema: Any, annotations: Any) -> str:
    """SHA-256 over the full raw definition a server sent (name, description, schema, annotations)."""
    payload = {"name": name, "description": description, "input_schema": input_schema, "annotations": annotations}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_vars(text: str, env: Mapping[str, str] | None = None) -> str:
    """Expand ``${VAR}`` from the environment; an unknown variable is left as written (R17.9)."""
    source = os.environ if env is None else env
    return _VAR.sub(lambda m: source.get(m.group(1), m.group(0)), text)


_EXPR = re.compile(r"\{([+#./;?&]?)([^{}]*)\}")
_VARNAME = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*", re.ASCII)


def template_variables(uri_template: str) -> list[str]:
    """The variable names of an RFC 6570 URI template, in order, without duplicates."""
    names: list[str] = []
    for match in _EXPR.finditer(uri_template):
        for spec in match.group(2).split(","):
            name = spec.split(":", 1)[0].rstrip("*").strip()
            if _VARNAME.fullmatch(name) and name not in names:
                names.append(name)
    return names


def expand_template(uri_template: str, values: Mapping[str, str]) -> str:
    """Expand an RFC 6570 template (levels 1-3, plus ``*`` explode kept as a single value)."""
    separators = {"": ",", "+": ",", "#": ",", ".": ".", "/": "/", ";": ";", "?": "&", "&": "&"}

    def expand(match: re.Match[str]) -> str:
        op, body = match.group(1), match.group(2)
        parts: list[str] = []
        for spec in body.split(","):
            name, _, prefix = spec.partition(":")
            name = name.rstrip("*").strip()
            if name not in values:
                continue
            value = str(values[name])
            if prefix.isdigit():
                value = value[: int(prefix)]
            safe = ":/?#[]@!$&'()*+,;=" if op in ("+", "#") else ""
            encoded = quote(value, safe=safe)
            if op in (";", "?", "&"):
                encoded = f"{name}={encoded}" if value or op != ";" else name
            parts.append(encoded)
        if not parts:
            return ""
        lead = {"": "", "+": "", "#": "#", ".": ".", "/": "/", ";": ";", "?": "?", "&": "&"}[op]
        return lead + separators[op].join(parts)

    return _EXPR.sub(expand, uri_template)
