"""A run as the zygote keeps it: its socket, its descriptors, its processes.

Part of the zygote (:mod:`aleph_exec._zygote`): standard library only, loaded from beside it.
"""

from __future__ import annotations

import json
import os

from _zygote_procs import processes

MARKER = "ALEPH_SANDBOX_RUN"
MARKER_B = MARKER.encode()


def encode(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


class Run:
    """One command started for the host."""

    def __init__(self, sock: int, fds: list[int], stdin: int, cgroup: int, layer: int = -1) -> None:
        self.sock = sock  # the run socket's fd (non-blocking: the host makes it so)
        self.fds = fds  # stdout and stderr
        self.given = (stdin, cgroup, layer)  # until the start: descriptors that came with the request (-1: none)
        self.buf = b""
        self.id = ""
        self.pid = 0
        self.tmp = ""
        self.signalled: set[int] = set()
        self.strays: set[int] | None = None  # what was left when the command was reaped
        self.expect = 0  # bytes of a request still to come on the run socket
        self.offered = b""  # the id of the layer offered ahead that the run goes on (flag p), or b""
        self.net_ns = -1  # the network namespace paired with the run's kit, its door sent already (or -1)

    def send(self, message: dict[str, object]) -> None:
        self.write(encode(message))

    def write(self, line: bytes) -> None:
        data = memoryview(line)
        try:
            while data:
                data = data[os.write(self.sock, data) :]
        except OSError:
            pass  # the host is gone or stuck; the run ends when its socket is read as closed

    def members(self) -> set[int]:
        """Pids of the run's processes in this namespace: its session or group, or its marker."""
        if not self.pid:
            return set()
        needle = f"{MARKER}={self.id}".encode()
        found = set()
        for name in processes():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
                if self.pid in (int(fields[2]), int(fields[3])):
                    found.add(int(name))
                    continue
                with open(f"/proc/{name}/environ", "rb") as fh:
                    if needle in fh.read():
                        found.add(int(name))
            except (OSError, IndexError, ValueError):
                continue
        return found

    def signal(self, signo: int, others: set[int]) -> int:
        """Send ``signo`` (0: none) to the run's processes and ``others``; how many of them still exist.

        Signalled ones count until they are reaped.
        """
        targets = self.members() | others
        if signo:
            for pid in targets:
                try:
                    os.kill(pid, signo)
                except OSError:
                    pass
            self.signalled |= targets
        self.signalled = {pid for pid in self.signalled if os.path.exists(f"/proc/{pid}")}
        return len(targets | self.signalled)
