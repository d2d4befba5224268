"""The ledger's native row builder writes exactly the bytes of the Python path, and the Python path still works.

``aleph._ledger._rowfast`` (C, compiled by ``core/hatch_build.py``) and ``aleph._ledger._rowline.py_row_line``
build a marked row's hash, mark and JSON line. A chain written by one must read, recover and verify under the
other, so both are run over many varied rows (control characters, quotes, non-ASCII text, fields at and past
their clipping limits, lone surrogates) and compared byte for byte, declining the same rows.
"""

from __future__ import annotations

import hmac
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aleph._ledger import Ledger, LedgerRecord, row_hash
from aleph._ledger._clip import MAX_DETAIL, MAX_SHORT, MAX_TARGET
from aleph._ledger._rowline import encode_line, py_row_line
from aleph._ledger._speedups import PyMarkKey, native, speedups_disabled

REPO = Path(__file__).resolve().parents[2]
FP = "94ac40aa196c0be6255fbec9385727d9"
KEY = bytes(range(32))


def _native() -> Any:
    if native is None:
        why = "ALEPH_NO_SPEEDUPS is set" if speedups_disabled() else "it was not built (no C compiler or libssl-dev)"
        pytest.skip(f"the native row builder is not loaded: {why}")
    return native


def test_native_builder_is_loaded_in_ci() -> None:
    """CI builds the accelerator (gcc and libssl-dev come from scripts/setup-system): tox -e core tests it."""
    if os.environ.get("CI", "").strip().lower() not in ("true", "1", "yes") or speedups_disabled():
        pytest.skip("only checked under CI=true")
    assert native is not None, "aleph._ledger._rowfast was not built or does not import"


_ALPHABET = [chr(c) for c in range(128)] + ["é", "ß", "—", "…", "中", "😀", "\u2028", "\ufeff", "\x85"]


def _text(rng: random.Random, limit: int) -> str:
    size = rng.choice([0, 1, 2, 5, 17, 64, limit - 1, limit, limit + 1])
    if rng.random() < 0.3:
        return "".join(rng.choice(_ALPHABET[32:127]) for _ in range(max(0, size)))
    return "".join(rng.choice(_ALPHABET) for _ in range(max(0, size)))


def _row(rng: random.Random) -> tuple[Any, ...]:
    def opt() -> str | None:
        return None if rng.random() < 0.4 else _text(rng, MAX_SHORT)

    return (
        rng.choice(["main", "a", "agent with spaces", "ünï", "x" * 128]),
        rng.choice([1, 2, 9, 10, 99_999, 2**62]),
        None if rng.random() < 0.2 else rng.randbytes(32),
        rng.choice([FP, "", 'a"b']),
        rng.choice([1_796_057_543_099, 0, 1, 2**53]),
        rng.choice(["tool_call", "tool_denied", "tool_event"]),
        _text(rng, MAX_TARGET),
        rng.choice(["ok", "error", "denied"]),
        _text(rng, MAX_DETAIL),
        opt(),
        opt(),
        opt(),
        opt(),
    )


def _both(fast: Any, args: tuple[Any, ...], key: bytes = KEY) -> tuple[Any, Any]:
    agent, seq, prev, fp, at_ms, *rest = args
    ours = fast.row_line(agent, seq, prev, fp, fast.MarkKey(key), at_ms, *rest)
    theirs = py_row_line(agent, seq, prev, fp, PyMarkKey(key), at_ms, *rest)
    return ours, theirs


def test_native_and_python_rows_are_the_same_bytes_over_many_rows() -> None:
    fast = _native()
    rng = random.Random(34)
    built = declined = 0
    for _ in range(4000):
        args = _row(rng)
        ours, theirs = _both(fast, args)
        assert ours == theirs, args
        if ours is None:
            declined += 1
            continue
        built += 1
        line, digest = ours
        row = json.loads(line)  # and the line is the row json.dumps(row, ensure_ascii=False) would write
        assert line == (json.dumps(row, ensure_ascii=False) + "\n").encode()
        assert row["hash"] == digest.hex()
    assert built > 1000 and declined > 300  # both the fast rows and the declined ones were exercised


def test_every_ascii_character_is_escaped_as_json_does_it() -> None:
    fast = _native()
    for code in range(128):
        text = f"a{chr(code)}b"
        args = ("main", 2, None, FP, 5, "tool_call", text, "ok", text * 3, text, None, text, None)
        ours, theirs = _both(fast, args)
        assert ours is not None and ours == theirs, repr(chr(code))


@pytest.mark.parametrize(
    "field, value",
    [
        (6, "t" * (MAX_TARGET + 1)),  # target past its limit: the Python path clips it
        (8, "d" * (MAX_DETAIL + 1)),
        (9, "f" * (MAX_SHORT + 1)),
        (10, "p" * (MAX_SHORT + 1)),
        (8, "lone \ud800 surrogate"),  # replaced, not stored as it is
        (6, type("Sub", (str,), {})("a str subclass")),
        (9, 42),  # not text at all
    ],
)
def test_rows_that_need_clipping_or_repair_are_declined_by_both(field: int, value: Any) -> None:
    fast = _native()
    args = ["main", 2, None, FP, 5, "tool_call", "t", "ok", "d", None, None, None, None]
    args[field] = value
    ours, theirs = _both(fast, tuple(args))
    assert ours is None and theirs is None


def test_fields_exactly_at_their_limits_are_built_natively() -> None:
    fast = _native()
    args = ("main", 3, bytes(32), FP, 7, "tool_call", "é" * MAX_TARGET, "ok", "😀" * MAX_DETAIL, "f" * MAX_SHORT,
            "p" * MAX_SHORT, "r" * MAX_SHORT, "u" * MAX_SHORT)  # fmt: skip
    ours, theirs = _both(fast, args)
    assert ours is not None and ours == theirs


@pytest.mark.parametrize("size", [0, 1, 32, 63, 64, 65, 200])
def test_the_mark_is_hmac_sha256_under_the_key_for_every_key_length(size: int) -> None:
    key = bytes((i * 7 + 3) % 256 for i in range(size))
    digest = bytes(range(100, 132))
    expected = hmac.digest(key, digest, "sha256")[:16].hex()
    assert PyMarkKey(key).mark(digest) == expected
    if native is not None:
        assert native.MarkKey(key).mark(digest) == expected


def test_the_row_hash_is_the_documented_v2_hash() -> None:
    fast = _native()
    prev = bytes(range(32))
    line, digest = fast.row_line("main", 4, prev, FP, fast.MarkKey(KEY), 99, "tool_call", "file_write", "ok",
                                 "file_write: path=a", "ab" * 16, '{"agent":"main"}', None, "r")  # fmt: skip
    assert digest == row_hash(agent_id="main", seq=4, at_ms=99, action="tool_call", outcome="ok",
                              target="file_write", args_fp="ab" * 16, detail="file_write: path=a", signer_fp=FP,
                              principal='{"agent":"main"}', result_fp=None, rule="r", prev_hash=prev)  # fmt: skip
    mark = PyMarkKey(KEY).mark(digest)
    assert line == encode_line("main", 4, prev, digest, "", FP, "tool_call", "file_write", "ok", "ab" * 16,
                               "file_write: path=a", 99, '{"agent":"main"}', None, "r", mark)  # fmt: skip


def test_a_chain_written_by_both_builders_recovers_and_verifies(tmp_path: Path) -> None:
    """Rows of a process with the accelerator and of one without share a chain (several processes may)."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from aleph._ledger import Ledger, LedgerRecord\n"
        "from aleph._ledger._speedups import native\n"
        "ledger = Ledger(Path(sys.argv[1]))\n"
        "for i in range(50):\n"
        "    record = LedgerRecord('main', 'tool_call', 'w', 'ok', f'w: i={i} é \\n \"q\"', args_fp='f' * 32)\n"
        "    ledger.append_nowait(record)\n"
        "    ledger.write_row('main', 'tool_call', 'w', 'ok', f'w: fast {i}', 'a'*32, '{}')\n"
        "ledger.close()\n"
        "print('native' if native is not None else 'python')\n"
    )
    builders = []
    for disabled in ("1", "0", "1"):
        env = {**os.environ, "ALEPH_NO_SPEEDUPS": disabled}
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True,
                              check=True)  # fmt: skip
        builders.append(done.stdout.strip())
    assert builders[0] == "python"
    report = Ledger(tmp_path).verify("main")
    assert report.ok and report.rows == 1 + 300 and report.unsigned_tail == 0, report
    ledger = Ledger(tmp_path)
    try:
        assert ledger.write_row("main", "tool_call", "w", "ok", "after") is None
    finally:
        ledger.close()
    assert Ledger(tmp_path).verify("main").rows == 302


def test_write_row_stores_the_row_append_would(tmp_path: Path) -> None:
    """The chokepoint's fast entry and append() of the same record store the same fields."""
    ledger = Ledger(tmp_path)
    try:
        assert ledger.write_row("main", "tool_call", "file_write", "ok", "file_write: path=a", "f" * 32, "{}") is None
        ledger.append_nowait(LedgerRecord("main", "tool_call", "file_write", "ok", "file_write: path=a",
                                          args_fp="f" * 32, principal="{}"))  # fmt: skip
        assert ledger.write_row("main", "nonsense", "t", "ok", "d") is not None  # type: ignore[arg-type]
    finally:
        ledger.close()
    rows = Ledger(tmp_path).rows("main")
    keep = ("action", "target", "outcome", "detail", "args_fp", "principal", "result_fp", "rule", "refs")
    assert [{k: getattr(r, k) for k in keep} for r in rows[1:]] == [{k: getattr(rows[1], k) for k in keep}] * 2
    assert Ledger(tmp_path).verify("main").ok


def test_the_ledger_tests_pass_on_the_python_path() -> None:
    """ALEPH_NO_SPEEDUPS=1 switches the accelerator off: the core ledger tests must pass that way too."""
    env = {**os.environ, "ALEPH_NO_SPEEDUPS": "1"}
    names = ("test_ledger.py", "test_ledger_durability.py", "test_ledger_lease.py", "test_fingerprints.py")
    tests = [str(REPO / "tests/core" / name) for name in names]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--import-mode=importlib", *tests],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    probe = "from aleph._ledger._speedups import native; print(native)"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"


_KEYS = ["a", "path", "api_key", "Password", "token", "x y", "k\x1ce", "ключ", "\u3000sp", "n", "secret_id", "b\tc"]
_VALUES: list[Any] = ["", "v", "two  words\n", "sk-abcdefghijklmnopqrstuvwx", "Bearer abc.def", "tab\tz",
                      "\x1c\x1f", "zero\u200bwidth", "é ü", "\u2028line", "😀", "x" * 250, 0, -7, 10**30, True,
                      False, None]  # fmt: skip


def test_native_and_python_call_prints_are_the_same_over_many_flat_calls() -> None:
    """The summary (detail) and argument fingerprint (args_fp) are stored: both builders must agree exactly."""
    fast = _native()
    from aleph._chokepoint import _callprint as cp

    rng = random.Random(28)
    seen_secret = seen_long = 0
    for _ in range(3000):
        arguments = {rng.choice(_KEYS): rng.choice(_VALUES) for _ in range(rng.randint(0, 6))}
        tool = rng.choice(["file_write", "add", "t\u00e9l\u00e9", "a b"])
        ours = fast.call_print(tool, arguments, cp._secret_keys, cp._is_secret_key, cp._clean, cp._SECRET_JSON,
                               cp.SUMMARY_LIMIT)  # fmt: skip
        theirs = cp._flat(tool, arguments)
        assert ours == theirs, (tool, arguments)
        assert ours is not None
        seen_secret += "***" in ours[0]
        seen_long += ours[0].endswith("…")
    assert seen_secret > 100 and seen_long > 100


@pytest.mark.parametrize(
    "arguments",
    [{"a": 1.5}, {"a": [1]}, {"a": {"b": 1}}, {1: "a"}, {"a": type("S", (str,), {})("x")}, {"a": "\ud800"}],
)
def test_calls_the_native_print_declines_take_the_full_functions(arguments: dict[Any, Any]) -> None:
    fast = _native()
    from aleph._chokepoint import _callprint as cp

    ours = fast.call_print("t", arguments, cp._secret_keys, cp._is_secret_key, cp._clean, cp._SECRET_JSON, 200)
    assert ours is None
