"""The A2A runner: a member that is a remote agent, spoken to with the A2A protocol (``a2a-sdk``).

The task goes to the agent as one user message (its data part carries the team, task and attempt);
the runner follows the agent's task to a final state and returns its text. A timeout or a cancel
cancels the remote task too. The remote agent's own tool calls are its host's business: they do not
pass this chokepoint (only calls a member makes through ``task.tools`` do).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from aleph import ExecutionFailed
from aleph_teams._runners import MemberTask, RunResult

if TYPE_CHECKING:
    import httpx

__all__ = ["A2ARunner"]


def _sdk() -> Any:
    try:
        import a2a.client
        import a2a.helpers.proto_helpers
        import a2a.types
    except ImportError as exc:
        raise ExecutionFailed(
            "team_delegate", "agent runner not available: a2a-sdk is not installed (pip install 'aleph-teams[a2a]')"
        ) from exc
    return a2a


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
        a2a = _sdk()
        types, helpers = a2a.types, a2a.helpers.proto_helpers
        config = a2a.client.ClientConfig(httpx_client=self.httpx_client, streaming=True)
        try:
            client = await a2a.client.create_client(self.url, client_config=config)
        except Exception as exc:
            raise ExecutionFailed(
                "team_delegate", f"agent runner not available: A2A agent at {self.url}: {exc}"
            ) from exc
        text = (
            task.subject
            if not task.description or task.description == task.subject
            else (f"{task.subject}\n\n{task.description}")
        )
        if task.protocol:
            text = f"{text}\n\nTeam protocol:\n{task.protocol}"
        message = helpers.new_message(
            [helpers.new_text_part(text), helpers.new_data_part(task.to_json())],
            context_id=f"{task.team_id or 'aleph'}:{task.task_id}",
            role=types.Role.ROLE_USER,
        )
        remote_id: str | None = None
        texts: list[str] = []
        state = None
        try:
            async for response in client.send_message(types.SendMessageRequest(message=message)):
                if response.HasField("task"):
                    remote_id = response.task.id or remote_id
                    state = response.task.status.state
                elif response.HasField("status_update"):
                    remote_id = response.status_update.task_id or remote_id
                    state = response.status_update.status.state
                elif response.HasField("message"):
                    state = types.TaskState.TASK_STATE_COMPLETED
                piece = helpers.get_stream_response_text(response)
                if piece and piece not in texts:
                    texts.append(piece)
        except BaseException:
            if remote_id is not None:
                with contextlib.suppress(Exception):
                    await client.cancel_task(types.CancelTaskRequest(id=remote_id))
            await _close(client)
            raise
        await _close(client)
        reply = "\n".join(texts).strip()
        if state == types.TaskState.TASK_STATE_COMPLETED:
            return RunResult(reply or "(No reply content)")
        name = types.TaskState.Name(state) if state is not None else "no final state"
        raise ExecutionFailed("team_delegate", f"the A2A agent ended the task in {name}: {reply[:2000] or '(no text)'}")


async def _close(client: Any) -> None:
    with contextlib.suppress(Exception):
        await client.close()
