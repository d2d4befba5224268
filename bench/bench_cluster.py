"""aleph-cluster figures on loopback TLS, each against Dask's own ``submit`` of the same work in the same run.

Starts a TLS scheduler and 8 nodes (``aleph cluster node`` processes running aleph-exec), joins them, then:
  node_list p50; node_invoke of ``true`` p50 (the node's default exec: bubblewrap sandbox + transaction, and
  with ``[exec] isolation = "none"`` for the floor of the transport); node_invoke_many over 8 nodes p50;
  node_file push and pull of 100 MB with the sha256 checked; a killed worker mid-call (time to the error).
Baseline: ``await client.submit(run_true, workers=[addr], pure=False)`` where run_true runs ``true`` in a
subprocess on the worker, through a Dask client holding the center's certificate.

    python bench/bench_cluster.py [--rounds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cluster"))
sys.path.insert(0, str(Path(__file__).parent))

from _harness import OPERATOR, Cluster  # noqa: E402
from _util import percentile  # noqa: E402
from aleph_cluster._config import TlsFiles, security_for  # noqa: E402

PLAIN_EXEC = 'exec_tier = "full"\n[exec]\nisolation = "none"\n'  # continues [cluster_node]


def run_true() -> int:
    """The baseline's work on the worker: the same ``true`` the tools run."""
    return subprocess.run(["true"]).returncode


async def timed(fn, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def line(label: str, samples: list[float], base: float, target: str = "") -> None:
    p50, p90 = percentile(samples, 0.5), percentile(samples, 0.9)
    print(f"{label:<46} p50 {p50:8.2f} ms  p90 {p90:8.2f} ms  x{p50 / base:6.1f} of submit  {target}")


async def bench(cluster: Cluster, rounds: int) -> None:
    from distributed import Client

    files = TlsFiles(
        ca_file=cluster.pki / "ca.crt",
        cert_file=cluster.pki / "center" / "center.crt",
        key_file=cluster.pki / "center" / "center.key",
    )
    client = await Client(cluster.scheduler_address, security=security_for(files, "client"), asynchronous=True)
    rt = cluster.center()
    try:
        async with rt:
            ops = rt.tool_service(agent="ops", turn=OPERATOR)
            names = sorted(cluster.nodes)
            for name in names:
                await ops.execute("node_manage", {"action": "join", "node": name, "tags": ["bench"]})
            alice = rt.tool_service(agent="alice")
            info = await client.scheduler.identity(n_workers=-1)
            addr = {w["name"]: a for a, w in info["workers"].items()}

            async def submit_true() -> None:
                await client.submit(run_true, workers=[addr["n0"]], pure=False, allow_other_workers=False)

            async def submit_many() -> None:
                futures = [client.submit(run_true, workers=[addr[n]], pure=False) for n in names]
                await client.gather(futures)

            for _ in range(5):
                await submit_true()
                await alice.execute("node_invoke", {"node": "n0", "command": "true"})
                await alice.execute("node_invoke", {"node": "n1", "command": "true"})
            base = percentile(await timed(submit_true, rounds), 0.5)
            print(f"{'baseline: Dask submit of `true` (1 worker)':<46} p50 {base:8.2f} ms")
            center = await rt.registry.get("node_invoke").tool.handle.get("node_invoke")  # type: ignore[union-attr]
            pool = await center.backend._pool()

            async def bare_rpc() -> None:
                await pool(addr["n1"]).identity()

            line("bare Dask comm round trip to a worker", await timed(bare_rpc, rounds), base, "(no checks, no work)")
            line(
                "node_list (8 nodes)",
                await timed(lambda: alice.execute("node_list", {}), rounds),
                base,
                "target <= 50 ms",
            )
            inv = await timed(lambda: alice.execute("node_invoke", {"node": "n0", "command": "true"}), rounds)
            line("node_invoke `true`, bwrap + transaction", inv, base, "target <= 30 ms")
            inv_plain = await timed(lambda: alice.execute("node_invoke", {"node": "n1", "command": "true"}), rounds)
            line("node_invoke `true`, node tier full, no sandbox", inv_plain, base, "(checks + exec, no sandbox)")
            many_base = percentile(await timed(submit_many, max(10, rounds // 3)), 0.5)
            print(f"{'baseline: Dask submit of `true` on 8 workers':<46} p50 {many_base:8.2f} ms")
            many = await timed(
                lambda: alice.execute("node_invoke_many", {"tag": "bench", "command": "true"}), max(10, rounds // 3)
            )
            line("node_invoke_many `true` over 8 nodes", many, many_base, "target <= 100 ms")

            big = cluster.center_dir / "big.bin"
            with open(big, "wb") as f:
                f.write(os.urandom(100 * 1024 * 1024))
            for direction in ("push", "pull"):
                args = {
                    "node": "n2",
                    "direction": direction,
                    "local_path": "big.bin" if direction == "push" else "back.bin",
                    "remote_path": "big.bin",
                    "overwrite": True,
                    "resume": False,
                }
                best = 0.0
                for _ in range(3):
                    out = (await alice.execute("node_file", args)).value
                    best = max(best, out["mb_per_s"])
                print(f"node_file {direction} 100 MB, sha256 checked: best of 3 {best:7.1f} MB/s   target >= 100 MB/s")

            victim = cluster.nodes["n7"]
            call = asyncio.ensure_future(
                alice.call("node_invoke", {"node": "n7", "command": "sleep 60", "timeout_seconds": 120})
            )
            await asyncio.sleep(1.0)  # a bench, not a test: let the command get going
            killed = time.perf_counter()
            victim.kill()
            result = await call
            print(
                f"killed worker mid-call: error after {(time.perf_counter() - killed) * 1000:.0f} ms "
                f"(timeout 120 s): {result.error_kind}: {(result.error or '')[:90]}"
            )
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = Cluster(Path(tmp))
        try:
            cluster.start_scheduler()
            for i in range(8):
                cluster.start_node(f"n{i}", extra_toml=PLAIN_EXEC if i == 1 else "")
            asyncio.run(bench(cluster, args.rounds))
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
