"""Ctrl-C the instant a terminal prompt appears ends the wait, whatever the program's own SIGINT handler does.

The approval prompt and the agent's question on the terminal own SIGINT while a person is asked. They used to
take it only once the prompt was written and the read began; a Ctrl-C in between reached the program's own
handler (``asyncio.run``'s cancels the main task, and a cancellation could be absorbed on the way), and the
call then waited for an answer nobody would type. Each case runs in a child process on a real pseudo-terminal,
with a SIGINT handler that swallows the signal (the worst such absorption) and Ctrl-C raised from inside the
prompt's own write: the wait must end with ``KeyboardInterrupt``, not hang.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from aleph._chokepoint._approval import ApprovalDecision, ApprovalRequest
    from aleph._chokepoint._requesters import TerminalRequester
    from aleph._human import HumanQuestion
    from aleph._human_text import TerminalHuman

    swallowed = []
    signal.signal(signal.SIGINT, lambda *_: swallowed.append(1))  # absorbs it: nothing reaches the caller

    class CtrlCAsTheyAppear:
        def write(self, text):
            if text.endswith((": ", "> ")):  # the line that waits for the answer
                signal.raise_signal(signal.SIGINT)
        def flush(self):
            pass

    _primary, secondary = os.openpty()  # a terminal on which nobody types
    terminal = os.fdopen(secondary, "r")

    async def ask():
        if sys.argv[1] == "approval":
            choices = (ApprovalDecision.ALLOW_ONCE, ApprovalDecision.DENY)
            request = ApprovalRequest("t", "t: a=1", "asked", "r", choices, "f")
            await TerminalRequester(terminal, CtrlCAsTheyAppear()).request_approval(request)
        else:
            await TerminalHuman(terminal, CtrlCAsTheyAppear()).exchange("Which one?", 30)

    async def main():
        try:
            async with asyncio.timeout(20):
                await ask()
        except KeyboardInterrupt:
            print("interrupted", len(swallowed))
        except TimeoutError:
            print("waited on")

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("prompt", ["approval", "question"])
def test_ctrl_c_as_the_prompt_appears_ends_the_wait(prompt: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, prompt], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "interrupted 0", done.stdout + done.stderr[-2000:]
