"""``aleph doctor`` checks of the exec family: what isolation, overlay, cgroup and seccomp are in force here.

Each check answers from a real probe: one sandbox over a scratch workspace (never the user's), started
once for all four checks and closed after the probe.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aleph_exec import _seccomp
from aleph_exec._config import ExecConfig
from aleph_exec._layers import layers_check
from aleph_exec._processes import _pids_hierarchy
from aleph_exec._sandbox import WorkspaceSandbox, bwrap_available

__all__ = ["register_checks"]

Check = Callable[[], tuple[str, str]]

_PROBE = """
import json
status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)
maps = open("/proc/self/uid_map").read().split()
try:
    open("/proc/sys/kernel/core_pattern", "a").close()
    sysctl = "writable"
except OSError as exc:
    sysctl = exc.strerror
print(json.dumps({"filters": status.get("Seccomp_filters", "0").strip(), "nnp": status.get("NoNewPrivs", "").strip(),
                  "cap": status.get("CapEff", "").strip(), "uid_map": maps, "sysctl": sysctl}))
"""


class _Probe:
    """The facts the checks report, found once (thread-safe) by running a probe in a scratch sandbox."""

    def __init__(self, config: ExecConfig) -> None:
        self.config = config
        self.lock = threading.Lock()
        self.facts: dict[str, Any] | None = None

    def get(self) -> dict[str, Any]:
        with self.lock:
            if self.facts is None:
                self.facts = self._probe()
            return self.facts

    def _probe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {"error": None, "run": None, "overlay": None, "isolation": "none"}
        scratch = Path(tempfile.mkdtemp(prefix="aleph-doctor-"))
        sandbox = None
        try:
            ws = scratch / "ws"
            ws.mkdir()
            sandbox = WorkspaceSandbox(ws, self.config)
            facts["isolation"] = sandbox.isolation
            result = sandbox.run([sys.executable, "-I", "-S", "-c", _PROBE], cwd=ws, timeout=60)
            facts["result_isolation"] = result.isolation
            facts["network"] = result.network
            facts["zygote_error"] = sandbox.zygote_error
            # Why runs have no proxy (e.g. no capability to make a run's own network namespace).
            facts["proxy_error"] = getattr(sandbox._zygote, "proxy_error", None)
            if result.exit_code == 0:
                facts["run"] = json.loads(result.stdout)
            else:
                facts["error"] = f"the probe exited {result.exit_code}: {result.stderr.strip()[:200]}"
            facts["overlay"] = sandbox.transaction_support()
        except Exception as exc:
            facts["error"] = f"{type(exc).__name__}: {exc}"
            facts["overlay"] = facts["overlay"] or facts["error"]
        finally:
            if sandbox is not None:
                sandbox.close()
            shutil.rmtree(scratch, ignore_errors=True)
        return facts


def _isolation(probe: _Probe) -> tuple[str, str]:
    cfg = probe.config
    if cfg.isolation == "none" or (cfg.isolation == "auto" and not bwrap_available()):
        who = "host root" if os.geteuid() == 0 else f"host uid {os.geteuid()}"
        why = "isolation = none" if cfg.isolation == "none" else "bubblewrap is missing or cannot make namespaces here"
        return "warn", f"plain processes ({why}): commands run as {who}, no namespaces, no overlay"
    facts = probe.get()
    run = facts["run"]
    if run is None:
        return "fail", f"bubblewrap sandbox did not run: {facts['error']}"
    inside, host = (run["uid_map"] + ["?", "?"])[:2]
    mapping = f"sandbox uid {inside} = host uid {host}"
    if os.geteuid() == 0:
        mapping += " (idmapped workspace)"
    network = {"none": "no network", "host": "host network"}.get(cfg.network.mode, "network through the egress proxy")
    detail = f"bubblewrap + user namespace: {mapping}; pid/ipc/uts namespaces, {network}; "
    detail += f"/proc/sys not writable ({run['sysctl']})"
    if host == "0" or run["sysctl"] == "writable":
        detail = detail.replace("not writable (writable)", "WRITABLE")
        return "fail", detail
    if facts.get("zygote_error"):
        return "warn", f"{detail}; the sandbox server did not start: {facts['zygote_error']}"
    return "ok", detail


def _overlay(probe: _Probe) -> tuple[str, str]:
    facts = probe.get()
    reason = facts["overlay"]
    if reason is None:
        return "ok", "per-run overlayfs in the sandbox's mount namespace: exec calls can run as transactions"
    return "warn", f"no transactions here (exec calls are judged before they run): {reason}"


def _cgroup(probe: _Probe) -> tuple[str, str]:
    if probe.config.cgroup == "off":
        return "warn", "cgroup = off: no per-run pids cgroup (RLIMIT_NPROC only, which root ignores)"
    base = _pids_hierarchy()
    if base is None:
        return (
            "warn",
            "no writable pids cgroup: RLIMIT_NPROC only (which root ignores); kills by process group and sweep",
        )
    return "ok", f"a pids cgroup per run under {base} (pids.max = {probe.config.max_processes})"


def _seccomp_check(probe: _Probe) -> tuple[str, str]:
    if not _seccomp.BASE:
        return "warn", f"no seccomp filter for the {_seccomp.ARCH} architecture"
    facts = probe.get()
    run = facts["run"]
    if run is None:
        return "fail", f"could not probe: {facts['error']}"
    if run["filters"] in ("", "0") or run["nnp"] != "1":
        return "fail", f"a command ran without the filter (Seccomp_filters {run['filters']}, NoNewPrivs {run['nnp']})"
    return "ok", (
        f"filter in force ({_seccomp.ARCH}): kernel modules, kexec, bpf, keyring, perf, userfaultfd, handles, swap, "
        "reboot, new user namespaces, setns, io_uring refused; the mount family after the overlay; no_new_privs"
    )


def _network(probe: _Probe) -> tuple[str, str]:
    cfg = probe.config.network
    if cfg.mode == "host":
        return "warn", "network = host: commands reach everything the host does, and exec calls are not contained"
    facts = probe.get()
    if facts["isolation"] != "bwrap":
        return "warn", "without bubblewrap the network cannot be taken away: commands reach everything the host does"
    if cfg.mode == "none":
        return "ok", "network = none: an empty network namespace (loopback only)"
    if facts.get("network") != "proxied":
        why = facts.get("zygote_error") or facts.get("proxy_error") or facts.get("error")
        why = why or "the runs' listeners did not come up"
        return "warn", f"network = proxied, but the egress proxy is not in the sandbox (runs get no network): {why}"
    allowed = cfg.allow or []
    listed = ", ".join(allowed[:5]) + (f" and {len(allowed) - 5} more" if len(allowed) > 5 else "")
    hosts = f"allowed hosts: {listed}" if allowed else "no host allowed yet ([exec.network] allow is empty)"
    unlisted = "asked about" if cfg.unlisted == "ask" else "refused"
    return "ok", f"egress proxy in force, no DNS inside; {hosts}; other hosts are {unlisted}"


def register_checks(
    register: Callable[[str, Check], None],
    config: ExecConfig,
    workspace: Path | None = None,
    data_dir: Path | None = None,
) -> None:
    """Register the exec.* checks: isolation, overlay, cgroup, seccomp, network, layers (no I/O until one runs)."""
    probe = _Probe(config)
    if workspace is not None and data_dir is not None:
        register("exec.layers", lambda: layers_check(workspace, data_dir))
    register("exec.isolation", lambda: _isolation(probe))
    register("exec.overlay", lambda: _overlay(probe))
    register("exec.cgroup", lambda: _cgroup(probe))
    register("exec.seccomp", lambda: _seccomp_check(probe))
    register("exec.network", lambda: _network(probe))
