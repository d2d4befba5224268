"""file_read of a 1 MB text file through the chokepoint vs a bare ``open().read()`` + JSON encode.

Run: python bench/bench_files.py [N]
Target (aleph-files issue): <= 2x the bare read + encode, measured in the same run.
Calls go through ``rt.tool_service()`` (the scoped chokepoint; file_read is read-only, so the
default tier allows it without approval) and the result is serialised as the model would get it.
The main runtime raises ``[tools] max_output_chars`` to 4,000,000 so the whole file comes back (the
same content the bare read encodes); with the defaults a read stops at ~99,000 characters with the
offset to continue from, shown on the last line for reference.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import aleph_files.plugin
from _util import per_call_us, per_call_us_async

import aleph

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
ROUNDS = 7


def runtime(ws: Path, name: str, extra: str) -> aleph.Aleph:
    (ws / name).write_text(f'[workspace]\ndata_dir = "{(ws / ".data").as_posix()}"\n{extra}')
    return aleph.load(ws / name, workspace=ws, plugins=[aleph_files.plugin], entry_points=False, strict=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        line = "The quick brown fox jumps over the lazy dog; 0123456789 and some more text here.\n"
        (ws / "big.txt").write_text(line * (1024 * 1024 // len(line)))
        size = (ws / "big.txt").stat().st_size
        rt = runtime(ws, "aleph.toml", "[tools]\nmax_output_chars = 4000000\n")
        service = rt.tool_service()
        default = runtime(ws, "default.toml", "").tool_service()

        def bare() -> str:
            with open(ws / "big.txt") as fh:
                return json.dumps({"path": "big.txt", "content": fh.read()})

        async def read(svc: Any, **extra: object) -> str:
            return (await svc.execute("file_read", {"path": "big.txt", **extra})).text

        whole = json.loads(asyncio.run(read(service)))
        assert (False, 12945) == (whole["truncated"], whole["end_line"]), "the whole file must come back"
        unscoped = aleph.UnscopedToolService(rt.registry)
        calls = {
            "file_read, line_numbers=false          ": lambda: read(service, line_numbers=False),
            "file_read, numbered lines (default)    ": lambda: read(service),
            "file_read, unscoped service            ": lambda: read(unscoped),
            "file_read, default budget (99k chars)  ": lambda: read(default),
        }
        # Rounds alternate the bare read and each call (the machine is shared): medians of per-round ratios.
        bases: list[float] = []
        times: dict[str, list[float]] = {label: [] for label in calls}
        ratios: dict[str, list[float]] = {label: [] for label in calls}
        for _ in range(ROUNDS):
            base = per_call_us(bare, N, repeat=1)
            bases.append(base)
            for label, call in calls.items():
                us = per_call_us_async(call, N, repeat=1)
                times[label].append(us)
                ratios[label].append(us / base)
        print(f"file size {size} bytes, 12,945 lines; {N} calls x {ROUNDS} rounds; result text included")
        print("ratios are medians of rounds that alternate the bare read and the call")
        print(f"bare open().read() + json.dumps          {statistics.median(bases) / 1000:8.3f} ms")
        for label in calls:
            us, ratio = statistics.median(times[label]), statistics.median(ratios[label])
            print(f"{label}  {us / 1000:8.3f} ms  ratio {ratio:5.2f}x  (target <= 2x)")


if __name__ == "__main__":
    main()
