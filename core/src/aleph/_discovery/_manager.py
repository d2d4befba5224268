"""Discovery for one runtime: the per-generation search index, rewriters, per-session deferred sets and knobs."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aleph._config import ToolsConfig
from aleph._contract._registry import RegisteredTool, ToolRegistry
from aleph._discovery._deferred import DeferredSet
from aleph._discovery._disclosure import (
    ALWAYS_CORE,
    MODES,
    ProgressiveDisclosure,
    SessionMode,
    core_for_mode,
    defers_tool,
    disclosure_enabled,
    never_deferred,
)
from aleph._discovery._index import TermCache, ToolIndex
from aleph._discovery._sessions import SessionKnobs, SessionStore
from aleph._discovery._tools import RequestBinding, request_tools
from aleph._turn import TurnContext

if TYPE_CHECKING:
    from aleph._chokepoint._scoped import DefinitionRewriter, ScopedToolService

__all__ = ["Discovery", "RequestDiscovery"]

MAX_SESSIONS = 4096


@dataclass(slots=True)
class RequestDiscovery:
    """What discovery contributes to one tool service; call :meth:`bind` once the service exists."""

    rewriters: tuple[DefinitionRewriter, ...]
    deferred: Any
    extra_tools: dict[str, RegisteredTool]
    knobs: SessionKnobs
    binding: RequestBinding

    def bind(self, service: ScopedToolService) -> ScopedToolService:
        """Point the request's discovery tools at ``service``; returns it."""
        self.binding.service = service
        return service


class Discovery:
    """Everything ``[tools]`` decides, built once per runtime and shared by its tool services.

    - one :class:`ProgressiveDisclosure` rewriter per session mode (created once, so list caches hit);
    - one :class:`ToolIndex` per registry generation, rebuilt lazily after a change;
    - one :class:`DeferredSet` per (session, mode), bounded to the most recent sessions; requests
      without a session key share one set;
    - the session store (``<data_dir>/sessions.sqlite3``) holding each session's mode and exec tier.
    """

    def __init__(self, settings: ToolsConfig, registry: ToolRegistry, data_dir: Path) -> None:
        self.settings = settings
        self.registry = registry
        self.sessions = SessionStore(data_dir / "sessions.sqlite3")
        """Per-session knobs."""
        self.disclosure = disclosure_enabled(settings.core)
        """Progressive disclosure is on (a non-empty core list without ``"*"``)."""
        self._auto_percent = int(settings.defer.split(":", 1)[1]) if settings.defer else None
        self.active = self.disclosure or settings.defer_mcp_tools or self._auto_percent is not None
        """Discovery tools are offered and deferral applies (disclosure on, or a deferral setting)."""
        truncate = settings.truncate_tool_descriptions
        self._rewriters: dict[SessionMode, tuple[DefinitionRewriter, ...]] = {
            mode: (ProgressiveDisclosure(core_for_mode(settings.core, mode), truncate_descriptions=truncate),)
            if self.disclosure
            else ()
            for mode in MODES
        }
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._index: tuple[int, ToolIndex] | None = None
        self._terms = TermCache()
        self._size: tuple[int, int] | None = None
        self._plan: dict[tuple[int, SessionMode], frozenset[str]] = {}
        self._deferred: OrderedDict[tuple[str, SessionMode], tuple[DeferredSet, int]] = OrderedDict()

    # -- shared, per registry generation ---------------------------------------------------------

    def index(self) -> ToolIndex:
        """The search index of the current registry generation (built on first use after a change)."""
        generation = self.registry.generation
        cached = self._index
        if cached is not None and cached[0] == generation:
            return cached[1]
        with self._build_lock:
            cached = self._index
            if cached is not None and cached[0] == generation:
                return cached[1]
            index = ToolIndex(self.registry.definitions(), self._terms)
            self._index = (generation, index)
            return index

    def definition_tokens(self) -> int:
        """Estimated tokens of every full definition (JSON characters / 4), cached per generation."""
        generation = self.registry.generation
        cached = self._size
        if cached is not None and cached[0] == generation:
            return cached[1]
        chars = sum(len(json.dumps(d.to_function(), ensure_ascii=False)) for d in self.registry.definitions())
        self._size = (generation, chars // 4)
        return chars // 4

    def auto_deferral(self) -> bool:
        """``defer = "auto:N"`` is set and the full definitions exceed N% of ``context_budget_tokens``."""
        if self._auto_percent is None:
            return False
        return self.definition_tokens() * 100 > self._auto_percent * self.settings.context_budget_tokens

    def deferral_plan(self, mode: SessionMode) -> frozenset[str]:
        """The registered tools that start deferred under ``mode`` at the current generation."""
        generation = self.registry.generation
        key = (generation, mode)
        plan = self._plan.get(key)
        if plan is not None:
            return plan
        configured = set(self.settings.core) - {"*"}
        core = set(core_for_mode(self.settings.core, mode)) | ALWAYS_CORE if self.disclosure else set(ALWAYS_CORE)
        auto = self.auto_deferral()
        out = set()
        for entry in self.registry:
            name = entry.name
            if never_deferred(name):
                continue
            if (
                (self.disclosure and defers_tool(name, mode))
                or (self.settings.defer_mcp_tools and entry.source.type == "mcp" and name not in configured)
                or (auto and name not in core)
            ):
                out.add(name)
        plan = frozenset(out)
        with self._lock:
            if len(self._plan) > 2 * len(MODES):
                self._plan.clear()
            self._plan[key] = plan
        return plan

    # -- per session -----------------------------------------------------------------------------

    def deferred_set(self, session_key: str, mode: SessionMode) -> DeferredSet:
        """The session's deferred set for ``mode``, brought up to date with newly registered tools."""
        generation = self.registry.generation
        key = (session_key, mode)
        with self._lock:
            state = self._deferred.get(key)
            if state is not None:
                self._deferred.move_to_end(key)
                if state[1] == generation:
                    return state[0]
        deferred = state[0] if state is not None else DeferredSet()
        deferred.admit(self.registry.names(), self.deferral_plan(mode))
        with self._lock:
            self._deferred[key] = (deferred, generation)
            self._deferred.move_to_end(key)
            while len(self._deferred) > MAX_SESSIONS:
                self._deferred.popitem(last=False)
        return deferred

    def prepare(
        self,
        turn: TurnContext | None,
        *,
        rewriters: Sequence[DefinitionRewriter] = (),
        deferred: Any = None,
    ) -> RequestDiscovery:
        """Rewriters, deferred set and discovery tools for one request; explicit arguments win."""
        session_key = turn.session_key if turn is not None else ""
        knobs = self.sessions.get(session_key)
        if self.active:
            chosen_rewriters = tuple(rewriters) or self._rewriters[knobs.mode]
            chosen_deferred = deferred if deferred is not None else self.deferred_set(session_key, knobs.mode)
        else:
            chosen_rewriters, chosen_deferred = tuple(rewriters), deferred
        binding = RequestBinding(self.registry, self.index, chosen_deferred)
        extra = request_tools(binding, self.sessions) if self.active or chosen_deferred is not None else {}
        return RequestDiscovery(chosen_rewriters, chosen_deferred, extra, knobs, binding)
