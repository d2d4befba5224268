"""The ToolService contract, the null service and the plain (unscoped) service over a registry."""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from aleph._contract._failures import describe_environment_error
from aleph._contract._names import suggest_candidates
from aleph._contract._registry import ToolRegistry
from aleph._contract._types import ToolDefinition, ToolOutput, ToolResult
from aleph._errors import ExecutionFailed, ToolError, ToolNotFound

__all__ = ["BaseToolService", "NullToolService", "ToolService", "UnscopedToolService", "panic_error"]

log = logging.getLogger("aleph")


@runtime_checkable
class ToolService(Protocol):
    """What an agent loop talks to. Every method is async.

    ``execute`` raises a :class:`ToolError`; ``call`` never raises and returns a :class:`ToolResult`
    to feed back to the model.
    """

    async def execute(self, name: str, input: Mapping[str, Any]) -> ToolOutput:
        """Run ``name`` with ``input`` or raise a :class:`ToolError`."""
        ...

    async def call(self, name: str, input: Mapping[str, Any]) -> ToolResult:
        """Run ``name`` and report the outcome as a :class:`ToolResult`; never raises."""
        ...

    async def list(self) -> builtins.list[ToolDefinition]:
        """The tools offered to the model this turn, sorted by name."""
        ...

    async def describe(self, name: str) -> ToolDefinition | None:
        """The definition of ``name`` if this caller may see it."""
        ...

    async def dispatchable_list(self) -> builtins.list[ToolDefinition]:
        """Everything callable this turn: :meth:`list` plus deferred tools."""
        ...

    async def dispatcher_schema(self) -> builtins.list[dict[str, Any]]:
        """The provider-facing function definitions (``{name, description, parameters}``)."""
        ...


def panic_error(name: str, exc: BaseException) -> ExecutionFailed:
    """An exception a tool did not handle, as a non-retryable failure naming the tool.

    A machine condition a user can fix (full disk, permissions, a locked database) is named by its
    cause; anything else is a bug in the tool and reported as a panic with its type.
    """
    cause = describe_environment_error(exc)
    if cause is not None:
        return ExecutionFailed(name, cause)
    return ExecutionFailed(name, f"tool panicked: {type(exc).__name__}: {exc}")


class BaseToolService:
    """Shared behaviour: ``call`` on top of ``execute``, the dispatchable list and the function schema."""

    async def execute(self, name: str, input: Mapping[str, Any]) -> ToolOutput:  # pragma: no cover - abstract
        """Run ``name``; subclasses implement this."""
        raise NotImplementedError

    async def list(self) -> builtins.list[ToolDefinition]:  # pragma: no cover - abstract
        """Subclasses implement this."""
        raise NotImplementedError

    async def call(self, name: str, input: Mapping[str, Any]) -> ToolResult:
        """Run ``name`` and return a :class:`ToolResult`; never raises."""
        start = time.perf_counter()
        try:
            output = await self.execute(name, input)
        except ToolError as exc:
            return ToolResult(
                False,
                error=str(exc),
                duration_ms=(time.perf_counter() - start) * 1000,
                error_kind=exc.kind,
                retryable=exc.is_retryable,
            )
        except Exception as exc:
            err = panic_error(name, exc)
            return ToolResult(
                False, error=str(err), duration_ms=(time.perf_counter() - start) * 1000, error_kind=err.kind
            )
        warnings = output.metadata.get("warnings") if output.metadata else None
        return ToolResult(
            True,
            output=output.text,
            duration_ms=(time.perf_counter() - start) * 1000,
            warnings=tuple(warnings) if warnings else (),
        )

    async def dispatchable_list(self) -> builtins.list[ToolDefinition]:
        """Everything callable this turn; by default the same as :meth:`list`."""
        return await self.list()

    async def dispatcher_schema(self) -> builtins.list[dict[str, Any]]:
        """The provider-facing function definitions of :meth:`list`."""
        return [d.to_function() for d in await self.list()]


class NullToolService(BaseToolService):
    """A service with no tools: every call is "tool not found"."""

    async def execute(self, name: str, input: Mapping[str, Any]) -> ToolOutput:
        """Always raises :class:`ToolNotFound`."""
        log.warning("NullToolService asked to run %r; no tool service is configured", name)
        raise ToolNotFound(name)

    async def list(self) -> builtins.list[ToolDefinition]:
        """No tools."""
        return []

    async def describe(self, name: str) -> ToolDefinition | None:
        """Nothing is described."""
        return None


class UnscopedToolService(BaseToolService):
    """Every registered tool, no policy, no gates. For tests and benchmarks only; agents use the scoped service."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry

    async def execute(self, name: str, input: Mapping[str, Any]) -> ToolOutput:
        """Resolve, validate and run ``name``."""
        entry = self.registry.get(name)
        if entry is None:
            raise ToolNotFound(name, suggestions=suggest_candidates(name, self.registry.names()))
        try:
            return await entry.tool.call_json(input)
        except ToolError:
            raise
        except Exception as exc:
            raise panic_error(entry.name, exc) from exc

    async def list(self) -> builtins.list[ToolDefinition]:
        """Every registered tool."""
        return list(self.registry.definitions())

    async def describe(self, name: str) -> ToolDefinition | None:
        """The registered definition of ``name``."""
        entry = self.registry.get(name)
        return None if entry is None else entry.definition
