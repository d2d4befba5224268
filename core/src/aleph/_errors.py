"""Aleph's exceptions: one tree, rooted at :class:`AlephError`.

Every error a model can see tells it what to do next; every error a person can
cause (configuration, input) names what was wrong and where.

::

    AlephError
    ├── ConfigError(ValueError)          bad configuration: file, key and reason
    ├── PluginError                      a plugin failed to load or register
    └── ToolError                        a tool call did not produce a result
        ├── ToolNotFound(LookupError)    no such tool (or hidden from this caller)
        ├── PermissionDenied(PermissionError)   a policy or gate refused the call
        │   ├── ApprovalDenied               a human said no
        │   └── ApprovalUnavailable          nobody could be asked (no channel, unattended)
        ├── ApprovalRequired                 a human must decide first (deferred approval: suspend, then resume)
        ├── HumanInputRequired           a person must answer first (deferred question: suspend, then run again)
        ├── ValidationFailed(ValueError) the input does not match the tool's schema
        ├── ExecutionFailed              the tool ran and failed
        │   └── HumanUnavailable             nobody can be asked (no human channel bound, or it cannot reach one)
        ├── ToolTimeout(TimeoutError)    the tool overran its wall-clock budget      [retryable]
        ├── ApprovalExpired(TimeoutError)  nobody answered the approval prompt       [retryable]
        ├── TransportError(ConnectionError)  the channel to the tool broke (MCP)     [retryable]
        ├── Cancelled                    the run was stopped; not a verdict          [retryable]
        └── DuplicateTool(ValueError)    two owners registered the same tool name

``ToolError.is_retryable`` is true exactly for the four marked classes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aleph._chokepoint._approval import ApprovalRequest

__all__ = [
    "AlephError",
    "ApprovalDenied",
    "ApprovalExpired",
    "ApprovalRequired",
    "ApprovalUnavailable",
    "Cancelled",
    "ConfigError",
    "DuplicateTool",
    "ExecutionFailed",
    "PermissionDenied",
    "PluginError",
    "ToolError",
    "ToolNotFound",
    "ToolTimeout",
    "TransportError",
    "ValidationFailed",
]


class AlephError(Exception):
    """Root of every error Aleph raises on purpose."""


class ConfigError(AlephError, ValueError):
    """Configuration that cannot be used. The message names the file, the key and the reason."""

    def __init__(self, message: str, *, file: str | None = None, key: str | None = None) -> None:
        self.file = file
        self.key = key
        where = ": ".join(part for part in (file, key) if part)
        super().__init__(f"{where}: {message}" if where else message)
        self.problems: tuple[str, ...] = (str(self),)
        """Each problem on its own (one, or every key of an invalid file), for ``aleph config check``."""


class PluginError(AlephError):
    """A plugin could not be imported, validated or registered (strict mode only; otherwise recorded)."""


class ToolError(AlephError):
    """A tool call failed. ``str(err)`` is the text shown to the model."""

    retryable: bool = False

    def __init__(self, tool: str, message: str) -> None:
        self.tool = tool
        super().__init__(message)

    @property
    def is_retryable(self) -> bool:
        """True when trying the same call again later may succeed."""
        return self.retryable

    @property
    def kind(self) -> str:
        """A stable machine-readable token for the error class (``not_found``, ``timeout``, ...)."""
        return _KINDS.get(type(self), "error")


class ToolNotFound(ToolError, LookupError):
    """No tool of that name is offered to this caller."""

    def __init__(self, tool: str, *, suggestions: list[str] | tuple[str, ...] = ()) -> None:
        self.suggestions = list(suggestions)
        # The name is the caller's text: one that is not valid UTF-8 (a lone surrogate) is kept escaped,
        # so the message can be logged, recorded and sent anywhere.
        tool = tool.encode("utf-8", "backslashreplace").decode()
        message = f"tool not found: {tool}"
        if self.suggestions:
            message += f". Did you mean: {', '.join(self.suggestions)}?"
        super().__init__(tool, message)


class PermissionDenied(ToolError, PermissionError):
    """A policy rule or a gate refused the call; ``reason`` says which and what to do."""

    def __init__(self, tool: str, reason: str) -> None:
        self.reason = reason
        super().__init__(tool, f"permission denied for tool {tool}: {reason}")


class ApprovalDenied(PermissionDenied):
    """A human was asked and did not approve the call."""


class ApprovalUnavailable(PermissionDenied):
    """The call needs a human's approval and nobody could be asked (no approval channel, an unattended run)."""


class ApprovalRequired(ToolError):
    """The call needs a human's decision, and the caller asked not to block on it (deferred approval).

    ``request`` is the :class:`~aleph.ApprovalRequest` to show; resume by answering its ``fingerprint``
    through :class:`~aleph.DeferredApprovals` and making the same call again.
    """

    def __init__(self, tool: str, request: ApprovalRequest) -> None:
        self.request = request
        super().__init__(
            tool,
            f"tool {tool} needs a human's approval before it runs: {request.reason} "
            "The call is suspended until the user decides; it has not run.",
        )


class ValidationFailed(ToolError, ValueError):
    """The input does not match the tool's schema; ``errors`` lists each bad field."""

    def __init__(self, tool: str, cause: str, *, errors: list[dict[str, str]] | None = None) -> None:
        self.cause = cause
        self.errors = errors or []
        super().__init__(tool, f"invalid input for tool {tool}: {cause}")


class ExecutionFailed(ToolError):
    """The tool ran and reported a failure."""

    def __init__(self, tool: str, cause: str) -> None:
        self.cause = cause
        super().__init__(tool, f"tool {tool} execution failed: {cause}")


class ToolTimeout(ToolError, TimeoutError):
    """The tool overran its wall-clock budget and was stopped."""

    retryable = True

    def __init__(self, tool: str, elapsed_ms: int) -> None:
        self.elapsed_ms = elapsed_ms
        super().__init__(tool, f"tool {tool} timed out after {elapsed_ms}ms")


class ApprovalExpired(ToolError, TimeoutError):
    """Nobody answered the approval prompt in time; this is not a refusal."""

    retryable = True

    def __init__(self, tool: str, waited_ms: int) -> None:
        self.waited_ms = waited_ms
        super().__init__(
            tool,
            f"approval for tool {tool} expired after {waited_ms}ms with no response — "
            "nobody answered; the user did not decline this call",
        )


class TransportError(ToolError, ConnectionError):
    """The connection to the tool's provider (an MCP server, a browser) broke."""

    retryable = True

    def __init__(self, tool: str, cause: str) -> None:
        self.cause = cause
        super().__init__(tool, f"tool {tool} transport error: {cause}")


class Cancelled(ToolError):
    """The run was stopped while the tool was working."""

    retryable = True

    def __init__(self, tool: str) -> None:
        super().__init__(tool, f"tool {tool} was cancelled — the run was stopped, this is not a verdict on the call")


class DuplicateTool(ToolError, ValueError):
    """Two owners tried to register the same tool name (or two names that fold to one)."""

    def __init__(self, tool: str, *, existing_owner: str, new_owner: str, existing_name: str | None = None) -> None:
        self.existing_owner = existing_owner
        self.new_owner = new_owner
        clash = f" (as {existing_name})" if existing_name and existing_name != tool else ""
        super().__init__(
            tool,
            f"duplicate tool name: {tool} — already registered by {existing_owner}{clash}, "
            f"now also by {new_owner}; rename one of them",
        )


_KINDS: dict[type[ToolError], str] = {
    ToolNotFound: "not_found",
    PermissionDenied: "permission_denied",
    ApprovalDenied: "approval_denied",
    ApprovalUnavailable: "approval_unavailable",
    ApprovalRequired: "approval_required",
    ValidationFailed: "validation_failed",
    ExecutionFailed: "execution_failed",
    ToolTimeout: "timeout",
    ApprovalExpired: "approval_expired",
    TransportError: "transport",
    Cancelled: "cancelled",
    DuplicateTool: "duplicate",
}
