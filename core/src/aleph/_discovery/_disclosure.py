"""Progressive disclosure (reference R14.1-R14.3) and session modes (R14.4).

Non-core tools keep their name and description; their input schema is collapsed to an open object
and the description says how to load the real one. The rewriter is a pure function of its settings,
which is what lets the chokepoint cache the rewritten list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Literal

from aleph._contract._types import ToolDefinition

__all__ = [
    "ALWAYS_CORE",
    "MODES",
    "ProgressiveDisclosure",
    "SessionMode",
    "collapse_note",
    "core_for_mode",
    "defers_tool",
    "disclosure_enabled",
    "first_sentence",
    "never_deferred",
]

SessionMode = Literal["chat", "work", "code"]
MODES: tuple[SessionMode, ...] = ("chat", "work", "code")

ALWAYS_CORE = frozenset({"get_tool_schema", "tool_search"})
"""Discovery's own tools: collapsing them would leave the model no way to load a schema."""

_ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "cf", "al", "no", "fig"})
_NOTE = (
    ' [Parameters collapsed — call get_tool_schema(tool_name="{name}") to load the full input schema '
    "before calling this tool.]"
)

_CHAT_REMOVED = ("bash", "code_exec", "file_write", "file_edit", "file_ops")
_CODE_ADDED = ("apply_patch", "ctx_search")
_NEVER_DEFERRED = frozenset({"tool_search", "get_tool_schema", "ask_user", "session_set_mode", "self_config"})
_BROWSER_RESIDENT = frozenset({"browser_open", "browser_snapshot", "browser_exec"})
_CHAT_DEFERRED_FAMILIES = (
    "desktop", "browser", "team", "task", "node", "image_generate", "video_generate", "audio_generate",
    "speech_generate", "pdf_generate", "cron_manage", "hooks", "automation", "heartbeat", "goal", "loop",
    "workflow", "google_meet", "hub", "skill_install", "skill_manage", "a2a", "acp", "gateway_route",
    "apply_patch", "code_check", "strategy", "vault_store", "session_collaborate", "session_turn", "canvas",
)  # fmt: skip
_CODE_DEFERRED_FAMILIES = (
    "desktop", "image_generate", "video_generate", "audio_generate", "speech_generate", "google_meet",
)  # fmt: skip
_MEDIA_EXACT = frozenset({"media", "media_send"})


def disclosure_enabled(core: Sequence[str]) -> bool:
    """Collapsing is on iff the core list is non-empty and contains no ``"*"``."""
    return bool(core) and "*" not in core


def collapse_note(name: str) -> str:
    """The text appended to a collapsed tool's description."""
    return _NOTE.format(name=name)


def first_sentence(text: str) -> str:
    """``text`` cut after its first ". " whose preceding word is not an abbreviation (e.g, i.e, etc, ...).

    Without such a boundary the text is returned unchanged.
    """
    start = 0
    while True:
        at = text.find(". ", start)
        if at < 0:
            return text
        words = text[:at].split()
        if words and words[-1].lower() not in _ABBREVIATIONS:
            return text[: at + 1]
        start = at + 2


class ProgressiveDisclosure:
    """The definition rewriter: core tools pass unchanged, the rest get a collapsed schema.

    Create one per configuration and reuse it: the chokepoint's list cache keys on the object.
    """

    def __init__(self, core: Iterable[str], *, truncate_descriptions: bool = False) -> None:
        listed = tuple(core)
        self.enabled = disclosure_enabled(listed)
        """False for an empty core list or one containing ``"*"``: definitions pass unchanged."""
        self.core = frozenset(listed) | ALWAYS_CORE
        """Tools whose full schema is always sent."""
        self.truncate_descriptions = truncate_descriptions
        """Cut non-core descriptions to their first sentence."""

    def __repr__(self) -> str:
        return f"ProgressiveDisclosure(core={sorted(self.core)!r}, enabled={self.enabled})"

    def __call__(self, definition: ToolDefinition) -> ToolDefinition:
        """The definition as the model sees it."""
        if not self.enabled or definition.name in self.core:
            return definition
        description = definition.description
        if self.truncate_descriptions:
            description = first_sentence(description)
        return dataclasses.replace(
            definition,
            description=description + collapse_note(definition.name),
            input_schema={"type": "object", "additionalProperties": True},
        )


def core_for_mode(core: Sequence[str], mode: SessionMode) -> tuple[str, ...]:
    """The configured core list adjusted for a session mode (chat drops exec/write tools, code adds two)."""
    listed = tuple(core)
    if not disclosure_enabled(listed):
        return listed
    if mode == "chat":
        kept = tuple(n for n in listed if n not in _CHAT_REMOVED)
        return kept or listed
    if mode == "code":
        return listed + tuple(n for n in _CODE_ADDED if n not in listed)
    return listed


def _in_family(name: str, families: Iterable[str]) -> bool:
    return any(name == family or name.startswith(family + "_") for family in families)


def defers_tool(name: str, mode: SessionMode) -> bool:
    """Whether ``mode`` starts ``name`` deferred (browser satellites in every mode, families per mode)."""
    if name in _NEVER_DEFERRED or "__" in name:
        return False
    if name.startswith("browser_") and name not in _BROWSER_RESIDENT:
        return True
    if mode == "chat":
        return name in _MEDIA_EXACT or _in_family(name, _CHAT_DEFERRED_FAMILIES)
    if mode == "code":
        return name in _MEDIA_EXACT or _in_family(name, _CODE_DEFERRED_FAMILIES)
    return False


def never_deferred(name: str) -> bool:
    """Discovery, HITL and mode tools stay listed whatever the deferral settings."""
    return name in _NEVER_DEFERRED
