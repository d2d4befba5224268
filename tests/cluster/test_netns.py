"""Two nodes on "other hosts": each in its own network namespace, reached over veth through a private bridge.

The test makes everything it uses and removes it afterwards: a bridge in this namespace holding
10.231.N.1/24 (the scheduler listens there), two namespaces with one veth each (10.231.N.2 and .3), N picked
from the process id so parallel runs do not collide. Needs root and iproute2; skipped otherwise, except under
CI=true, where a missing piece is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _harness import Cluster, join
from aleph_cluster import crosscheck


def _need(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("CI") == "true":
            pytest.fail(f"netns test cannot run under CI: {why}")
        pytest.skip(why)


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@pytest.fixture
def two_hosts(tmp_path: Path) -> Iterator[tuple[Cluster, dict[str, str]]]:
    _need(os.geteuid() == 0, "needs root to make network namespaces")
    _need(shutil.which("ip") is not None, "needs iproute2 (`ip`)")
    n = 16 + os.getpid() % 200
    tag = f"alc{os.getpid() % 100000}"
    bridge, gateway = f"{tag}br", f"10.231.{n}.1"
    hosts = {"far-a": f"10.231.{n}.2", "far-b": f"10.231.{n}.3"}
    spaces: list[str] = []
    cluster: Cluster | None = None
    try:
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{gateway}/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for i, address in enumerate(hosts.values()):
            ns, outside, inside = f"{tag}-{i}", f"{tag}v{i}", f"{tag}p{i}"
            ip("netns", "add", ns)
            spaces.append(ns)
            ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            ip("link", "set", inside, "netns", ns)
            ip("link", "set", outside, "master", bridge)
            ip("link", "set", outside, "up")
            ip("-n", ns, "addr", "add", f"{address}/24", "dev", inside)
            ip("-n", ns, "link", "set", inside, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        cluster = Cluster(tmp_path / "c")
        cluster.start_scheduler(host=gateway)
        for ns, (name, address) in zip(spaces, hosts.items(), strict=True):
            cluster.start_node(name, prefix=["ip", "netns", "exec", ns], host=address, tags=("far",))
        yield cluster, hosts
    finally:
        if cluster is not None:
            cluster.close()
        for ns in spaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


def test_nodes_in_their_own_network_namespaces_work_as_other_hosts(two_hosts: tuple[Cluster, dict[str, str]]) -> None:
    cluster, hosts = two_hosts
    (cluster.center_dir / "to-far.txt").write_text("across the veth\n")
    rt = cluster.center()

    async def run() -> tuple[dict, dict, dict]:
        async with rt:
            await join(rt, *hosts)
            s = rt.tool_service(agent="alice")
            listed = (await s.execute("node_list", {"tag": "far"})).value
            many = (await s.execute("node_invoke_many", {"tag": "far", "command": "cat /proc/net/dev | wc -l"})).value
            pushed = (
                await s.execute(
                    "node_file",
                    {"node": "far-b", "direction": "push", "local_path": "to-far.txt", "remote_path": "got.txt"},
                )
            ).value
            return listed, many, pushed

    listed, many, pushed = asyncio.run(run())
    assert {n["id"]: n["host"] for n in listed["nodes"]} == hosts
    assert {n["id"]: n["address"].split(":")[1].lstrip("/") for n in listed["nodes"]} == hosts
    assert many["succeeded"] == 2 and many["failed"] == []
    assert (cluster.node_dir("far-b") / "workspace" / "got.txt").read_text() == "across the veth\n"
    assert pushed["size"] == len("across the veth\n")
    report = crosscheck(cluster.center_dir / ".aleph-data" / "ledger", cluster.node_dir("far-b") / "data" / "ledger")
    assert report.ok and len(report.matched) >= 2, report.as_dict()  # the fan-out's request and the push
