"""WorkspaceSandbox: run a command in the workspace with limits, and leave nothing behind.

Layers, strongest first, each used when the machine offers it:

* a **pids cgroup** per run (v1 ``/sys/fs/cgroup/pids`` or a delegated v2 subtree): ``pids.max`` caps
  the number of processes even for root, and killing every pid in ``cgroup.procs`` catches
  descendants that left the process group with ``setsid``;
* **bubblewrap**: own PID, IPC and UTS namespaces (``--die-with-parent``: when the sandbox's init
  dies, the kernel kills everything in the namespace), workspace bound read-write, system dirs
  read-only, protected paths re-bound read-only, network namespace unless ``network = "host"``.
  One bwrap per sandbox (per workspace), started at the first run, runs the zygote;
* the **zygote** (:mod:`aleph_exec._zygote`), one per sandbox, in that bwrap or, without bubblewrap,
  on the host: it starts each run, and as a subreaper it finds everything a run left behind among
  its descendants (also a process that left its session and cleared its environment). When it cannot
  start, runs are spawned directly (in a bwrap each, with bubblewrap) until a later start succeeds;
* always: a new session and process group, rlimits set before the command starts (CPU, address
  space, processes, file size, open files, core dumps off: by the zygote around its ``posix_spawn``;
  in a direct spawn by ``prlimit`` so CPython can ``vfork``, else in a ``preexec_fn``), a scrubbed
  environment carrying a per-run marker, and a kill that sends SIGTERM then SIGKILL to the group,
  the cgroup, and every process whose environment still carries the marker (a ``/proc`` sweep).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import shutil
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio.to_thread

from aleph_exec._capture import Capture, RunResult, SandboxError, TransactionUnavailable, _Output
from aleph_exec._config import ExecConfig
from aleph_exec._egress import EgressProxy, attach, closing_on_error, open_net
from aleph_exec._egress_rules import RunNetwork
from aleph_exec._layercheck import LayerChecks
from aleph_exec._layers import LAYERS_DIR
from aleph_exec._namespace import Namespaces, _chain, _host_env, _SandboxState, bwrap_available
from aleph_exec._offers import LayerOffers
from aleph_exec._processes import _MARKER, _become_subreaper, _Cgroup, _CgroupPool
from aleph_exec._supervise import Supervision, _shutdown
from aleph_exec._turns import PrincipalTurns, TurnHold, turn_key
from aleph_exec._zygote_client import _ZYGOTE_RETRY_S, _fsencode, _Zygote, _ZygoteRun

__all__ = ["Capture", "RunResult", "SandboxError", "TransactionUnavailable", "WorkspaceSandbox", "bwrap_available"]


class WorkspaceSandbox(Namespaces, Supervision, LayerOffers, LayerChecks):
    """Runs commands in a workspace under the limits of an :class:`ExecConfig`."""

    def __init__(self, workspace: Path, config: ExecConfig, protected: Iterable[Path] = ()) -> None:
        self.workspace = Path(workspace).resolve()
        self.config = config
        self.protected = [Path(p) for p in protected]
        if config.isolation == "bwrap" or (config.isolation == "auto" and bwrap_available()):
            self.isolation = "bwrap"
        else:
            self.isolation = "none"
        self.bwrap = shutil.which("bwrap") if self.isolation == "bwrap" else None
        if self.bwrap is None:
            _become_subreaper()
        # Re-bound read-only inside bubblewrap when they exist; a change in which exist restarts the zygote.
        self._ro_candidates = [
            path
            for path in [*self.protected, self.workspace / ".git" / "hooks", self.workspace / ".git" / "config"]
            if path.is_relative_to(self.workspace)
        ]
        self._layer_parents: dict[Path, Path] = {}  # a layer directory's parent, resolved (bounded by its use)
        self._offered: dict[str, tuple[_Zygote, bytes, int, int]] = {}  # layers the zygote holds (LayerOffers)
        # The transactions' layers (aleph_exec._layers) live in the workspace: under an empty read-only
        # tmpfs in the sandbox, so no command sees or touches any layer (its own only through its overlay).
        self._layers = self.workspace / LAYERS_DIR
        self._ro_texts = [str(path) for path in [*self._ro_candidates, self._layers]]
        # The zygote may sit in a run's cgroup: one more pid (see _CgroupPool).
        self._cgroups = _CgroupPool(config.max_processes + 1) if config.cgroup == "auto" else None
        self._lock = threading.Lock()
        self._turns = PrincipalTurns()  # runs of different principals never share the sandbox at once
        self._zygote: _Zygote | None = None
        self._zygotes: list[_Zygote] = []  # the current one and retired ones still running
        # Also when the sandbox is dropped without close() (or at interpreter exit): cgroups outlive us.
        weakref.finalize(self, _shutdown, self._zygotes, self._cgroups)
        self.zygote_error: str | None = None
        """Why the persistent sandbox last failed to start (runs then start a bubblewrap each), or None."""
        self._zygote_retry_at = 0.0
        # Run markers: unguessable per sandbox, unique per run (no random draw on each run's path).
        self._marker_prefix = secrets.token_hex(6)
        self._env_blob: tuple[dict[str, str], bytes] | None = None
        self._run_numbers = itertools.count()
        # The unprivileged sandbox (bubblewrap only): a user namespace; as root, its user mapped to
        # config.sandbox_host_uid and the workspace bound through an idmapped mount (see _userns).
        self._root = os.geteuid() == 0
        self._state: _SandboxState | None = None
        self._state_error: str | None = None
        self._transactions: list[str | None] = []  # the cached probe of transaction_support()

    # -- argv and child set-up -----------------------------------------------------------------

    # -- running -------------------------------------------------------------------------------

    def run(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout: float,
        stdin: bytes | None = None,
        on_line: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        layer: Path | None = None,
        network: RunNetwork | None = None,
        _probe: bool = False,
    ) -> RunResult:
        """Run ``argv`` in ``cwd`` (already checked to lie inside the workspace); blocks until it is over.

        With ``layer`` (an empty directory outside the workspace), the command runs on a copy-on-write
        view of the workspace whose writes land in ``layer/upper`` (see :meth:`transaction_support`);
        :class:`TransactionUnavailable` when that cannot be set up, before the command starts.
        ``network``: the call's rules for the egress proxy (network ``proxied``; default: ``[exec.network]``).
        Under bubblewrap a run waits for its principal's turn first (see :mod:`aleph_exec._turns`).
        """
        if layer is not None:
            self._check_layer(layer, _probe)
        turns = self._turns if self.bwrap is not None and not _probe else None
        if turns is not None:
            turns.enter(turn_key(), timeout)
        try:
            return self._run_now(argv, cwd, timeout, stdin, on_line, cancel, layer, network)
        finally:
            if turns is not None:
                turns.leave()

    def _run_now(
        self,
        argv: list[str],
        cwd: Path,
        timeout: float,
        stdin: bytes | None,
        on_line: Callable[[str], None] | None,
        cancel: threading.Event | None,
        layer: Path | None,
        network: RunNetwork | None,
    ) -> RunResult:
        cfg = self.config
        env = self._run_env()
        marker = env[_MARKER]
        cpu_seconds = int(timeout) + 5
        cgroup = self._cgroups.take() if self._cgroups is not None else None
        start = time.monotonic()
        proc: subprocess.Popen[bytes] | _ZygoteRun
        try:
            zygote, proc = self._start(argv, cwd, env, cgroup, cpu_seconds, stdin, layer, network)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        output = _Output(cfg, on_line)
        timed_out = False
        killed: str | None = None
        try:
            timed_out, killed = self._pump(proc, stdin, output, start + timeout, cancel)
        finally:
            if isinstance(proc, _ZygoteRun):
                assert zygote is not None
                self._stop_zygote_run(proc, cgroup)
                self._release(zygote)
                if proc.net is not None:
                    EgressProxy.shared().close_run(proc.net)
            else:
                self._kill_all(proc, cgroup, marker)
            if cgroup is not None:
                assert self._cgroups is not None
                self._cgroups.give(cgroup, self._zygote_pids() if zygote else set())
        if layer is not None:
            self._tidy_layer(layer)
        if isinstance(proc, _ZygoteRun) and proc.failure is not None:
            raise proc.failure
        net = proc.net if isinstance(proc, _ZygoteRun) else None
        return self._result(proc.returncode, output, timed_out, killed, cgroup, start, layer is not None, net)

    def _run_env(self) -> dict[str, str]:
        """The scrubbed environment of one run, carrying its fresh marker."""
        env = _host_env(self.config.env_allow, self.workspace)
        env[_MARKER] = f"{self._marker_prefix}{next(self._run_numbers):012x}"  # fixed width: no marker prefixes another
        return env

    def _result(
        self,
        returncode: int | None,
        output: _Output,
        timed_out: bool,
        killed: str | None,
        cgroup: _Cgroup | None,
        start: float,
        transaction: bool = False,
        net: RunNetwork | None = None,
    ) -> RunResult:
        truncated = output.out.truncated or output.err.truncated
        if killed and killed.startswith("output limit") and returncode is not None:
            # Killed for its output: say how it ended as a shell would (128 + signal), never "no exit code".
            exit_code: int | None = 128 - returncode if returncode < 0 else returncode
        else:
            exit_code = None if timed_out or killed else returncode
        return RunResult(
            exit_code=exit_code,
            stdout=output.out.text(),
            stderr=output.err.text(),
            truncated=truncated,
            output_bytes={"stdout": output.out.sizes(), "stderr": output.err.sizes()} if truncated else None,
            timed_out=timed_out,
            isolation=self.isolation + ("+userns" if self.bwrap else "") + ("+cgroup" if cgroup else ""),
            network=self.network_of(net),
            duration_ms=(time.monotonic() - start) * 1000,
            killed=killed,
            transaction=transaction,
            egress=net.to_json() if net is not None else None,
        )

    def network_of(self, net: RunNetwork | None) -> str:
        """What network a run had: ``proxied`` (through the egress proxy), ``none`` or ``host``."""
        if self.bwrap is None or self.config.network.mode == "host":
            return "host"
        return "proxied" if net is not None else "none"

    # -- running on the event loop -------------------------------------------------------------

    async def arun(
        self,
        argv: list[str],
        *,
        cwd: Path,
        timeout: float,
        stdin: bytes | None = None,
        on_line: Callable[[str], None] | None = None,
        layer: Path | None = None,
        network: RunNetwork | None = None,
    ) -> RunResult:
        """:meth:`run` for an asyncio caller; cancelling the caller stops (and kills) the run.

        A run through the zygote is driven by the event loop itself: its pipes and its socket sit in an
        epoll that the loop's hub (:class:`_Hub`) watches, so no worker thread is woken per run. Starting
        the zygote (the first run of a sandbox, or after the binds changed), runs without one (no
        bubblewrap, or the per-run bubblewrap fallback) and the slow end of a run that left processes
        behind (SIGTERM, grace, SIGKILL) use a worker thread.
        """
        if layer is not None:
            self._check_layer(layer)
        hold = TurnHold(self._turns if self.bwrap is not None else None)
        await hold.take(timeout)
        try:
            return await self._arun_held(hold, argv, cwd, timeout, stdin, on_line, layer, network)
        finally:
            if not hold.handed:
                hold.release()

    async def _arun_held(
        self,
        hold: TurnHold,
        argv: list[str],
        cwd: Path,
        timeout: float,
        stdin: bytes | None,
        on_line: Callable[[str], None] | None,
        layer: Path | None,
        network: RunNetwork | None,
    ) -> RunResult:
        zygote = self._running_zygote()
        if zygote is None:
            # Shielded: a start abandoned half-way would leave the zygote counted as in use.
            with anyio.CancelScope(shield=True):
                zygote = await anyio.to_thread.run_sync(self._acquire_zygote)
            if zygote is None:
                hold.release()  # the thread's run takes its own turn
                return await self._run_in_thread(argv, cwd, timeout, stdin, on_line, layer, network)
        env = self._run_env()
        cgroup = self._cgroups.take() if self._cgroups is not None else None
        start = time.monotonic()
        loop = asyncio.get_running_loop()
        try:
            run = self._stage(zygote, argv, cwd, env, cgroup, int(timeout) + 5, stdin, loop.call_soon, layer, network)
        except BaseException:
            self._unclaim(zygote, cgroup)
            raise
        try:
            # Sent as soon as it is staged: the zygote starts the command while we get ready to wait for it.
            run.send()
        except SandboxError:
            # It died since the last run. The blocking path replaces it (a start takes a while).
            self._unclaim(zygote, cgroup)
            self._retire(zygote)
            if run.net is not None:
                await EgressProxy.shared().aclose_run(run.net)
            hold.release()  # the thread's run takes its own turn
            return await self._run_in_thread(argv, cwd, timeout, stdin, on_line, layer, network)

        def end() -> None:
            try:
                self._stop_zygote_run(run, cgroup)
            finally:
                self._unclaim(zygote, cgroup)

        output = _Output(self.config, on_line)
        try:
            timed_out, killed = await self._apump(run, stdin, output, start + timeout)
        except BaseException:
            # Cancelled: the run is stopped in the background; the caller does not wait for it.
            # The turn goes back once the stop is over: no other principal's run meets this one's processes.
            threading.Thread(target=hold.after(end), name="aleph-exec-stop", daemon=True).start()
            if run.net is not None:
                threading.Thread(target=EgressProxy.shared().close_run, args=(run.net,), daemon=True).start()
            raise
        if self._run_is_over(run, cgroup):
            # Nothing left to signal or wait for, and its cgroup is empty: free again. Closing the run
            # (which wakes the zygote to clean up) waits for the loop's next turn, off the caller's path.
            loop.call_soon(run.close)
            loop.call_soon(zygote.prepare)
            self._release(zygote)
            if cgroup is not None:
                assert self._cgroups is not None
                if run.lost:  # the zygote died: its namespace is going down, maybe not gone yet
                    self._cgroups.give(cgroup, self._zygote_pids())
                else:
                    self._cgroups.put_back(cgroup)
        else:
            await anyio.to_thread.run_sync(end)
        if run.net is not None:
            await EgressProxy.shared().aclose_run(run.net)
        if layer is not None:
            self._tidy_layer(layer)
        if run.failure is not None:
            raise run.failure
        return self._result(run.returncode, output, timed_out, killed, cgroup, start, layer is not None, run.net)

    def _start(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        cgroup: _Cgroup | None,
        cpu_seconds: int,
        stdin: bytes | None,
        layer: Path | None = None,
        network: RunNetwork | None = None,
    ) -> tuple[_Zygote | None, subprocess.Popen[bytes] | _ZygoteRun]:
        """Start the command through the zygote when there is one (a dead one is replaced once), else directly."""
        for attempt in range(2):
            zygote = self._acquire_zygote()
            if zygote is None:
                break
            try:
                run = self._stage(zygote, argv, cwd, env, cgroup, cpu_seconds, stdin, None, layer, network)
                with closing_on_error(run.net):
                    run.send()
                return zygote, run
            except SandboxError:
                # It died since the last run (killed, crashed): retire it; the next attempt starts a new one.
                self._release(zygote)
                self._retire(zygote)
                if attempt:
                    raise
            except BaseException:
                self._release(zygote)
                raise
        if layer is not None:
            raise TransactionUnavailable(f"the sandbox server is not running ({self.zygote_error or 'no server'})")
        return None, self._popen(argv, cwd, env, cgroup, cpu_seconds, stdin)

    def _popen(
        self,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        cgroup: _Cgroup | None,
        cpu_seconds: int,
        stdin: bytes | None,
    ) -> subprocess.Popen[bytes]:
        """Start the command directly (no bubblewrap), or in a bubblewrap of its own (the fallback)."""
        stage: Callable[[], None] | None = None
        pass_fds: list[int] = []
        full = argv
        if self.bwrap:
            prefix, stage, pass_fds = self._bwrap_argv(cwd)
            full = prefix + argv
        launcher = self._launcher(cgroup, cpu_seconds)
        if launcher is not None:
            full = launcher + full
        preexec: Callable[[], None] | None = None if launcher is not None else self._preexec(cgroup, cpu_seconds)
        if stage is not None:
            preexec = _chain(stage, preexec)
        try:
            return subprocess.Popen(
                full,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                close_fds=True,
                pass_fds=pass_fds,
                preexec_fn=preexec,
            )
        finally:
            userns = self._state.userns if self._state is not None else None
            for fd in pass_fds:  # the filters' memfds are the child's now; the user namespace stays ours
                if userns is None or fd != userns.fd:
                    os.close(fd)

    # -- the zygote: one bubblewrap per workspace ------------------------------------------------

    @property
    def zygote_pid(self) -> int | None:
        """The host pid of the running zygote (the server inside the persistent bubblewrap), or None."""
        zygote = self._zygote
        return zygote.host_pid if zygote is not None and zygote.alive() else None

    def close(self) -> None:
        """Stop the zygote, if one runs, and remove the cgroups kept for runs; a next run starts afresh."""
        with self._lock:
            self._zygote = None
        _shutdown(self._zygotes, self._cgroups)

    def _running_zygote(self) -> _Zygote | None:
        """The running zygote for the current binds, acquired, without starting one (None: it needs a start)."""
        key = self._bind_key()
        with self._lock:
            zygote = self._zygote
            if zygote is None or zygote.key != key or not zygote.alive():
                return None
            zygote.active += 1
            return zygote

    def _bind_key(self) -> tuple[bool, ...]:
        if self.bwrap is None:
            return ()  # no binds: the zygote runs on the host's filesystem
        return tuple(os.access(path, os.F_OK) for path in self._ro_texts)

    def _retire(self, zygote: _Zygote) -> None:
        """Take a zygote found dead out of service; it is closed once its last run is released."""
        with self._lock:
            if self._zygote is zygote:
                self._zygote = None
            zygote.retire()

    def _acquire_zygote(self) -> _Zygote | None:
        """The running zygote for the current binds (started, or restarted, here); None: per-run bwrap."""
        key = self._bind_key()
        with self._lock:
            zygote = self._zygote
            if zygote is not None and (zygote.key != key or not zygote.alive()):
                self._zygote = None
                zygote.retire()
                zygote = None
            if zygote is None:
                if self.zygote_error is not None and time.monotonic() < self._zygote_retry_at:
                    return None
                try:
                    try:
                        argv, preexec, fds = self._zygote_argv()
                        zygote = _Zygote.start(argv, key, namespaced=self.bwrap is not None, preexec=preexec, fds=fds)
                    except SandboxError as exc:
                        # A user's own namespace that bubblewrap cannot use (an LSM may confine namespaces
                        # made outside bubblewrap): bubblewrap makes one instead, without transactions.
                        # Only when bubblewrap refuses it and makes one itself: a start that failed
                        # under load is no reason to give up transactions.
                        refused = None if self._root else self._own_userns_refused()
                        if refused is None or self._state is None or not self._state.demote(refused):
                            raise exc from None
                        self._transactions.clear()  # probed again: no overlay without our namespace
                        argv, preexec, fds = self._zygote_argv()
                        zygote = _Zygote.start(argv, key, namespaced=self.bwrap is not None, preexec=preexec, fds=fds)
                except SandboxError as exc:
                    # Per-run bubblewrap meanwhile; a start that failed under load gets another chance later.
                    self.zygote_error = str(exc)
                    self._zygote_retry_at = time.monotonic() + _ZYGOTE_RETRY_S
                    return None
                self.zygote_error = None
                attach(zygote, self.config.network.mode)
                self._zygote = zygote
                self._zygotes.append(zygote)
            zygote.active += 1
            return zygote

    def _release(self, zygote: _Zygote) -> None:
        with self._lock:
            zygote.active -= 1
            if zygote.retired and zygote.active == 0:
                zygote.close(wait=False)

    def _stage(
        self,
        zygote: _Zygote,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        cgroup: _Cgroup | None,
        cpu_seconds: int,
        stdin: bytes | None,
        later: Callable[..., object] | None = None,
        layer: Path | None = None,
        network: RunNetwork | None = None,
    ) -> _ZygoteRun:
        cfg = self.config
        env = dict(env)
        marker = env.pop(_MARKER)  # the zygote puts it back in the environment
        net = open_net(zygote, cfg.network.mode, network, cfg.network, env)
        with closing_on_error(net):
            run = self._stage_payload(zygote, marker, argv, cwd, env, cgroup, cpu_seconds, stdin, later, layer)
        run.net = net
        return run

    def _stage_payload(
        self,
        zygote: _Zygote,
        marker: str,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        cgroup: _Cgroup | None,
        cpu_seconds: int,
        stdin: bytes | None,
        later: Callable[..., object] | None,
        layer: Path | None,
    ) -> _ZygoteRun:
        cfg = self.config
        head = [
            marker,
            str(cwd),
            cgroup.name if cgroup else "",
            *map(str, (cpu_seconds, cpu_seconds + 5, cfg.max_open_files, cfg.max_open_files)),
            *map(str, (cfg.max_processes, cfg.max_processes, len(argv))),
            *argv,
        ]
        try:
            payload = b"\0".join(_fsencode(field) for field in head)
            # The environment is the same from run to run (but for the marker): its encoding is made once.
            cached = self._env_blob
            if cached is None or cached[0] != env:
                texts = [text for pair in env.items() for text in pair]
                if any("\0" in text for text in texts):
                    raise ValueError("the environment contains a NUL byte")
                cached = self._env_blob = (env, b"\0".join(map(_fsencode, texts)))
        except ValueError as exc:  # a lone surrogate (UnicodeEncodeError) too
            raise OSError(f"cannot pass the command to the sandbox: {exc}") from None
        if payload.count(b"\0") != len(head) - 1:
            raise OSError("an argument contains a NUL byte, which no command line can carry")
        if cached[1]:
            payload += b"\0" + cached[1]
        offered = self._claim_offer(layer, zygote) if layer is not None else b""
        layer_fd = self._layer_fd(layer) if layer is not None and not offered else -1
        run = zygote.stage(payload, stdin is not None, cgroup, later, layer_fd, offered)
        run.marker = marker
        return run
