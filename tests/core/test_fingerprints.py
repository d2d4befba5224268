"""Fingerprints, call summaries and row hashes are stored: the same input must keep giving the same bytes.

A ledger row's ``args_fp`` and ``detail``, approval grants and the results store key on these values; a change
to how they are computed (however fast) must not change a single stored byte. The values here were computed
by the implementation before issue 34's fast paths and are pinned.
"""

from __future__ import annotations

import hmac
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from aleph._chokepoint._callprint import summary_and_fingerprint
from aleph._chokepoint._gate import grant_fingerprint, summarize_call
from aleph._ledger import row_hash
from aleph._ledger._keystore import Signer

PINNED: list[tuple[str, dict[str, Any], str, str]] = [
    ("add_write", {"a": 2, "b": 3}, "18899d1e8b9b1307100f6048f8a7db08", "add_write: a=2 b=3"),
    ("add_write", {"b": 3, "a": 2}, "18899d1e8b9b1307100f6048f8a7db08", "add_write: a=2 b=3"),
    (
        "file_write",
        {"path": "notes.txt", "content": "héllo\nwörld", "append": False},
        "bf19db79acbac3f6f4e313e96db9ee57",
        "file_write: append=false content=héllo wörld path=notes.txt",
    ),
    (
        "http",
        {"url": "https://x.test", "api_key": "sk-abcdefghijklmnopqrstuvwx", "token": "", "n": None},
        "f9532bf458981f950aad4367691716fe",
        "http: api_key=*** n=null token= url=https://x.test",
    ),
    (
        "deep",
        {"cfg": {"password": "hunter2", "z": [1, 2.5, None, {"k": None, "secret": "s"}], "ok": True}, "e": {}},
        "7eaafa8ee562c1fd9fdf0e9be7bba9ea",
        'deep: cfg={"password": "***", "z": [1, 2.5, null, {"k": null, "secret": "***"}], "ok": true} e={}',
    ),
    ("bash", {"cmd": "ls -la", "justification": "look around"}, "f0fc1fd0972747dfca19759098f88db6", "bash: ls -la"),
    (
        "file_ops",
        {"operation": "move", "path": "a.txt", "destination": "b.txt"},
        "969a9d4409f88c193f76c1409025ef78",
        "file_ops: operation=move path=a.txt destination=b.txt",
    ),
    ("empty", {}, "d8e7af2ab34c1e3774e681cd3c5763b5", "empty: (no arguments)"),
    (
        "floaty",
        {"x": 1.0, "y": -0.0, "z": 1e300, "t": (1, "two")},
        "a0ec47e82f60cbd23e07491366f777ca",
        'floaty: t=[1, "two"] x=1.0 y=-0.0 z=1e+300',
    ),
    (
        "ctrl",
        {
            "text": "a\u202eb\x00c Bearer abc.def",
            "long": "w w w w w w w w w w w w w w w w w w w w ",
            "sk": "sk-abcdefghijklmnopqrstuvwx",
        },
        "b2f901150fffee27803475bc3666b521",
        "ctrl: long=w w w w w w w w w w w w w w w w w w w w sk=*** text=a\\u202eb\\u0000c Bearer ***",
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "fingerprint", "summary"), PINNED, ids=[c[0] for c in PINNED])
def test_a_call_keeps_its_stored_fingerprint_and_summary(
    tool: str, arguments: dict[str, Any], fingerprint: str, summary: str
) -> None:
    assert grant_fingerprint(tool, arguments) == fingerprint
    assert summarize_call(tool, arguments) == summary


def test_a_secret_named_string_is_masked_in_the_fingerprint_whatever_its_value() -> None:
    # The fingerprint binds what the approving human saw (``***``), never the secret itself.
    one = grant_fingerprint("http", {"url": "u", "api_key": "first-secret"})
    assert one == grant_fingerprint("http", {"url": "u", "api_key": "another"})
    assert one != grant_fingerprint("http", {"url": "u", "api_key": ""})  # empty is not a secret: kept as is
    assert one != grant_fingerprint("http", {"url": "u", "api_key": 5})  # only strings are masked


def test_a_row_keeps_its_pinned_hash() -> None:
    fields: dict[str, Any] = {
        "agent_id": "main",
        "seq": 7,
        "at_ms": 1796057543099,
        "action": "tool_call",
        "outcome": "ok",
        "target": "file_write",
        "args_fp": "3b1f" * 8,
        "detail": "file_write: path=notes.txt \u2014 \u00e9",
        "signer_fp": "94ac40aa196c0be6255fbec9385727d9",
        "principal": '{"agent":"main","role":null}',
        "result_fp": None,
        "rule": None,
        "prev_hash": bytes(range(32)),
        "refs": '{"call":"c1"}',
    }
    assert row_hash(**fields).hex() == "ca5dc6d3add1f9db3117c6b37457ae5fd2b553547cd44ba3bc18c905e3de38b6"
    genesis = fields | {"seq": 1, "at_ms": 1, "action": "identity_created", "target": "x", "args_fp": None}
    genesis |= {"detail": "", "signer_fp": "fp", "principal": None, "result_fp": "r", "rule": "rule"}
    genesis |= {"prev_hash": None, "refs": None}
    assert row_hash(**genesis).hex() == "04cc1fecfb12c85a332cd40c62ec0bc19b47c9c95d537be9ec2c19f468c7e33b"


@pytest.mark.parametrize("key", [b"", b"k" * 32, b"x" * 64, bytes(range(100))], ids=["empty", "32", "64", "100"])
def test_a_writers_mark_is_hmac_sha256_of_the_row_hash(key: bytes) -> None:
    # Marks are stored and read back by the recovery at start: the precomputed form must be plain HMAC.
    private = Ed25519PrivateKey.generate()
    signer = Signer("main", "fp", b"", private, key)
    for digest in (bytes(32), bytes(range(32)), b"\xff" * 32):
        assert signer.mark(digest) == hmac.digest(key, digest, "sha256")[:16].hex()


_VARIED: list[tuple[str, Any]] = [
    *((tool, arguments) for tool, arguments, _, _ in PINNED),
    ("t", {"api_key": 0, "token": True, "password": None, "secret": "", "auth": "x", "plain": False}),
    ("t", {"n": -12, "big": 10**30, "flag": True, "off": False, "none": None, "s": "ghp_" + "a" * 24}),
    ("t", {"text": "tab\there  and\nnewlines\u200b", "é": "ünï", "x" * 150: "y" * 150}),
    ("t", {"f": 1.5}),  # a float: handed to the two functions
    ("t", {"nested": {"a": 1}, "l": [1, None]}),
    ("t", {1: "a", 2: "b"}),  # keys that are not strings (not from a validated call, but never wrong)
    ("t", {"1": "a", 2: "b"}),
    ("bash", {"cmd": "echo hi", "justification": "x", "token": "t"}),
    ("code_exec", {"code": "print(1)"}),
    ("file_ops", {"operation": "delete", "path": "x"}),
    ("", {}),
    ("tool with space", {"k": "v"}),
    ("t", {"s": "\ud800"}),  # a lone surrogate: the fingerprint cannot be made, either way
]


@pytest.mark.parametrize(("tool", "arguments"), _VARIED)
def test_the_one_pass_summary_and_fingerprint_equal_the_two_functions(tool: str, arguments: Any) -> None:
    def both() -> tuple[str | None, str | None]:
        summary: str | None = None
        fingerprint: str | None = None
        try:
            summary = summarize_call(tool, arguments)
        except Exception as exc:
            summary = type(exc).__name__
        try:
            fingerprint = grant_fingerprint(tool, arguments)
        except Exception as exc:
            fingerprint = type(exc).__name__
        return summary, fingerprint

    expected = both()
    try:
        got: tuple[str | None, str | None] = summary_and_fingerprint(tool, arguments)
    except Exception as exc:  # only where one of the two raises too
        assert type(exc).__name__ in expected
    else:
        assert got == expected
