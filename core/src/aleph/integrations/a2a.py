"""One A2A client for every family that talks to remote agents (``a2a-sdk``, imported lazily).

aleph-teams' A2A runner and aleph-interop's ``a2a_delegate`` both send work with :class:`A2AClient`:
read (and, when a key is pinned, verify) an agent's card, send one message, follow the remote task to a
final state while reporting its updates, collect its artifacts, and cancel the remote task when the
caller times out or is cancelled. Install it with ``pip install 'aleph-core[a2a]'``.

What a remote agent says is content, not instructions: the caller marks it untrusted.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["A2AArtifact", "A2ACard", "A2AClient", "A2AError", "A2AReply", "a2a_sdk"]

MAX_ARTIFACTS = 64
MAX_TEXT_CHARS = 200_000
MAX_ARTIFACT_BYTES = 50 * 1024 * 1024


class A2AError(Exception):
    """The remote agent could not be reached, refused the request, or its card did not verify."""


def a2a_sdk() -> Any:
    """The ``a2a`` package, or :class:`A2AError` saying how to install it."""
    try:
        import a2a.client
        import a2a.client.card_resolver
        import a2a.helpers.proto_helpers
        import a2a.types
        import a2a.utils.signing
    except ImportError as exc:
        raise A2AError("A2A not available: a2a-sdk is not installed (pip install 'aleph-core[a2a]')") from exc
    return a2a


@dataclass(frozen=True, slots=True)
class A2ACard:
    """What a remote agent says about itself, and whether its signature was checked."""

    name: str
    description: str
    version: str
    url: str
    skills: list[dict[str, Any]]
    streaming: bool
    signed: bool
    verified: bool
    """A signature matched the key pinned for this agent (False when no key is pinned)."""


@dataclass(slots=True)
class A2AArtifact:
    """One artifact of a remote task: its name and its parts (text, data, bytes or a URL)."""

    name: str
    parts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class A2AReply:
    """The end of a remote task."""

    state: str
    """``completed``, ``failed``, ``canceled``, ``rejected``, ``input_required``, ``auth_required`` ..."""
    text: str
    task_id: str | None
    context_id: str | None
    artifacts: list[A2AArtifact] = field(default_factory=list)


def _state_name(a2a: Any, state: Any) -> str:
    name = str(a2a.types.TaskState.Name(state)) if state is not None else "TASK_STATE_UNSPECIFIED"
    return name.removeprefix("TASK_STATE_").lower()


def _part(part: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"media_type": part.media_type or None, "filename": part.filename or None}
    if part.HasField("text"):
        out["text"] = part.text[:MAX_TEXT_CHARS]
    elif part.HasField("raw"):
        if len(part.raw) > MAX_ARTIFACT_BYTES:
            raise A2AError(f"an artifact part is {len(part.raw):,} bytes; at most {MAX_ARTIFACT_BYTES:,} are taken")
        out["bytes_b64"] = base64.b64encode(part.raw).decode("ascii")
    elif part.HasField("url"):
        out["url"] = part.url
    elif part.HasField("data"):
        from google.protobuf.json_format import MessageToDict

        out["data"] = MessageToDict(part.data)
    return {k: v for k, v in out.items() if v is not None}


class A2AClient:
    """Talks to remote A2A agents. One instance may serve many agents and calls."""

    def __init__(self, *, httpx_client: Any = None, timeout_seconds: float = 300.0) -> None:
        self.httpx_client = httpx_client
        self.timeout_seconds = timeout_seconds

    def _verifier(self, a2a: Any, key: str | None) -> Callable[[Any], None] | None:
        if key is None:
            return None
        return a2a.utils.signing.create_signature_verifier(  # type: ignore[no-any-return]
            lambda _kid, _jku: key, ["ES256", "RS256", "EdDSA", "PS256"]
        )

    async def card(self, url: str, *, pinned_key: str | None = None) -> A2ACard:
        """The agent card at ``url``'s well-known path; with ``pinned_key`` (PEM) a valid signature is required.

        The key a card names (``jku``) is never fetched: only a key pinned by the person who added the agent
        can vouch for it.
        """
        a2a = a2a_sdk()
        import httpx

        client = self.httpx_client or httpx.AsyncClient(timeout=30.0, follow_redirects=False)
        try:
            resolver = a2a.client.card_resolver.A2ACardResolver(client, url)
            card = await resolver.get_agent_card(signature_verifier=self._verifier(a2a, pinned_key))
        except a2a.utils.signing.SignatureVerificationError as exc:
            raise A2AError(
                f"the agent card at {url} does not carry a valid signature for the pinned key: {exc}"
            ) from None
        except Exception as exc:
            raise A2AError(f"A2A agent at {url} not reachable or its card is invalid: {exc}") from None
        finally:
            if self.httpx_client is None:
                await client.aclose()
        interfaces = list(card.supported_interfaces)
        return A2ACard(
            name=card.name,
            description=card.description,
            version=card.version,
            url=interfaces[0].url if interfaces else url,
            skills=[
                {"id": s.id, "name": s.name, "description": s.description, "tags": list(s.tags)} for s in card.skills
            ],
            streaming=bool(card.capabilities.streaming),
            signed=bool(card.signatures),
            verified=pinned_key is not None,
        )

    async def send(
        self,
        url: str,
        text: str,
        *,
        data: dict[str, Any] | None = None,
        context_id: str | None = None,
        on_update: Callable[[str, str], None] | None = None,
        pinned_key: str | None = None,
    ) -> A2AReply:
        """Send one user message and follow the task to its end; ``on_update(state, text)`` sees each step.

        A timeout or cancellation of the caller cancels the remote task too.
        """
        a2a = a2a_sdk()
        types, helpers = a2a.types, a2a.helpers.proto_helpers
        config = a2a.client.ClientConfig(httpx_client=self.httpx_client, streaming=True)
        try:
            client = await a2a.client.create_client(
                url, client_config=config, signature_verifier=self._verifier(a2a, pinned_key)
            )
        except Exception as exc:
            raise A2AError(f"A2A agent at {url} not reachable: {exc}") from exc
        parts = [helpers.new_text_part(text)]
        if data is not None:
            parts.append(helpers.new_data_part(data))
        message = helpers.new_message(parts, context_id=context_id, role=types.Role.ROLE_USER)
        reply = A2AReply("submitted", "", None, context_id)
        texts: list[str] = []
        artifacts: dict[str, A2AArtifact] = {}
        state: Any = None
        try:
            async for response in client.send_message(types.SendMessageRequest(message=message)):
                if response.HasField("task"):
                    reply.task_id = response.task.id or reply.task_id
                    reply.context_id = response.task.context_id or reply.context_id
                    state = response.task.status.state
                    for artifact in response.task.artifacts:
                        self._collect(artifacts, artifact)
                elif response.HasField("status_update"):
                    reply.task_id = response.status_update.task_id or reply.task_id
                    state = response.status_update.status.state
                elif response.HasField("artifact_update"):
                    self._collect(artifacts, response.artifact_update.artifact)
                elif response.HasField("message"):
                    state = types.TaskState.TASK_STATE_COMPLETED
                piece = helpers.get_stream_response_text(response)
                if piece and piece not in texts and sum(map(len, texts)) < MAX_TEXT_CHARS:
                    texts.append(piece)
                if on_update is not None:
                    on_update(_state_name(a2a, state), piece or "")
        except BaseException:
            if reply.task_id is not None:
                with contextlib.suppress(Exception):
                    await client.cancel_task(types.CancelTaskRequest(id=reply.task_id))
            with contextlib.suppress(Exception):
                await client.close()
            raise
        with contextlib.suppress(Exception):
            await client.close()
        reply.state = _state_name(a2a, state)
        reply.text = "\n".join(texts).strip()[:MAX_TEXT_CHARS]
        reply.artifacts = list(artifacts.values())
        return reply

    @staticmethod
    def _collect(artifacts: dict[str, A2AArtifact], artifact: Any) -> None:
        key = artifact.artifact_id or artifact.name or str(len(artifacts))
        if key not in artifacts and len(artifacts) >= MAX_ARTIFACTS:
            return
        entry = artifacts.setdefault(key, A2AArtifact(artifact.name or key))
        entry.parts.extend(_part(p) for p in artifact.parts)
