"""Namespace set-up: what a sandbox sees and the state it keeps on the host.

Bubblewrap options, /etc, system dirs, protected paths re-bound read-only, the environment a run gets,
and the unprivileged state (user namespaces, /etc files) kept on the host.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from aleph_exec import _seccomp, _userns
from aleph_exec._capture import MiB, SandboxError, TransactionUnavailable
from aleph_exec._processes import _Cgroup

_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


# What of the host's /etc a sandbox sees (read-only): what bash, python, git, pip and node need; never
# shadow, gshadow, ssh keys or other secrets. passwd and group are the sandbox's own.
_ETC_ALLOW = (
    "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "ssl", "ca-certificates", "ca-certificates.conf", "pki", "alternatives", "localtime", "timezone", "mime.types",
    "bash.bashrc", "profile", "profile.d", "inputrc", "environment", "os-release", "debian_version", "protocols",
    "services", "shells", "gitconfig", "python3", "login.defs", "terminfo", "magic", "mailcap", "machine-id",
    "npmrc", "manpath.config", "locale.alias", "locale.gen", "default", "xdg", "fonts",
)  # fmt: skip


_bwrap_probe: dict[str, bool] = {}


_which: dict[str, str | None] = {}
_ZYGOTE_PATH = Path(__file__).with_name("_zygote.py")
_ZYGOTE_MODULES = ("_zygote_kernel", "_zygote_net", "_zygote_procs", "_zygote_run", "_zygote_spawn")


def zygote_files() -> list[Path]:
    """The zygote, run by path, and the modules it loads from beside it: bound into the sandbox together."""
    siblings = (_ZYGOTE_PATH.with_name(f"{name}.py") for name in _ZYGOTE_MODULES)
    return [_ZYGOTE_PATH, *(path for path in siblings if path.exists())]


def _which_cached(name: str) -> str | None:
    if name not in _which:
        _which[name] = shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")
    return _which[name]


def bwrap_available() -> bool:
    """Whether bubblewrap is installed and can create namespaces here (probed once per process)."""
    path = shutil.which("bwrap")
    if path is None:
        return False
    if path not in _bwrap_probe:
        try:
            probe = subprocess.run(
                [path, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", "true"],
                capture_output=True,
                timeout=10,
            )
            _bwrap_probe[path] = probe.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _bwrap_probe[path] = False
    return _bwrap_probe[path]


def _host_env(allow: Iterable[str], workspace: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workspace),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": os.environ.get("TERM", "dumb"),
        "TMPDIR": "/tmp",
    }
    for name in allow:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


_ZYGOTE_CAPS = (
    "CAP_SYS_ADMIN", "CAP_SYS_CHROOT", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_CHOWN", "CAP_FOWNER",
    "CAP_FSETID", "CAP_MKNOD",
    "CAP_NET_ADMIN",  # a run's own network namespace (network proxied): its loopback up (see _zygote_net)
)  # fmt: skip


_LAYER_POINT = (
    "/run/aleph-layer"  # where a run's child attaches its layer, for the overlay mount (the zygote's LAYER_DIR)
)


def _chain(first: Callable[[], None], then: Callable[[], None] | None) -> Callable[[], None]:
    def both() -> None:
        first()
        if then is not None:
            then()

    return both


class _SandboxState:
    """What an unprivileged sandbox keeps on the host: its /etc files, the staging point, user namespaces.

    As root: ``userns`` (the sandbox's: SANDBOX_ID is the host uid) and ``idmap`` (for idmapped mounts:
    the workspace owner on disk shows as the host uid). As a user: ``userns`` maps SANDBOX_ID to the
    user (None, with ``userns_error``, where the user may make none: bubblewrap then makes one) and no
    ``idmap``; layers are cloned by a :class:`_userns.LayerCloner`.
    """

    def __init__(self, root: Path, userns: _userns.Idmap | None, idmap: _userns.Idmap | None) -> None:
        self.root = root
        self.etc = root / "etc"
        self.stage_dir = str(root / "stage")
        self.userns = userns
        self.idmap = idmap
        self.owner: tuple[int, int] | None = None  # the workspace's owner on disk (uid, gid), with ``idmap``
        self.userns_error: str | None = None  # why a user got no user namespace of ours (then ``userns`` is None)
        self._cloner: _userns.LayerCloner | None = None
        self._cloner_lock = threading.Lock()
        self._retired: list[_userns.Idmap] = []

    def demote(self, why: str) -> bool:
        """As a user: give up our own user namespace (bubblewrap makes one per sandbox instead); False if none."""
        if self.userns is None or self.idmap is not None:
            return False
        self._retired.append(self.userns)  # closed with the state: a run may still be passing its fd
        self.userns = None
        self.userns_error = f"bubblewrap could not use it: {why}"
        return True

    def layer_cloner(self) -> _userns.LayerCloner:
        """As a user: the helper that clones layer directories in the sandbox's user namespace (started once)."""
        assert self.userns is not None
        with self._cloner_lock:
            if self._cloner is None or self._cloner.proc.poll() is not None:
                self._cloner = _userns.LayerCloner(self.userns.fd)
            return self._cloner

    @classmethod
    def create(cls, workspace: Path, host_uid: int | None) -> _SandboxState:
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="aleph-sandbox-"))
        try:
            root.chmod(0o755)
            (root / "etc").mkdir(mode=0o755)
            (root / "stage").mkdir(mode=0o755)
            sid = _userns.SANDBOX_ID
            (root / "etc" / "passwd").write_text(
                "root:x:0:0:root:/root:/bin/bash\n"
                f"aleph:x:{sid}:{sid}:Aleph sandbox:{workspace}:/bin/bash\n"
                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            )
            (root / "etc" / "group").write_text(f"root:x:0:\naleph:x:{sid}:\nnogroup:x:65534:\n")
            for name in ("passwd", "group"):
                (root / "etc" / name).chmod(0o644)
            userns = idmap = None
            if host_uid is not None:
                userns = _userns.Idmap(sid, host_uid)
                # On disk the workspace's owner (root in CI, or the user of a checkout) is the sandbox user.
                owner = workspace.stat()
                idmap = _userns.Idmap(owner.st_uid, host_uid, owner.st_gid)
                state = cls(root, userns, idmap)
                state.owner = (owner.st_uid, owner.st_gid)
                return state
            # A user: the sandbox's user is the user itself (the workspace is theirs); no idmapped mounts.
            try:
                userns = _userns.Idmap(sid, os.getuid(), host_gid=os.getgid())
            except OSError as exc:
                state = cls(root, None, None)
                state.userns_error = str(exc)  # bubblewrap may still make one (--unshare-user)
                return state
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return cls(root, userns, idmap)

    def close(self) -> None:
        if self._cloner is not None:
            self._cloner.close()
        for ns in (self.userns, self.idmap, *self._retired):
            if ns is not None:
                ns.close()
        shutil.rmtree(self.root, ignore_errors=True)


class Namespaces:
    """The bubblewrap command lines and launchers a sandbox's runs and zygote start with."""

    def _sandbox_state(self) -> _SandboxState:
        """The user namespaces, staging directory and /etc of this sandbox (made once; SandboxError if impossible)."""
        if self._state is not None:
            return self._state
        if self._state_error is not None:
            raise SandboxError(self._state_error)
        try:
            self._state = _SandboxState.create(self.workspace, self.config.sandbox_host_uid if self._root else None)
        except OSError as exc:
            self._state_error = f"the unprivileged sandbox cannot be set up here: {exc}"
            raise SandboxError(self._state_error) from None
        weakref.finalize(self, self._state.close)
        return self._state

    def _bwrap_options(self, *, zygote: bool = False) -> tuple[list[str], Callable[[], None] | None, list[int]]:
        """The bwrap command line up to the command, the ``preexec_fn`` of its process, the fds it inherits.

        Namespaces and binds for the filesystem as it is now; as root, the ``preexec_fn`` stages the sources.
        """
        assert self.bwrap is not None
        state = self._sandbox_state()
        argv = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if self.config.network.mode != "host":
            argv.append("--unshare-net")
        uid = str(_userns.SANDBOX_ID)
        if state.userns is not None:
            # Our own user namespace: its one user is config.sandbox_host_uid on the host as root, else
            # the user Aleph runs as (bubblewrap then nests no namespace of its own: the zygote may mount).
            argv += ["--userns", str(state.userns.fd), "--uid", uid, "--gid", uid]
        else:
            argv += ["--unshare-user", "--uid", uid, "--gid", uid]
        # Capabilities exist only inside that namespace. The zygote keeps CAP_SYS_ADMIN there for the
        # overlays and the runs' network namespaces and hands no capability on; a per-run bubblewrap keeps none.
        argv += ["--cap-drop", "ALL"]
        if zygote and state.userns is not None:
            # What overlayfs needs of its mounter's credentials (copy-up, the work directory, whiteouts).
            for cap in _ZYGOTE_CAPS:
                argv += ["--cap-add", cap]
        argv += ["--ro-bind", "/usr", "/usr"]
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                argv += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                argv += ["--ro-bind", d, d]
        # A minimal /etc: the sandbox's passwd and group, and what tools need of the host's.
        for name in _ETC_ALLOW:
            if name == "resolv.conf" and self.config.network.mode != "host":
                continue  # no DNS inside: the proxy resolves names (a DNS query cannot carry data out)
            if os.path.exists(f"/etc/{name}"):
                argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
        argv += [
            "--ro-bind",
            str(state.etc / "passwd"),
            "/etc/passwd",
            "--ro-bind",
            str(state.etc / "group"),
            "/etc/group",
        ]
        argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", _LAYER_POINT]
        # The interpreter's prefix may live under /tmp (a CI checkout): bind it after the tmpfs, which bwrap allows.
        seen = {"/usr", "/etc"}
        bound_files = {str(path) for path in zygote_files()}
        extra = [sys.prefix, sys.base_prefix, *self.config.extra_ro_paths]
        if zygote:
            extra += [str(path) for path in zygote_files()]
        staged: list[tuple[str, str]] = []
        stage = state.stage_dir if state.idmap is not None else None

        def source(real: str, name: str) -> str:
            # As root, bubblewrap resolves sources as the sandbox's unprivileged user: through the staging tmpfs.
            if stage is None:
                return real
            staged.append((real, name))
            return f"{stage}/{name}"

        for p in extra:
            real = os.path.realpath(p)
            is_file = p in bound_files
            if (os.path.isdir(real) or is_file) and not any(real == s or real.startswith(s + "/") for s in seen):
                argv += ["--ro-bind", source(real, f"ro{len(seen)}"), real]
                seen.add(real)
        ws = str(self.workspace)
        ws_source = f"{stage}/ws" if stage is not None else ws
        argv += ["--bind", ws_source, ws]
        # Aleph's own files and git hooks inside the workspace stay read-only for commands too.
        for path in self._ro_candidates:
            if path.exists():
                argv += ["--ro-bind", ws_source + str(path)[len(ws) :], str(path)]
        layers = str(self._layers)
        if os.path.isdir(layers) and not os.path.islink(layers):
            # The transactions' layers: an empty read-only tmpfs over them (see aleph_exec._layers).
            argv += ["--perms", "0555", "--tmpfs", layers, "--remount-ro", layers]
        # The sandbox's own root and /etc (a tmpfs bubblewrap builds) are read-only: a command cannot leave
        # anything there for the next call, another session's or another agent's (/tmp is cleared instead).
        argv += ["--remount-ro", "/"]
        if stage is None:
            return argv, None, [state.userns.fd] if state.userns is not None else []
        assert state.userns is not None and state.idmap is not None
        preexec = _userns.stage(stage, staged, [(ws, "ws")], state.idmap)
        return argv, preexec, [state.userns.fd]

    def _layer_fd(self, layer: Path) -> int:
        """The layer as a detached mount for the zygote (idmapped as the workspace is); TransactionUnavailable."""
        state = self._state
        if state is None or state.userns is None:
            raise TransactionUnavailable("no user namespace of the sandbox's own here")
        if state.idmap is None:
            # A user's layer is theirs already (the sandbox's user): a plain clone, made in that namespace.
            try:
                return state.layer_cloner().clone(layer)
            except OSError as exc:
                raise TransactionUnavailable(f"the layer {layer} cannot be handed to the sandbox: {exc}") from None
        try:
            owner = state.owner
            if owner is not None and (layer.stat().st_uid, layer.stat().st_gid) != owner:
                os.chown(layer, *owner)  # its upper/ and work/ are made by the sandbox user: the owner on disk
            return _userns.idmapped_clone(layer, state.idmap)
        except OSError as exc:
            raise TransactionUnavailable(f"the layer {layer} cannot be handed to the sandbox: {exc}") from None

    def _hardening(self) -> dict[str, Any]:
        """What the zygote sets up in bubblewrap before it serves (see _zygote.main)."""
        return {
            # In our own user namespace (as root, and as a user who may make one) the zygote makes /proc's
            # kernel interfaces read-only and mounts the overlays. Else bubblewrap nests a user namespace
            # that owns no mount (for /dev's devpts): neither can be done (a user cannot write them anyway).
            "proc": self._state is not None and self._state.userns is not None,
            "base": _seccomp.BASE.hex(),
            "mounts": _seccomp.MOUNTS.hex(),
            "workspace": str(self.workspace),
            "protected": [str(path) for path in self._ro_candidates if path.exists()],
            "proxy": self.config.network.mode == "proxied",
            "masked": [str(self._layers)],
        }

    def _bwrap_argv(self, cwd: Path) -> tuple[list[str], Callable[[], None] | None, list[int]]:
        """The prefix of a per-run bubblewrap (the fallback when the zygote cannot start).

        The command gets the seccomp filters from bubblewrap (``--add-seccomp-fd``): each program in a
        fresh memfd, which the caller's child inherits (``pass_fds``) and closes once it has started.
        """
        argv, preexec, fds = self._bwrap_options()
        seccomp: list[str] = []
        for program in (_seccomp.BASE, _seccomp.MOUNTS):
            if program:
                fd = os.memfd_create("aleph-seccomp", os.MFD_CLOEXEC)
                os.write(fd, program)
                os.lseek(fd, 0, os.SEEK_SET)
                seccomp += ["--add-seccomp-fd", str(fd)]
                fds = [*fds, fd]
        return [*argv, *seccomp, "--chdir", str(cwd), "--"], preexec, fds

    def _preexec(self, cgroup: _Cgroup | None, cpu_seconds: int) -> Callable[[], None]:
        cfg = self.config
        procs_file = str(cgroup.path / "cgroup.procs") if cgroup else None

        def setup() -> None:
            # Runs in the child between fork and exec: join the cgroup first, so every descendant is in it.
            if procs_file is not None:
                with open(procs_file, "w") as fh:
                    fh.write(str(os.getpid()))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
            resource.setrlimit(resource.RLIMIT_AS, (cfg.memory_mb * MiB, cfg.memory_mb * MiB))
            resource.setrlimit(resource.RLIMIT_FSIZE, (cfg.max_file_mb * MiB, cfg.max_file_mb * MiB))
            resource.setrlimit(resource.RLIMIT_NOFILE, (cfg.max_open_files, cfg.max_open_files))
            # Per-uid, and ignored for root: the cgroup's pids.max is what holds there.
            resource.setrlimit(resource.RLIMIT_NPROC, (cfg.max_processes, cfg.max_processes))

        return setup

    def _launcher(self, cgroup: _Cgroup | None, cpu_seconds: int) -> list[str] | None:
        """A vfork-friendly prefix that applies the same limits: ``sh`` joins the cgroup, ``prlimit`` sets rlimits.

        CPython must ``fork()`` the whole interpreter when a ``preexec_fn`` is given, but can ``vfork()``
        otherwise; two tiny execs cost far less than copying a large process's page tables. None when
        util-linux ``prlimit`` is missing (then :meth:`_preexec` does the same work in the child).
        """
        prlimit = _which_cached("prlimit")
        if prlimit is None:
            return None
        cfg = self.config

        def lim(name: str, value: int, hard: int | None = None) -> str:
            return f"--{name}={value}:{value if hard is None else hard}"

        prefix = []
        if cgroup is not None:
            # Join the cgroup before anything can fork; "$0" is the cgroup.procs path.
            prefix = [_which_cached("sh") or "/bin/sh", "-c", 'echo $$ > "$0" || exit 125; exec "$@"']
            prefix.append(str(cgroup.path / "cgroup.procs"))
        return [
            *prefix,
            prlimit,
            lim("core", 0),
            lim("cpu", cpu_seconds, cpu_seconds + 5),
            lim("as", cfg.memory_mb * MiB),
            lim("fsize", cfg.max_file_mb * MiB),
            lim("nofile", cfg.max_open_files),
            lim("nproc", cfg.max_processes),
            "--",
        ]

    def _own_userns_refused(self) -> str | None:
        """As a user: bubblewrap's error when it refuses our user namespace but can make its own; else None."""
        state = self._state
        if self.bwrap is None or state is None or state.userns is None or state.idmap is not None:
            return None
        fd = state.userns.fd
        tries = {}
        for name, options in (("ours", ["--userns", str(fd)]), ("its", ["--unshare-user"])):
            try:
                done = subprocess.run(
                    [self.bwrap, *options, "--ro-bind", "/", "/", "--", "true"],
                    pass_fds=[fd],
                    capture_output=True,
                    timeout=30,
                )
            except (OSError, subprocess.SubprocessError):
                return None
            tries[name] = (done.returncode, done.stderr.decode(errors="replace").strip()[-300:])
        if tries["ours"][0] != 0 and tries["its"][0] == 0:
            return tries["ours"][1] or f"exit {tries['ours'][0]}"
        return None

    def _zygote_argv(self) -> tuple[list[str], Callable[[], None] | None, list[int]]:
        cfg = self.config
        limits = {
            "AS": [cfg.memory_mb * MiB] * 2,
            "FSIZE": [cfg.max_file_mb * MiB] * 2,
            "CORE": [0, 0],
        }
        path = str(_ZYGOTE_PATH)
        if self.bwrap is None:
            # No namespace: the server runs on the host, tracks a run's processes as its descendants.
            filters = {"base": _seccomp.BASE.hex(), "mounts": _seccomp.MOUNTS.hex()}
            argv = [sys.executable, "-I", "-S", path, "{control}", json.dumps(limits), "host", json.dumps(filters)]
            return argv, None, []
        options, preexec, fds = self._bwrap_options(zygote=True)
        # The zygote is the namespace's init: when it dies, the kernel ends every process of the namespace.
        # (bubblewrap's own init would wait for them: in our user namespace, --die-with-parent does not
        # reach it; the zygote asks for its parent's death signal itself.)
        argv = [
            *options,
            "--as-pid-1",
            "--chdir",
            "/",
            "--",
            os.path.abspath(sys.executable),
            "-I",
            "-S",
            path,
            "{control}",
        ]
        argv.append(json.dumps(limits))
        return [*argv, "ns", json.dumps(self._hardening())], preexec, fds
