"""One loopback TLS cluster per test session: a scheduler and nodes node-a and node-b, joined by an operator."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from _harness import Cluster, join
from aleph_cluster._store import NodeStore

STRICT_NODE = """
[agents.alice.tool_permissions]
default = "allow"
overrides = { "bash(rm *)" = "deny", "bash(curl *)" = "deny" }
[agents.carol.tool_permissions.overrides]
node_file = "deny"
[agents.dave.tool_permissions.overrides]
"node_file(direction=push)" = "deny"
"""


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        c.start_scheduler()
        # node-b's own policy refuses `rm` and `curl` for alice and file copies to carol (pushes to dave),
        # whatever the center allows
        c.start_node("node-a", tags=("kit", "web"))
        c.start_node("node-b", tags=("kit",), extra_toml=STRICT_NODE)
        rt = c.center()

        async def admit() -> None:
            async with rt:
                await join(rt, "node-a", "node-b")

        asyncio.run(admit())
        yield c
    finally:
        c.close()


@pytest.fixture(scope="session")
def joined(cluster: Cluster) -> dict[str, object]:
    """The records the operator's join pinned (name -> NodeRecord)."""
    store = NodeStore(cluster.center_dir / ".aleph-data" / "cluster.db")
    try:
        return dict(store.all())
    finally:
        store.close()
