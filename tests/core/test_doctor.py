"""``aleph doctor``: core's checks (workspace, ledger keys, plugins) and the checks plugins register."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

import aleph
from aleph import Ledger, LedgerRecord, load_config
from aleph._cli import main
from aleph._ledger import ledger_directory


class Checks:
    """A plugin registering the given checks (name → status, detail or an exception to raise)."""

    def __init__(self, **checks: tuple[str, str] | Exception) -> None:
        self.checks = checks

    @aleph.hookimpl
    def aleph_doctor_checks(self, register, config):  # type: ignore[no-untyped-def]
        for name, answer in self.checks.items():

            def check(answer: tuple[str, str] | Exception = answer) -> tuple[str, str]:
                if isinstance(answer, Exception):
                    raise answer
                return answer

            register(name.replace("_", "."), check)


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """In-process plugins every ``aleph.load`` of the command line gets."""
    extra: list[object] = []
    real = aleph.load

    def load(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["plugins"] = [*kwargs.get("plugins", ()), *extra]
        return real(*args, **kwargs)

    monkeypatch.setattr("aleph._cli._common.load", load)
    return extra


def doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, tuple[str, str]]]:
    code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is (code == 0)
    return code, {c["name"]: (c["status"], c["detail"]) for c in report["checks"]}


def test_a_healthy_workspace_passes_with_core_checks(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, checks = doctor(capsys)
    assert code == 0
    assert {"core.workspace", "core.ledger", "core.plugins"} <= set(checks)
    assert checks["core.workspace"] == ("ok", f"workspace {workspace}, tier auto")


def test_plugin_checks_are_run_and_a_failure_exits_1(
    workspace: Path, plugins: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    plugins.append(Checks(fake_isolation=("warn", "plain processes"), fake_disk=("fail", "no space left")))
    code, checks = doctor(capsys)
    assert code == 1
    assert checks["fake.isolation"] == ("warn", "plain processes")
    assert checks["fake.disk"] == ("fail", "no space left")


def test_a_warning_alone_exits_0_and_the_text_form_lists_every_check(
    workspace: Path, plugins: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    plugins.append(Checks(fake_isolation=("warn", "plain processes")))
    assert 0 == main(["doctor"])
    out = capsys.readouterr().out
    assert "warn  fake.isolation  plain processes" in out and "ok    core.ledger" in out


def test_a_check_that_raises_or_answers_nonsense_fails_and_names_itself(
    workspace: Path, plugins: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    plugins.append(Checks(fake_probe=RuntimeError("no /proc"), fake_odd=("fine", "all good")))
    code, checks = doctor(capsys)
    assert code == 1
    assert checks["fake.probe"] == ("fail", "the check raised RuntimeError: no /proc")
    assert checks["fake.odd"][0] == "fail" and "'fine'" in checks["fake.odd"][1]


@pytest.mark.anyio
async def test_a_swapped_ledger_key_is_shown_as_a_failure(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = Ledger(ledger_directory(load_config()))
    for agent in ("main", "helper"):
        await ledger.append(LedgerRecord(agent, "tool_call", "file_write", "ok", "file_write: path=a", "a" * 32))
    await ledger.aclose()
    code, checks = doctor(capsys)
    assert code == 0 and checks["core.ledger"][0] == "ok" and "2 chain(s)" in checks["core.ledger"][1]

    from aleph._ledger._speedups import native

    builder = "rows built by the native row writer" if native is not None else "rows built in Python ("
    assert builder in checks["core.ledger"][1]

    fp = ledger.keystore.active_fingerprint("main")
    forged = Ed25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    (ledger.keystore.directory / f"{fp}.key").write_bytes(forged)
    code, checks = doctor(capsys)
    status, detail = checks["core.ledger"]
    assert code == 1 and status == "fail"
    assert f"agent 'main': the key {fp}" in detail and "helper" not in detail
