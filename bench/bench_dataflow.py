"""Data-flow rules (issue 37): what the sink check costs, and what the rules stop on AgentDojo.

Run: python bench/bench_dataflow.py [--cost-only] [--suite NAME ...]

1. Cost. A sink call (``send_money``) in a session that tracks 1,000 untrusted values, against the
   same call with the data-flow rules off, measured in turns in one run. Target: <= 10 µs added.
   The same for a call of a tool that is not a sink (one attribute test: the target is ~0).
2. AgentDojo (needs ``agentdojo``; see bench/agentdojo_replay.py). Per suite and mode: utility (user
   tasks whose ground truth runs unasked, the prompt given as trusted context) and attack success
   (injection ground truth run unasked right after the injected text was read), over the pairs whose
   injection makes a sink call; pairs without one are printed apart. Modes: no rules; the naive rule
   (the issue's baseline: whole third-party outputs untrusted, identifiers only); the rules (third-party
   fields untrusted, ``[flow.tainted]`` for the sinks without identifiers: bookings, events, deletions,
   updates); the same with ``[flow.tainted]`` for every sink; and the rules with ``named_sources = true``.
   This is an upper bound for a model that follows the reference solutions, not a model evaluation.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from _util import alternating_us_async

import aleph

TRACKED = 1_000
N = 20_000


def _registry(sink: bool) -> aleph.ToolRegistry:
    reg = aleph.ToolRegistry()

    async def send_money(recipient: str, amount: float, subject: str = "") -> str:
        return "sent"

    async def read_inbox() -> str:
        return "ok"

    reg.register(aleph.tool(name="send_money", description="Pay someone.", sink=sink)(send_money))
    reg.register(aleph.tool(name="read_note", description="Read a note.", idempotent=True)(read_inbox))
    return reg


def cost() -> None:
    """µs added by the data-flow check to a sink call and to a non-sink call, 1,000 tracked values."""
    from aleph._chokepoint._scoped import Chokepoint, ScopedToolService
    from aleph._flow._gate import DataFlow, state_key
    from aleph._flow._state import Origin

    def service(flow: bool, sink: bool) -> ScopedToolService:
        cp = Chokepoint(_registry(sink), flow=DataFlow() if flow else None)
        svc = ScopedToolService(cp, agent="bench", turn=aleph.TurnContext(session_key="s"))
        if flow:
            state = cp.flow.tracker.state(state_key(svc.principal))  # type: ignore[union-attr]
            text = " ".join(
                f"GB{10 + i % 89:02d}NWBK{60161331926800 + i} mail{i}@example.org" for i in range(TRACKED // 2)
            )
            state.saw_untrusted(text, Origin("text", "read_email", "1", "e-mail"))
        return svc

    args = {"recipient": "DE89370400440532013000", "amount": 12.5, "subject": "Rent for March, flat 3"}
    off, on = service(False, True), service(True, True)
    tracked = len(on._cp.flow.tracker.state(state_key(on.principal)).untrusted)  # type: ignore[union-attr]
    plain_off, plain_on = service(False, False), service(True, False)
    base, sink, plain_base, plain = alternating_us_async(
        [
            lambda: off.execute("send_money", args),
            lambda: on.execute("send_money", args),
            lambda: plain_off.execute("send_money", args),
            lambda: plain_on.execute("send_money", args),
        ],
        N,
    )
    print(f"sink call, rules off:                 {base:7.2f} µs")
    added = sink - base
    print(f"sink call, {tracked} tracked values:      {sink:7.2f} µs   added {added:5.2f} µs (target <= 10)")
    extra = plain - plain_base
    print(f"non-sink call, rules off / on:        {plain_base:7.2f} / {plain:7.2f} µs   added {extra:5.2f} µs")


def agentdojo(suites: list[str]) -> None:
    """The replay table."""
    sys.path.insert(0, str(Path(__file__).parent))
    from agentdojo_replay import MODES, run_suite

    print()
    print("AgentDojo v1.2.2 ground-truth replay (no model): an upper bound for a model that follows the reference")
    print("solutions, not a model evaluation. attacks = injection ground truth run unasked / gateable pairs.")
    header = f"{'suite':10} {'mode':12} {'utility':>14} {'attacks':>16} {'no sink call (succeeded)':>26} {'s':>5}"
    print(header)
    for suite in suites:
        for mode in ("off", "naive", "rules", "strict", "named"):
            start = time.perf_counter()
            with tempfile.TemporaryDirectory() as root:
                res = asyncio.run(run_suite(suite, mode, root=Path(root)))
            took = time.perf_counter() - start
            utility = f"{res.useful}/{res.user_tasks} {res.utility:4.0%}"
            attacks = f"{res.succeeded}/{res.gateable} {res.attack_rate:5.1%}"
            nosink = f"{res.no_sink} ({res.no_sink_succeeded})"
            print(f"{suite:10} {mode:12} {utility:>14} {attacks:>16} {nosink:>26} {took:5.0f}")
        sys.stdout.flush()
    print("modes:", "; ".join(f"{k} = {m.name}" for k, m in MODES.items() if k != "identifiers"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost-only", action="store_true")
    parser.add_argument("--suite", action="append", choices=["workspace", "travel", "banking", "slack"])
    ns = parser.parse_args()
    cost()
    if not ns.cost_only:
        agentdojo(ns.suite or ["banking", "slack", "travel", "workspace"])


if __name__ == "__main__":
    main()
