"""Aleph: the part of an AI agent that turns a model's tool call into a checked, permitted, recorded action.

Start with :func:`load`::

    import aleph

    async with aleph.load() as rt:
        service = rt.tool_service(agent="main")
        result = await service.call("text_stats", {"text": "hello world"})

Write tools with :class:`AlephTool` or :func:`tool`; ship them as a plugin with :data:`hookimpl`.
"""

from __future__ import annotations

from aleph._chokepoint._approval import (
    ApprovalDecision,
    ApprovalOutcome,
    ApprovalRequest,
    ApprovalRequester,
    ApprovalResponse,
)
from aleph._chokepoint._budget import Budget, BudgetExhausted, BudgetUsage
from aleph._chokepoint._call import CallContext, current_call, current_principal
from aleph._chokepoint._requesters import DeferredApprovals, ScriptedRequester, TerminalRequester
from aleph._chokepoint._scoped import Explanation, ScopedToolService
from aleph._chokepoint._secrets import SecretResolver
from aleph._chokepoint._telemetry import configure_telemetry
from aleph._chokepoint._tiers import ExecTier
from aleph._chokepoint._verdict import PolicyVote
from aleph._config import AlephConfig, load_config
from aleph._confine import ConfinedRoot, ConfinedTarget, PathRefused
from aleph._console import Console, ConsoleInbox
from aleph._contract._function import tool
from aleph._contract._names import repair_tool_name, suggest_candidates
from aleph._contract._registry import RegisteredTool, ToolRegistry
from aleph._contract._service import BaseToolService, NullToolService, ToolService, UnscopedToolService
from aleph._contract._tool import AlephTool, LoopTool, Tool, ToolArgs
from aleph._contract._types import ToolDefinition, ToolFacts, ToolOutput, ToolResult, ToolSource
from aleph._discovery import DeferredSet, ProgressiveDisclosure
from aleph._discovery._index import ToolIndex
from aleph._errors import (
    AlephError,
    ApprovalDenied,
    ApprovalExpired,
    ApprovalRequired,
    ApprovalUnavailable,
    Cancelled,
    ConfigError,
    DuplicateTool,
    ExecutionFailed,
    PermissionDenied,
    PluginError,
    ToolError,
    ToolNotFound,
    ToolTimeout,
    TransportError,
    ValidationFailed,
)
from aleph._floor._policy import CommandPolicy, CommandRule, CommandVerdict
from aleph._human import (
    DeferredHuman,
    HumanAnswer,
    HumanAnswerInvalid,
    HumanChannel,
    HumanField,
    HumanInputRequired,
    HumanOutcome,
    HumanQuestion,
    HumanUnavailable,
)
from aleph._human_text import TerminalHuman, TextHumanChannel
from aleph._ledger import Ledger, LedgerRecord, LedgerRow, VerifyReport
from aleph._ledger._events import EventLog
from aleph._ledger._keystore import Keystore
from aleph._mcp import McpManager
from aleph._netguard import AddressGuard, address_problem, is_public_address, parse_address
from aleph._plugins._context import PluginContext, ToolRegistrar
from aleph._plugins._hookspec import hookimpl
from aleph._plugins._loader import inspect_distribution
from aleph._plugins._trust import HeldPlugin, PluginTrust, TrustRecord, adds_digest
from aleph._principal import Principal
from aleph._progress import (
    ToolProgressCallback,
    notify_tool_result,
    notify_tool_start,
    notify_tool_streaming_chunk,
    set_tool_progress_handler,
)
from aleph._protected import ProtectedPaths
from aleph._runtime import Aleph, load
from aleph._seal import StateSeal
from aleph._turn import TurnContext, current_session, current_turn

__version__ = "0.1.0"

__all__ = [
    "AddressGuard",
    "Aleph",
    "AlephConfig",
    "AlephError",
    "AlephTool",
    "ApprovalDecision",
    "ApprovalDenied",
    "ApprovalExpired",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalRequester",
    "ApprovalRequired",
    "ApprovalResponse",
    "ApprovalUnavailable",
    "BaseToolService",
    "Budget",
    "BudgetExhausted",
    "BudgetUsage",
    "CallContext",
    "Cancelled",
    "CommandPolicy",
    "CommandRule",
    "CommandVerdict",
    "ConfigError",
    "ConfinedRoot",
    "ConfinedTarget",
    "Console",
    "ConsoleInbox",
    "DeferredApprovals",
    "DeferredHuman",
    "DeferredSet",
    "DuplicateTool",
    "EventLog",
    "ExecTier",
    "ExecutionFailed",
    "Explanation",
    "HeldPlugin",
    "HumanAnswer",
    "HumanAnswerInvalid",
    "HumanChannel",
    "HumanField",
    "HumanInputRequired",
    "HumanOutcome",
    "HumanQuestion",
    "HumanUnavailable",
    "Keystore",
    "Ledger",
    "LedgerRecord",
    "LedgerRow",
    "LoopTool",
    "McpManager",
    "NullToolService",
    "PathRefused",
    "PermissionDenied",
    "PluginContext",
    "PluginError",
    "PluginTrust",
    "PolicyVote",
    "Principal",
    "ProgressiveDisclosure",
    "ProtectedPaths",
    "RegisteredTool",
    "ScopedToolService",
    "ScriptedRequester",
    "SecretResolver",
    "StateSeal",
    "TerminalHuman",
    "TerminalRequester",
    "TextHumanChannel",
    "Tool",
    "ToolArgs",
    "ToolDefinition",
    "ToolError",
    "ToolFacts",
    "ToolIndex",
    "ToolNotFound",
    "ToolOutput",
    "ToolProgressCallback",
    "ToolRegistrar",
    "ToolRegistry",
    "ToolResult",
    "ToolService",
    "ToolSource",
    "ToolTimeout",
    "TransportError",
    "TrustRecord",
    "TurnContext",
    "UnscopedToolService",
    "ValidationFailed",
    "VerifyReport",
    "address_problem",
    "adds_digest",
    "configure_telemetry",
    "current_call",
    "current_principal",
    "current_session",
    "current_turn",
    "hookimpl",
    "inspect_distribution",
    "is_public_address",
    "load",
    "load_config",
    "notify_tool_result",
    "notify_tool_start",
    "notify_tool_streaming_chunk",
    "parse_address",
    "repair_tool_name",
    "set_tool_progress_handler",
    "suggest_candidates",
    "tool",
]
