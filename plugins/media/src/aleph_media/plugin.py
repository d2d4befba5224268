"""The ``media`` plugin: document_extract, media_understand, audio_transcribe and the artifact tools."""

from __future__ import annotations

from typing import Any

import aleph
from aleph_media import hookspec
from aleph_media._artifacts import ArtifactStore
from aleph_media._config import MediaConfig
from aleph_media._confine import Workspace
from aleph_media._documents import DocumentExtractTool
from aleph_media._ocr import Ocr
from aleph_media._resources import SCHEME, ArtifactResources
from aleph_media._speech import AudioTranscribeTool, Pocketsphinx, SpeechEngine
from aleph_media._tools_artifacts import ArtifactListTool, ArtifactPublishTool, ArtifactReadTool, ArtifactUnpublishTool
from aleph_media._understand import Describer, MediaUnderstandTool

__all__ = ["ALEPH_HOOKSPECS", "aleph_mcp_resources", "aleph_register_tools"]

ALEPH_PLUGIN_NAME = "media"
ALEPH_HOOKSPECS = (hookspec,)
"""The family's own hooks (describers, speech engines), added to the plugin manager when this plugin loads."""


def _collector(kind: str, into: dict[str, Any], reserved: tuple[str, ...] = ()) -> Any:
    def register(name: str, fn: Any) -> None:
        if not isinstance(name, str) or not name or not callable(fn):
            raise ValueError(f"register(name, fn) for a {kind} needs a non-empty name and an async callable")
        if name in into or name in reserved:
            raise ValueError(f"{kind} {name!r} is registered twice")
        into[name] = fn

    return register


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Validate ``[media]``, collect describers and speech engines, and register the tools."""
    config = context.config.section("media", MediaConfig)
    ws = Workspace(context.workspace)
    store = ArtifactStore(context.config.data_dir / "media")

    async def close() -> None:
        ws.close()
        store.close()

    context.add_cleanup(close)
    describers: dict[str, Describer] = {}
    engines: dict[str, SpeechEngine] = {}
    context.call_hook("aleph_media_describers", register=_collector("describer", describers))
    context.call_hook("aleph_media_speech_engines", register=_collector("speech engine", engines, (Pocketsphinx.name,)))
    ocr = Ocr(config.ocr_language, config.ocr_timeout_seconds)
    max_chars = config.max_output_chars or max(1000, context.config.tools.max_output_chars - 2000)
    register(
        DocumentExtractTool(ws, config, ocr, max_chars),
        MediaUnderstandTool(ws, config, ocr, describers),
        AudioTranscribeTool(ws, config, Pocketsphinx(), engines),
        ArtifactPublishTool(ws, config, store),
        ArtifactListTool(config, store),
        ArtifactReadTool(store),
        ArtifactUnpublishTool(store),
    )


@aleph.hookimpl
def aleph_mcp_resources(register: Any, config: aleph.AlephConfig) -> None:
    """Offer the served principal's artifacts to MCP clients of ``aleph serve`` as ``aleph-artifact://`` resources."""
    section = config.section("media", MediaConfig)
    source = ArtifactResources(config.data_dir / "media", section.max_resource_bytes)
    register(SCHEME, source.list, source.read)
