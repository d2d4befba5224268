"""The ``files`` plugin: file_read, file_write, file_edit, file_ops, apply_patch, web_fetch and search."""

from __future__ import annotations

from typing import Any

import aleph
from aleph_files import hookspecs
from aleph_files._config import FilesConfig
from aleph_files._confine import Workspace
from aleph_files._files import FileEditTool, FileReadTool, FileWriteTool
from aleph_files._journal import TempJournal
from aleph_files._ops import FileOpsTool
from aleph_files._patch import ApplyPatchTool
from aleph_files._search import SearchFn, SearchTool, searxng_backend
from aleph_files._web import WebFetchTool

ALEPH_PLUGIN_NAME = "files"
ALEPH_HOOKSPECS = (hookspecs,)


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Register the file, patch, web and search tools over the runtime's workspace."""
    config = context.config.section("files", FilesConfig)
    ws = Workspace(context.workspace, context.protected_paths, context.protected_patterns)
    ws.journal = TempJournal(context.data_dir / "files" / "inflight")
    ws.journal.recover(ws)  # temporary files a killed writer left in the workspace

    async def close() -> None:
        ws.close()

    context.add_cleanup(close)
    providers: dict[str, SearchFn] = {}
    if config.searxng_url:
        providers["searxng"] = searxng_backend(config)

    def add_provider(name: str, search: Any) -> None:
        if not isinstance(name, str) or not name or not callable(search):
            raise ValueError("register(name, search) needs a non-empty name and an async callable")
        if name in providers:
            raise ValueError(f"search provider {name!r} is registered twice")
        providers[name] = search

    context.call_hook("aleph_search_providers", register=add_provider)
    register(
        FileReadTool(ws, config, config.max_read_chars or max(1000, context.config.tools.max_output_chars - 1000)),
        FileWriteTool(ws, config),
        FileEditTool(ws, config),
        FileOpsTool(ws, config),
        ApplyPatchTool(ws, config),
        WebFetchTool(config),
        SearchTool(providers, config),
    )
