from __future__ import annotations

from pathlib import Path

import aleph_exec.plugin

from aleph import Aleph
from aleph.testing import ToolContractTests

from .test_tools import ImageProvider


class TestExecContract(ToolContractTests):
    plugin = aleph_exec.plugin
    families = ("bash", "code", "pdf", "image", "exec")
    no_example = {
        "exec_commit": "the approval step aleph-exec asks for itself; a direct call commits nothing",
        "exec_network": "the approval step aleph-exec's egress proxy asks for itself; a direct call opens nothing",
    }

    def make_runtime(self, workspace: Path) -> Aleph:
        import aleph

        (workspace / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(workspace / ".aleph-data").as_posix()}"\n')
        return aleph.load(
            workspace / "aleph.toml",
            workspace=workspace,
            plugins=[self.plugin, ImageProvider()],
            entry_points=False,
            strict=True,
        )

    def examples(self) -> list[tuple[str, dict[str, object]]]:
        return [
            ("bash", {"command": "echo hello > hello.txt && cat hello.txt"}),
            ("code_exec", {"language": "python", "code": "print(sum(range(10)))"}),
            ("code_check", {"checks": ["ruff"]}),
            ("pdf_generate", {"content": "# Title\n\nBody", "output_path": "doc.pdf"}),
            ("image_generate", {"prompt": "a square", "size": "32x32"}),
        ]
