"""google_meet against a stand-in of the Meet REST API v2, the family's configuration errors, and the kit.

Google cannot be reached from the test machine, so google_meet runs against a local HTTP server that
implements the documented endpoints (spaces.create/get, conferenceRecords.list, participants.list,
transcripts.list, transcripts.entries.list) with their response shapes, and checks the bearer token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aleph_channels.plugin
import pytest

import aleph
from aleph.testing import ToolContractTests

from .conftest import runtime
from .servers import http_server

pytestmark = pytest.mark.anyio

PARTICIPANTS = [
    {
        "name": f"conferenceRecords/c1/participants/p{i}",
        "signedinUser": {"user": f"users/{i}", "displayName": f"P{i}"},
        "earliestStartTime": "2026-12-01T10:00:00Z",
        "latestEndTime": "2026-12-01T11:00:00Z",
    }
    for i in range(150)
] + [{"name": "conferenceRecords/c1/participants/anon", "anonymousUser": {"displayName": "Guest"}}]


def meet_api(request: Any, body: bytes) -> tuple[int, Any]:
    if request.headers.get("Authorization") != "Bearer good-token":
        return 401, {"error": {"code": 401, "status": "UNAUTHENTICATED"}}
    url = urlsplit(request.path)
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    path = url.path.removeprefix("/v2/")
    if request.command == "POST" and path == "spaces":
        config = json.loads(body)["config"]
        return 200, {
            "name": "spaces/abc",
            "meetingUri": "https://meet.google.com/abc-defg-hij",
            "meetingCode": "abc-defg-hij",
            "config": config,
        }
    if path == "spaces/abc":
        return 200, {
            "name": "spaces/abc",
            "meetingUri": "https://meet.google.com/abc-defg-hij",
            "meetingCode": "abc-defg-hij",
            "config": {"accessType": "TRUSTED"},
        }
    if path == "conferenceRecords" and query.get("filter") == 'space.name="spaces/abc"':
        return 200, {
            "conferenceRecords": [
                {
                    "name": "conferenceRecords/c1",
                    "startTime": "2026-12-01T10:00:00Z",
                    "endTime": "2026-12-01T11:00:00Z",
                    "space": "spaces/abc",
                }
            ]
        }
    if path == "conferenceRecords/c1/participants":
        start = int(query.get("pageToken") or 0)
        size = int(query["pageSize"])
        page = PARTICIPANTS[start : start + size]
        nxt = start + size
        return 200, {"participants": page, **({"nextPageToken": str(nxt)} if nxt < len(PARTICIPANTS) else {})}
    if path == "conferenceRecords/c1/transcripts":
        return 200, {"transcripts": [{"name": "conferenceRecords/c1/transcripts/t1", "state": "FILE_GENERATED"}]}
    if path == "conferenceRecords/c1/transcripts/t1/entries":
        return 200, {
            "transcriptEntries": [
                {
                    "name": "conferenceRecords/c1/transcripts/t1/entries/e1",
                    "participant": "conferenceRecords/c1/participants/p1",
                    "text": "Let's ship on Friday.",
                    "languageCode": "en-US",
                    "startTime": "2026-12-01T10:05:00Z",
                    "endTime": "2026-12-01T10:05:03Z",
                }
            ]
        }
    return 404, {"error": {"code": 404, "status": "NOT_FOUND"}}


@pytest.fixture
def meet(monkeypatch: pytest.MonkeyPatch):
    url, recorded, stop = http_server(meet_api)
    monkeypatch.setenv("TEST_MEET_TOKEN", "good-token")
    yield f'[google_meet]\napi_base = "{url}/v2"\ntoken_env = "TEST_MEET_TOKEN"\n', recorded
    stop()


async def call(rt: aleph.Aleph, **payload: Any) -> Any:
    result = await rt.tool_service(agent="alice", tier="full").call("google_meet", payload)
    assert result.success, result.error
    return json.loads(result.output)


async def test_google_meet_creates_a_space_and_reads_a_conference(workspace: Path, meet) -> None:
    config, recorded = meet
    async with runtime(workspace, config) as rt:
        space = await call(rt, action="create_space", access_type="OPEN")
        assert space["space"] == {
            "name": "spaces/abc",
            "meeting_uri": "https://meet.google.com/abc-defg-hij",
            "meeting_code": "abc-defg-hij",
            "access_type": "OPEN",
        }
        conferences = await call(rt, action="list_conferences", space="abc")
        assert [c["name"] for c in conferences["conferences"]] == ["conferenceRecords/c1"]
        people = await call(rt, action="participants", conference="conferenceRecords/c1", max_items=2000)
        assert people["count"] == 151 and people["participants"][-1]["kind"] == "anonymous"
        capped = await call(rt, action="participants", conference="conferenceRecords/c1", max_items=120)
        assert capped["count"] == 120
        said = await call(rt, action="transcript", conference="conferenceRecords/c1")
        assert said["transcript"][0]["text"] == "Let's ship on Friday." and said["untrusted"] is True
    assert all(r["headers"]["Authorization"] == "Bearer good-token" for r in recorded.requests)


async def test_google_meet_without_credentials_says_what_to_configure(workspace: Path, meet, monkeypatch) -> None:
    monkeypatch.delenv("TEST_MEET_TOKEN")
    async with runtime(workspace, meet[0]) as rt:
        result = await rt.tool_service(agent="alice", tier="full").call("google_meet", {"action": "create_space"})
    assert not result.success and "set TEST_MEET_TOKEN" in result.error and meet[1].requests == []


async def test_google_meet_refused_token_is_a_permission_error(workspace: Path, meet, monkeypatch) -> None:
    monkeypatch.setenv("TEST_MEET_TOKEN", "stolen")
    async with runtime(workspace, meet[0]) as rt:
        result = await rt.tool_service(agent="alice", tier="full").call(
            "google_meet", {"action": "get_space", "space": "spaces/abc"}
        )
    assert not result.success and "refused the token" in result.error


async def test_google_meet_names_a_malformed_conference(workspace: Path, meet) -> None:
    async with runtime(workspace, meet[0]) as rt:
        result = await rt.tool_service(agent="alice", tier="full").call(
            "google_meet", {"action": "transcript", "conference": "../../admin"}
        )
    assert not result.success and "conferenceRecords/<id>" in result.error and meet[1].requests == []


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[channel_adapters.x]\nkind = "telegram"\n', "unknown adapter kind 'telegram'"),
        (
            '[channel_adapters.x]\nkind = "irc"\nhost = "irc.example.org"\ntls = false\n',
            "only for a server on loopback",
        ),
        ('[channel_adapters.x]\nkind = "irc"\nhost = "127.0.0.1"\nnick = "9bad nick"\n', "nick"),
        ('[channel_adapters.x]\nkind = "webhook"\n', "url_env"),
        ("[channel_pairing]\ncode_ttl_s = 5\n", "code_ttl_s"),
    ],
)
def test_bad_configuration_names_the_key(workspace: Path, toml: str, message: str) -> None:
    with pytest.raises((aleph.ConfigError, aleph.PluginError)) as info:
        runtime(workspace, toml)
    assert message in str(info.value)


class TestChannelsContract(ToolContractTests):
    plugin = aleph_channels.plugin
    families = ("ask_user", "channel", "media", "google_meet")
    no_example: dict[str, str] = {
        "ask_user": "needs a person on a channel; tests/channels/test_irc.py asks one on a real IRC server",
        "media_send": "needs a channel adapter; tested against real SMTP and webhook servers",
        "google_meet": "needs Google; tested against a stand-in of the Meet REST API",
    }

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        return [("channel_pairing", {"action": "list"}), ("channel_pairing", {"action": "pending"})]
