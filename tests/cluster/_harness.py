"""A real TLS cluster for the tests: certificates, a scheduler and node processes, a center runtime.

Everything runs as subprocesses of the test (``python -m aleph_cluster scheduler|node``) on loopback, or,
for the netns test, inside network namespaces the test makes. Readiness is the line each process prints
once it listens; nothing waits on a fixed sleep.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import aleph_cluster.plugin
from aleph_cluster import init_ca, issue
from aleph_cluster._cli import _center_key

import aleph
from aleph.testing import isolated_runtime

READY_SECONDS = 60.0


class Proc:
    """A child process whose stdout lines are collected by a thread (so waiting never blocks forever)."""

    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        self.p = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put("")  # EOF marker

    def wait_for(self, pattern: str, timeout: float = READY_SECONDS) -> re.Match[str]:
        """The first output line matching ``pattern``; fails with the process's output if it exits first."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.argv} did not print {pattern!r} in {timeout}s:\n{''.join(self.log)}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line == "":
                raise AssertionError(f"{self.argv} exited ({self.p.wait()}) before {pattern!r}:\n{''.join(self.log)}")
            m = rx.search(line)
            if m:
                return m

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group and reap it."""
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
        self._pump_thread.join(timeout=30)
        if self.p.stdout is not None:
            self.p.stdout.close()


class Cluster:
    """One CA, one scheduler, any number of nodes, and the center's configuration."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pki = root / "pki"
        self.center_dir = root / "center"
        self.center_dir.mkdir(parents=True)
        (self.center_dir / "aleph.toml").write_text(
            f'[workspace]\ndata_dir = "{(self.center_dir / ".aleph-data").as_posix()}"\n'
        )
        init_ca(self.pki, hosts=["127.0.0.1", "localhost"])
        self.center_key = _center_key(str(self.center_dir / "aleph.toml"))
        self.procs: list[Proc] = []
        self.nodes: dict[str, Proc] = {}
        self.scheduler_address = ""

    def start_scheduler(self, host: str = "127.0.0.1", prefix: list[str] | None = None) -> str:
        proc = self.spawn(
            [
                *(prefix or []),
                sys.executable,
                "-m",
                "aleph_cluster",
                "scheduler",
                str(self.pki),
                "--host",
                host,
                "--port",
                "0",
            ],
            cwd=self.root,
        )
        self.scheduler_address = proc.wait_for(r"scheduler at (tls://\S+)").group(1)
        return self.scheduler_address

    def spawn(self, argv: list[str], *, cwd: Path) -> Proc:
        proc = Proc(argv, cwd=cwd)
        self.procs.append(proc)
        return proc

    def node_dir(self, name: str) -> Path:
        return self.root / "nodes" / name

    def write_node(
        self,
        name: str,
        *,
        tags: tuple[str, ...] = (),
        extra_toml: str = "",
        host: str | None = None,
        scheduler: str | None = None,
    ) -> Path:
        """A node's own directory: its certificate, its aleph.toml (policy), its workspace and data dir."""
        d = self.node_dir(name)
        (d / "workspace").mkdir(parents=True, exist_ok=True)
        issue(self.pki, name, hosts=[host or "127.0.0.1"])
        host_line = f'host = "{host}"\n' if host else ""
        (d / "aleph.toml").write_text(
            f'[workspace]\ndata_dir = "{(d / "data").as_posix()}"\n'
            f'[cluster_node]\nname = "{name}"\nscheduler = "{scheduler or self.scheduler_address}"\n'
            f'center_key = "{self.center_key}"\ntls_dir = "{self.pki.as_posix()}"\n'
            f"tags = {list(tags)!r}\n{host_line}".replace("'", '"')
            + extra_toml
        )
        return d

    def start_node(self, name: str, *, prefix: list[str] | None = None, **kwargs: object) -> Proc:
        d = self.write_node(name, **kwargs)  # type: ignore[arg-type]
        proc = self.spawn(
            [
                *(prefix or []),
                sys.executable,
                "-m",
                "aleph_cluster",
                "node",
                "--config",
                str(d / "aleph.toml"),
                "--workspace",
                str(d / "workspace"),
            ],
            cwd=d,
        )
        proc.wait_for(rf"node {re.escape(name)} at tls://")
        self.nodes[name] = proc
        return proc

    def center_toml(self, extra: str = "") -> str:
        return (
            f'[cluster]\nscheduler = "{self.scheduler_address}"\ntls_dir = "{self.pki.as_posix()}"\n'
            # the auto tier asks before any remote command (its effects cannot be held back here); these
            # tests act as a deployment that chose the full tier for the cluster and judges by rules instead
            f'call_timeout_seconds = 30\n[policies]\nexec_tier = "full"\n{extra}'
        )

    def center(self, extra: str = "", *plugins: object) -> aleph.Aleph:
        """The center's runtime: the cluster plugin (and ``plugins``) over the center's workspace and keys."""
        return isolated_runtime(self.center_dir, aleph_cluster.plugin, *plugins, config_toml=self.center_toml(extra))

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.kill(signal.SIGTERM)


OPERATOR = aleph.TurnContext(caller_role="operator")


async def join(rt: aleph.Aleph, *names: str, tags: list[str] | None = None) -> None:
    """Join ``names`` as an operator."""
    service = rt.tool_service(agent="ops", turn=OPERATOR)
    for name in names:
        args: dict[str, object] = {"action": "join", "node": name}
        if tags is not None:
            args["tags"] = tags
        await service.execute("node_manage", args)
