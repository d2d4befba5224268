from __future__ import annotations

import hashlib
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aleph import Keystore
from aleph._ledger._keystore import KeystoreError, fingerprint, verify_signature


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_signer_is_get_or_create_and_survives_a_new_keystore(tmp_path: Path) -> None:
    first = Keystore(tmp_path / "keys").signer("main")
    again = Keystore(tmp_path / "keys").signer("main")
    assert first.fingerprint == again.fingerprint
    assert first.public_key == again.public_key


def test_each_agent_gets_its_own_key(tmp_path: Path) -> None:
    keys = Keystore(tmp_path / "keys")
    assert keys.signer("a").fingerprint != keys.signer("b").fingerprint


def test_fingerprint_is_first_16_bytes_of_sha256_of_the_raw_public_key(tmp_path: Path) -> None:
    signer = Keystore(tmp_path / "keys").signer("main")
    assert 32 == len(signer.public_key)
    assert hashlib.sha256(signer.public_key).digest()[:16].hex() == signer.fingerprint
    assert fingerprint(signer.public_key) == signer.fingerprint


def test_signatures_verify_under_the_published_public_key(tmp_path: Path) -> None:
    keys = Keystore(tmp_path / "keys")
    signer = keys.signer("main")
    signature = signer.sign(b"x" * 32)
    public = keys.public_keys("main")[signer.fingerprint]
    assert verify_signature(public, signature, b"x" * 32)
    assert not verify_signature(public, signature, b"y" * 32)
    assert not verify_signature(keys.signer("other").public_key, signature, b"x" * 32)


def test_rotation_keeps_old_keys_verifiable(tmp_path: Path) -> None:
    keys = Keystore(tmp_path / "keys")
    old = keys.signer("main")
    old_signature = old.sign(b"m")
    new_fp = keys.rotate("main")
    assert new_fp != old.fingerprint
    assert new_fp == keys.signer("main").fingerprint == keys.active_fingerprint("main")
    published = keys.public_keys("main")
    assert {old.fingerprint, new_fp} == set(published)
    assert verify_signature(published[old.fingerprint], old_signature, b"m")
    assert old.fingerprint == keys.signer_for("main", old.fingerprint).fingerprint


def test_a_revoked_agent_still_signs_but_cannot_rotate(tmp_path: Path) -> None:
    keys = Keystore(tmp_path / "keys")
    fp = keys.signer("main").fingerprint
    keys.revoke("main")
    assert keys.is_revoked("main")
    assert not keys.is_revoked("other")
    signer = keys.signer("main")
    assert fp == signer.fingerprint
    assert verify_signature(signer.public_key, signer.sign(b"m"), b"m")
    with pytest.raises(KeystoreError, match="revoked"):
        keys.rotate("main")


def test_key_files_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    keys = Keystore(tmp_path / "keys")
    keys.signer("main")
    keys.rotate("main")
    assert 0o700 == mode(tmp_path / "keys")
    files = list((tmp_path / "keys").iterdir())
    assert 4 == len(files)  # two private keys, the index and the lock file
    assert {0o600} == {mode(f) for f in files}


def test_a_swapped_private_key_file_is_refused(tmp_path: Path) -> None:
    keys = Keystore(tmp_path / "keys")
    a = keys.signer("a")
    b = keys.signer("b")
    (tmp_path / "keys" / f"{a.fingerprint}.key").write_bytes((tmp_path / "keys" / f"{b.fingerprint}.key").read_bytes())
    with pytest.raises(KeystoreError, match="does not match"):
        Keystore(tmp_path / "keys").signer("a")


def test_an_index_claiming_a_key_under_a_borrowed_fingerprint_is_not_trusted(tmp_path: Path) -> None:
    keys = Keystore(tmp_path / "keys")
    a = keys.signer("a")
    index = next(p for p in (tmp_path / "keys").iterdir() if p.suffix == ".json")
    index.write_text(index.read_text().replace(a.public_key.hex(), keys.signer("b").public_key.hex()))
    assert {} == Keystore(tmp_path / "keys").public_keys("a")


@pytest.mark.parametrize("bad", ["", "a\nb", "x" * 257])
def test_bad_agent_ids_are_rejected_with_a_reason(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="agent id"):
        Keystore(tmp_path / "keys").signer(bad)


def test_agent_ids_with_path_characters_stay_inside_the_directory(tmp_path: Path) -> None:
    keys = Keystore(tmp_path / "keys")
    keys.signer("../../escape")
    keys.signer("ü/ñ")
    assert all(p.parent == tmp_path / "keys" for p in (tmp_path / "keys").iterdir())
    assert not (tmp_path / "escape").exists()


def test_concurrent_first_use_from_many_keystores_creates_one_key(tmp_path: Path) -> None:
    # Separate Keystore objects stand in for separate processes sharing the directory.
    results: list[str] = []

    def worker() -> None:
        results.append(Keystore(tmp_path / "keys").signer("main").fingerprint)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 == len(set(results))
    assert set(results) == set(Keystore(tmp_path / "keys").public_keys("main"))


def test_a_key_file_half_written_by_a_killed_process_is_cleared_when_keys_are_next_written(tmp_path: Path) -> None:
    store = Keystore(tmp_path / "keys")
    store.signer("main")
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)
    stale = tmp_path / "keys" / f".main-0123.json.{dead}.x1y2z3.tmp"
    stale.write_bytes(b'{"agent_id": "ma')
    Keystore(tmp_path / "keys").rotate("main")  # a new process's first locked write sweeps the directory
    assert not stale.exists()
    assert not [p.name for p in (tmp_path / "keys").iterdir() if p.name.endswith(".tmp")]
