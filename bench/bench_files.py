"""file_read of a 1 MB text file through the chokepoint vs a bare ``open().read()`` + JSON encode.

Run: python bench/bench_files.py [N]
Target (aleph-files issue): <= 2x the bare read + encode, measured in the same run.
The call goes through ``rt.tool_service()`` (the scoped chokepoint; file_read is read-only, so the
default tier allows it without approval).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import aleph_files.plugin
from _util import per_call_us, per_call_us_async

import aleph

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        line = "The quick brown fox jumps over the lazy dog; 0123456789 and some more text here.\n"
        (ws / "big.txt").write_text(line * (1024 * 1024 // len(line)))
        size = (ws / "big.txt").stat().st_size
        (ws / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(ws / ".data").as_posix()}"\n')
        rt = aleph.load(ws / "aleph.toml", workspace=ws, plugins=[aleph_files.plugin], entry_points=False, strict=True)
        service = rt.tool_service()

        def bare() -> str:
            with open(ws / "big.txt") as fh:
                return json.dumps({"path": "big.txt", "content": fh.read()})

        base = per_call_us(bare, N)
        numbered = per_call_us_async(lambda: service.execute("file_read", {"path": "big.txt"}), N)
        plain = per_call_us_async(lambda: service.execute("file_read", {"path": "big.txt", "line_numbers": False}), N)
        unscoped = aleph.UnscopedToolService(rt.registry)
        tool_only = per_call_us_async(
            lambda: unscoped.execute("file_read", {"path": "big.txt", "line_numbers": False}), N
        )
        print(f"file size {size} bytes; calls per measurement: {N}; service: rt.tool_service()")
        print(f"bare open().read() + json.dumps          {base / 1000:8.3f} ms")
        print(f"file_read, line_numbers=false            {plain / 1000:8.3f} ms  ratio {plain / base:5.2f}x  (<= 2x)")
        print(f"file_read, numbered lines (default)      {numbered / 1000:8.3f} ms  ratio {numbered / base:5.2f}x")
        print(f"file_read, unscoped service (tool only)  {tool_only / 1000:8.3f} ms  ratio {tool_only / base:5.2f}x")


if __name__ == "__main__":
    main()
