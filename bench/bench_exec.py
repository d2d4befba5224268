"""bash ``true`` through the full chokepoint and the sandbox vs a bare ``subprocess.run(["bash", "-c", "true"])``.

Run: python bench/bench_exec.py [N]   (``commit``: only the commit rows; ``typical``: git status and pytest;
``egress``: only the egress proxy rows, issue #35's two; ``transaction``: the sandbox alone on a layer)
Targets, measured against the bare spawn in the same run: <= 2.0x where the call runs as a transaction
(bubblewrap: a copy-on-write layer per call, its changeset read and judged); <= 1.5x without one.
With bubblewrap, the first run of a workspace starts its zygote (one bwrap kept for the workspace);
the ratios measure the runs after it, and the breakdown prints that one-time start separately.
The call goes through ``rt.tool_service(tier="full")`` (the scoped chokepoint: permissions, tier, the
command-policy floor, ledger) so that no approval is needed for an unattended benchmark.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import aleph_exec.plugin
from _util import per_call_us, per_call_us_async

import aleph

N = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 20
ROUNDS = 5
SETTLE_S = 0.005

MODES = {
    "bwrap + cgroup (auto, default here; network proxied)": '[exec]\nisolation = "auto"\n',
    "bwrap + cgroup, network none": '[exec]\nisolation = "auto"\nnetwork = "none"\n',
    "bwrap, no cgroup": '[exec]\nisolation = "auto"\ncgroup = "off"\n',
    "no bwrap, cgroup (zygote on the host)": '[exec]\nisolation = "none"\n',
    "no bwrap, no cgroup (zygote on the host)": '[exec]\nisolation = "none"\ncgroup = "off"\n',
}


def breakdown(bare: float) -> None:
    """Where the time goes in the default mode: spawn options, the sandbox alone, the unscoped service."""
    from aleph_exec import WorkspaceSandbox
    from aleph_exec._config import ExecConfig

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        session = per_call_us(lambda: subprocess.run(["bash", "-c", "true"], start_new_session=True), N, repeat=3)
        preexec = per_call_us(
            lambda: subprocess.run(["bash", "-c", "true"], start_new_session=True, preexec_fn=lambda: None), N, repeat=3
        )
        print(
            f"  spawn with start_new_session                     {session / 1000:8.2f} ms  ratio {session / bare:5.2f}x"
        )
        print(
            f"  spawn with a preexec_fn (fork instead of vfork)  {preexec / 1000:8.2f} ms  ratio {preexec / bare:5.2f}x"
        )
        bwrap_sandbox = WorkspaceSandbox(ws, ExecConfig(cgroup="off"))
        if bwrap_sandbox.bwrap is not None:

            def bwrap_once() -> None:
                # Fresh each time: the seccomp programs are memfds that bubblewrap reads to their end.
                prefix, stage, fds = bwrap_sandbox._bwrap_argv(ws)
                state = bwrap_sandbox._state
                try:
                    subprocess.run([*prefix, "bash", "-c", "true"], check=True, preexec_fn=stage, pass_fds=fds)
                finally:
                    for fd in fds:
                        if state is None or state.userns is None or fd != state.userns.fd:
                            os.close(fd)

            bw = per_call_us(bwrap_once, N, repeat=3)
            print(f"  bare bwrap with the sandbox's arguments          {bw / 1000:8.2f} ms  ratio {bw / bare:5.2f}x")
            first = statistics.median(first_run_ms(ws) for _ in range(5))
            print(f"  first run in a workspace (zygote start), once    {first:8.2f} ms  (not in the ratios above)")
        for label, cfg in (
            ("bwrap+cgroup", ExecConfig()),
            ("bwrap, no cgroup", ExecConfig(cgroup="off")),
            ("none, no cgroup", ExecConfig(isolation="none", cgroup="off")),
        ):
            sandbox = WorkspaceSandbox(ws, cfg)
            us = per_call_us_async(partial(sandbox.arun, ["bash", "-c", "true"], cwd=ws, timeout=30), N, repeat=3)
            sandbox.close()
            print(f"  WorkspaceSandbox.arun alone, {label:<19} {us / 1000:8.2f} ms  ratio {us / bare:5.2f}x")
        (ws / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(ws / ".data").as_posix()}"\n')
        rt = aleph.load(ws / "aleph.toml", workspace=ws, plugins=[aleph_exec.plugin], entry_points=False, strict=True)
        unscoped = aleph.UnscopedToolService(rt.registry)
        scoped = rt.tool_service(tier="full")

        async def alternate() -> tuple[list[float], list[float]]:
            # One event loop, the two services called alternately: per-call times, same conditions.
            bare_calls: list[float] = []
            full_calls: list[float] = []
            for _ in range(3):
                await scoped.execute("bash", {"command": "true"})
            for _ in range(N * ROUNDS):
                for service, into in ((unscoped, bare_calls), (scoped, full_calls)):
                    start = time.perf_counter()
                    await service.execute("bash", {"command": "true"})
                    into.append((time.perf_counter() - start) * 1e6)
            return bare_calls, full_calls

        unscoped_calls, scoped_calls = asyncio.run(alternate())
        # The ledger row of a scoped call is written by a background thread while the next call runs, so
        # alternation spreads it over both services: compare the two figures, not their difference.
        for label, calls in (("UnscopedToolService", unscoped_calls), ("rt.tool_service(tier='full')", scoped_calls)):
            us = statistics.median(calls)
            print(f"  bash via {label:<28} alternating {us / 1000:8.2f} ms  ratio {us / bare:5.2f}x")
        asyncio.run(rt.aclose())


def first_run_ms(ws: Path) -> float:
    """The first run of a fresh sandbox, which starts its zygote (one bwrap for the workspace)."""
    from aleph_exec import WorkspaceSandbox
    from aleph_exec._config import ExecConfig

    sandbox = WorkspaceSandbox(ws, ExecConfig())
    start = time.perf_counter()
    sandbox.run(["bash", "-c", "true"], cwd=ws, timeout=30)
    elapsed = (time.perf_counter() - start) * 1000
    sandbox.close()
    return elapsed


def bare_call() -> None:
    subprocess.run(["bash", "-c", "true"], check=True)


def measure(toml: str) -> tuple[float, float, float, str]:
    """Per-call medians (ms) of the bare spawn and the tool call, alternated call by call in one event loop.

    Alternating single calls puts both under the same conditions on a shared machine; medians keep a
    stray pause (a collection, a neighbour's burst) from moving the figure.
    """
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{(ws / ".data").as_posix()}"\n{toml}')
        rt = aleph.load(ws / "aleph.toml", workspace=ws, plugins=[aleph_exec.plugin], entry_points=False, strict=True)
        service = rt.tool_service(tier="full")

        async def alternate() -> tuple[list[float], list[float], str]:
            first = await service.call("bash", {"command": "true"})
            assert first.success, first.error
            for _ in range(5):
                await service.execute("bash", {"command": "true"})
            bare: list[float] = []
            tool: list[float] = []
            for _ in range(N * ROUNDS):
                # An untimed pause before each call, as an agent's calls come between model turns: what a
                # call leaves to do in the background (the ledger row, the zygote's clean-up) is done,
                # and neither measurement runs beside the other's leftovers.
                await asyncio.sleep(SETTLE_S)
                start = time.perf_counter()
                bare_call()
                bare.append(time.perf_counter() - start)
                await asyncio.sleep(SETTLE_S)
                start = time.perf_counter()
                await service.execute("bash", {"command": "true"})
                tool.append(time.perf_counter() - start)
            return bare, tool, str(json.loads(first.output or "{}").get("isolation"))

        bare, tool, isolation = asyncio.run(alternate())
        asyncio.run(rt.aclose())
        b, t = statistics.median(bare) * 1000, statistics.median(tool) * 1000
        return b, t, t / b, isolation


def commit_rows(files: int = 1000, rounds: int = 7) -> None:
    """Committing a changeset of ``files`` new files (target <= 50 ms): read + judge + commit, and each part.

    Through :class:`Transactions` (layer placement, read, judge, journal, undo store, apply), with the data
    directory on the workspace's filesystem and on another one (/dev/shm, a tmpfs, when it is one): the
    layer is placed in the workspace's ``.aleph-tx`` either way, so a commit renames. The upper directory
    is written the way overlayfs leaves new files, so the figure needs no mount. The last rows are the
    baseline of the old placement, a layer on another filesystem than the workspace (copied, then renamed).
    The journal is fsynced, files are not.
    """
    from aleph_exec._changeset import read_changeset
    from aleph_exec._commit import commit
    from aleph_exec._config import ExecConfig
    from aleph_exec._decision import DEFAULT_PROTECTED, ProtectedPaths, decide
    from aleph_exec._transaction import Transactions

    disk = Path(tempfile.gettempdir())
    shm = Path("/dev/shm")
    other = shm if shm.is_dir() and shm.stat().st_dev != disk.stat().st_dev else None
    places: dict[str, Path | None] = {"data dir on the workspace's fs": None}
    if other is not None:
        places["data dir on another fs (tmpfs)"] = other
    else:
        print("commit: /dev/shm is not another filesystem here: the cross-filesystem rows are left out")

    def workspace(tmp: str) -> Path:
        ws = Path(tmp) / "ws"
        (ws / "src").mkdir(parents=True)
        for i in range(20):
            (ws / "src" / f"old{i}.py").write_text("x = 1\n")
        return ws

    def fill(upper: Path, into: str) -> None:
        for i in range(files):
            d = upper / into.format(i % 10)
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i}.py").write_text(f"value = {i}\n")

    def report(label: str, parts: dict[str, list[float]]) -> None:
        med = {k: statistics.median(v) for k, v in parts.items()}
        print(
            f"commit {files} new files, {label:<58} {med['total']:7.2f} ms (min {min(parts['total']):.2f})  "
            f"read+hash {med['read']:.2f}, judge {med['judge']:.2f}, journal+apply {med['commit']:.2f}  "
            "(target <= 50 ms)"
        )

    floor: list[float] = []
    for _ in range(rounds):
        # The floor on this machine now: renaming 1,000 small files, one call each, with nothing else.
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "a", Path(tmp) / "b"
            src.mkdir()
            dst.mkdir()
            for i in range(files):
                (src / f"f{i}").write_text("x")
            t0 = time.perf_counter()
            for i in range(files):
                os.rename(src / f"f{i}", dst / f"f{i}")
            floor.append((time.perf_counter() - t0) * 1000)
    print(f"floor: {files} bare os.rename calls into one directory {statistics.median(floor):7.2f} ms (same run)")
    for into, what in (("gen/d{}", "new directories"), ("src", "into src/")):
        for label, data_on in places.items():
            parts: dict[str, list[float]] = {"read": [], "judge": [], "commit": [], "total": []}
            for r in range(rounds):
                with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=data_on) as data:
                    txn = Transactions(workspace(tmp), Path(data), ExecConfig())
                    layer = txn.new_layer()
                    fill(layer / "upper", into)
                    t0 = time.perf_counter()
                    cs = txn.read(layer)
                    t1 = time.perf_counter()
                    decision = txn.judge(cs)
                    t2 = time.perf_counter()
                    assert decision.action == "commit", decision
                    txn.commit(cs, "bench", f"c{r}", cs.digest())
                    t3 = time.perf_counter()
                    txn.discard(layer)
                    txn.close()
                for key, value in (("read", t1 - t0), ("judge", t2 - t1), ("commit", t3 - t2), ("total", t3 - t0)):
                    parts[key].append(value * 1000)
            report(f"{what}, {label}", parts)
        if other is None:
            continue
        # Baseline: the old placement, the layer beside a data directory on another filesystem (a copy per file).
        protected = ProtectedPaths(DEFAULT_PROTECTED)
        parts = {"read": [], "judge": [], "commit": [], "total": []}
        for _ in range(rounds):
            with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory(dir=other) as layer:
                ws = workspace(tmp)
                upper = Path(layer) / "upper"
                fill(upper, into)
                t0 = time.perf_counter()
                cs = read_changeset(upper, ws)
                t1 = time.perf_counter()
                decision = decide(cs, protected)
                t2 = time.perf_counter()
                commit(cs, journal_dir=Path(tmp) / "journal", undo_dir=Path(tmp) / "undo" / "c", meta={})
                t3 = time.perf_counter()
            for key, value in (("read", t1 - t0), ("judge", t2 - t1), ("commit", t3 - t2), ("total", t3 - t0)):
                parts[key].append(value * 1000)
        report(f"{what}, baseline: layer on another fs (copy)", parts)


def measure_transaction() -> tuple[float, float, float, float, str]:
    """The sandbox alone, one run of ``bash -c true`` on a fresh copy-on-write layer (``layer=``) per call.

    Per-call medians (ms) of the bare spawn, a run without a layer, a run with one and a run on a layer
    offered ahead (``offer_layer``: the zygote mounts its overlay during the untimed pause before, as
    it does for the layers Transactions makes between calls), alternated in one event loop; the layer
    directory is made before the timer starts (as a caller makes it beforehand).
    """
    from aleph_exec import WorkspaceSandbox
    from aleph_exec._config import ExecConfig

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        sandbox = WorkspaceSandbox(ws, ExecConfig())
        reason = sandbox.transaction_support()
        if reason is not None:
            sandbox.close()
            return 0.0, 0.0, 0.0, 0.0, f"no transactions here: {reason}"

        async def alternate() -> tuple[list[float], list[float], list[float], list[float]]:
            bare: list[float] = []
            plain: list[float] = []
            layered: list[float] = []
            offered: list[float] = []
            argv = ["bash", "-c", "true"]
            for i in range(N * ROUNDS + 5):
                layer = Path(tmp) / f"layer{i}"
                layer.mkdir()
                await asyncio.sleep(SETTLE_S)
                start = time.perf_counter()
                bare_call()
                bare.append(time.perf_counter() - start)
                await asyncio.sleep(SETTLE_S)
                start = time.perf_counter()
                await sandbox.arun(argv, cwd=ws, timeout=30)
                plain.append(time.perf_counter() - start)
                await asyncio.sleep(SETTLE_S)
                start = time.perf_counter()
                result = await sandbox.arun(argv, cwd=ws, timeout=30, layer=layer)
                layered.append(time.perf_counter() - start)
                assert result.transaction and result.exit_code == 0, result.stderr
                ahead = Path(tmp) / f"ahead{i}"
                ahead.mkdir()
                sandbox.offer_layer(ahead)
                await asyncio.sleep(SETTLE_S)
                start = time.perf_counter()
                result = await sandbox.arun(argv, cwd=ws, timeout=30, layer=ahead)
                offered.append(time.perf_counter() - start)
                assert result.transaction and result.exit_code == 0, result.stderr
            return bare[5:], plain[5:], layered[5:], offered[5:]

        bare, plain, layered, offered = asyncio.run(alternate())
        sandbox.close()
        b, p, t, o = (statistics.median(x) * 1000 for x in (bare, plain, layered, offered))
        return b, p, t, o, ""


def transaction_rows() -> None:
    """The sandbox with and without a per-run overlay (the transaction's run; its commit is measured apart)."""
    bare, plain, layered, offered, note = measure_transaction()
    if note:
        print(f"sandbox + transaction: {note}")
        return
    print(f"{'sandbox.arun, no layer':<50} {plain:8.2f} ms  bare {bare:5.2f} ms  ratio {plain / bare:5.2f}x")
    print(
        f"{'sandbox.arun, layer= (copy-on-write overlay)':<50} {layered:8.2f} ms  bare {bare:5.2f} ms  "
        f"ratio {layered / bare:5.2f}x"
    )
    print(
        f"{'sandbox.arun, layer= mounted ahead (offer_layer)':<50} {offered:8.2f} ms  bare {bare:5.2f} ms  "
        f"ratio {offered / bare:5.2f}x  (what a tool call's run costs; target <= 2.0x with the chokepoint)"
    )


def typical_tool_rows(rounds: int = 10) -> None:
    """``git status`` and ``python -m pytest -q`` on a small repository, with and without transactions.

    Through ``rt.tool_service(tier="full")``; per-call medians. ``git status`` refreshes ``.git/index``
    and pytest writes ``__pycache__`` and ``.pytest_cache``: in a transaction those are a changeset that
    is read, judged and committed on every call, which is part of what the figure shows.
    """
    import shutil

    if shutil.which("git") is None:
        print("typical commands: git is not installed")
        return
    for label, command in (("git status", "git status --short"), ("python -m pytest -q", "python3 -m pytest -q")):
        row = []
        for toml in ("[exec]\ntransactions = true\n", "[exec]\ntransactions = false\n"):
            with tempfile.TemporaryDirectory() as tmp:
                ws = Path(tmp) / "repo"
                (ws / "src").mkdir(parents=True)
                for i in range(30):
                    (ws / "src" / f"m{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
                (ws / "test_m.py").write_text("from src.m1 import f1\n\n\ndef test_f():\n    assert f1(1) == 2\n")
                (ws / "src" / "__init__.py").write_text("")
                git = ["git", "-c", "user.email=b@example.com", "-c", "user.name=bench"]
                subprocess.run([*git, "init", "-q"], cwd=ws, check=True)
                subprocess.run([*git, "add", "-A"], cwd=ws, check=True)
                subprocess.run([*git, "commit", "-qm", "init"], cwd=ws, check=True)
                data = (Path(tmp) / "data").as_posix()
                (ws / "aleph.toml").write_text(f'[workspace]\ndata_dir = "{data}"\n{toml}')
                rt = aleph.load(
                    ws / "aleph.toml", workspace=ws, plugins=[aleph_exec.plugin], entry_points=False, strict=True
                )
                service = rt.tool_service(tier="full")

                async def calls(service: Any, command: str) -> tuple[list[float], dict[str, Any]]:
                    times, last = [], {}
                    for i in range(rounds + 2):
                        start = time.perf_counter()
                        out = await service.execute("bash", {"command": command})
                        if i >= 2:
                            times.append(time.perf_counter() - start)
                        last = json.loads(out.text)
                    return times, last

                times, last = asyncio.run(calls(service, command))
                asyncio.run(rt.aclose())
                status = (last.get("changes") or {}).get("status", "-")
                row.append(f"{statistics.median(times) * 1000:7.1f} ms (transaction {last['transaction']}, {status})")
        print(f"{label:<22} {row[0]}   without: {row[1]}")


def typical_rows() -> None:
    """``git status`` and ``python -m pytest -q`` on a small repository, in the sandbox with and without a layer."""
    from aleph_exec import WorkspaceSandbox
    from aleph_exec._config import ExecConfig

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "src").mkdir(parents=True)
        for i in range(40):
            (ws / "src" / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
        (ws / "test_small.py").write_text(
            "from src.m1 import f1\n\n\ndef test_one():\n    assert f1() == 1\n\n\ndef test_two():\n    assert 2\n"
        )
        (ws / "src" / "__init__.py").write_text("")
        git = ["git", "-c", "user.email=b@b", "-c", "user.name=b"]
        subprocess.run([*git, "init", "-q", str(ws)], check=True)
        subprocess.run([*git, "-C", str(ws), "add", "-A"], check=True)
        subprocess.run([*git, "-C", str(ws), "commit", "-qm", "one"], check=True)
        sandbox = WorkspaceSandbox(ws, ExecConfig())
        layered = sandbox.transaction_support() is None
        commands = {
            "git status": ["git", "status", "--short"],
            "python -m pytest -q": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        }
        for label, argv in commands.items():
            plain, with_layer = [], []
            for i in range(7):
                start = time.perf_counter()
                sandbox.run(argv, cwd=ws, timeout=120)
                plain.append(time.perf_counter() - start)
                if layered:
                    layer = Path(tmp) / f"layer-{label.split()[0]}-{i}"
                    layer.mkdir()
                    start = time.perf_counter()
                    result = sandbox.run(argv, cwd=ws, timeout=120, layer=layer)
                    with_layer.append(time.perf_counter() - start)
                    assert result.transaction, result.stderr
            p = statistics.median(plain[1:]) * 1000
            row = f"  {label:<22} in the sandbox {p:8.2f} ms"
            if with_layer:
                t = statistics.median(with_layer[1:]) * 1000
                row += f"   on a layer {t:8.2f} ms  (+{t - p:.2f} ms)"
            print(row)
        sandbox.close()


def egress_rows(size: int = 1024 * 1024) -> None:
    """``curl`` of a 1 MB file through the egress proxy (a bash call, network proxied) vs the same ``curl`` bare.

    The file comes from ``python -m http.server`` in a process of its own on loopback, named
    ``files.example`` for the proxy (``[exec.network] hosts``). Target: <= 1.3x.
    """
    import shlex
    import shutil

    if shutil.which("curl") is None:
        print("egress: curl is not installed")
        return
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        site.mkdir()
        (site / "one.bin").write_bytes(os.urandom(size))
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", "0", "-b", "127.0.0.1", "-d", str(site)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline().split("port ")[1].split()[0])  # "Serving HTTP on ... port N ..."
            ws = Path(tmp) / "ws"
            ws.mkdir()
            toml = (
                f'[workspace]\ndata_dir = "{(Path(tmp) / "data").as_posix()}"\n'
                '[exec.network]\nallow = ["files.example"]\nprivate_hosts = ["files.example"]\n'
                'hosts = { "files.example" = "127.0.0.1" }\n'
            )
            (ws / "aleph.toml").write_text(toml)
            rt = aleph.load(
                ws / "aleph.toml", workspace=ws, plugins=[aleph_exec.plugin], entry_points=False, strict=True
            )
            service = rt.tool_service(tier="full")
            # The same sandbox without network: what a run's own network namespace and door cost on top.
            ws_none = Path(tmp) / "ws-none"
            ws_none.mkdir()
            (ws_none / "aleph.toml").write_text(
                f'[workspace]\ndata_dir = "{(Path(tmp) / "data-none").as_posix()}"\n[exec]\nnetwork = "none"\n'
            )
            rt_none = aleph.load(
                ws_none / "aleph.toml", workspace=ws_none, plugins=[aleph_exec.plugin], entry_points=False, strict=True
            )
            service_none = rt_none.tool_service(tier="full")
            bare_argv = ["curl", "-sS", "-o", "/dev/null", f"http://127.0.0.1:{port}/one.bin"]
            command = f"curl -sS -o /dev/null http://files.example:{port}/one.bin"

            sandbox = rt.registry.get("bash").tool.sandbox  # type: ignore[union-attr]
            sandboxed = ["curl", "-sS", "-o", "/dev/null", f"http://files.example:{port}/one.bin"]

            async def alternate() -> tuple[list[float], list[float], list[float], list[float], str]:
                first = json.loads((await service.execute("bash", {"command": command})).text)
                assert first["connections"]["allowed"] == 1 and first["exit_code"] == 0, first
                curl_bare, curl_tool, true_bare, true_tool = [], [], [], []
                for _ in range(N * ROUNDS):
                    await asyncio.sleep(SETTLE_S)
                    start = time.perf_counter()
                    await sandbox.arun(sandboxed, cwd=ws, timeout=30)
                    curl_sandbox.append(time.perf_counter() - start)
                    for argv, into in (
                        (bare_argv, curl_bare),
                        (["bash", "-c", shlex.join(bare_argv)], curl_bash_bare),
                        (["bash", "-c", "true"], true_bare),
                    ):
                        await asyncio.sleep(SETTLE_S)
                        start = time.perf_counter()
                        subprocess.run(argv, check=True)
                        into.append(time.perf_counter() - start)
                    for svc, text, into in (
                        (service, command, curl_tool),
                        (service, "true", true_tool),
                        (service_none, "true", true_none),
                    ):
                        await asyncio.sleep(SETTLE_S)
                        start = time.perf_counter()
                        await svc.execute("bash", {"command": text})
                        into.append(time.perf_counter() - start)
                return curl_bare, curl_tool, true_bare, true_tool, first["network"]

            curl_sandbox: list[float] = []
            curl_bash_bare: list[float] = []
            true_none: list[float] = []
            curl_bare, curl_tool, true_bare, true_tool, network = asyncio.run(alternate())
            asyncio.run(rt.aclose())
            asyncio.run(rt_none.aclose())
        finally:
            server.kill()
            server.wait()
    cb, ct, tb, tt = (statistics.median(x) * 1000 for x in (curl_bare, curl_tool, true_bare, true_tool))
    cs = statistics.median(curl_sandbox) * 1000
    cbb = statistics.median(curl_bash_bare) * 1000
    tn = statistics.median(true_none) * 1000
    print(
        f"{'  curl 1 MB through the proxy, sandbox.arun alone':<50} {cs:8.2f} ms  bare curl {cb:5.2f} ms  "
        f"ratio {cs / cb:5.2f}x  (the proxy and the sandbox, without the chokepoint)"
    )
    print(
        f"{'curl 1 MB through the egress proxy (bash call)':<50} {ct:8.2f} ms  bare curl {cb:5.2f} ms  "
        f"ratio {ct / cb:5.2f}x  [{network}]  (<= 1.3x)"
    )
    print(
        f"{'  the same, vs the same command bare (bash -c)':<50} {ct:8.2f} ms  bare {cbb:8.2f} ms  "
        f"ratio {ct / cbb:5.2f}x  (bash's own start counted on both sides)"
    )
    print(
        f"{'bash true, network proxied':<50} {tt:8.2f} ms  bare {tb:5.2f} ms  ratio {tt / tb:5.2f}x  "
        f"[{network}]  (<= 2.0x)"
    )
    print(
        f"{'bash true, network proxied vs none':<50} {tt:8.2f} ms  none {tn:5.2f} ms  ratio {tt / tn:5.2f}x  "
        "(a run's own network namespace and door; ~1.0x)"
    )


def main() -> None:
    if sys.argv[1:2] == ["egress"]:
        egress_rows()
        return
    if sys.argv[1:2] == ["commit"]:
        commit_rows()
        return
    if sys.argv[1:2] == ["transaction"]:
        transaction_rows()
        return
    if sys.argv[1:2] == ["typical"]:
        typical_rows()
        typical_tool_rows()
        return
    print(f"{N * ROUNDS} calls per mode, through rt.tool_service(tier='full') (the scoped chokepoint)")
    print("each tool call alternates with a bare spawn in the same event loop; per-call medians")
    bares = []
    for label, toml in MODES.items():
        bare, ms, ratio, isolation = measure(toml)
        bares.append(bare)
        target = "2.0x, a transaction" if label.startswith("bwrap") else "1.5x, no transaction"
        print(f"{label:<50} {ms:8.2f} ms  bare {bare:5.2f} ms  ratio {ratio:5.2f}x  [{isolation}]  (<= {target})")
    transaction_rows()
    egress_rows()
    print("a small repository (40 files), the run alone (the transaction's commit is measured apart):")
    typical_rows()
    print("breakdown (single runs, ratio to the median bare spawn above):")
    breakdown(statistics.median(bares) * 1000)
    print("transactions:")
    commit_rows()
    typical_tool_rows()


if __name__ == "__main__":
    main()
