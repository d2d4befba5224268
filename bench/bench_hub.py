"""The hub's three figures, each against a baseline or a target measured in the same run.

Run: python bench/bench_hub.py [ROUNDS]

1. Install: ``hub_install_run`` of a small plugin (built from plugins/_template) from a loopback
   PEP 691 index, through the chokepoint with a human who approves, until its tool is listed by the
   tool service — against ``pip install --target`` of the same wheel from the same index (pip's own
   run, same flags, nothing else). Target (issue 19): <= 1.5x. Median of ROUNDS alternating runs.
2. Verify: every single-file modification, addition and removal over the installed plugins, one at
   a time, each checked by ``hub_install_verify``. Target: 100% caught.
3. Skill routing: ``skill_list`` with query, recall@3 over tests/hub/data/routing.json (24 skills,
   60 labelled prompts). Target: >= 0.95.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import aleph_hub.plugin  # noqa: E402
from hub.localindex import LocalIndex, build_test_wheels, serve_index  # noqa: E402

import aleph  # noqa: E402
from aleph import ApprovalOutcome, ScriptedRequester  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5


def runtime(ws: Path, index_url: str) -> aleph.Aleph:
    (ws / "aleph.toml").write_text(
        f'[workspace]\ndata_dir = "{(ws / ".data").as_posix()}"\n'
        f'[hub]\nindex_url = "{index_url}"\nuser_skills_dirs = ["{(ws / "user").as_posix()}"]\n'
    )
    return aleph.load(ws / "aleph.toml", workspace=ws, plugins=[aleph_hub.plugin], entry_points=False, strict=True)


def forget(prefix: str) -> None:
    """Undo what loading an installed plugin did in this process, so the next round starts clean."""
    for name in [m for m in sys.modules if m.startswith(prefix)]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if "/plugins/site" not in p]


# aleph-core, the plugin's one dependency, is already in this environment (as for the hub's own run).
PIP = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--no-deps", "--only-binary", ":all:"]


def ms(times: list[float]) -> str:
    return ", ".join(f"{t * 1000:.0f}" for t in times)


def pip_baseline(index: LocalIndex, target: Path) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    start = time.perf_counter()
    subprocess.run(
        [*PIP, "--index-url", index.url, "--target", str(target), "aleph-greet"],
        check=True,
        env=env,
        capture_output=True,
    )
    return time.perf_counter() - start


def hub_install(index: LocalIndex, ws: Path) -> float:
    rt = runtime(ws, index.url)

    async def go() -> float:
        async with rt:
            service = rt.tool_service(requester=ScriptedRequester([ApprovalOutcome.APPROVED]), tier="auto")
            start = time.perf_counter()
            out = (await service.execute("hub_install_run", {"requirement": "aleph-greet"})).value
            listed = {d.name for d in await service.list()}
            elapsed = time.perf_counter() - start
            assert out["status"] == "installed" and "greet_echo" in listed, out
            return elapsed

    try:
        return asyncio.run(go())
    finally:
        forget("aleph_greet")


def bench_install(index: LocalIndex) -> None:
    pip_times, hub_times = [], []
    for i in range(ROUNDS):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            if i % 2:
                hub_times.append(hub_install(index, Path(a)))
                pip_times.append(pip_baseline(index, Path(b)))
            else:
                pip_times.append(pip_baseline(index, Path(b)))
                hub_times.append(hub_install(index, Path(a)))
    p, h = statistics.median(pip_times), statistics.median(hub_times)
    print(f"install  pip install --target (baseline): median {p * 1000:7.0f} ms  ({ms(pip_times)})")
    print(f"install  hub_install_run until listed:    median {h * 1000:7.0f} ms  ({ms(hub_times)})")
    print(f"install  ratio {h / p:.2f}x   (target <= 1.5x)")


def bench_verify(index: LocalIndex) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        rt = runtime(ws, index.url)

        async def go() -> tuple[int, int, int, int]:
            async with rt:
                service = rt.tool_service(
                    requester=ScriptedRequester(lambda r: aleph.ApprovalResponse(ApprovalOutcome.APPROVED)), tier="auto"
                )
                for name in ("aleph-greet", "aleph-shout"):
                    await service.execute("hub_install_run", {"requirement": name})

                async def caught(kind: str, path: str) -> bool:
                    report = (await service.execute("hub_install_verify", {})).value
                    return any(path in d[kind] for d in report["distributions"]) and not report["ok"]

                clean = (await service.execute("hub_install_verify", {})).value
                assert clean["ok"], clean
                total = found = 0
                for dist in clean["distributions"]:
                    base = Path(dist["location"])
                    files = [f for f in _receipt_files(ws, dist["distribution"])]
                    for rel in files:
                        path = base / rel
                        original = path.read_bytes()
                        path.write_bytes(original + b"\n#")  # modification
                        total += 1
                        found += await caught("modified", rel)
                        path.write_bytes(original)
                        path.unlink()  # removal
                        total += 1
                        found += await caught("removed", rel)
                        path.write_bytes(original)
                    for top in sorted({Path(r).parts[0] for r in files if len(Path(r).parts) > 1}):
                        extra = base / top / "added_by_bench.py"
                        extra.write_text("x = 1\n")  # addition
                        total += 1
                        found += await caught("added", extra.relative_to(base).as_posix())
                        extra.unlink()
                return (
                    total,
                    found,
                    len(clean["distributions"]),
                    sum(d["files_checked"] for d in clean["distributions"]),
                )

        try:
            total, found, dists, files = asyncio.run(go())
        finally:
            forget("aleph_greet")
            forget("aleph_shout")
    caught = f"{found}/{total} single-file changes caught over {dists} plugins ({files} files)"
    print(f"verify   {caught}: {found / total:.0%}   (target 100%)")


def _receipt_files(ws: Path, dist: str) -> list[str]:
    import sqlite3

    db = sqlite3.connect(ws / ".data" / "hub.sqlite")
    (files,) = db.execute("SELECT files FROM receipts WHERE distribution = ?", (dist,)).fetchone()
    db.close()
    return sorted(json.loads(files))


def bench_routing() -> None:
    data = json.loads((REPO / "tests" / "hub" / "data" / "routing.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        for skill in data["skills"]:
            folder = ws / ".aleph" / "skills" / skill["name"]
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(
                f"---\nname: {skill['name']}\ndescription: {json.dumps(skill['description'])}\n---\n\nBody.\n"
            )
        rt = runtime(ws, "https://pypi.org/simple/")

        async def go() -> tuple[int, int, float]:
            async with rt:
                service = rt.tool_service()
                at1 = at3 = 0
                start = time.perf_counter()
                for item in data["prompts"]:
                    ids = [
                        s["id"]
                        for s in (await service.execute("skill_list", {"query": item["prompt"], "limit": 3})).value[
                            "skills"
                        ]
                    ]
                    at1 += bool(ids) and ids[0] == item["skill"]
                    at3 += item["skill"] in ids
                return at1, at3, (time.perf_counter() - start) / len(data["prompts"])

        at1, at3, per = asyncio.run(go())
    n = len(data["prompts"])
    recall = f"recall@1 {at1 / n:.3f}, recall@3 {at3 / n:.3f}   (target recall@3 >= 0.95)"
    print(f"routing  {len(data['skills'])} skills, {n} prompts: {recall}; {per * 1000:.1f} ms per skill_list")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp, serve_index() as index:
        wheels = build_test_wheels(Path(tmp))
        index.add("aleph-greet", wheels["greet-1.0.0"])
        index.add("aleph-shout", wheels["shout"])
        sandbox = "yes" if _has_bwrap() else "no"
        print(f"python {sys.version.split()[0]}, pip {_pip_version()}, bubblewrap {sandbox}, {ROUNDS} rounds")
        bench_install(index)
        bench_verify(index)
    bench_routing()


def _pip_version() -> str:
    import pip

    return pip.__version__


def _has_bwrap() -> bool:
    import shutil

    return shutil.which("bwrap") is not None


if __name__ == "__main__":
    main()
