"""The contract kit against the cluster family, with a real TLS cluster behind the examples."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import aleph_cluster.plugin
import pytest
from _harness import Cluster
from aleph_cluster._store import NodeStore

import aleph
from aleph.testing import ToolContractTests, isolated_runtime


class TestClusterContract(ToolContractTests):
    plugin = aleph_cluster.plugin
    family = "node"
    no_example: ClassVar[dict[str, str]] = {
        "node_manage": "needs the operator role, which the kit's unscoped service does not bind "
        "(run with an operator turn in test_manage.py)"
    }
    _cluster: ClassVar[Cluster | None] = None
    _joined: ClassVar[dict[str, Any]] = {}

    @pytest.fixture(autouse=True)
    def _with_cluster(self, cluster: Cluster, joined: dict[str, Any]) -> None:
        type(self)._cluster = cluster
        type(self)._joined = joined

    def make_runtime(self, workspace: Path) -> aleph.Aleph:
        """The kit's runtime signs with the center's ledger key and knows the nodes the operator joined."""
        c = self._cluster
        assert c is not None
        ledger = (c.center_dir / ".aleph-data" / "ledger").as_posix()
        rt = isolated_runtime(workspace, self.plugin, config_toml=c.center_toml(f'[ledger]\ndirectory = "{ledger}"\n'))
        store = NodeStore(workspace / ".aleph-data" / "cluster.db")
        for record in self._joined.values():
            store.join(record.name, record.identity_key, list(record.tags))
        store.close()
        (workspace / "kit.txt").write_text("contract kit\n")
        return rt

    def examples(self) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("node_list", {}),
            ("node_invoke", {"node": "node-a", "command": "echo contract"}),
            ("node_invoke_many", {"tag": "kit", "command": "true", "mode": "all"}),
            (
                "node_file",
                {
                    "node": "node-a",
                    "direction": "push",
                    "local_path": "kit.txt",
                    "remote_path": "kit.txt",
                    "overwrite": True,
                },
            ),
        ]
