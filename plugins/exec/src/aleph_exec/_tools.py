"""``bash``, ``code_exec`` and ``code_check``: commands in the workspace sandbox.

The command-policy floor is not here: the chokepoint asks an exec-class tool for the shell text a
call would run (:meth:`shell_command`) and applies the policy before the tool runs.
"""

from __future__ import annotations

import contextvars
import importlib.util
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts, ValidationFailed
from aleph_exec._netcall import network_for_call, record_network
from aleph_exec._sandbox import RunResult, SandboxError, WorkspaceSandbox
from aleph_exec._transaction import COMMIT_TOOL, Transactions
from aleph_exec._workdir import WorkdirError, resolve_workdir

__all__ = ["BashTool", "CodeCheckTool", "CodeExecTool", "ExecCommitTool", "run_sandboxed", "uncontained_reason"]

_SHELL_LANGUAGES = ("shell", "bash", "sh")


async def run_sandboxed(
    tool: str,
    sandbox: WorkspaceSandbox,
    argv: list[str],
    *,
    cwd: Path,
    timeout: float,
    stdin: bytes | None = None,
    on_line: Callable[[str], None] | None = None,
    layer: Path | None = None,
) -> RunResult:
    """Run in the sandbox, on the copy-on-write ``layer`` when given.

    A cancelled caller stops (and kills) the run instead of leaking it.
    """
    extra: dict[str, Any] = {} if layer is None else {"layer": layer}
    network = network_for_call(sandbox)
    if network is not None:
        extra["network"] = network
    try:
        result = await sandbox.arun(argv, cwd=cwd, timeout=timeout, stdin=stdin, on_line=on_line, **extra)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ExecutionFailed(tool, f"could not start {argv[0]!r} in the sandbox: {exc}") from None
    except (SandboxError, ValueError) as exc:  # ValueError: a layer the sandbox refused
        raise ExecutionFailed(tool, str(exc)) from None
    finally:
        if network is not None:
            await record_network(network)
    return result


def uncontained_reason(sandbox: WorkspaceSandbox) -> str | None:
    """None when a run of this sandbox is a transaction (copy-on-write view, network off or proxied); else why not.

    Under ``network = "proxied"`` a call is contained: its commands reach only the hosts the proxy lets
    through (listed, or approved by a person), and every connection is on the call's ledger row.
    """
    if not sandbox.config.transactions:
        return "transactions are off ([exec] transactions = false)"
    if sandbox.config.network.mode == "host":
        return "network is enabled ([exec] network = host)"
    return sandbox.transaction_support()


async def run_transaction(
    tool: str,
    sandbox: WorkspaceSandbox,
    transactions: Transactions | None,
    argv: list[str],
    *,
    cwd: Path,
    timeout: float,
    stdin: bytes | None = None,
    on_line: Callable[[str], None] | None = None,
    keep: bool = True,
) -> dict[str, Any]:
    """Run as a transaction when one holds, else directly; the result says ``transaction`` and, when false, why.

    In a transaction the changeset is judged and then committed (or discarded unjudged when not ``keep``).
    """
    reason = uncontained_reason(sandbox) if transactions is not None else "transactions are not set up"
    if reason is not None or transactions is None:
        run = await run_sandboxed(tool, sandbox, argv, cwd=cwd, timeout=timeout, stdin=stdin, on_line=on_line)
        return {**run.to_json(), "transaction": False, "uncontained": reason}
    layer = transactions.new_layer()  # one mkdir: not worth a worker thread
    try:
        run = await run_sandboxed(
            tool, sandbox, argv, cwd=cwd, timeout=timeout, stdin=stdin, on_line=on_line, layer=layer
        )
    except BaseException:
        transactions.discard_later(layer)
        raise
    if not keep:
        transactions.discard_later(layer)
        return {**run.to_json(), "transaction": True, "changes": {"status": "discarded"}}
    changes = await transactions.settle(tool, layer)
    result = {**run.to_json(), "transaction": True, "changes": changes}
    if changes.get("status") == "refused":
        # The refusal leads the result, in words: an exit code of 0 and output that reads like success
        # must not let the model believe the files changed.
        message = (
            f"the command ran (exit code {run.exit_code}) but none of its file changes were applied: "
            f"{changes.get('reason', 'the changeset was refused')}"
        )
        return {"ok": False, "error": message, **result}
    return result


def _workdir(tool: str, sandbox: WorkspaceSandbox, working_dir: str) -> Path:
    try:
        return resolve_workdir(sandbox.workspace, working_dir)
    except WorkdirError as exc:
        raise ValidationFailed(tool, f"working_dir: {exc}") from None


def _stream_to_caller(name: str) -> Callable[[str], None]:
    """Live output lines of this call, notified in the calling task's context.

    Runs share one output reader task, whose context is that of the first call; without this, an
    observer that tells calls apart by context (``aleph serve``'s progress) gives later calls' lines
    to the first one.
    """
    context = contextvars.copy_context()
    return lambda line: context.run(aleph.notify_tool_streaming_chunk, name, line)


class _Contained:
    """The answers a sandboxed shell tool gives the chokepoint: where a call starts, and whether it is a transaction."""

    def __init__(self, sandbox: WorkspaceSandbox, transactions: Transactions | None = None) -> None:
        self.sandbox = sandbox
        self.transactions = transactions

    def uncontained(self, input: Mapping[str, Any]) -> str | None:
        """None when this call runs as a transaction (its changeset judged before it lands); else why not."""
        if self.transactions is None:
            return "transactions are not set up"
        return uncontained_reason(self.sandbox)

    def shell_cwd(self, input: Mapping[str, Any]) -> str | None:
        """Where the command starts (``working_dir`` resolved in the workspace); None when it cannot be."""
        working_dir = input.get("working_dir", ".")
        if not isinstance(working_dir, str):
            return None
        try:
            return str(resolve_workdir(self.sandbox.workspace, working_dir))
        except (WorkdirError, OSError):
            return None


class BashArgs(ToolArgs):
    command: str = Field(min_length=1, max_length=100_000)
    """The shell command (bash syntax) to run in the workspace."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=170)
    """Wall-time limit in seconds (default from [exec] default_timeout_seconds, at most 170)."""
    working_dir: str = Field(default=".", max_length=4096)
    """Directory to run in, relative to the workspace."""


class BashTool(_Contained, AlephTool[BashArgs]):
    NAME = "bash"
    DESCRIPTION = (
        "Run a bash command in the workspace sandbox and return exit_code, stdout, stderr, whether output was "
        "truncated or the command timed out, and which isolation was active. Output lines stream live. "
        "Background processes do not outlive the call. Network, by default, goes through Aleph's egress proxy "
        "(HTTP_PROXY is set; curl, pip, git and npm use it): a host the operator has not allowed is refused "
        "with a 403 naming it, and the result lists every connection."
    )
    Args = BashArgs
    FACTS = ToolFacts(max_duration_ms=180_000, tags=("exec",))

    def shell_command(self, input: Mapping[str, Any]) -> str | None:
        """The shell text this call would run, for the chokepoint's command-policy floor."""
        command = input.get("command")
        return command if isinstance(command, str) else None

    async def call(self, args: BashArgs) -> dict[str, Any]:
        cwd = _workdir(self.NAME, self.sandbox, args.working_dir)
        timeout = args.timeout_seconds or self.sandbox.config.default_timeout_seconds
        return await run_transaction(
            self.NAME,
            self.sandbox,
            self.transactions,
            ["bash", "-c", args.command],
            cwd=cwd,
            timeout=timeout,
            on_line=_stream_to_caller(self.NAME),
        )


class CodeExecArgs(ToolArgs):
    language: Literal["python", "shell", "bash", "sh", "node", "javascript"]
    """python, shell (bash) or node (when Node.js is installed)."""
    code: str = Field(min_length=1, max_length=1_000_000)
    """The program text."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=170)
    """Wall-time limit in seconds (at most 170)."""
    working_dir: str = Field(default=".", max_length=4096)
    """Directory to run in, relative to the workspace."""


class CodeExecTool(_Contained, AlephTool[CodeExecArgs]):
    NAME = "code_exec"
    DESCRIPTION = (
        "Run a snippet of Python, shell or JavaScript (Node.js) in the workspace sandbox and return its exit "
        "code, stdout and stderr. Python and Node read the program from stdin; shell runs it with bash -c."
    )
    Args = CodeExecArgs
    FACTS = ToolFacts(max_duration_ms=180_000, tags=("exec",))

    def shell_command(self, input: Mapping[str, Any]) -> str | None:
        """The shell text this call is judged as, for the command-policy floor.

        Shell code as it is; a Python or Node snippet as ``python3 -c '<code>'`` / ``node -e '<code>'``,
        so the floor reads it exactly as it reads the same snippet given to bash.
        """
        code = input.get("code")
        language = input.get("language")
        if not isinstance(code, str):
            return None
        if language in _SHELL_LANGUAGES:
            return code
        quoted = "'" + code.replace("'", "'\\''") + "'"
        if language == "python":
            return f"python3 -c {quoted}"
        if language in ("node", "javascript"):
            return f"node -e {quoted}"
        return None

    async def call(self, args: CodeExecArgs) -> dict[str, Any]:
        cwd = _workdir(self.NAME, self.sandbox, args.working_dir)
        timeout = args.timeout_seconds or self.sandbox.config.default_timeout_seconds
        stdin: bytes | None = None
        if args.language in _SHELL_LANGUAGES:
            argv = ["bash", "-c", args.code]
        elif args.language == "python":
            # -I: ignore PYTHON* variables and the user site; the program comes on stdin.
            argv, stdin = [sys.executable, "-I", "-"], args.code.encode()
        else:
            node = shutil.which("node")
            if node is None:
                raise ExecutionFailed(self.NAME, "node not available: install Node.js (Debian package nodejs)")
            argv, stdin = [node, "-"], args.code.encode()
        result = await run_transaction(
            self.NAME,
            self.sandbox,
            self.transactions,
            argv,
            cwd=cwd,
            timeout=timeout,
            stdin=stdin,
            on_line=_stream_to_caller(self.NAME),
        )
        lead = {k: result[k] for k in ("ok", "error") if k in result}  # a refusal stays the first thing read
        return {**lead, "language": args.language, **result}


_FAILURE_LINE = re.compile(
    r"^(FAILED |ERROR |E\s{2,}|.+:\d+:\d+: [A-Z]+\d*|.*\b(error|Error|failed|FAIL)\b)",
)
_MAX_FAILURE_LINES = 40
_MAX_LINE = 300
_TAIL = 2000


def _failure_lines(output: str) -> list[str]:
    lines = [line[:_MAX_LINE] for line in output.splitlines() if _FAILURE_LINE.match(line)]
    if len(lines) > _MAX_FAILURE_LINES:
        dropped = len(lines) - _MAX_FAILURE_LINES
        lines = [*lines[:_MAX_FAILURE_LINES], f"[... {dropped} more failure lines ...]"]
    return lines


class CodeCheckArgs(ToolArgs):
    checks: list[str] | None = Field(default=None, max_length=20)
    """Checks to run: ruff, pytest, or names from [exec] checks. Default: [exec] default_checks."""
    paths: list[str] = Field(default_factory=list, max_length=100)
    """Files or directories (workspace-relative) for ruff and pytest; default: the whole workspace."""
    timeout_seconds: float | None = Field(default=None, gt=0, le=170)
    """Per-check wall-time limit (default [exec] check_timeout_seconds)."""


class CodeCheckTool(AlephTool[CodeCheckArgs]):
    NAME = "code_check"
    DESCRIPTION = (
        "Lint and test the workspace with real tools (ruff, pytest, and the checks the project configures) "
        "and return pass/fail per check with the failing lines. Use it after editing code. Checks run on a "
        "copy-on-write view of the workspace where the sandbox allows: what they write (caches, reports) is "
        "discarded, never committed."
    )
    Args = CodeCheckArgs
    FACTS = ToolFacts(max_duration_ms=600_000, tags=("check",))

    def __init__(self, sandbox: WorkspaceSandbox, transactions: Transactions | None = None) -> None:
        self.sandbox = sandbox
        self.transactions = transactions

    def _argv(self, name: str, paths: list[str]) -> list[str] | str:
        """The argv of a check, or why it is not available."""
        configured = self.sandbox.config.checks
        if name in configured:
            return ["bash", "-c", configured[name]]
        if name == "ruff":
            if importlib.util.find_spec("ruff") is None:
                return "ruff not available: pip install ruff"
            return [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format=concise", *(paths or ["."])]
        if name == "pytest":
            if importlib.util.find_spec("pytest") is None:
                return "pytest not available: pip install pytest"
            return [sys.executable, "-m", "pytest", "-q", "--no-header", "-rfE", "-p", "no:cacheprovider", *paths]
        known = ", ".join(sorted({"ruff", "pytest", *configured}))
        raise ValidationFailed(self.NAME, f"checks: unknown check {name!r} (available: {known})")

    async def call(self, args: CodeCheckArgs) -> dict[str, Any]:
        cfg = self.sandbox.config
        names = args.checks if args.checks is not None else cfg.default_checks
        if not names:
            raise ValidationFailed(self.NAME, "checks: name at least one check")
        for path in args.paths:
            if path.startswith("-"):
                raise ValidationFailed(self.NAME, f"paths: {path!r} looks like an option, not a path")
            try:
                resolve_workdir(self.sandbox.workspace, str(Path(path).parent))
            except WorkdirError as exc:
                raise ValidationFailed(self.NAME, f"paths: {exc}") from None
        plans = [(name, self._argv(name, args.paths)) for name in names]
        results = []
        for name, argv in plans:
            if isinstance(argv, str):
                results.append({"name": name, "status": "unavailable", "passed": False, "failures": [argv]})
                continue
            start = time.monotonic()
            run = await run_transaction(
                self.NAME,
                self.sandbox,
                self.transactions,
                argv,
                cwd=self.sandbox.workspace,
                timeout=args.timeout_seconds or cfg.check_timeout_seconds,
                keep=False,
            )
            output = (run["stdout"] + "\n" + run["stderr"]).strip()
            if run["timed_out"]:
                status = "timed_out"
            elif name == "pytest" and run["exit_code"] == 5:
                status = "no_tests"
            else:
                status = "passed" if run["exit_code"] == 0 else "failed"
            results.append(
                {
                    "name": name,
                    "status": status,
                    "passed": status in ("passed", "no_tests"),
                    "exit_code": run["exit_code"],
                    "duration_ms": round((time.monotonic() - start) * 1000, 1),
                    "failures": _failure_lines(output) if status != "passed" else [],
                    "output_tail": output[-_TAIL:],
                }
            )
        reason = uncontained_reason(self.sandbox) if self.transactions is not None else "transactions are not set up"
        return {
            "passed": all(r["passed"] for r in results),
            "checks": results,
            "isolation": self.sandbox.isolation,
            "transaction": reason is None,
            **({} if reason is None else {"uncontained": reason}),
        }


class ExecCommitArgs(ToolArgs):
    tool: str = Field(max_length=64)
    """The exec tool whose changeset this is."""
    call_id: str = Field(max_length=128)
    """That call's id."""
    about: str = Field(max_length=2000)
    """What the changeset does, e.g. "deletes 1,204 files under src/, modifies 3 files" (named to come first
    in the approval prompt, whose arguments are sorted)."""
    created: int = Field(ge=0)
    modified: int = Field(ge=0)
    deleted: int = Field(ge=0)
    top_dirs: list[str] = Field(default_factory=list, max_length=10)
    """Where most changes are."""
    digest: str = Field(max_length=64)
    """SHA-256 of the changeset (paths and content hashes)."""


class ExecCommitTool(AlephTool[ExecCommitArgs]):
    NAME = COMMIT_TOOL
    DESCRIPTION = (
        "Not for models: the approval step aleph-exec asks for before committing a large bash/code_exec "
        'changeset (a person approves or refuses it; `exec_commit = "allow"` or "deny" in the policy '
        "decides it without asking). Calling it directly commits nothing."
    )
    Args = ExecCommitArgs
    FACTS = ToolFacts(tags=("destructive",), max_duration_ms=1_000, inline=True)

    async def call(self, args: ExecCommitArgs) -> dict[str, Any]:
        raise ExecutionFailed(
            self.NAME,
            "exec_commit is the approval aleph-exec asks for itself when a command's changeset is large; "
            "calling it commits nothing. Run the command with bash or code_exec instead.",
        )
