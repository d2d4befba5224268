"""Installing without PyPI: scripts/build-dists writes checked wheels and sdists, and a plugin made from the
template installs into a fresh virtualenv with `pip install --find-links DIST aleph-<name>`, as a plugin
author's users would (the aleph-* packages are not on PyPI; third-party dependencies come from the index)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# aleph-core's wheel carries the ledger's native accelerator (core/hatch_build.py compiles it; gcc and libssl-dev
# come from scripts/setup-system), so it is tagged for this interpreter and platform, as hatchling infers it.
_PY = f"cp{sys.version_info.major}{sys.version_info.minor}"
_PLATFORM = sysconfig.get_platform().replace("-", "_").replace(".", "_")
CORE_WHEEL = f"aleph_core-0.1.0-{_PY}-{_PY}-{_PLATFORM}.whl"


def make_plugin_from_template(target: Path) -> Path:
    """Follow plugins/_template/README.md step 1 and 2: copy, rename to `hello`, keep its one tool."""
    shutil.copytree(REPO / "plugins" / "_template", target, ignore=shutil.ignore_patterns("__pycache__", "tests"))
    (target / "src" / "aleph_template").rename(target / "src" / "aleph_hello")
    for path in (target / "pyproject.toml", target / "src" / "aleph_hello" / "plugin.py", target / "README.md"):
        text = path.read_text()
        for old, new in (("aleph_template", "aleph_hello"), ("aleph-template", "aleph-hello")):
            text = text.replace(old, new)
        text = text.replace("template_echo", "hello_echo").replace("TemplateEcho", "HelloEcho")
        text = text.replace('template = "aleph_hello.plugin"', 'hello = "aleph_hello.plugin"')
        path.write_text(text)
    return target


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}  # build-dists uses this test's Python (it has build, twine)
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert 0 == done.returncode, f"{args}: {done.stdout}\n{done.stderr}"
    return done


def test_a_template_plugin_wheel_installs_into_a_fresh_venv_from_dist(tmp_path: Path) -> None:
    plugin = make_plugin_from_template(tmp_path / "aleph-hello")
    dist = tmp_path / "dist"
    built = run(REPO / "scripts" / "build-dists", "--out", dist, REPO / "core", plugin)
    names = sorted(p.name for p in dist.iterdir())
    assert (
        sorted(
            [CORE_WHEEL, "aleph_core-0.1.0.tar.gz", "aleph_hello-0.1.0-py3-none-any.whl", "aleph_hello-0.1.0.tar.gz"]
        )
        == names
    )
    assert built.stdout.count("PASSED") == 4  # twine check --strict on every file
    packed = zipfile.ZipFile(dist / CORE_WHEEL).namelist()
    assert [n for n in packed if n.startswith("aleph/_ledger/_rowfast.") and n.endswith(".so")]  # built, once
    assert "aleph/_ledger/_rowfast.c" in packed and "hatch_build.py" in tarfile_names(dist / "aleph_core-0.1.0.tar.gz")

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "pip", "install", "-q", "--disable-pip-version-check", "--find-links", dist, "aleph-hello")

    workspace = tmp_path / "ws"
    workspace.mkdir()
    listed = run(venv / "bin" / "aleph", "tools", "list", "--json", cwd=workspace)
    assert "hello_echo" in [d["name"] for d in json.loads(listed.stdout)]
    called = run(venv / "bin" / "aleph", "tools", "call", "hello_echo", "--input", '{"text": "hi"}', cwd=workspace)
    assert {"text": "hi"} == json.loads(called.stdout)
    plugins = run(venv / "bin" / "aleph", "plugins", cwd=workspace)
    assert "aleph-hello 0.1.0" in plugins.stdout


def test_build_dists_installs_build_and_twine_itself_on_a_fresh_machine(tmp_path: Path) -> None:
    # A checkout whose Pythons have neither build nor twine: a copy of the script (no .venv beside it),
    # PYTHON and the python3 on PATH both a bare virtualenv.
    bare = tmp_path / "bare"
    run(sys.executable, "-m", "venv", "--without-pip", bare)
    scripts = tmp_path / "checkout" / "scripts"
    scripts.mkdir(parents=True)
    shutil.copy2(REPO / "scripts" / "build-dists", scripts / "build-dists")
    env = {
        "PATH": f"{bare / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHON": str(bare / "bin" / "python"),
    }
    env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})  # the machine's index settings
    done = subprocess.run(
        [str(scripts / "build-dists"), "--out", str(tmp_path / "dist"), str(REPO / "core")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert 0 == done.returncode, done.stderr
    assert "installing build and twine into" in done.stderr
    assert (tmp_path / "cache" / "aleph" / "build-dists-venv" / "bin" / "twine").exists()
    assert sorted(p.name for p in (tmp_path / "dist").iterdir()) == sorted([CORE_WHEEL, "aleph_core-0.1.0.tar.gz"])


def test_the_memory_wheel_carries_its_native_vector_kernels(tmp_path: Path) -> None:
    # aleph-memory's build hook compiles the vector index's int8 kernels (plugins/memory/hatch_build.py): its
    # wheel is tagged for this interpreter and platform, and its sdist carries the source and the hook.
    dist = tmp_path / "dist"
    run(REPO / "scripts" / "build-dists", "--out", dist, REPO / "plugins" / "memory")
    wheel = f"aleph_memory-0.1.0-{_PY}-{_PY}-{_PLATFORM}.whl"
    assert sorted(p.name for p in dist.iterdir()) == sorted([wheel, "aleph_memory-0.1.0.tar.gz"])
    packed = zipfile.ZipFile(dist / wheel).namelist()
    assert len([n for n in packed if n.startswith("aleph_memory/_int8dot.") and n.endswith(".so")]) == 1
    sdist = tarfile_names(dist / "aleph_memory-0.1.0.tar.gz")
    assert "hatch_build.py" in sdist and "src/aleph_memory/_int8dot.c" in sdist
    assert not [n for n in sdist if n.endswith(".so")]  # a module compiled in place is never shipped


def tarfile_names(path: Path) -> list[str]:
    """The file names in an sdist, without its top folder."""
    import tarfile

    with tarfile.open(path) as archive:
        return [name.partition("/")[2] for name in archive.getnames()]
