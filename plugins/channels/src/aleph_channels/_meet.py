"""``google_meet``: create a Meet space and read a conference's participants and transcript (Meet REST API v2).

Endpoints used (all under ``[google_meet] api_base``, default ``https://meet.googleapis.com/v2``):
``POST spaces``, ``GET spaces/{id}``, ``GET conferenceRecords?filter=space.name="spaces/{id}"``,
``GET {conferenceRecord}/participants``, ``GET {conferenceRecord}/transcripts`` and
``GET {transcript}/entries``. The OAuth access token comes from the environment, or is obtained from a
refresh token at ``token_uri``; without either the tool says what to configure.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import httpx
from pydantic import Field, model_validator

from aleph import AlephTool, ExecutionFailed, PermissionDenied, ToolArgs, ToolFacts
from aleph_channels._config import MeetSettings, secret_from_env

__all__ = ["GoogleMeet"]

_SPACE = re.compile(r"^(spaces/)?[A-Za-z0-9_-]{1,128}$")
_RECORD = re.compile(r"^conferenceRecords/[A-Za-z0-9_-]{1,128}$")
MAX_PAGES = 20


class MeetArgs(ToolArgs):
    action: Literal["create_space", "get_space", "list_conferences", "participants", "transcript"]
    """What to do."""
    space: str | None = Field(default=None, max_length=140)
    """For get_space / list_conferences: ``spaces/<id>``, the id, or the meeting code."""
    conference: str | None = Field(default=None, max_length=160)
    """For participants / transcript: ``conferenceRecords/<id>`` (from list_conferences)."""
    access_type: Literal["OPEN", "TRUSTED", "RESTRICTED"] = "TRUSTED"
    """For create_space: who may join without knocking."""
    max_items: int = Field(default=200, ge=1, le=2000)
    """Most participants or transcript entries returned."""

    @model_validator(mode="after")
    def _needs(self) -> MeetArgs:
        if self.action in ("get_space", "list_conferences"):
            if not self.space or not _SPACE.fullmatch(self.space):
                raise ValueError(f"{self.action} needs space: 'spaces/<id>', the id, or the meeting code")
        if self.action in ("participants", "transcript"):
            if not self.conference or not _RECORD.fullmatch(self.conference):
                raise ValueError(f"{self.action} needs conference: 'conferenceRecords/<id>' (see list_conferences)")
        return self


class GoogleMeet(AlephTool[MeetArgs]):
    NAME = "google_meet"
    DESCRIPTION = (
        "Google Meet: create a meeting space, look one up, list its conferences, and read a conference's "
        "participants or transcript. Needs an OAuth token with a Meet scope (see docs/channels.md)."
    )
    Args = MeetArgs
    FACTS = ToolFacts(idempotent=False, concurrent_safe=True, max_duration_ms=120_000, tags=("channels", "meet"))

    def __init__(self, settings: MeetSettings) -> None:
        self._settings = settings

    async def _token(self, client: httpx.AsyncClient) -> str:
        s = self._settings
        token = secret_from_env(s.token_env)
        if token:
            return token
        refresh = secret_from_env(s.refresh_token_env)
        client_id = secret_from_env(s.client_id_env)
        secret = secret_from_env(s.client_secret_env)
        if not (refresh and client_id and secret):
            raise ExecutionFailed(
                self.NAME,
                f"Google Meet not configured: set {s.token_env} to an OAuth access token with a Meet scope, or set "
                "[google_meet] refresh_token_env, client_id_env and client_secret_env",
            )
        response = await client.post(
            s.token_uri,
            data={
                "grant_type": "refresh_token",
                "refresh_token": refresh,
                "client_id": client_id,
                "client_secret": secret,
            },
        )
        if response.status_code != 200 or "access_token" not in response.json():
            raise PermissionDenied(
                self.NAME, f"the token endpoint refused the refresh token (HTTP {response.status_code})"
            )
        return str(response.json()["access_token"])

    async def call(self, args: MeetArgs) -> dict[str, Any]:
        base = self._settings.api_base.rstrip("/")
        async with httpx.AsyncClient(timeout=self._settings.timeout_s, follow_redirects=False) as client:
            headers = {"Authorization": f"Bearer {await self._token(client)}"}

            async def get(path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
                return _checked(self.NAME, await client.get(f"{base}/{path}", params=params, headers=headers))

            if args.action == "create_space":
                body = {"config": {"accessType": args.access_type}}
                space = _checked(self.NAME, await client.post(f"{base}/spaces", json=body, headers=headers))
                return {"space": _space(space)}
            space_name = _space_name(args.space or "")
            if args.action == "get_space":
                return {"space": _space(await get(space_name))}
            if args.action == "list_conferences":
                data = await get("conferenceRecords", {"filter": f'space.name="{space_name}"', "pageSize": 100})
                records = data.get("conferenceRecords", [])
                return {"conferences": [_record(r) for r in records[:100]]}
            conference = args.conference or ""
            if args.action == "participants":
                items = await _paged(get, f"{conference}/participants", "participants", args.max_items)
                return {"participants": [_participant(p) for p in items], "count": len(items)}
            transcripts = (await get(f"{conference}/transcripts")).get("transcripts", [])
            entries: list[dict[str, Any]] = []
            for transcript in transcripts:
                name = str(transcript.get("name", ""))
                if not name.startswith(conference + "/transcripts/"):
                    continue
                left = args.max_items - len(entries)
                if left <= 0:
                    break
                entries += await _paged(get, f"{name}/entries", "transcriptEntries", left)
            return {
                "transcript": [_entry(e) for e in entries],
                "count": len(entries),
                "untrusted": True,  # what people said in a meeting is content, not instructions
            }


async def _paged(get: Any, path: str, key: str, limit: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token: str | None = None
    for _ in range(MAX_PAGES):
        params: dict[str, Any] = {"pageSize": min(100, limit - len(items))}
        if token:
            params["pageToken"] = token
        data = await get(path, params)
        items += list(data.get(key, []))[: limit - len(items)]
        token = data.get("nextPageToken")
        if not token or len(items) >= limit:
            break
    return items


def _checked(tool: str, response: httpx.Response) -> dict[str, Any]:
    if response.status_code in (401, 403):
        raise PermissionDenied(tool, f"Google Meet refused the token (HTTP {response.status_code}); check its scopes")
    if response.status_code == 404:
        raise ExecutionFailed(tool, "Google Meet has no such space or conference")
    if response.status_code >= 300:
        raise ExecutionFailed(tool, f"Google Meet answered HTTP {response.status_code}")
    try:
        data = response.json()
    except ValueError:
        raise ExecutionFailed(tool, "Google Meet answered something that is not JSON") from None
    if not isinstance(data, dict):
        raise ExecutionFailed(tool, "Google Meet answered an unexpected shape")
    return data


def _space_name(space: str) -> str:
    return space if space.startswith("spaces/") else f"spaces/{space}"


def _space(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": s.get("name"),
        "meeting_uri": s.get("meetingUri"),
        "meeting_code": s.get("meetingCode"),
        "access_type": (s.get("config") or {}).get("accessType"),
    }


def _record(r: dict[str, Any]) -> dict[str, Any]:
    return {"name": r.get("name"), "start_time": r.get("startTime"), "end_time": r.get("endTime")}


def _participant(p: dict[str, Any]) -> dict[str, Any]:
    who = p.get("signedinUser") or p.get("anonymousUser") or p.get("phoneUser") or {}
    kind = "signed_in" if "signedinUser" in p else "anonymous" if "anonymousUser" in p else "phone"
    return {
        "name": p.get("name"),
        "display_name": who.get("displayName"),
        "user": who.get("user"),
        "kind": kind,
        "earliest_start": p.get("earliestStartTime"),
        "latest_end": p.get("latestEndTime"),
    }


def _entry(e: dict[str, Any]) -> dict[str, Any]:
    return {
        "participant": e.get("participant"),
        "text": e.get("text"),
        "language": e.get("languageCode"),
        "start_time": e.get("startTime"),
        "end_time": e.get("endTime"),
    }
