"""One ledger story: the cross-check command pairs the center's rows with a node's, and notices tampering."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

from _harness import Cluster, join


def crosscheck_cli(center: Path, node: Path) -> tuple[int, dict]:
    out = subprocess.run(
        [sys.executable, "-m", "aleph_cluster", "crosscheck", str(center), str(node), "--node", "audited", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out.returncode, json.loads(out.stdout)


def test_crosscheck_matches_both_halves_and_fails_on_an_edited_node_row(cluster: Cluster, tmp_path: Path) -> None:
    cluster.start_node("audited")  # its own node: every request it ever saw went through the center's chokepoint
    rt = cluster.center()

    async def run() -> str:
        async with rt:
            await join(rt, "audited")
            s = rt.tool_service(agent="carol")
            await s.execute("node_invoke_many", {"nodes": ["audited", "node-a"], "command": "true"})
            out = await s.execute("node_invoke", {"node": "audited", "command": "echo audit"})
            return out.value["request_id"]

    request_id = asyncio.run(run())
    center = cluster.center_dir / ".aleph-data" / "ledger"
    node = cluster.node_dir("audited") / "data" / "ledger"
    code, report = crosscheck_cli(center, node)
    assert (code, report["ok"], report["matched"]) == (0, True, 2), report  # the fan-out's request and the invoke

    copy = tmp_path / "node-ledger"
    shutil.copytree(node, copy)
    chain = next(p for p in (copy / "chains").glob("cluster-node*.jsonl") if not p.name.endswith(".ckpt.jsonl"))
    lines = chain.read_text().splitlines()
    for i, line in enumerate(lines):
        row = json.loads(line)
        if (row.get("refs") or {}).get("request_id") == request_id:
            row["result_fp"] = "0" * 32  # the node now claims another result
            lines[i] = json.dumps(row, separators=(",", ":"))
    chain.write_text("\n".join(lines) + "\n")
    code, report = crosscheck_cli(center, copy)
    assert code == 1 and not report["ok"]
    assert any(name.startswith("node:cluster-node") for name in report["broken_chains"])
    assert {"request_id": request_id, "differs": "result digest"} in report["mismatched"]
