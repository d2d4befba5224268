"""The ``memory`` plugin: memory, sessions and notes tools over one SQLite file and the notes folder."""

from __future__ import annotations

from typing import Any

import aleph
from aleph_memory import hookspec
from aleph_memory._base import FamilyTool, Runtime
from aleph_memory._choice import choose_embedder, embedder_check
from aleph_memory._config import MemoryConfig
from aleph_memory._confine import NotesDir
from aleph_memory._memory import Memory
from aleph_memory._notes import Notes
from aleph_memory._providers import Embedder, Providers
from aleph_memory._sessions import SessionStore
from aleph_memory._tools_memory import (
    MemoryExploreTool,
    MemoryReflectTool,
    MemorySearchTool,
    MemoryTimelineTool,
    RecallContextTool,
)
from aleph_memory._tools_notes import (
    MemoryBrowseTool,
    NoteGraphQueryTool,
    NoteManageTool,
    NoteOrientTool,
    NoteSchemaTool,
)
from aleph_memory._tools_recall import CtxSearchTool, GovernanceMetricsTool, RecallEventsTool, ToolUsageTool
from aleph_memory._tools_remember import FlagCorrectionTool, MemoryTraceTool, RememberTool, UserProfileTool
from aleph_memory._tools_sessions import (
    SessionCompactTool,
    SessionCompleteTool,
    SessionListTool,
    SessionNewTool,
    SessionRenameTool,
    SessionSearchTool,
    SessionSendTool,
)
from aleph_memory._twopass import vectors_check

ALEPH_PLUGIN_NAME = "memory"
ALEPH_HOOKSPECS = (hookspec,)

TOOLS: tuple[type[FamilyTool], ...] = (
    MemorySearchTool,
    MemoryBrowseTool,
    MemoryExploreTool,
    MemoryTimelineTool,
    MemoryReflectTool,
    MemoryTraceTool,
    RememberTool,
    RecallContextTool,
    RecallEventsTool,
    CtxSearchTool,
    UserProfileTool,
    FlagCorrectionTool,
    ToolUsageTool,
    GovernanceMetricsTool,
    SessionListTool,
    SessionNewTool,
    SessionRenameTool,
    SessionSendTool,
    SessionSearchTool,
    SessionCompactTool,
    SessionCompleteTool,
    NoteManageTool,
    NoteOrientTool,
    NoteSchemaTool,
    NoteGraphQueryTool,
)


def database_path(context_or_config: Any) -> Any:
    """Where the family keeps its SQLite file: ``<data_dir>/memory/memory.sqlite``."""
    return context_or_config.data_dir / "memory" / "memory.sqlite"


def _wordllama() -> Embedder:
    from aleph_memory._wordllama import WordLlamaEmbedder

    return WordLlamaEmbedder()


def _minilm_numpy() -> Embedder:
    from aleph_memory._minilm_numpy import MiniLMNumpyEmbedder

    return MiniLMNumpyEmbedder()


def _minilm_onnx() -> Embedder:
    from aleph_memory._minilm_onnx import MiniLMOnnxEmbedder

    return MiniLMOnnxEmbedder()


def _minilm() -> Embedder:
    from aleph_memory._minilm import MiniLMEmbedder

    return MiniLMEmbedder()


@aleph.hookimpl
def aleph_memory_embedders(register: Any) -> None:
    """The family's embedders: ``minilm-onnx`` (the default), ``wordllama``, ``minilm-numpy``, ``minilm`` (torch)."""
    register("minilm-onnx", _minilm_onnx)
    register("wordllama", _wordllama)
    register("minilm-numpy", _minilm_numpy)
    register("minilm", _minilm)


@aleph.hookimpl
def aleph_doctor_checks(register: Any, config: aleph.AlephConfig) -> None:
    """``aleph doctor``: memory.embedder (the embedder search uses) and memory.vectors (the native kernels).

    memory.embedder loads the embedder search would use and embeds one sentence, or says why search is
    lexical; memory.vectors says whether the two passes over the vectors run natively.
    """
    configured = config.section("memory", MemoryConfig).embedder
    factories: dict[str, Any] = {}
    aleph_memory_embedders(register=factories.__setitem__)
    register("memory.embedder", lambda: embedder_check(configured, factories))
    register("memory.vectors", vectors_check)


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Open the family's store and notes folder and register its 25 tools."""
    config = context.config.section("memory", MemoryConfig)
    name, note = choose_embedder(config.embedder)
    providers = Providers(name, config.summariser, note=note, optional=config.embedder is None)
    context.call_hook("aleph_memory_embedders", register=providers.add_embedder)
    context.call_hook("aleph_memory_summarisers", register=providers.add_summariser)
    folder = NotesDir(context.workspace, config.notes_dir, context.protected_paths)
    memory = Memory(database_path(context), config, providers)

    async def close() -> None:
        memory.close()

    context.add_cleanup(close)
    rt = Runtime(memory, context, Notes(folder, memory.db, config.max_notes), SessionStore(memory.db))
    register(*(tool(rt) for tool in TOOLS))
