"""How the CLI tells a person what happened to a call, and shows a running call's progress.

A :class:`~aleph.ToolError`'s text is written for a model ("Do not retry ... ask the user"); at the terminal
the person *is* the user, so the CLI words each outcome for them and keeps the model-facing text out.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import TextIO

from aleph._chokepoint._gate import escape_for_prompt
from aleph._chokepoint._scoped import Explanation
from aleph._cli._common import EXIT_FAILED, EXIT_REFUSED
from aleph._errors import PermissionDenied, ToolError
from aleph._progress import ToolProgressCallback

__all__ = ["StderrProgress", "exit_code", "person_message"]

_REFUSED = {"permission_denied", "approval_denied", "approval_unavailable", "approval_expired"}


def exit_code(exc: ToolError) -> int:
    """3 for a refusal (policy, a human, nobody to ask, nobody answered), else 1."""
    return EXIT_REFUSED if exc.kind in _REFUSED or isinstance(exc, PermissionDenied) else EXIT_FAILED


def person_message(
    exc: ToolError, explanation: Explanation | None, *, stdin_is_tty: bool, said: str | None = None
) -> str:
    """One or two lines for the person at the terminal, by the kind of failure.

    :param said: the reason the person gave when they declined at the prompt.
    """
    tool = exc.tool
    kind = exc.kind
    if kind == "approval_denied":
        if said is None and "without asking again" in str(exc):
            return f"not run: `{tool}` with these arguments was declined earlier in this session"
        return f"not run: you declined `{tool}`" + (f' ("{escape_for_prompt(said)}")' if said else "")
    if kind == "approval_unavailable":
        why = "stdin is not a terminal" if not stdin_is_tty else "no approval channel answered"
        return (
            f"not run: `{tool}` needs approval and nobody could be asked ({why}).\n"
            f"  Run it from a terminal to be asked, or allow it in aleph.toml; see: aleph policy explain {tool}"
        )
    if kind == "approval_expired":
        return f"not run: nobody answered the approval prompt for `{tool}` in time"
    if isinstance(exc, PermissionDenied):
        if explanation is not None and explanation.rule is not None:
            where = f" in the {explanation.layer} layer" if explanation.layer else ""
            return f"refused: `{tool}` is denied by the rule `{explanation.rule}`{where}"
        by = explanation.decided_by if explanation is not None else "policy"
        return f"refused by the {by}: `{tool}`; see why with: aleph policy explain {tool} --input '...'"
    if kind == "cancelled":
        return f"cancelled: `{tool}` was stopped"
    return f"error: {exc}"


class StderrProgress:
    """A one-line indicator of the running call on a terminal's stderr: the tool, seconds, its last line.

    It chains to the handler that was installed before (an observer keeps observing). Off a terminal it
    only chains: scripts read the result on stdout, not a redrawn status line.
    """

    def __init__(self, previous: ToolProgressCallback | None, stream: TextIO | None = None) -> None:
        self.previous = previous
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._started: dict[str, float] = {}
        self._last: dict[str, str] = {}
        self._shown = False

    def on_tool_start(self, tool_name: str, args_summary: str) -> None:
        """Remember when the call started."""
        self._started[tool_name] = time.monotonic()
        if self.previous is not None:
            self.previous.on_tool_start(tool_name, args_summary)

    def on_tool_streaming_chunk(self, tool_name: str, chunk: str) -> None:
        """Redraw the status line with the newest output line or progress message."""
        self._last[tool_name] = " ".join(escape_for_prompt(chunk).split())
        self.tick(tool_name)
        if self.previous is not None:
            self.previous.on_tool_streaming_chunk(tool_name, chunk)

    def tick(self, tool_name: str) -> None:
        """Redraw the status line of a call still running (seconds so far, its last line)."""
        if not self.live or tool_name not in self._started:
            return
        elapsed = time.monotonic() - self._started[tool_name]
        last = self._last.get(tool_name)
        width = max(20, shutil.get_terminal_size((80, 20)).columns - 1)
        text = f"… {tool_name} {elapsed:.0f}s" + (f": {last}" if last else "")
        self.stream.write("\r\x1b[2K" + text[:width])
        self.stream.flush()
        self._shown = True

    def on_tool_result(self, tool_name: str, result_summary: str, success: bool) -> None:
        """Clear the status line."""
        self._started.pop(tool_name, None)
        self._last.pop(tool_name, None)
        self.clear()
        if self.previous is not None:
            self.previous.on_tool_result(tool_name, result_summary, success)

    def clear(self) -> None:
        """Remove the status line, if one is shown."""
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False
