from __future__ import annotations

import aleph_files.plugin

from aleph.testing import ToolContractTests


class TestFilesContract(ToolContractTests):
    plugin = aleph_files.plugin
    families = ("file", "apply", "web", "search")
    no_example = {
        "web_fetch": "needs a reachable page; tests/files/test_web.py serves one on loopback",
        "search": "needs a search backend; tests/files/test_search.py runs a SearXNG-compatible stand-in",
    }

    def examples(self) -> list[tuple[str, dict[str, object]]]:
        return [
            ("file_write", {"path": "notes/a.txt", "content": "one\ntwo\n", "create_dirs": True}),
            ("file_read", {"path": "notes/a.txt"}),
            ("file_edit", {"path": "notes/a.txt", "old_string": "two", "new_string": "2"}),
            ("file_ops", {"operation": "search", "pattern": "*.txt", "content_regex": "one"}),
            (
                "apply_patch",
                {"patch": "*** Begin Patch\n*** Update File: notes/a.txt\n@@\n one\n-2\n+two\n*** End Patch"},
            ),
        ]
