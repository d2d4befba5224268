"""The unprivileged sandbox: never host uid 0, no writable kernel interface, a seccomp filter, a minimal /etc.

Run as root (as CI does), through the real bubblewrap sandbox. Dangerous writes are aimed only at kernel
interfaces the sandbox must refuse, and each test checks on the host that nothing changed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aleph_exec._config import ExecConfig
from aleph_exec._sandbox import WorkspaceSandbox, bwrap_available

pytestmark = pytest.mark.skipif(not bwrap_available(), reason="needs bubblewrap")


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[WorkspaceSandbox]:
    ws = tmp_path / "ws"
    ws.mkdir()
    box = WorkspaceSandbox(ws, ExecConfig(isolation="bwrap"))
    try:
        yield box
    finally:
        box.close()


def sh(box: WorkspaceSandbox, command: str, timeout: float = 60) -> tuple[int | None, str, str]:
    result = box.run(["bash", "-c", command], cwd=box.workspace, timeout=timeout)
    assert box.zygote_error is None, box.zygote_error
    return result.exit_code, result.stdout, result.stderr


def test_the_command_is_never_host_root(sandbox: WorkspaceSandbox) -> None:
    _, out, _ = sh(sandbox, "id -u; id -un; cat /proc/self/uid_map /proc/self/gid_map; grep CapEff /proc/self/status")
    uid, name, *maps, cap = out.strip().split("\n")
    assert (uid, name) == ("1000", "aleph")
    host = ExecConfig().sandbox_host_uid if os.geteuid() == 0 else os.geteuid()
    # Its one uid and gid are an unprivileged host id; host uid 0 is not even mapped.
    assert [m.split() for m in maps] == [["1000", str(host), "1"]] * 2
    assert host != 0
    assert cap.split() == ["CapEff:", "0000000000000000"]


def test_a_host_root_owned_workspace_stays_writable_and_keeps_its_owner(sandbox: WorkspaceSandbox) -> None:
    ws = sandbox.workspace
    (ws / "old.txt").write_text("old\n")
    code, out, err = sh(sandbox, "stat -c %u old.txt; echo more >> old.txt; echo new > new.txt; mkdir d && touch d/f")
    assert code == 0, err
    assert out.strip() == "1000"  # a host-root file shows as the sandbox user's
    owner = os.stat(ws).st_uid
    assert {p.stat().st_uid for p in (ws / "old.txt", ws / "new.txt", ws / "d", ws / "d" / "f")} == {owner}
    assert (ws / "old.txt").read_text() == "old\nmore\n"


def test_the_kernel_interfaces_under_proc_are_read_only_or_hidden(sandbox: WorkspaceSandbox) -> None:
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    probes = [
        "echo '|/bin/false' > /proc/sys/kernel/core_pattern",
        "echo 1 > /proc/sys/vm/drop_caches",
        "echo h > /proc/sysrq-trigger",
        "echo 1 > /proc/sys/kernel/sysrq",
        "echo 0 > /proc/sys/net/ipv4/ip_forward",
    ]
    for probe in probes:
        if not Path(probe.rsplit("> ", 1)[1]).exists():
            continue  # not in this kernel
        code, _, err = sh(sandbox, probe)
        assert code != 0, probe
        assert "Read-only file system" in err or "Permission denied" in err, (probe, err)
    _, out, _ = sh(
        sandbox, "head -c 64 /proc/kcore | wc -c; cat /proc/keys | wc -l; ls -A /proc/acpi 2>/dev/null | wc -l"
    )
    assert out.split() == ["0", "0", "0"]
    # The mounts themselves are read-only (not merely refused by permissions).
    _, mounts, _ = sh(sandbox, "cat /proc/self/mountinfo")
    for path in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"):
        if not Path(path).exists():
            continue
        lines = [line for line in mounts.splitlines() if line.split()[4] == path]
        assert lines and "ro" in lines[-1].split()[5].split(","), path
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern


def test_etc_is_minimal_and_holds_no_secrets(sandbox: WorkspaceSandbox) -> None:
    _, out, _ = sh(sandbox, "ls -A /etc; echo ---; cat /etc/passwd; echo ---; getent passwd aleph")
    listing, passwd, entry = out.split("---\n")
    names = set(listing.split())
    assert not names & {"shadow", "gshadow", "shadow-", "gshadow-", "ssh", "sudoers", "security", "ssl/private"}
    assert {"passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache"} <= names
    assert "resolv.conf" not in names  # network proxied (the default): no DNS inside, the proxy resolves names
    assert "aleph:x:1000:1000" in passwd and Path("/etc/passwd").read_text() != passwd
    assert entry.startswith("aleph:x:1000:1000:")
    code, _, _ = sh(sandbox, "cat /etc/shadow")
    assert code != 0


# Each line: a system call, how it is called from Python's ctypes, and the errno the filter answers.
SYSCALLS = """
import ctypes, errno, json, os, platform
libc = ctypes.CDLL(None, use_errno=True)
x86 = platform.machine() == "x86_64"
NR = dict(
    bpf=321 if x86 else 280, keyctl=250 if x86 else 219, add_key=248 if x86 else 217,
    perf_event_open=298 if x86 else 241, userfaultfd=323 if x86 else 282, init_module=175 if x86 else 105,
    finit_module=313 if x86 else 273, kexec_load=246 if x86 else 104, open_by_handle_at=304 if x86 else 265,
    swapon=167 if x86 else 224, reboot=169 if x86 else 142, setns=308 if x86 else 268,
    io_uring_setup=425, clone3=435,
)
out = {}
for name, nr in NR.items():
    r = libc.syscall(nr, 0, 0, 0, 0, 0, 0)
    out[name] = errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "ok"
# A well-formed mount: refused, for want of any capability (the command holds none, and cannot make a
# user namespace to get some).
r = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
out["mount"] = errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "ok"
r = libc.unshare(0x10000000)
out["unshare_user"] = errno.errorcode.get(ctypes.get_errno(), "?") if r < 0 else "ok"
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
out["seccomp"] = status.get("Seccomp", "").strip()
out["no_new_privs"] = status.get("NoNewPrivs", "").strip()
out["filters"] = status.get("Seccomp_filters", "").strip()
print(json.dumps(out))
"""


@pytest.mark.parametrize("transaction", [False, True])
def test_the_seccomp_filter_refuses_the_dangerous_system_calls(
    sandbox: WorkspaceSandbox, tmp_path: Path, transaction: bool
) -> None:
    layer = None
    if transaction:
        if sandbox.transaction_support() is not None:
            pytest.skip(f"no transactions here: {sandbox.transaction_support()}")
        layer = tmp_path / "layer"
        layer.mkdir()
    result = sandbox.run([sys.executable, "-I", "-c", SYSCALLS], cwd=sandbox.workspace, timeout=60, layer=layer)
    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)
    assert (got.pop("seccomp"), got.pop("no_new_privs"), got.pop("filters")) == ("2", "1", "1")
    expected = dict.fromkeys(got, "EPERM")
    expected.update(io_uring_setup="ENOSYS", clone3="ENOSYS")
    assert got == expected


def test_new_user_namespaces_are_refused_even_through_unshare_and_bubblewrap(sandbox: WorkspaceSandbox) -> None:
    code, _, err = sh(sandbox, "unshare -U true")
    assert code != 0 and "Operation not permitted" in err
    code, _, _ = sh(sandbox, "unshare -r id")
    assert code != 0


def test_everyday_work_still_runs(sandbox: WorkspaceSandbox) -> None:
    ws = sandbox.workspace
    (ws / "test_x.py").write_text("def test_x():\n    assert 1 + 1 == 2\n")
    steps = [
        "git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m one",
        f"{sys.executable} -m pytest -q -p no:cacheprovider test_x.py | tail -1",
        f"{sys.executable} -m venv --without-pip venv && venv/bin/python -c 'import sys; print(sys.prefix)'",
        "python3 -c 'import ssl, sqlite3, subprocess; print(subprocess.run([\"true\"]).returncode)'",
        "mkdir -p a/b && cp -r a c && tar -cf x.tar c && rm -rf a c x.tar && echo files",
    ]
    if shutil.which("node"):
        steps.append('node -e \'require("fs").writeFileSync("n.txt", "n"); console.log("node")\'')
    for step in steps:
        code, out, err = sh(sandbox, step, timeout=120)
        assert code == 0, (step, out, err)
    _, out, _ = sh(sandbox, "git log --oneline | wc -l")
    assert out.strip() == "1"


def test_results_say_which_isolation_was_in_force(sandbox: WorkspaceSandbox, tmp_path: Path) -> None:
    result = sandbox.run(["true"], cwd=sandbox.workspace, timeout=30)
    assert result.to_json()["isolation"].startswith("bwrap+userns")
    plain_ws = tmp_path / "plain"
    plain_ws.mkdir()
    plain = WorkspaceSandbox(plain_ws, ExecConfig(isolation="none"))
    try:
        assert plain.run(["true"], cwd=plain_ws, timeout=30).to_json()["isolation"].startswith("none")
    finally:
        plain.close()


def _doctor(toml: str, tmp_path: Path) -> dict[str, tuple[str, str]]:
    import aleph_exec.plugin

    import aleph

    (tmp_path / "aleph.toml").write_text(toml)
    config = aleph.load_config(tmp_path / "aleph.toml")
    checks: dict[str, tuple[str, str]] = {}
    aleph_exec.plugin.aleph_doctor_checks(register=lambda name, check: checks.update({name: check()}), config=config)
    return checks


def test_doctor_reports_what_is_in_force(tmp_path: Path) -> None:
    checks = _doctor('[exec]\nisolation = "bwrap"\n[exec.network]\nallow = ["pypi.org"]\n', tmp_path)
    names = {"exec.isolation", "exec.overlay", "exec.cgroup", "exec.seccomp", "exec.network", "exec.layers"}
    assert set(checks) == names
    assert ("ok", True) == (checks["exec.network"][0], "allowed hosts: pypi.org" in checks["exec.network"][1])
    # Layers go in the workspace's .aleph-tx (a root-owned workspace, Aleph as root); asking writes nothing.
    assert checks["exec.layers"][0] == "ok" and ".aleph-tx" in checks["exec.layers"][1], checks["exec.layers"]
    assert not (tmp_path / ".aleph-tx").exists()
    status, detail = checks["exec.isolation"]
    assert status == "ok" and "user namespace" in detail and "host uid 0 " not in detail, detail
    assert checks["exec.seccomp"][0] == "ok", checks["exec.seccomp"]
    if os.geteuid() == 0:
        assert checks["exec.overlay"][0] == "ok", checks["exec.overlay"]


def test_doctor_says_plain_processes_hold_nothing_back(tmp_path: Path) -> None:
    checks = _doctor('[exec]\nisolation = "none"\n', tmp_path)
    assert checks["exec.isolation"][0] == "warn" and "plain processes" in checks["exec.isolation"][1]
    assert checks["exec.overlay"] == ("warn", checks["exec.overlay"][1])
    assert "isolation is none" in checks["exec.overlay"][1]
    assert checks["exec.network"][0] == "warn" and "cannot be taken away" in checks["exec.network"][1]


# -- as a user: Debian's python3 as `nobody`, with copies of aleph_exec and what it imports ----------------

NONROOT_PROBE = """
import json, sys
from pathlib import Path
from aleph_exec._sandbox import WorkspaceSandbox
from aleph_exec._config import ExecConfig
ws = Path(sys.argv[1])
box = WorkspaceSandbox(ws, ExecConfig(isolation="bwrap"))
command = (
    "id -u; cat /proc/self/uid_map; grep Seccomp_filters /proc/self/status; echo 1 > /proc/sys/vm/drop_caches;"
    " echo e=$?; test -e /etc/shadow && echo shadow; unshare -U true; echo u=$?; echo x > mine.txt;"
    " cut -d' ' -f5,6 /proc/self/mountinfo | grep -E '^/proc/(sys|irq) ' | cut -d, -f1;"
    " mount -t tmpfs none /tmp; echo m=$?"
)
result = box.run(["bash", "-c", command], cwd=ws, timeout=60)
print(json.dumps({"out": result.stdout, "err": result.stderr, "isolation": result.isolation,
                  "zygote_error": box.zygote_error, "transactions": box.transaction_support()}))
box.close()
"""


NONROOT_LAYER_PROBE = """
import json, os, stat, sys
from pathlib import Path
from aleph_exec._sandbox import WorkspaceSandbox
from aleph_exec._config import ExecConfig
ws, layer = Path(sys.argv[1]), Path(sys.argv[2])
box = WorkspaceSandbox(ws, ExecConfig(isolation="bwrap"), protected=[ws / ".aleph"])
command = (
    "id -u; echo new > created.txt; echo changed > kept.txt; rm gone.txt; rm -r olddir; mkdir olddir;"
    " echo x > .aleph/config 2>/dev/null; echo a=$?; echo x > .git/hooks/pre-commit 2>/dev/null; echo h=$?;"
    " echo 1 > /proc/sys/vm/drop_caches 2>/dev/null; echo e=$?; cat kept.txt created.txt;"
    " test -e gone.txt || echo nogone"
)
support = box.transaction_support()
result = box.run(["bash", "-c", command], cwd=ws, timeout=60, layer=layer)
upper = layer / "upper"
entries = {}
for path in sorted(upper.rglob("*")):
    st = path.lstat()
    kind = "whiteout" if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0 else "dir" if path.is_dir() else "file"
    entries[str(path.relative_to(upper))] = [kind, st.st_uid]
    if kind == "dir":
        opaque = os.getxattr(path, "user.overlay.opaque", follow_symlinks=False)
        entries[str(path.relative_to(upper))].append(opaque.decode())
plain = box.run(["bash", "-c", "cat kept.txt; test -e created.txt && echo leaked; echo ok"], cwd=ws, timeout=60)
print(json.dumps({"out": result.stdout, "err": result.stderr, "transaction": result.transaction,
                  "support": support, "entries": entries, "plain": plain.stdout, "left": sorted(os.listdir(layer)),
                  "zygote_error": box.zygote_error}))
box.close()
"""


class Nobody:
    """Runs a probe as ``nobody`` under Debian's python3, with copies of aleph_exec and what it imports."""

    def __init__(self, root: Path) -> None:
        import importlib
        import pwd
        import subprocess

        if os.geteuid() != 0:
            pytest.skip("needs root, to run the sandbox as another user")
        self.python = "/usr/bin/python3"
        if not os.access(self.python, os.X_OK):
            pytest.skip(f"no {self.python} (scripts/setup-system installs python3)")
        version = subprocess.run([self.python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True)
        if version.stdout.decode().strip() != str(sys.version_info[:2]):
            pytest.skip("Debian's python3 is another version than this one: the compiled dependencies would not load")
        self.uid = pwd.getpwnam("nobody").pw_uid
        bwrap = shutil.which("bwrap") or "bwrap"
        userns = subprocess.run(
            [bwrap, "--unshare-user", "--ro-bind", "/", "/", "true"], user=self.uid, group=self.uid, capture_output=True
        )
        if userns.returncode != 0:
            pytest.skip(f"this machine gives users no user namespaces: {userns.stderr.decode(errors='replace')}")
        self.root = root
        self.lib = root / "lib"
        self.lib.mkdir()
        for name in ("aleph_exec", "pydantic", "pydantic_core", "typing_extensions", "annotated_types", "anyio"):
            module = importlib.import_module(name)
            source = Path(module.__file__ or "")
            if source.name == "__init__.py":
                shutil.copytree(source.parent, self.lib / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(source, self.lib)
        for name in ("sniffio", "idna", "typing_inspection"):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            source = Path(module.__file__ or "")
            shutil.copytree(source.parent, self.lib / name, ignore=shutil.ignore_patterns("__pycache__"))
        self.ws = root / "ws"
        self.ws.mkdir()

    def run(self, probe: str, *args: str, wrap: tuple[str, ...] = ()) -> dict[str, Any]:
        import subprocess

        for path in [self.root, *self.root.rglob("*")]:
            if path.is_relative_to(self.ws) or path.name.startswith("layer"):
                os.lchown(path, self.uid, self.uid)
        subprocess.run(["chmod", "-R", "a+rX", str(self.root)], check=True)
        argv = ["probe", *args]
        boot = f"import sys; sys.path.insert(0, {str(self.lib)!r}); sys.argv = {argv!r}; exec({probe!r})"
        done = subprocess.run(
            [*wrap, self.python, "-I", "-c", boot],
            user=self.uid,
            group=self.uid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
        got: dict[str, Any] = json.loads(done.stdout)
        assert got["zygote_error"] is None, got["zygote_error"]
        return got


@pytest.fixture
def nobody() -> Iterator[Nobody]:
    import tempfile

    # Not under tmp_path (its parent is root's alone): nobody must reach these.
    root = Path(tempfile.mkdtemp(prefix="aleph-nonroot-"))
    try:
        yield Nobody(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_as_a_user_the_sandbox_holds_too(nobody: Nobody) -> None:
    got = nobody.run(NONROOT_PROBE, str(nobody.ws))
    lines = got["out"].split("\n")
    assert lines[0] == "1000"
    # Our own user namespace: its one user, 1000, is nobody on the host (no namespace nested in it).
    assert lines[1].split() == ["1000", str(nobody.uid), "1"]
    assert lines[2].split() == ["Seccomp_filters:", "1"]
    assert "e=1" in lines and "shadow" not in lines and "u=1" in lines, got
    # /proc's kernel interfaces are mounted read-only (as root), not only closed by their permissions;
    # and the command may mount nothing (no capability, and the seccomp filter).
    assert "/proc/sys ro" in lines and "/proc/irq ro" in lines, got
    assert "m=0" not in lines and any(line.startswith("m=") for line in lines), got
    assert got["isolation"].startswith("bwrap+userns")
    assert (nobody.ws / "mine.txt").stat().st_uid == nobody.uid
    assert got["transactions"] is None


NO_USERNS_PROBE = """
import json, os, sys
from pathlib import Path
from aleph_exec._sandbox import WorkspaceSandbox
from aleph_exec._config import ExecConfig
box = WorkspaceSandbox(Path(sys.argv[1]), ExecConfig(isolation="bwrap"))
print(json.dumps({"uid": os.geteuid(), "support": box.transaction_support(), "zygote_error": None}))
box.close()
"""


def test_as_a_user_without_user_namespaces_transactions_say_why(nobody: Nobody) -> None:
    # nobody, root of a user namespace whose limit of namespaces (its own, counted) is 1, makes a second
    # in which it is uid 1000 and runs Aleph there: Aleph can make no user namespace of its own.
    if shutil.which("unshare") is None:
        pytest.skip("no unshare (util-linux)")
    limit = 'echo 1 > /proc/sys/user/max_user_namespaces && exec "$@"'
    wrap = ("unshare", "-U", "-r", "--", "sh", "-c", limit, "sh")
    wrap += ("unshare", "-U", "--map-user=1000", "--map-group=1000", "--")
    got = nobody.run(NO_USERNS_PROBE, str(nobody.ws), wrap=wrap)
    assert got["uid"] == 1000
    assert "cannot make the sandbox's user namespace" in got["support"], got
    assert "No space left on device" in got["support"], got  # the kernel's refusal (ENOSPC), named


CONCURRENT_LAYERS_PROBE = """
import json, sys, threading
from pathlib import Path
from aleph_exec._sandbox import WorkspaceSandbox
from aleph_exec._config import ExecConfig
ws, root = Path(sys.argv[1]), Path(sys.argv[2])
box = WorkspaceSandbox(ws, ExecConfig(isolation="bwrap"))
layers = [root / f"layer{i}" for i in range(4)]
out = {}
def one(i):
    r = box.run(["bash", "-c", f"sleep 0.2; echo {i} > mine.txt; ls"], cwd=ws, timeout=60, layer=layers[i])
    out[i] = [r.stdout, r.transaction, sorted(p.name for p in (layers[i] / "upper").iterdir()),
              (layers[i] / "upper" / "mine.txt").read_text()]
threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"out": out, "zygote_error": box.zygote_error}))
box.close()
"""


def test_as_a_user_concurrent_layer_runs_get_their_own_layers(nobody: Nobody) -> None:
    (nobody.ws / "base.txt").write_text("b\n")
    for i in range(4):
        (nobody.root / f"layer{i}").mkdir()
    got = nobody.run(CONCURRENT_LAYERS_PROBE, str(nobody.ws), str(nobody.root))
    for i in range(4):
        stdout, transaction, upper, mine = got["out"][str(i)]
        assert transaction is True
        assert stdout == "base.txt\nmine.txt\n"  # the run sees its own write only, over the workspace
        assert upper == ["mine.txt"] and mine == f"{i}\n"
    assert sorted(p.name for p in nobody.ws.iterdir()) == ["base.txt"]


def test_as_a_user_a_layer_run_writes_only_into_the_layer(nobody: Nobody) -> None:
    ws = nobody.ws
    (ws / "kept.txt").write_text("old\n")
    (ws / "gone.txt").write_text("bye\n")
    (ws / "olddir").mkdir()
    (ws / "olddir" / "inner.txt").write_text("in\n")
    (ws / ".aleph").mkdir()
    (ws / ".aleph" / "config").write_text("cfg\n")
    (ws / ".git" / "hooks").mkdir(parents=True)
    layer = nobody.root / "layer"
    layer.mkdir()
    got = nobody.run(NONROOT_LAYER_PROBE, str(ws), str(layer))
    assert got["support"] is None
    assert got["transaction"] is True
    lines = got["out"].split("\n")
    assert lines[0] == "1000"
    assert "a=1" in lines and "h=1" in lines and "e=1" in lines, got
    assert "changed" in lines and "new" in lines and "nogone" in lines, got
    # The upper layer holds exactly what the command created, modified and deleted, as nobody's files.
    entries = got["entries"]
    assert entries == {
        "created.txt": ["file", nobody.uid],
        "kept.txt": ["file", nobody.uid],
        "gone.txt": ["whiteout", nobody.uid],
        "olddir": ["dir", nobody.uid, "y"],  # removed and made again: opaque (nothing of the lower shows)
    }, entries
    # The real workspace is untouched, and a later plain run sees it as it was.
    assert (ws / "kept.txt").read_text() == "old\n"
    assert (ws / "gone.txt").read_text() == "bye\n"
    assert (ws / "olddir" / "inner.txt").read_text() == "in\n"
    assert not (ws / "created.txt").exists()
    assert (ws / ".aleph" / "config").read_text() == "cfg\n"
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert got["plain"] == "old\nok\n"
    # overlayfs's work directory (its work/work has mode 000, which only root could remove) is gone.
    assert got["left"] == ["upper"]


def test_the_per_run_bubblewrap_fallback_is_as_unprivileged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # When the zygote cannot start, each run gets a bubblewrap of its own: the same user namespace, /etc
    # and seccomp filters (given to bubblewrap), and no capability.
    import aleph_exec._namespace as sandbox_module

    broken = tmp_path / "no-zygote.py"
    broken.write_text("raise SystemExit('no zygote in this test')\n")
    monkeypatch.setattr(sandbox_module, "_ZYGOTE_PATH", broken)
    ws = tmp_path / "ws"
    ws.mkdir()
    box = WorkspaceSandbox(ws, ExecConfig(isolation="bwrap"))
    try:
        probe = (
            "id -u; grep -E 'Seccomp_filters|CapEff|NoNewPrivs' /proc/self/status; test -e /etc/shadow && echo shadow"
        )
        result = box.run(["bash", "-c", probe + "; unshare -U true; echo u=$?"], cwd=ws, timeout=60)
        assert box.zygote_error is not None
        lines = result.stdout.split("\n")
        assert lines[0] == "1000"
        fields = dict(line.split(":\t") for line in lines[1:4])
        assert fields["CapEff"] == "0000000000000000" and fields["NoNewPrivs"] == "1"
        assert int(fields["Seccomp_filters"]) >= 2
        assert "shadow" not in lines and "u=1" in lines
        (ws / "x").write_text("x")
        assert box.run(["bash", "-c", "echo y >> x"], cwd=ws, timeout=60).exit_code == 0
        assert (ws / "x").stat().st_uid == os.stat(ws).st_uid
    finally:
        box.close()


def test_a_workspace_owned_by_a_user_is_the_sandbox_users_and_keeps_that_owner(tmp_path: Path) -> None:
    # Aleph as root over a user's checkout: the owner's files are the sandbox user's, new ones are the owner's.
    if os.geteuid() != 0:
        pytest.skip("as a user, the workspace is the user's own")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mine.txt").write_text("mine\n")
    for path in (ws, ws / "mine.txt"):
        os.chown(path, 4321, 4322)
    box = WorkspaceSandbox(ws, ExecConfig(isolation="bwrap"))
    try:
        code, out, err = (lambda r: (r.exit_code, r.stdout, r.stderr))(
            box.run(
                ["bash", "-c", "stat -c '%u %g' mine.txt; echo more >> mine.txt; mkdir d; echo n > d/n"],
                cwd=ws,
                timeout=60,
            )
        )
        assert (code, out) == (0, "1000 1000\n"), err
        assert {(p.stat().st_uid, p.stat().st_gid) for p in (ws / "mine.txt", ws / "d", ws / "d" / "n")} == {
            (4321, 4322)
        }
        if box.transaction_support() is None:
            layer = tmp_path / "layer"
            layer.mkdir()
            result = box.run(
                ["bash", "-c", "echo l > layered.txt; echo x >> mine.txt"], cwd=ws, timeout=60, layer=layer
            )
            assert result.exit_code == 0, result.stderr
            upper = layer / "upper"
            assert {(p.stat().st_uid, p.stat().st_gid) for p in (upper / "layered.txt", upper / "mine.txt")} == {
                (4321, 4322)
            }
    finally:
        box.close()
