"""Spellings that once walked around the command-policy floor, judged as a model would send them.

Each class of the review (unknown wrappers, expansion, programs that run programs, program identity,
working_dir, code_exec) with the review's examples and variants of our own. Under the default tier
``auto`` none of them may be allowed without a human: ``explain`` must answer deny or ask. Nothing here
runs a command; the effect tests are in test_transactions.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aleph_exec._config import ExecConfig
from aleph_exec._sandbox import WorkspaceSandbox
from aleph_exec._tools import BashTool, CodeExecTool

from .conftest import make_runtime

DESTRUCTIVE = [
    # glob, brace, tilde and $IFS forms of / and ~
    "rm -rf /[a-z]*",
    "rm -rf ~/[a-z]*",
    "rm -rf /*",
    "rm -rf ~/*",
    "rm -rf /{bin,etc,home}",
    "rm -rf {/,x}",
    "rm${IFS}-rf${IFS}/",
    "rm -rf ${HOME:-/}",
    "d=/; rm -rf $d",
    "rm -rf $(echo /)",
    "rm -rf ~root",
    # wrappers the analyser does not know
    "eatmydata rm -rf /",
    "setpriv --reuid=0 rm -rf /",
    "capsh -- -c 'rm -rf /'",
    "chpst -u nobody rm -rf ~",
    "flock /tmp/x rm -rf ~",
    "ionice -c3 rm -rf /",
    "taskset 1 rm -rf ~",
    "unshare -r rm -rf ~",
    # programs that run programs
    "gdb -batch -ex 'shell rm -rf /'",
    "vim -es -c '!rm -rf ~'",
    "ex -c '!rm -rf ~' -c q",
    "make -f /dev/null --eval='x:; rm -rf /' x",
    "rsync -a --delete e/ ~/",
    "tar -cf /dev/null --remove-files /",
    "tar -xf a.tar --to-command='rm -rf ~'",
    "find -files0-from /dev/null / -delete",
    "find ~ -delete",
    "find / -exec rm -rf {} +",
    "echo / | xargs rm -rf",
    "awk 'BEGIN{system(\"rm -rf ~\")}'",
    "env -S 'rm -rf /'",
    "timeout 5 rm -rf ~",
    "python3 -c 'import shutil; shutil.rmtree(\"/\")'",
    "perl -e 'system(\"rm -rf ~\")'",
]

GIT_EXEC = [
    "git grep -O'touch PWN;' -e x",
    "git difftool -y -x'touch PWN;'",
    "git archive --remote=. --exec='touch PWN;' HEAD",
    "git push --exec='touch PWN;' origin",
    "git -c core.pager='touch PWN;' log",
    "git -c core.fsmonitor='touch PWN' status",
    "git config -f sub/.git/config core.fsmonitor 'touch PWN'",
    "git -C sub status",
    "git fetch --upload-pack='touch PWN;' origin",
    "git -c diff.external='touch PWN;' diff",
    "./tools/git status",
    "tools/git status",
]


@pytest.mark.anyio
@pytest.mark.parametrize("command", DESTRUCTIVE)
async def test_a_destructive_spelling_is_never_allowed_under_auto(workspace: Path, command: str) -> None:
    async with make_runtime(workspace) as rt:
        explanation = rt.tool_service().explain("bash", {"command": command})
    assert explanation.decision in ("deny", "ask"), (command, explanation)


@pytest.mark.anyio
@pytest.mark.parametrize("command", GIT_EXEC)
async def test_an_allow_rule_for_git_does_not_cover_git_that_runs_code(workspace: Path, command: str) -> None:
    (workspace / "sub" / ".git").mkdir(parents=True)
    (workspace / "tools").mkdir()
    (workspace / "tools" / "git").write_text("#!/bin/sh\ntouch PWN\n")
    (workspace / "tools" / "git").chmod(0o755)
    toml = '[policies.tool_permissions.overrides]\nbash = "deny"\n"bash(git *)" = "allow"\n'
    async with make_runtime(workspace, toml) as rt:
        explanation = rt.tool_service(tier="full").explain("bash", {"command": command})
    assert explanation.decision in ("deny", "ask"), (command, explanation)


@pytest.mark.anyio
async def test_the_git_allow_rule_still_covers_plain_git(workspace: Path) -> None:
    toml = '[policies.tool_permissions.overrides]\nbash = "deny"\n"bash(git *)" = "allow"\n'
    async with make_runtime(workspace, toml) as rt:
        explanation = rt.tool_service(tier="full").explain("bash", {"command": "git status --short"})
    assert explanation.decision == "allow", explanation


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("command", "working_dir"),
    [
        ("echo owned > ../aleph.toml", "sub"),
        ("cp /dev/null ../aleph.toml", "sub"),
        ("mkdir -p ../.aleph-data/approvals && echo '{}' > ../.aleph-data/approvals/always.json", "sub"),
        ("rm -rf ../../..", "sub/deeper"),
        ("rm -rf ..", "sub"),
    ],
)
async def test_relative_targets_are_judged_from_the_working_dir(
    workspace: Path, command: str, working_dir: str
) -> None:
    (workspace / working_dir).mkdir(parents=True)
    async with make_runtime(workspace) as rt:
        explanation = rt.tool_service().explain("bash", {"command": command, "working_dir": working_dir})
    assert explanation.decision in ("deny", "ask"), (command, explanation)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("python", "import os; os.system('rm -rf /')"),
        ("python", "import subprocess; subprocess.run(['rm', '-rf', '/'])"),
        ("python", "import shutil, os; shutil.rmtree(os.path.expanduser('~'))"),
        ("node", "require('child_process').execSync('rm -rf ~')"),
    ],
)
async def test_code_exec_meets_the_floor(workspace: Path, language: str, code: str) -> None:
    async with make_runtime(workspace) as rt:
        explanation = rt.tool_service().explain("code_exec", {"language": language, "code": code})
    assert explanation.decision in ("deny", "ask"), (language, code, explanation)


def test_the_exec_tools_report_where_they_start(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    sandbox = WorkspaceSandbox(tmp_path, ExecConfig(isolation="none"))
    bash = BashTool(sandbox)
    code = CodeExecTool(sandbox)
    root = str(tmp_path.resolve())
    assert bash.shell_cwd({"command": "ls"}) == root
    assert bash.shell_cwd({"command": "ls", "working_dir": "sub"}) == f"{root}/sub"
    assert bash.shell_cwd({"command": "ls", "working_dir": "../x"}) is None
    assert code.shell_cwd({"language": "python", "code": "1", "working_dir": "missing"}) is None
    assert (
        code.shell_command({"language": "python", "code": "print('it''s')"})
        == "python3 -c 'print('\\''it'\\'''\\''s'\\'')'"
    )
    assert code.shell_command({"language": "node", "code": "x()"}) == "node -e 'x()'"
    assert code.shell_command({"language": "bash", "code": "ls"}) == "ls"
