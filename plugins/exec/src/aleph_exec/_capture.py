"""A run's output and result: capped capture of stdout and stderr, streamed lines, the result a tool returns."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aleph_exec._config import ExecConfig

MiB = 1024 * 1024


class Capture:
    """Keeps the head and tail of a stream within ``cap`` bytes and counts what was dropped."""

    def __init__(self, cap: int) -> None:
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Add a chunk."""
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def truncated(self) -> bool:
        """Whether bytes were dropped between head and tail."""
        return self.total > len(self.head) + len(self.tail)

    def sizes(self) -> dict[str, int]:
        """Bytes the stream produced, kept (head and tail) and dropped."""
        kept = len(self.head) + len(self.tail)
        return {"total": self.total, "kept": kept, "dropped": self.total - kept}

    def text(self) -> str:
        """The kept output, with a marker where the middle was dropped."""
        head = self.head.decode("utf-8", "replace")
        if not self.truncated:
            return head + self.tail.decode("utf-8", "replace")
        dropped = self.total - len(self.head) - len(self.tail)
        tail = self.tail.decode("utf-8", "replace")
        return f"{head}\n[... {dropped} bytes truncated ...]\n{tail}"


class _Output:
    """A run's stdout and stderr as they arrive: kept within the caps, stdout streamed line by line."""

    def __init__(self, config: ExecConfig, on_line: Callable[[str], None] | None) -> None:
        self.out, self.err = Capture(config.max_output_bytes), Capture(config.max_output_bytes)
        self.on_line = on_line
        self.stream_cap = config.max_output_bytes
        self.kill_at = config.output_kill_bytes
        self.partial = b""  # the unfinished streamed line
        self.streamed = 0  # stdout bytes streamed so far

    def feed(self, capture: Capture, chunk: bytes) -> str | None:
        """Take a chunk of ``capture``'s stream; why the run must be killed, when its output is too much."""
        capture.feed(chunk)
        if self.on_line is not None and capture is self.out and self.streamed < self.stream_cap:
            self.streamed += len(chunk)
            *lines, self.partial = (self.partial + chunk).split(b"\n")
            for line in lines:
                self.on_line(line.decode("utf-8", "replace"))
        if self.out.total + self.err.total > self.kill_at:
            return f"output limit ({self.kill_at} bytes)"
        return None

    def flush(self) -> None:
        """Stream the last line, which had no newline."""
        if self.on_line is not None and self.partial:
            self.on_line(self.partial.decode("utf-8", "replace"))
            self.partial = b""


def _write_some(fd: int, pending: memoryview) -> memoryview:
    """Write what a non-blocking ``fd`` takes of ``pending``; the rest (nothing once the reader is gone)."""
    try:
        return pending[os.write(fd, pending) :]
    except BrokenPipeError:
        return pending[:0]


@dataclass(slots=True)
class RunResult:
    """What a run produced and how it ended."""

    exit_code: int | None
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool
    isolation: str
    network: str
    duration_ms: float
    killed: str | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    transaction: bool = False
    """True when the command ran on a per-run copy-on-write view of the workspace (``layer=``)."""
    output_bytes: dict[str, dict[str, int]] | None = None
    """When output was cut: per stream, the bytes produced, kept and dropped."""
    egress: dict[str, Any] | None = None
    """Network ``proxied``: the connections the run's commands made through the egress proxy."""

    def to_json(self) -> dict[str, Any]:
        """The tool-facing form."""
        out = {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "truncated": self.truncated,
            "timed_out": self.timed_out,
            "isolation": self.isolation,
            "network": self.network,
            "duration_ms": round(self.duration_ms, 1),
            "transaction": self.transaction,
        }
        if self.killed:
            out["killed"] = self.killed
        if self.output_bytes is not None:
            out["output_bytes"] = self.output_bytes
        if self.egress is not None:
            out["connections"] = self.egress
        return out


class SandboxError(RuntimeError):
    """The sandbox could not run the command: its zygote stopped during the run, or did not start."""


class TransactionUnavailable(SandboxError):
    """A run asked for a copy-on-write layer that this sandbox cannot give; the command did not start."""
