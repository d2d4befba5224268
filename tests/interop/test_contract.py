from __future__ import annotations

from typing import Any

import aleph_interop.plugin

from aleph.testing import ToolContractTests


class TestInteropContract(ToolContractTests):
    plugin = aleph_interop.plugin
    families = ("acp", "a2a", "moa", "clawhub")
    no_example: dict[str, str] = {
        "acp_delegate": "needs an ACP agent; tests/interop/test_acp.py runs a real one under bubblewrap",
        "a2a_delegate": "needs a remote agent; tests/interop/test_a2a.py runs the SDK's server",
        "moa": "needs llm models; tests/interop/test_moa_clawhub.py registers offline ones",
        "clawhub": "needs the registry; tested against a stand-in of its HTTP API",
    }

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        return [("acp_switch", {"action": "list"}), ("a2a_agents", {"action": "list"})]
