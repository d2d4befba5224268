"""Signed requests without a cluster: what a node refuses before it looks at the body."""

from __future__ import annotations

import time

import pytest
from aleph_cluster._wire import MAX_REQUEST_BYTES, REQUEST_DOMAIN, Replay, Request, WireError
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

KEY = Ed25519PrivateKey.generate()
PUBLIC = KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def signed(**overrides: object) -> tuple[bytes, bytes]:
    args: dict = {"node": "n1", "kind": "invoke", "principal": "alice", "channel": "", "body": {}, "ttl_seconds": 30}
    args.update(overrides)
    _, text = Request.make(**args)
    return text, KEY.sign(REQUEST_DOMAIN + text)


def test_a_valid_request_opens_with_its_principal() -> None:
    text, sig = signed(body={"command": "true"})
    req = Request.open(text, sig, center_key=PUBLIC, node="n1")
    assert (req.principal, req.kind, req.body) == ("alice", "invoke", {"command": "true"})


@pytest.mark.parametrize(
    ("mangle", "says"),
    [
        (lambda t, s: (t.replace(b'"alice"', b'"mallory"'), s), "signature does not verify"),
        (lambda t, s: (t, s[:-1] + bytes([s[-1] ^ 1])), "signature does not verify"),
        (lambda t, s: (t, KEY.sign(t)), "signature does not verify"),  # signed without the domain tag
    ],
)
def test_an_edited_or_differently_signed_request_is_refused(mangle, says: str) -> None:
    text, sig = mangle(*signed())
    with pytest.raises(WireError, match=says):
        Request.open(text, sig, center_key=PUBLIC, node="n1")


def test_expired_future_misrouted_and_oversized_requests_are_refused() -> None:
    text, sig = signed()
    now = int(time.time() * 1000)
    with pytest.raises(WireError, match="expired"):
        Request.open(text, sig, center_key=PUBLIC, node="n1", now_ms=now + 60_000)
    with pytest.raises(WireError, match="in the future"):
        Request.open(text, sig, center_key=PUBLIC, node="n1", now_ms=now - 60_000)
    with pytest.raises(WireError, match="not 'n2'"):
        Request.open(text, sig, center_key=PUBLIC, node="n2")
    big, big_sig = signed(body={"x": "a" * MAX_REQUEST_BYTES})
    with pytest.raises(WireError, match="limit"):
        Request.open(big, big_sig, center_key=PUBLIC, node="n1")


def test_replays_are_refused_and_a_full_window_fails_closed() -> None:
    replay = Replay(limit=2)
    first = Request.open(*signed(), center_key=PUBLIC, node="n1")
    replay.admit(first)
    with pytest.raises(WireError, match="replay"):
        replay.admit(first)
    replay.admit(Request.open(*signed(), center_key=PUBLIC, node="n1"))
    with pytest.raises(WireError, match="unexpired requests"):
        replay.admit(Request.open(*signed(), center_key=PUBLIC, node="n1"))
    later = int(time.time() * 1000) + 120_000  # once they expire, room comes back
    replay.admit(Request.open(*signed(ttl_seconds=600), center_key=PUBLIC, node="n1"), now_ms=later)
