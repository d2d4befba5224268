"""The contract kit, with a runnable example for every desktop tool against a real GTK form on Xvfb."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aleph_desktop.plugin
import pytest
from aleph_desktop import HeadlessSession
from conftest import desktop_toml, has_window_on_accessibility_bus

from aleph.testing import ToolContractTests

APPS = Path(__file__).parent / "apps"


class TestDesktopContract(ToolContractTests):
    plugin = aleph_desktop.plugin
    family = "desktop"

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _form(cls, session: HeadlessSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
        state = tmp_path_factory.mktemp("contract") / "state.json"
        proc = session.launch(["/usr/bin/python3", str(APPS / "gtk_form.py"), str(state)])
        deadline = time.monotonic() + 20
        while not (state.exists() and has_window_on_accessibility_bus(session, "gtk_form")):
            assert time.monotonic() < deadline, "gtk_form did not show its window on the accessibility bus"
            time.sleep(0.05)  # poll interval of the condition above
        cls.config_toml = desktop_toml(session)
        yield
        session.stop(proc)

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("desktop", {"action": "screenshot", "max_width": 640}),
            (
                "desktop",
                {"action": "press", "role": "push button", "name": "Save", "target_app": "gtk_form", "observe": "id"},
            ),
            ("desktop_ax_query_focused", {}),
            ("desktop_ax_query_tree", {"app": "gtk_form", "max_depth": 3}),
            ("desktop_ax_query_by_role", {"role": "check box", "app": "gtk_form"}),
            ("desktop_ax_snapshot", {"app": "gtk_form"}),
            ("desktop_som", {"ocr": "never"}),
            ("desktop_gui_locate", {"target_text": "Subscribe"}),
            ("desktop_check_permissions", {}),
        ]
