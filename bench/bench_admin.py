"""What a vault handle adds to a call, and config_audit on a 200-rule configuration.

Run: python bench/bench_admin.py [N]
Targets (issue 29): a ``{{vault:NAME}}`` handle adds <= 50 µs to a call (resolve after the verdict,
decrypt, re-validate the input with the value, scrub the result); ``config_audit`` of a configuration
with 200 rules takes <= 50 ms.
Baseline, same run: the same tool called with the same-length literal value (no handle), so the
difference is what the handle costs; for the audit, the runtime's own ``model_dump`` of the config.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aleph_admin.plugin
from _util import percentile

import aleph
from aleph import ApprovalOutcome, ApprovalResponse, ScriptedRequester

N = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
SECRET = "ghp_" + "x" * 36


@aleph.tool(idempotent=True, concurrent_safe=True, inline=True)
def send_header(authorization: str) -> str:
    """Pretend to send a header; return a short acknowledgement that holds it (so scrubbing has work)."""
    return f"sent {authorization[:8]}… ({len(authorization)} chars) {authorization}"


async def timed(service: aleph.ScopedToolService, payload: dict[str, str]) -> list[float]:
    samples = []
    for _ in range(N):
        start = time.perf_counter()
        result = await service.call("send_header", payload)
        samples.append((time.perf_counter() - start) * 1e6)
        assert result.success, result.error
    return samples


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["XDG_DATA_HOME"] = str(root / "data")
        os.environ["XDG_CONFIG_HOME"] = str(root / "config")
        rules = "\n".join(f'"tool_{i}(src/**)" = "{("allow", "ask", "deny")[i % 3]}"' for i in range(200))
        (root / "aleph.toml").write_text(f"[policies.tool_permissions.overrides]\n{rules}\n")
        rt = aleph.load(root / "aleph.toml", workspace=root, plugins=[aleph_admin.plugin], entry_points=False)
        async with rt:
            rt.register(send_header)
            human = ScriptedRequester(lambda r: ApprovalResponse(ApprovalOutcome.APPROVED))
            alice = rt.tool_service(agent="alice", requester=human)
            stored = await alice.call(
                "vault_store", {"action": "store", "name": "gh", "secret": SECRET, "allow": ["send_header"]}
            )
            assert stored.success, stored.error
            literal = {"authorization": "Bearer " + SECRET}
            handle = {"authorization": "Bearer {{vault:gh}}"}
            await timed(alice, literal)  # warm both paths
            await timed(alice, handle)
            base = await timed(alice, literal)
            with_handle = await timed(alice, handle)
            added = statistics.median(with_handle) - statistics.median(base)
            print(
                f"call, literal value   : median {statistics.median(base):7.1f} µs  p95 {percentile(base, 95):7.1f} µs"
            )
            print(
                f"call, vault handle    : median {statistics.median(with_handle):7.1f} µs  "
                f"p95 {percentile(with_handle, 95):7.1f} µs"
            )
            ratio = statistics.median(with_handle) / statistics.median(base)
            print(f"added by the handle   : {added:7.1f} µs (target <= 50 µs)  ratio {ratio:.2f}x")

            ops = rt.tool_service(agent="ops")
            await ops.call("config_audit", {})
            audit, dump = [], []
            for _ in range(50):
                start = time.perf_counter()
                result = await ops.call("config_audit", {})
                audit.append((time.perf_counter() - start) * 1e3)
                assert result.success, result.error
                start = time.perf_counter()
                rt.config.model_dump(mode="json")
                dump.append((time.perf_counter() - start) * 1e3)
            print(
                f"config_audit, 200 rules: median {statistics.median(audit):6.2f} ms  "
                f"p95 {percentile(audit, 95):6.2f} ms "
                f"(target <= 50 ms); baseline model_dump {statistics.median(dump):.2f} ms, "
                f"ratio {statistics.median(audit) / statistics.median(dump):.1f}x"
            )


if __name__ == "__main__":
    asyncio.run(main())
