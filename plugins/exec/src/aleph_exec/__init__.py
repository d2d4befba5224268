"""aleph-exec: shell and code execution in a bounded workspace sandbox, real checks, PDF and image generation."""

from aleph_exec._sandbox import RunResult, SandboxError, TransactionUnavailable, WorkspaceSandbox
from aleph_exec._undo import UndoError
from aleph_exec._undo_cmd import undo_call

__all__ = ["RunResult", "SandboxError", "TransactionUnavailable", "UndoError", "WorkspaceSandbox", "undo_call"]
