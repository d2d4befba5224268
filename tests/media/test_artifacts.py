"""artifact_publish / artifact_list / artifact_unpublish: content-addressed, immutable, owned, per session."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

import aleph
from aleph import ApprovalOutcome, ExecutionFailed, ScriptedRequester, ValidationFailed

from .conftest import Call, caller, make_runtime

pytestmark = pytest.mark.anyio


def blobs(workspace: Path) -> list[Path]:
    root = workspace / ".aleph-data" / "media" / "blobs" / "sha256"
    return sorted(p for p in root.rglob("*") if p.is_file())


def approving() -> ScriptedRequester:
    return ScriptedRequester([ApprovalOutcome.APPROVED] * 4)


async def test_publish_names_the_artifact_by_its_sha256_and_stores_it_read_only(workspace: Path, call: Call) -> None:
    data = b"%PDF-1.4 pretend report\n"
    (workspace / "out").mkdir()
    (workspace / "out" / "report.pdf").write_bytes(data)
    out = await call("artifact_publish", path="out/report.pdf")
    art = out["artifact"]
    digest = hashlib.sha256(data).hexdigest()
    assert out["created"] is True
    assert (art["id"], art["uri"]) == (digest, f"aleph-artifact://sha256/{digest}")
    assert (art["name"], art["size"], art["media_type"]) == ("report.pdf", len(data), "application/pdf")
    assert (art["published_by"], art["session"], art["source_path"]) == ("alice", "alice:s1", "out/report.pdf")
    assert art["published_at"].endswith("Z")
    (blob,) = blobs(workspace)
    assert blob.name == digest and blob.read_bytes() == data
    assert stat.S_IMODE(blob.stat().st_mode) == 0o444


async def test_a_published_artifact_never_changes(workspace: Path, call: Call) -> None:
    (workspace / "a.txt").write_text("first")
    first = (await call("artifact_publish", path="a.txt", name="notes.txt"))["artifact"]
    (workspace / "a.txt").write_text("second")
    again = await call("artifact_publish", path="a.txt")
    assert again["created"] is True and again["artifact"]["id"] != first["id"]
    (workspace / "a.txt").write_text("first")
    same = await call("artifact_publish", path="a.txt", name="renamed.txt")
    assert same["created"] is False and same["artifact"] == first  # name and time kept: immutable
    listed = (await call("artifact_list"))["artifacts"]
    assert sorted(a["id"] for a in listed) == sorted([first["id"], again["artifact"]["id"]])
    assert {p.read_bytes() for p in blobs(workspace)} == {b"first", b"second"}


async def test_another_principal_sees_a_foreign_artifact_as_missing(workspace: Path, rt: aleph.Aleph) -> None:
    (workspace / "a.txt").write_text("alice's")
    alice, bob = caller(rt, "alice"), caller(rt, "bob", requester=approving())
    art = (await alice("artifact_publish", path="a.txt"))["artifact"]
    assert (await bob("artifact_list", all_sessions=True))["artifacts"] == []
    with pytest.raises(ExecutionFailed) as foreign:
        await bob("artifact_unpublish", id=art["id"])
    never = "f" * 64
    with pytest.raises(ExecutionFailed) as missing:
        await bob("artifact_unpublish", id=never)
    assert str(foreign.value).replace(art["id"], never) == str(missing.value)
    assert [a["id"] for a in (await alice("artifact_list"))["artifacts"]] == [art["id"]]


async def test_listing_is_per_session_unless_all_sessions(workspace: Path, rt: aleph.Aleph) -> None:
    (workspace / "one.txt").write_text("1")
    (workspace / "two.txt").write_text("2")
    s1, s2 = caller(rt, "alice", "s1"), caller(rt, "alice", "s2")
    await s1("artifact_publish", path="one.txt")
    await s2("artifact_publish", path="two.txt")
    assert [a["name"] for a in (await s1("artifact_list"))["artifacts"]] == ["one.txt"]
    assert (await s2("artifact_list"))["session"] == "alice:s2"
    assert sorted(a["name"] for a in (await s1("artifact_list", all_sessions=True))["artifacts"]) == [
        "one.txt",
        "two.txt",
    ]


async def test_unpublishing_needs_an_approval(workspace: Path, rt: aleph.Aleph) -> None:
    (workspace / "a.txt").write_text("data")
    art = (await caller(rt)("artifact_publish", path="a.txt"))["artifact"]
    with pytest.raises(aleph.ApprovalUnavailable):
        await caller(rt)("artifact_unpublish", id=art["id"])
    assert len((await caller(rt)("artifact_list"))["artifacts"]) == 1
    denied = ScriptedRequester([ApprovalOutcome.DENIED])
    with pytest.raises(aleph.ApprovalDenied):
        await caller(rt, requester=denied)("artifact_unpublish", id=art["id"])
    out = await caller(rt, requester=approving())("artifact_unpublish", id=f"sha256:{art['id']}")
    assert out["unpublished"]["id"] == art["id"]
    assert (await caller(rt)("artifact_list"))["artifacts"] == []
    assert blobs(workspace) == []


async def test_shared_bytes_stay_while_another_owner_holds_them(workspace: Path, rt: aleph.Aleph) -> None:
    (workspace / "a.txt").write_text("same bytes")
    alice, bob = caller(rt, "alice", requester=approving()), caller(rt, "bob")
    art = (await alice("artifact_publish", path="a.txt"))["artifact"]
    assert (await bob("artifact_publish", path="a.txt"))["created"] is True
    await alice("artifact_unpublish", id=art["id"])
    assert [p.name for p in blobs(workspace)] == [art["id"]]
    assert [a["id"] for a in (await bob("artifact_list"))["artifacts"]] == [art["id"]]


async def test_a_malformed_id_is_a_validation_error(call: Call) -> None:
    with pytest.raises(ValidationFailed, match=r"\bid\b"):
        await call("artifact_unpublish", id="abc")


async def test_a_file_over_the_artifact_limit_leaves_nothing_behind(workspace: Path) -> None:
    (workspace / "big.bin").write_bytes(b"x" * 4096)
    async with make_runtime(workspace, "[media]\nmax_artifact_bytes = 1024\n") as rt:
        with pytest.raises(ExecutionFailed, match=r"larger than the 1,024-byte limit"):
            await caller(rt)("artifact_publish", path="big.bin")
        assert (await caller(rt)("artifact_list"))["artifacts"] == []
    leftovers = list((workspace / ".aleph-data" / "media" / "blobs").rglob("*"))
    assert [p for p in leftovers if p.is_file()] == []


async def test_artifacts_survive_a_restart(workspace: Path) -> None:
    (workspace / "a.txt").write_text("kept")
    async with make_runtime(workspace) as rt:
        art = (await caller(rt)("artifact_publish", path="a.txt"))["artifact"]
    async with make_runtime(workspace) as rt:
        assert (await caller(rt)("artifact_list"))["artifacts"] == [art]


async def test_artifact_read_describes_an_owned_artifact_and_inlines_small_ones(
    workspace: Path, rt: aleph.Aleph
) -> None:
    import base64

    (workspace / "small.txt").write_bytes(b"tiny")
    (workspace / "large.bin").write_bytes(b"\1" * (64 * 1024))
    alice, bob = caller(rt, "alice"), caller(rt, "bob")
    small = (await alice("artifact_publish", path="small.txt"))["artifact"]
    large = (await alice("artifact_publish", path="large.bin"))["artifact"]
    out = await alice("artifact_read", id=small["uri"], content=True)
    assert out["artifact"] == small and base64.b64decode(out["content_base64"]) == b"tiny"
    assert "content_base64" not in await alice("artifact_read", id=small["id"])
    big = await alice("artifact_read", id=large["id"], content=True)
    assert "content_base64" not in big and large["uri"] in big["note"]
    with pytest.raises(ExecutionFailed, match=f"artifact {small['id']} not found"):
        await bob("artifact_read", id=small["id"])
