from __future__ import annotations

from pathlib import Path

import pytest

from aleph._mcp._pins import PinStore


def test_pins_round_trip_with_mode_0600(tmp_path: Path) -> None:
    store = PinStore(tmp_path / "mcp" / "pins.json")
    store.set_many("srv", {"a": "1" * 64})
    assert 0o600 == (tmp_path / "mcp" / "pins.json").stat().st_mode & 0o777
    assert "1" * 64 == PinStore(tmp_path / "mcp" / "pins.json").get("srv", "a")
    assert PinStore(tmp_path / "mcp" / "pins.json").get("srv", "b") is None


def test_an_unreadable_pin_file_is_kept_aside_not_overwritten(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "pins.json"
    path.write_text("{not json")
    store = PinStore(path)
    assert store.get("srv", "a") is None
    assert "unreadable" in caplog.text
    [kept] = tmp_path.glob("pins.json.unreadable-*")
    assert "{not json" == kept.read_text()
    store.set_many("srv", {"a": "2" * 64})
    assert "2" * 64 == PinStore(path).get("srv", "a")
