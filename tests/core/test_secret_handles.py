"""Secret handles: judged and recorded as handles, resolved after the verdict, scrubbed from what leaves."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import aleph

pytestmark = pytest.mark.anyio

VALUE = "s3cr3t-value-for-tests"


class _Resolver:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str, tuple[str | int, ...], str]] = []

    def resolve_secret(
        self,
        name: str,
        *,
        tool: str,
        field: tuple[str | int, ...],
        arguments: Mapping[str, Any],
        principal: aleph.Principal,
    ) -> str:
        self.asked.append((name, tool, field, principal.owner))
        if name != "key" or principal.owner != "alice":
            raise aleph.PermissionDenied(tool, f"no secret {name}")
        return VALUE


class _Plugin:
    def __init__(self, resolver: _Resolver) -> None:
        self.resolver = resolver

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
        context.add_secret_resolver("test", self.resolver)

        @aleph.tool
        def shout(text: str, fail: bool = False) -> dict[str, str]:
            """Stream the text, then return it (or fail with it)."""
            aleph.notify_tool_streaming_chunk("shout", text)
            if fail:
                raise aleph.ExecutionFailed("shout", f"bad {text}")
            return {"heard": text}

        register(shout)


class _Chunks:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    def on_tool_start(self, tool_name: str, args_summary: str) -> None: ...

    def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None: ...

    def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
        self.chunks.append(chunk)


def _runtime(workspace: Path, resolver: _Resolver, toml: str = "") -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(f'[workspace]\ndata_dir = ".data"\n{toml}')
    return aleph.load(workspace / "aleph.toml", plugins=[_Plugin(resolver)], entry_points=False, strict=True)


async def test_the_tool_gets_the_value_and_everything_after_it_gets_the_handle(workspace: Path) -> None:
    resolver = _Resolver()
    chunks = _Chunks()
    previous = aleph.set_tool_progress_handler(chunks)
    try:
        async with _runtime(workspace, resolver) as rt:
            service = rt.tool_service(agent="alice")
            result = await service.call("shout", {"text": "key={{test:key}}"})
            failed = await service.call("shout", {"text": "{{test:key}}", "fail": True})
    finally:
        aleph.set_tool_progress_handler(previous)
    assert result.success and result.output == '{"heard":"key={{test:key}}"}'
    assert not failed.success and failed.error is not None and "{{test:key}}" in failed.error
    assert VALUE not in failed.error
    assert chunks.chunks == ["key={{test:key}}", "{{test:key}}"]
    assert resolver.asked[0] == ("key", "shout", ("text",), "alice")
    for path in (workspace / ".data").rglob("*"):
        if path.is_file():
            assert VALUE.encode() not in path.read_bytes(), path


async def test_a_denied_call_never_asks_the_resolver(workspace: Path) -> None:
    resolver = _Resolver()
    toml = "[policies.tool_permissions.overrides]\nshout = 'deny'\n"
    async with _runtime(workspace, resolver, toml) as rt:
        result = await rt.tool_service(agent="alice").call("shout", {"text": "{{test:key}}"})
    assert not result.success and result.error_kind == "permission_denied"
    assert resolver.asked == []


async def test_a_refusing_resolver_stops_the_call_and_unknown_schemes_pass_through(workspace: Path) -> None:
    resolver = _Resolver()
    async with _runtime(workspace, resolver) as rt:
        refused = await rt.tool_service(agent="bob").call("shout", {"text": "{{test:key}}"})
        other = await rt.tool_service(agent="bob").call("shout", {"text": "{{other:key}}"})
    assert not refused.success and refused.error_kind == "permission_denied"
    assert other.success and "{{other:key}}" in other.output


async def test_too_many_handles_in_one_call_are_refused(workspace: Path) -> None:
    resolver = _Resolver()
    async with _runtime(workspace, resolver) as rt:
        result = await rt.tool_service(agent="alice").call("shout", {"text": "{{test:key}}" * 65})
    assert not result.success and "secret handles" in (result.error or "")


def test_a_scheme_has_one_resolver() -> None:
    from aleph._chokepoint._secrets import SecretResolvers

    resolvers = SecretResolvers()
    resolvers.add("vault", _Resolver())
    with pytest.raises(ValueError, match="already has a resolver"):
        resolvers.add("vault", _Resolver())
    with pytest.raises(ValueError, match="lowercase"):
        resolvers.add("Bad Scheme", _Resolver())
