"""Tool discovery: BM25 ``tool_search``, ``get_tool_schema``, progressive disclosure, deferral and session modes.

Everything runs locally and deterministically, so it works with any model provider. The runtime
builds one :class:`Discovery` from ``[tools]`` and every ``rt.tool_service(...)`` asks it for the
request's rewriters, deferred set and discovery tools.
"""

from __future__ import annotations

from aleph._discovery._deferred import DeferredSet
from aleph._discovery._disclosure import (
    ALWAYS_CORE,
    MODES,
    ProgressiveDisclosure,
    SessionMode,
    collapse_note,
    core_for_mode,
    defers_tool,
    disclosure_enabled,
    first_sentence,
)
from aleph._discovery._index import SearchHit, ToolIndex, document_text
from aleph._discovery._manager import Discovery, RequestDiscovery
from aleph._discovery._sessions import SessionKnobs, SessionStore
from aleph._discovery._tokens import tokenize
from aleph._discovery._tools import RequestBinding, clamp_limit, search_tools

__all__ = [
    "ALWAYS_CORE",
    "MODES",
    "DeferredSet",
    "Discovery",
    "ProgressiveDisclosure",
    "RequestBinding",
    "RequestDiscovery",
    "SearchHit",
    "SessionKnobs",
    "SessionMode",
    "SessionStore",
    "ToolIndex",
    "clamp_limit",
    "collapse_note",
    "core_for_mode",
    "defers_tool",
    "disclosure_enabled",
    "document_text",
    "first_sentence",
    "search_tools",
    "tokenize",
]
