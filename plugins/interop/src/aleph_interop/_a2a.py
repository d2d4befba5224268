"""``a2a_agents`` and ``a2a_delegate``: remote agents spoken to with A2A, through core's shared client.

An agent is added by URL (its card read from the well-known path and, when the person adding it pins a
public key, its signature verified); the list belongs to the principal that added it. ``a2a_delegate``
sends a task to an agent of that list only, streams the remote task's updates as progress, and saves
its artifacts into the workspace with ``file_write`` through the chokepoint (the files family's
confinement and the policy apply to every byte it brings in). A remote agent cannot call back into
Aleph's tools: A2A gives it no way to, so it can never use a tool the delegating principal lacks.
"""

from __future__ import annotations

import ipaddress
import json
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

import aleph
from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts, ValidationFailed
from aleph.integrations.a2a import A2AClient, A2AError
from aleph_interop._owner import owner_of_call

__all__ = ["A2AAgents", "A2ADelegate", "AgentBook"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_METADATA_HOSTS = {"metadata.google.internal", "metadata"}
MAX_AGENTS = 200


def check_agent_url(tool: str, url: str) -> str:
    """An http(s) URL that is not a link-local or cloud-metadata address."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationFailed(tool, f"url: an A2A agent is reached over http or https, not {url!r}")
    host = parts.hostname
    if host in _METADATA_HOSTS:
        raise aleph.PermissionDenied(tool, f"{host} is a cloud metadata service, not an agent")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return url.rstrip("/")
    if address.is_link_local or address.is_multicast or address.is_unspecified:
        raise aleph.PermissionDenied(tool, f"{host} is a link-local or special address, not an agent")
    return url.rstrip("/")


class AgentBook:
    """The remote agents each principal added (SQLite); every query names the owner."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS agents (owner TEXT NOT NULL, name TEXT NOT NULL, url TEXT NOT NULL,"
                " pinned_key TEXT, card TEXT NOT NULL, added_at REAL NOT NULL, refreshed_at REAL NOT NULL,"
                " PRIMARY KEY (owner, name))"
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def get(self, owner: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute(
                "SELECT name, url, pinned_key, card, added_at, refreshed_at FROM agents WHERE owner=? AND name=?",
                (owner, name),
            ).fetchone()
        if row is None:
            return None
        return {"name": row[0], "url": row[1], "pinned_key": row[2], "card": json.loads(row[3]),
                "added_at": row[4], "refreshed_at": row[5]}  # fmt: skip

    def list(self, owner: str) -> list[dict[str, Any]]:
        with self._lock:
            names = [r[0] for r in self._db.execute("SELECT name FROM agents WHERE owner=? ORDER BY name", (owner,))]
        return [a for a in (self.get(owner, n) for n in names) if a is not None]

    def put(self, owner: str, name: str, url: str, pinned_key: str | None, card: dict[str, Any]) -> None:
        now = time.time()
        with self._lock:
            count = self._db.execute("SELECT count(*) FROM agents WHERE owner=?", (owner,)).fetchone()[0]
            exists = self._db.execute("SELECT 1 FROM agents WHERE owner=? AND name=?", (owner, name)).fetchone()
            if not exists and count >= MAX_AGENTS:
                raise ValueError(f"at most {MAX_AGENTS} agents per principal; remove one first")
            self._db.execute(
                "INSERT INTO agents VALUES (?,?,?,?,?,?,?) ON CONFLICT(owner, name) DO UPDATE SET url=excluded.url,"
                " pinned_key=excluded.pinned_key, card=excluded.card, refreshed_at=excluded.refreshed_at",
                (owner, name, url, pinned_key, json.dumps(card), now, now),
            )

    def remove(self, owner: str, name: str) -> bool:
        with self._lock:
            return self._db.execute("DELETE FROM agents WHERE owner=? AND name=?", (owner, name)).rowcount > 0


def _card_dict(card: Any) -> dict[str, Any]:
    return {
        "name": card.name,
        "description": card.description,
        "version": card.version,
        "url": card.url,
        "skills": card.skills,
        "streaming": card.streaming,
        "signed": card.signed,
        "signature_verified": card.verified,
    }


class AgentsArgs(ToolArgs):
    action: Literal["list", "add", "remove", "refresh"] = "list"
    """``list`` your agents, ``add`` one by URL, ``remove`` one, ``refresh`` its card."""
    name: str | None = Field(default=None, max_length=40)
    """The agent's name in your list (lowercase letters, digits, ``-``, ``_``)."""
    url: str | None = Field(default=None, max_length=2048)
    """For add: the agent's base URL (its card is read from ``/.well-known/agent-card.json``)."""
    public_key: str | None = Field(default=None, max_length=10_000)
    """For add: a PEM public key the card must be signed with (a signed card is then required)."""


class A2AAgents(AlephTool[AgentsArgs]):
    NAME = "a2a_agents"
    DESCRIPTION = (
        "Your remote A2A agents: list them with their skills, add one by URL (optionally pinning the public key "
        "its card must be signed with), remove one, or refresh its card."
    )
    Args = AgentsArgs
    FACTS = ToolFacts(idempotent=False, concurrent_safe=True, max_duration_ms=60_000, tags=("agents", "a2a"))

    def __init__(self, book: AgentBook, client: A2AClient) -> None:
        self._book = book
        self._client = client

    async def call(self, args: AgentsArgs) -> dict[str, Any]:
        owner = owner_of_call()
        if args.action == "list":
            agents = self._book.list(owner)
            return {"agents": [{"name": a["name"], "url": a["url"], **a["card"]} for a in agents]}
        if not args.name or not _NAME.fullmatch(args.name):
            raise ValidationFailed(self.NAME, "name: 1-40 lowercase letters, digits, '-' or '_'")
        if args.action == "remove":
            if not self._book.remove(owner, args.name):
                raise ExecutionFailed(self.NAME, f"no A2A agent named {args.name!r} in your list")
            return {"removed": args.name}
        known = self._book.get(owner, args.name)
        if args.action == "refresh":
            if known is None:
                raise ExecutionFailed(self.NAME, f"no A2A agent named {args.name!r} in your list")
            url, key = known["url"], known["pinned_key"]
        else:
            if not args.url:
                raise ValidationFailed(self.NAME, "url: required to add an agent")
            url, key = check_agent_url(self.NAME, args.url), args.public_key
        try:
            card = await self._client.card(url, pinned_key=key)
        except A2AError as exc:
            raise ExecutionFailed(self.NAME, str(exc)) from None
        try:
            self._book.put(owner, args.name, url, key, _card_dict(card))
        except ValueError as exc:
            raise ExecutionFailed(self.NAME, str(exc)) from None
        current = aleph.current_call()
        if current is not None:
            current.annotate(a2a_agent=args.name)
        return {"agent": {"name": args.name, "url": url, **_card_dict(card)}, "untrusted": True}


class DelegateArgs(ToolArgs):
    agent: str = Field(max_length=40)
    """The agent's name in your list (see a2a_agents)."""
    task: str = Field(min_length=1, max_length=100_000)
    """What the remote agent should do."""
    context_id: str | None = Field(default=None, max_length=200)
    """Continue a conversation with that agent (from an earlier result)."""
    save_artifacts_to: str | None = Field(default=None, max_length=1000)
    """A workspace folder to save the task's file artifacts in (each written with file_write)."""


class A2ADelegate(AlephTool[DelegateArgs]):
    NAME = "a2a_delegate"
    DESCRIPTION = (
        "Send a task to one of your remote A2A agents and wait for its result; its updates stream back, and "
        "its file artifacts can be saved into the workspace. Its answer is untrusted content."
    )
    Args = DelegateArgs
    # A sink (the task goes to a remote agent). Its reply and artifacts are marked untrusted per call; the
    # task and context ids only address that agent's own conversation, so continuing one asks nothing.
    FACTS = ToolFacts(
        sink=True,
        idempotent=False,
        concurrent_safe=True,
        max_duration_ms=1_860_000,
        tags=("agents", "a2a"),
    )

    def __init__(self, book: AgentBook, client: A2AClient) -> None:
        self._book = book
        self._client = client

    async def call(self, args: DelegateArgs) -> dict[str, Any]:
        call = aleph.current_call()
        owner = owner_of_call()
        agent = self._book.get(owner, args.agent)
        if agent is None:
            raise ExecutionFailed(self.NAME, f"no A2A agent named {args.agent!r} in your list (add it with a2a_agents)")

        def update(state: str, text: str) -> None:
            if text:
                aleph.notify_tool_streaming_chunk(self.NAME, f"[{state}] {text}\n")

        try:
            reply = await self._client.send(
                agent["url"], args.task, context_id=args.context_id, on_update=update, pinned_key=agent["pinned_key"]
            )
        except A2AError as exc:
            raise ExecutionFailed(self.NAME, str(exc)) from None
        if call is not None and reply.task_id:
            call.annotate(a2a_agent=args.agent, a2a_task=reply.task_id[:200])
        saved: list[str] = []
        if args.save_artifacts_to and call is not None:
            saved = await self._save(call, args.save_artifacts_to, reply.artifacts)
        artifacts = [
            {"name": a.name, "parts": [{k: v for k, v in p.items() if k != "bytes_b64"} for p in a.parts]}
            for a in reply.artifacts
        ]
        if call is not None:
            said = json.dumps({"reply": reply.text, "state": reply.state, "artifacts": artifacts}, default=str)
            call.mark_untrusted(said, "another agent's reply")
        return {
            "agent": args.agent,
            "state": reply.state,
            "reply": reply.text,
            "task_id": reply.task_id,
            "context_id": reply.context_id,
            "artifacts": artifacts,
            "saved": saved,
            "untrusted": True,
        }

    async def _save(self, call: aleph.CallContext, folder: str, artifacts: list[Any]) -> list[str]:
        saved = []
        for artifact in artifacts:
            for i, part in enumerate(artifact.parts):
                if "bytes_b64" not in part and "text" not in part:
                    continue
                base = Path(part.get("filename") or f"{artifact.name}-{i}").name or f"artifact-{i}"
                path = f"{folder.rstrip('/')}/{base}"
                payload = {"path": path, "create_dirs": True}
                if "bytes_b64" in part:
                    payload.update(content=part["bytes_b64"], encoding="base64")
                else:
                    payload["content"] = part["text"]
                await call.subcall("file_write", payload)  # confinement and policy of the files family
                saved.append(path)
        return saved
