from __future__ import annotations

from pathlib import Path
from typing import Any

import aleph_hub.plugin

from aleph import Aleph
from aleph.testing import ToolContractTests, isolated_runtime

SKILL = """---
name: pdf-forms
description: Fill in PDF forms from a table of values.
---

# PDF forms

Read the form fields first, then fill them.
"""


class TestHubContract(ToolContractTests):
    plugin = aleph_hub.plugin
    families = ("skill", "hub")
    no_example = {
        "skill_install": "asks a human through the chokepoint (hub_consent); covered by test_skills.py",
        "skill_read": "asks a human (hub_consent) before it serves a skill nobody approved yet; covered by "
        "test_skill_consent.py and test_skills.py",
        "hub_catalog_sync": "needs a package index; covered against a loopback index in test_catalog.py",
        "hub_resolve_spec": "needs a package index; covered against a loopback index in test_install.py",
        "hub_install_run": "needs a package index and a human; covered in test_install.py",
        "hub_fetch_docs": "needs a synced catalog; covered in test_catalog.py",
    }

    def make_runtime(self, workspace: Path) -> Aleph:
        skill = workspace / ".aleph" / "skills" / "pdf-forms"
        skill.mkdir(parents=True, exist_ok=True)
        (skill / "SKILL.md").write_text(SKILL)
        (skill / "references").mkdir(exist_ok=True)
        (skill / "references" / "fields.md").write_text("Field names are case-sensitive.\n")
        user = (workspace / ".user-skills").as_posix()
        return isolated_runtime(workspace, self.plugin, config_toml=f'[hub]\nuser_skills_dirs = ["{user}"]\n')

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("skill_list", {"query": "fill a pdf form"}),
            ("skill_status", {"filter": "ready"}),
            ("skill_manage", {"action": "pin", "skill_id": "pdf-forms"}),
            ("hub_catalog_search", {"query": "greet"}),
            ("hub_install_verify", {}),
            (
                "hub_consent",
                {"kind": "skill", "subject": "pdf-forms", "digest": "sha256:" + "0" * 64, "disclosure": "{}"},
            ),
        ]
