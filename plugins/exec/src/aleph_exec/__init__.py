"""aleph-exec: shell and code execution in a bounded workspace sandbox, real checks, PDF and image generation."""

from aleph_exec._sandbox import RunResult, SandboxError, TransactionUnavailable, WorkspaceSandbox

__all__ = ["RunResult", "SandboxError", "TransactionUnavailable", "WorkspaceSandbox"]
