"""What the family's tools share: bad-input errors, the error guard, deadlines, bounded subprocesses."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread

from aleph import ExecutionFailed, PermissionDenied, ToolError, ValidationFailed
from aleph_media._confine import PathError

__all__ = [
    "Deadline",
    "MediaError",
    "Unavailable",
    "guard",
    "in_thread",
    "run_bounded",
    "which",
]

T = TypeVar("T")


class MediaError(Exception):
    """The file's content cannot be handled (corrupt, too large, wrong format); the message says which and why."""


class Unavailable(MediaError):
    """A program or library the tool needs is missing; the message says what to install."""


@contextmanager
def guard(tool: str) -> Iterator[None]:
    """Turn a refused path, a bad file or an OS error into the matching :class:`ToolError` for ``tool``."""
    try:
        yield
    except ToolError:
        raise
    except PathError as exc:
        if exc.kind == "invalid":
            raise ValidationFailed(tool, f"path: {exc}") from None
        if exc.kind == "denied":
            raise PermissionDenied(tool, str(exc)) from None
        raise ExecutionFailed(tool, str(exc)) from None
    except MediaError as exc:
        raise ExecutionFailed(tool, str(exc)) from None
    except MemoryError:
        raise ExecutionFailed(tool, "the file needs more memory than this host can give it") from None
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise ExecutionFailed(tool, f"{exc.strerror or exc}{where}") from None


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run blocking parsing, OCR or decoding off the event loop."""
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))


class Deadline:
    """A wall-clock budget: parsing loops check it between pages and stop with a note when it runs out."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (never negative)."""
        return max(0.0, self._end - time.monotonic())

    def expired(self) -> bool:
        """Whether the budget is spent."""
        return time.monotonic() >= self._end


def which(program: str, package: str) -> str:
    """The absolute path of ``program``, or :class:`Unavailable` naming the Debian package to install."""
    for folder in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        candidate = os.path.join(folder or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise Unavailable(f"{program} not available: install the Debian package {package}")


def _limits(cpu_seconds: int, memory_bytes: int | None) -> Callable[[], None]:
    def apply() -> None:
        # Nothing a probe runs may write a file: the tools are read-only, outputs come back on pipes.
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        if memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    return apply


def run_bounded(
    argv: Sequence[str],
    *,
    timeout: float,
    pass_fds: Sequence[int] = (),
    max_output: int,
    memory_bytes: int | None = 4 << 30,
    what: str,
) -> tuple[bytes, bytes]:
    """Run ``argv`` in its own process group with CPU, memory and file-size limits; its stdout and stderr.

    The whole group is killed at ``timeout`` seconds (no zombies: it is reaped before returning), and
    output past ``max_output`` bytes is an error, so neither time nor memory depends on the input.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=tuple(pass_fds),
        start_new_session=True,
        preexec_fn=_limits(int(timeout) + 2, memory_bytes),  # rlimits must be set in the child itself
    )
    try:
        out, err = _communicate(proc, timeout, max_output)
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    if proc.returncode != 0:
        detail = err.decode("utf-8", "replace").strip().splitlines()
        reason = detail[-1] if detail else f"exit status {proc.returncode}"
        raise MediaError(f"{what}: {reason[:500]}")
    return out, err


def _communicate(proc: subprocess.Popen[bytes], timeout: float, max_output: int) -> tuple[bytes, bytes]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        program = os.path.basename(str(proc.args[0]))  # type: ignore[index]
        raise MediaError(f"{program} gave up after {timeout:g} seconds (the file takes too long to read)") from None
    if len(out) > max_output:
        raise MediaError(f"produced more than {max_output} bytes of output")
    return out, err


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
