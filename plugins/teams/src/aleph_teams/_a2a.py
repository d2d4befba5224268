"""The A2A runner: a member that is a remote agent, spoken to with the A2A protocol.

It uses core's shared A2A client (:class:`aleph.integrations.a2a.A2AClient`, the one aleph-interop's
``a2a_delegate`` uses too). The task goes to the agent as one user message (its data part carries the team,
task and attempt); the runner follows the agent's task to a final state and returns its text. A timeout
or a cancel cancels the remote task too. The remote agent's own tool calls are its host's business: they
do not pass this chokepoint (only calls a member makes through ``task.tools`` do).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aleph import ExecutionFailed
from aleph.integrations.a2a import A2AClient, A2AError
from aleph_teams._runners import MemberTask, RunResult

if TYPE_CHECKING:
    import httpx

__all__ = ["A2ARunner"]


class A2ARunner:
    """Runs a member on a remote A2A agent at ``url`` (its card is read from the well-known path)."""

    def __init__(
        self, url: str, *, timeout_seconds: float = 300.0, httpx_client: httpx.AsyncClient | None = None
    ) -> None:
        self.url = url
        self.timeout_seconds = timeout_seconds
        self.httpx_client = httpx_client

    async def run(self, task: MemberTask) -> RunResult:
        """Send the task, follow the remote task to its end, return the agent's text."""
        text = (
            task.subject
            if not task.description or task.description == task.subject
            else (f"{task.subject}\n\n{task.description}")
        )
        if task.protocol:
            text = f"{text}\n\nTeam protocol:\n{task.protocol}"
        client = A2AClient(httpx_client=self.httpx_client, timeout_seconds=self.timeout_seconds)
        try:
            reply = await client.send(
                self.url, text, data=task.to_json(), context_id=f"{task.team_id or 'aleph'}:{task.task_id}"
            )
        except A2AError as exc:
            raise ExecutionFailed("team_delegate", f"agent runner not available: {exc}") from exc
        if reply.state == "completed":
            return RunResult(reply.text or _artifact_text(reply) or "(No reply content)")
        detail = reply.text or _artifact_text(reply) or "(no text)"
        raise ExecutionFailed(
            "team_delegate", f"the A2A agent ended the task in TASK_STATE_{reply.state.upper()}: {detail[:2000]}"
        )


def _artifact_text(reply: object) -> str:
    parts = [p.get("text", "") for a in getattr(reply, "artifacts", []) for p in a.parts]
    return "\n".join(p for p in parts if p).strip()
