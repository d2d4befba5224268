from __future__ import annotations

import aleph_template.plugin

from aleph.testing import ToolContractTests


class TestTemplateContract(ToolContractTests):
    plugin = aleph_template.plugin
    family = "template"

    def examples(self) -> list[tuple[str, dict[str, object]]]:
        return [("template_echo", {"text": "hi", "upper": True})]
