"""The text layer of the command-policy floor (issue 13): one class per test group, with cases of our own.

Each class is a mechanism, so the cases are spellings the analyser was never told about: unknown wrapper
programs, targets that are only known after expansion, programs that run other programs through an
option or a config key, program identity for permission rules, ``working_dir``-relative judging,
``code_exec`` snippets, and the ``uncontained_exec`` rule. ``/`` and ``~`` are judged with ``check`` and
``explain`` only; nothing here runs a command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import aleph
from aleph import CommandPolicy, ToolFacts

from .command_corpus import CWD, HOME, PROTECTED


def judge(command: str, cwd: str | None = CWD) -> tuple[str, tuple[str, ...]]:
    verdict = CommandPolicy(home=Path(HOME), protected_paths=PROTECTED).check(
        command, cwd=Path(cwd) if cwd is not None else None
    )
    return verdict.action, verdict.rules


# -- 1. unknown wrapper programs ------------------------------------------------------------------

UNKNOWN_WRAPPERS_BLOCK = [
    "nocache rm -rf /",
    "schedtool -e rm -rf ~",
    "proot -0 rm -rf /",
    "linux32 rm -rf /",
    "setarch x86_64 -R rm -rf ~",
    "tsp rm -rf /",
    "daemonize /bin/rm -rf /",
    "fakechroot rm -rf ~/",
    "hyperfine 'rm -rf /'",
    "entr -s 'rm -rf ~' < files.txt",
    "watchexec -- rm -rf /",
    "tmux new-session -d 'rm -rf ~'",
    "sqlite3 x.db '.shell rm -rf /'",
    "my-runner --then='rm -rf /' go",
]
UNKNOWN_WRAPPERS_ASK = [
    'some-wrapper bash -c "$PAYLOAD"',
    "some-wrapper --user nobody sh script.sh",
    "schedtool -B -e python3 -c 'print(1)'",
    "with-lock make install",
    "runwith /usr/bin/env python3 x.py",
    "mytool --target /etc",
    "mytool ~",
    "cleaner /[a-z]*",
    'sg wheel -c "$X"',
    'faketime -f +1d bash -c "$X"',
    "eatmydata $CMD --flag",
    'nocache "$(command -v make)" all',
]
# everyday commands (some with unknown programs) that must stay allowed: no false asks
EVERYDAY = [
    "ls -la ~",
    "du -sh ~/.cache",
    "cat README.md | grep -n TODO",
    "git status",
    "git log --oneline -20",
    'git commit -m "stop rm -rf from running twice"',
    "git -C . status",
    "python -m pytest -q",
    "python3 -c 'import sys; print(sys.version)'",
    "uv run python -m pytest -q",
    "npm run build",
    "cargo test",
    "go test ./...",
    "make -j4",
    "make -C docs html",
    "tar -czf dist.tar.gz dist/",
    "rsync -a src/ backup/",
    "find . -name '*.pyc' -delete",
    "gh pr create --title 'Fix the bug' --body details",
    "terraform plan",
    "shellcheck scripts/run.sh",
    "./scripts/run.sh --fast",
    "mytool build --out dist",
    "timeout 60 pytest -q",
    "vim README.md",
    "less README.md",
    "gdb ./a.out",
]


@pytest.mark.parametrize("command", UNKNOWN_WRAPPERS_BLOCK)
def test_an_unknown_wrapper_around_a_hardline_command_is_blocked(command: str) -> None:
    assert judge(command)[0] == "block"


@pytest.mark.parametrize("command", UNKNOWN_WRAPPERS_ASK)
def test_an_unknown_program_naming_a_program_or_a_wide_target_cannot_be_proven(command: str) -> None:
    action, rules = judge(command)
    assert action in ("ask", "block"), rules
    assert action == "block" or "unknown_program" in rules or "dynamic_shell_code" in rules


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_commands_stay_allowed(command: str) -> None:
    assert judge(command)[0] in ("allow", "warn")


# -- 2. expansion before judging targets ----------------------------------------------------------

WIDEST_BLOCK = [
    "rm -rf /[a-z]*",
    "rm -rf /[!x]*",
    "rm -rf /?*",
    "rm -rf /b*",
    "rm -rf ~/[a-z]*",
    "rm -rf ~/.[!.]*",
    "rm -rf ~/*/",
    "rm -rf {/tmp/x,/}",
    "rm -rf /{,}",
    "rm -rf {~,/tmp/x}",
    "rm -rf ~/.",
    "rm -rf $HOME/..",
    "rm -rf /$IFS",
    "rm -rf ${TARGET:-/}",
    "rm -rf ${TARGET=/}",
    'rm -rf "$UNSET"/',
    'rm -rf "$BUILD"/*',
    "cd ~ && rm -rf *",
    "cd / && rm -rf ./*",
    "find ~/ -delete",
    "find -L / -name x -delete",
    "find . / -delete",
    "find -files0-from /dev/null ~ -delete",
    "rsync -a --delete-after empty/ ~",
    "rsync --del x/ /",
    "tar --remove-files -cf /dev/null ~",
    "tar cf x.tar --remove-files /",
    "mv ~/* /tmp/gone/",
    "x=/; rm -rf $x",
    'target=~; cd /tmp && rm -rf "$target"',
    'export D=/; rm -rf "$D"/*',
    'for d in x /; do rm -rf "$d"; done',
    "eval 'v=/'; rm -rf ${v}",
]
WIDEST_ASK = [
    "rm -rf $(cat victims)",
    "rm -rf ${DIR:?}/*",
    "rm -rf ~other",
    "find -files0-from list.txt -delete",
]


@pytest.mark.parametrize("command", WIDEST_BLOCK)
def test_a_target_is_judged_as_the_widest_thing_it_can_be(command: str) -> None:
    action, rules = judge(command)
    assert (action, "rm_rf_root" in rules) == ("block", True), rules


@pytest.mark.parametrize("command", WIDEST_ASK)
def test_a_target_only_known_at_run_time_asks(command: str) -> None:
    assert judge(command)[0] == "ask"


@pytest.mark.parametrize("command", ["rm -rf ./build*", "rm -rf *.egg-info", "rm -rf ~/.cache/pip", "rm -rf x/*"])
def test_narrow_globs_and_workspace_targets_are_not_widened(command: str) -> None:
    assert judge(command)[0] in ("allow", "warn")


# -- 3. programs that run other programs ----------------------------------------------------------

EXEC_OPTIONS = [
    "git grep -Oless -e x",
    "git grep --open-files-in-pager=vi x",
    "git difftool -y -xcat",
    "git difftool --extcmd=cat HEAD",
    "git archive --remote=. --exec=x HEAD",
    "git push --exec=x origin",
    "git fetch --upload-pack=x origin",
    "git ls-remote --receive-pack=x origin",
    "git -c core.sshCommand=x fetch",
    "git -c diff.external=x diff",
    "git --config-env=core.pager=PAGER log",
    "git clone --config core.hooksPath=h url d",
    "git config --file sub/cfg core.fsmonitor x",
    "git config -f elsewhere.cfg user.name x",
    "git send-email --to x patch",
    "git clone --template=/tmp/t url d",
    "git -C sub status",
    "git -C ../other log",
    "git --git-dir=/tmp/elsewhere/.git log",
    "GIT_DIR=/tmp/elsewhere/.git git log",
    "git help --web log",
    "make --eval='all: ; touch x' all",
    "make -E 'x: ; y' x",
    "make SHELL=./evil",
    "make -f /dev/stdin < Makefile.in",
    "make -f /tmp/elsewhere.mk all",
    "gdb -batch -ex run ./a.out",
    "gdb -x script.gdb ./a.out",
    "lldb -o 'run' ./a.out",
    "vim -es -c wq file",
    "vi -c ':!touch x' file",
    "nvim --cmd 'lua x()' file",
    "vim -S session.vim",
    "vim +'!touch x' file",
    "emacs --batch --eval '(x)'",
    "less '+!touch x' file",
    "ed file <<< 'q'",
    "awk 'BEGIN { system(\"touch x\") }'",
    "awk '{ print | \"sh\" }' file",
    "sed -n '1e touch x' file",
    "sed 's/a/b/e' file",
    "tar -xf a.tar --to-command=cat",
    "tar -cf a.tar -I gzip x",
    "tar -cf a.tar --checkpoint-action=exec=x x",
    "rsync -e 'ssh -p 2' a host:b",
    "rsync --rsh=ssh a host:b",
    "ssh -o ProxyCommand=x host",
    'find . -exec sh -c "$X" \\;',
    'xargs sh -c "$X" < list',
    "env -S 'sh -c \"$X\"'",
    "python3 -c 'import os; os.system(cmd)'",
    "perl -e 'system($cmd)'",
    "ruby -e 'exec(ENV[\"X\"])'",
    "node -e 'require(\"child_process\").execSync(process.env.X)'",
]


@pytest.mark.parametrize("command", EXEC_OPTIONS)
def test_an_option_or_setting_that_runs_code_is_never_proven_safe(command: str) -> None:
    assert judge(command)[0] in ("ask", "block")


EXEC_OPTIONS_BLOCK = [
    "gdb -batch -ex 'shell rm -rf ~'",
    "gdb -ex '!rm -rf /' -ex quit",
    "lldb -o 'platform shell rm -rf /'",
    "vim -es -c '!rm -rf /' -c q",
    "ex -c 'silent !rm -rf ~' file",
    "make -f /dev/null --eval='x: ; rm -rf ~' x",
    "git -c core.pager='rm -rf /' log",
    "man -P 'rm -rf ~' ls",
    "git -c core.fsmonitor='rm -rf ~' status",
    "git push --exec='rm -rf /' origin",
    "git difftool -y -x 'rm -rf ~' HEAD",
    "sed 's/x/y/w /home/user/.bashrc' file",
    "sed -n 'w /work/project/aleph.toml' file",
    "git config -f sub/.git/config core.hooksPath h",
    "env -S 'rm -rf ~'",
    "nice -n 5 nohup stdbuf -oL timeout 9 rm -rf /",
    "doas rm -rf ~",
    "ssh host 'rm -rf /'",
]


@pytest.mark.parametrize("command", EXEC_OPTIONS_BLOCK)
def test_the_code_an_exec_option_runs_is_judged_too(command: str) -> None:
    assert judge(command)[0] == "block"


# -- 6. inline code (python3 -c, node -e and code_exec snippets) ------------------------------------

CODE_BLOCK = [
    "import os as o; o.system('rm -rf ~')",
    "__import__('os').system('rm -rf /')",
    "import subprocess; subprocess.Popen('rm -rf /', shell=True)",
    "from subprocess import check_call as c; c(['rm', '-r', '/'])",
    "import os; os.execvp('rm', ['rm', '-rf', '/'])",
    "import os; os.spawnlp(os.P_WAIT, 'rm', 'rm', '-rf', '/')",
    "import shutil; shutil.rmtree('/home/user')",
    "exec(\"import os; os.system('rm -rf /')\")",
    "import os; os.remove('/work/project/aleph.toml')",
]
CODE_ASK = [
    "import os; os.system(cmd)",
    "import subprocess; subprocess.run(args)",
    "import subprocess; subprocess.run([program, 'x'])",
    "import subprocess; subprocess.run(['rm', '-rf', target])",
    "import subprocess; subprocess.run(['git', '-c', setting, 'status'])",
    "import subprocess; subprocess.run(['sh', '-c', script])",
    "import os; f = os.system; f('ls')",
    "import os; getattr(os, 'system')('ls')",
    "getattr(__import__('o' + 's'), 'system')('ls')",
    "import shutil, os; shutil.rmtree(os.path.expanduser('~'))",
    "exec(open('x.py').read())",
    "import importlib; importlib.import_module(name)",
    "from os import *; system('ls')",
    "def broken(:",
]


@pytest.mark.parametrize("code", CODE_BLOCK)
def test_python_code_that_deletes_root_or_home_is_blocked(code: str) -> None:
    assert judge(f"python3 -c {_quote(code)}")[0] == "block"


@pytest.mark.parametrize("code", CODE_ASK)
def test_python_code_the_analyser_cannot_read_asks(code: str) -> None:
    assert judge(f"python3 -c {_quote(code)}")[0] == "ask"


@pytest.mark.parametrize(
    "code",
    [
        "print(1 + 1)",
        "import json, sys; print(json.load(sys.stdin))",
        "import subprocess; subprocess.run(['git', 'status'], check=True)",
        "import subprocess, sys; subprocess.run(['git', 'log', sys.argv[1]])",
        "import os; print(os.getcwd())",
    ],
)
def test_ordinary_python_code_is_allowed(code: str) -> None:
    assert judge(f"python3 -c {_quote(code)}")[0] == "allow"


def test_python_options_before_c_do_not_hide_the_code() -> None:
    assert judge("""python3 -W ignore -I -c 'import os; os.system("rm -rf /")'""")[0] == "block"
    assert judge("""python3 -Ic 'import os; os.system("rm -rf /")'""")[0] == "block"
    assert judge("""python3 - <<'EOF'\nimport os; os.system("rm -rf /")\nEOF""")[0] == "block"
    assert judge("python3 -m pip install -e .")[0] == "allow"  # -e of pip is not code


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('node -e \'require("child_process").execSync("rm -rf ~")\'', "block"),
        ('node -e \'const {spawn} = require("child_process"); spawn("rm", ["-rf", "/"])\'', "block"),
        ("node -e 'eval(process.argv[1])'", "ask"),
        ("node -e \"const m = require('child_' + 'process'); m['ex' + 'ecSync'](x)\"", "ask"),
        ("node -e \"process.binding('spawn_sync')\"", "ask"),
        ("node -e \"console.log(require('os').platform())\"", "allow"),
        ("node -e 'console.log(1)'", "allow"),
        ("php -r 'shell_exec($x);'", "ask"),
        ("ruby -e '`rm -rf /`'", "block"),
        ('perl -e \'exec "rm", "-rf", "/"\'', "block"),
    ],
)
def test_other_interpreters_are_read_for_the_commands_they_run(command: str, expected: str) -> None:
    assert judge(command)[0] == expected


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# -- through the chokepoint: working_dir, code_exec, identity, allow rules, uncontained -------------


class _Shell(aleph.LoopTool):
    """A fake exec-class tool: it reports the command instead of running it."""

    def shell_command(self, input: dict[str, Any]) -> str | None:
        if "code" in input:
            quoted = _quote(input["code"])
            return f"python3 -c {quoted}" if input.get("language") == "python" else input["code"]
        return input.get("command")


class _ContainedShell(_Shell):
    """Starts in ``working_dir`` (None when it leaves the workspace) and runs as a transaction."""

    workspace = ""

    def shell_cwd(self, input: dict[str, Any]) -> str | None:
        target = (Path(self.workspace) / input.get("working_dir", ".")).resolve()
        return str(target) if target.is_relative_to(self.workspace) and target.is_dir() else None

    def uncontained(self, input: dict[str, Any]) -> str | None:
        return "network is enabled" if input.get("network") else None


class _Fixtures:
    ALEPH_PLUGIN_NAME = "floor_fixtures"

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        async def run(data: dict[str, Any]) -> dict[str, Any]:
            return {"ran": data}

        schema = {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "code": {"type": "string"},
                "language": {"type": "string"},
                "working_dir": {"type": "string"},
                "network": {"type": "boolean"},
            },
            "additionalProperties": False,
        }
        facts = ToolFacts(tags=("exec",))
        contained = _ContainedShell("bash", "Run a shell command (fixture).", schema, run, facts=facts)
        contained.workspace = str(self.workspace.resolve())
        register(contained)
        register(
            _Shell("code_exec", "Run a shell command (fixture without the optional methods).", schema, run, facts=facts)
        )


def _runtime(workspace: Path, toml: str = "") -> aleph.Aleph:
    (workspace / "aleph.toml").write_text(toml)
    return aleph.load(plugins=[_Fixtures(workspace)], entry_points=False, strict=True)


@pytest.mark.anyio
async def test_relative_paths_are_judged_from_the_working_directory(workspace: Path) -> None:
    (workspace / "sub" / "deeper").mkdir(parents=True)
    async with _runtime(workspace) as rt:
        svc = rt.tool_service(tier="full")
        for working_dir, command in (
            ("sub", "echo owned > ../aleph.toml"),
            ("sub/deeper", "cp x ../../aleph.toml"),
            ("sub", "tee ../.git/hooks/pre-commit < x"),
        ):
            explanation = svc.explain("bash", {"command": command, "working_dir": working_dir})
            assert (explanation.decision, explanation.rule_id) == ("deny", "command_blocked"), explanation.reason
        # the same text from the root writes a harmless file
        assert svc.explain("bash", {"command": "echo ok > ../aleph.toml", "working_dir": "."}).decision == "allow"


@pytest.mark.anyio
async def test_an_unresolvable_working_directory_fails_closed(workspace: Path) -> None:
    async with _runtime(workspace) as rt:
        svc = rt.tool_service(tier="full")
        explanation = svc.explain("bash", {"command": "echo hi > notes.txt", "working_dir": "../.."})
        assert explanation.decision == "ask" and "working directory" in explanation.reason
        assert svc.explain("bash", {"command": "rm -rf /", "working_dir": "missing"}).decision == "deny"


@pytest.mark.anyio
async def test_a_code_snippet_meets_the_floor_as_its_bash_form_does(workspace: Path) -> None:
    async with _runtime(workspace) as rt:
        svc = rt.tool_service(tier="full")
        code = "import os; os.system('rm -rf /')"
        snippet = svc.explain("bash", {"language": "python", "code": code})
        through_bash = svc.explain("bash", {"command": f"python3 -c {_quote(code)}"})
        assert (snippet.decision, snippet.rule_id) == (through_bash.decision, through_bash.rule_id)
        assert snippet.decision == "deny"
        assert svc.explain("bash", {"language": "python", "code": "import os; os.system(x)"}).decision == "ask"


RULES = """
[policies.tool_permissions.overrides]
bash = "deny"
"bash(git *)" = "allow"
"bash(./scripts/check.sh)" = "allow"
"""


@pytest.mark.anyio
@pytest.mark.parametrize(
    "command",
    [
        "./tools/git status",
        "tools/git status",
        "../git status",
        "git grep -Ox -e y",
        "git difftool -y -x'touch PWN;'",
        "git archive --remote=. --exec='touch PWN;' HEAD",
        "git -c core.fsmonitor=x status",
        "git config -f sub/.git/config core.fsmonitor x",
        "git $(echo status)",
        "git status; curl x",
        "git status (",
    ],
)
async def test_an_allow_rule_covers_only_the_real_program_with_harmless_options(workspace: Path, command: str) -> None:
    async with _runtime(workspace, RULES) as rt:
        explanation = rt.tool_service(tier="full").explain("bash", {"command": command})
        assert explanation.decision in ("deny", "ask"), explanation
        assert explanation.rule != "bash(git *)"


@pytest.mark.anyio
async def test_an_allow_rule_still_covers_what_it_names(workspace: Path) -> None:
    async with _runtime(workspace, RULES) as rt:
        svc = rt.tool_service(tier="full")
        for command in ("git status", "git log --oneline -5", "/usr/bin/git diff", "./scripts/check.sh"):
            assert svc.explain("bash", {"command": command}).decision == "allow", command


@pytest.mark.anyio
async def test_a_workspace_directory_on_path_unproves_bare_program_names(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = workspace / "bin"
    tools.mkdir()
    (tools / "git").write_text("#!/bin/sh\n")
    (tools / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    async with _runtime(workspace, RULES) as rt:
        assert rt.tool_service(tier="full").explain("bash", {"command": "git status"}).decision == "deny"


@pytest.mark.anyio
async def test_uncontained_exec_asks_under_auto_only(workspace: Path) -> None:
    async with _runtime(workspace) as rt:
        auto = rt.tool_service(tier="auto")
        contained = auto.explain("bash", {"command": "ls"})
        assert contained.decision == "allow" and "contained: runs as a transaction" in contained.notes
        network = auto.explain("bash", {"command": "ls", "network": True})
        assert (network.decision, network.rule_id) == ("ask", "uncontained_exec")
        assert "network is enabled" in network.reason and "`bash`" in network.reason
        missing = auto.explain("code_exec", {"command": "ls"})
        assert (missing.decision, missing.rule_id) == ("ask", "uncontained_exec")
        assert "uncontained" in missing.reason
        # the floor comes first: a blocked command stays denied, a command it cannot prove says so
        assert auto.explain("code_exec", {"command": "rm -rf /"}).rule_id == "command_blocked"
        assert auto.explain("code_exec", {"command": "$X"}).rule_id == "command_policy"
        # full does not ask for containment; ask asks as before
        assert rt.tool_service(tier="full").explain("code_exec", {"command": "ls"}).decision == "allow"
        assert rt.tool_service(tier="ask").explain("bash", {"command": "ls"}).rule_id == "tier_raised"


@pytest.mark.anyio
async def test_a_deny_rule_catches_a_program_by_its_basename_or_its_path(workspace: Path) -> None:
    toml = '[policies.tool_permissions.overrides]\n"bash(curl *)" = "deny"\n"bash(./evil.sh *)" = "deny"\n'
    async with _runtime(workspace, toml) as rt:
        svc = rt.tool_service(tier="full")
        for command in ("./tools/curl x", "/opt/bin/curl x", "curl x", "./evil.sh a", "sub/../evil.sh b"):
            assert svc.explain("bash", {"command": command}).decision == "deny", command
        assert svc.explain("bash", {"command": "./good.sh a"}).decision == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "ip netns exec n rm -rf /",
        "rustup run stable rm -rf ~",
        "bundle exec rm -rf /",
        "dc -e '!rm -rf /'",
        "cmake -E rm -rf /",
        "cmake -E remove_directory ~",
        "go test -exec='rm -rf ~' ./...",
        "nc -l 9 -c 'rm -rf /'",
        "./tools/ls rm -rf /",
    ],
)
def test_programs_that_run_their_arguments_are_not_taken_for_harmless_ones(command: str) -> None:
    assert judge(command)[0] == "block"


@pytest.mark.parametrize(
    "command",
    [
        "rg --pre ./x foo",
        "sort --compress-program=x big.txt",
        "split --filter='sh -c x' big.txt",
        "bat --pager=x README.md",
        "sdiff --diff-program=x a b",
        "cmake -E chdir / rm -rf x",
        "git config set core.pager x",
        "./tools/ls sh -c x",
        "cp -r dotfiles/ ~/",
        "rsync -a dotfiles/ ~",
        "tar -xf x.tar -C ~",
        "unzip x.zip -d /",
    ],
)
def test_options_that_run_a_program_or_unknown_trees_in_wide_places_ask(command: str) -> None:
    assert judge(command)[0] == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "cp .bashrc ~",
        "cp id_rsa.pub ~/.ssh/",
        "ln -sf /tmp/x/.bashrc ~/",
        "echo x > ~/.bash*",
        "mv .profile ~/",
        "python3 -c \"open('/work/project/aleph.toml', 'w').write('x')\"",
        "python3 -c \"from pathlib import Path; Path('/home/user/.bashrc').write_text('x')\"",
        "python3 -c \"import shutil; shutil.copy('k', '/home/user/.ssh/authorized_keys')\"",
        "node -e \"require('fs').writeFileSync('/home/user/.zshrc', 'x')\"",
        "node -e \"require('fs').rmSync('/', {recursive: true})\"",
        'ruby -e \'require "fileutils"; FileUtils.rm_rf("/")\'',
        "git diff --output=/home/user/.bashrc",
        "awk '{print > \"/home/user/.profile\"}' f",
        "perl -pi -e 's/a/b/' ~/.bashrc",
    ],
)
def test_writes_into_protected_files_are_blocked_however_they_are_spelled(command: str) -> None:
    assert judge(command)[0] == "block"


@pytest.mark.parametrize(
    "command",
    [
        "tar -xzf archive.tar.gz",
        "cp -r assets build/",
        "python3 -c \"open('notes.txt', 'w').write('x')\"",
        "node -e \"require('fs').writeFileSync('out.txt', 'x')\"",
        "./configure --prefix=/usr/local",
        'rm -rf "${BUILD:?}"/out',
    ],
)
def test_ordinary_writes_in_the_workspace_stay_allowed(command: str) -> None:
    assert judge(command)[0] in ("allow", "warn", "ask") and judge(command)[0] != "block"
    if "BUILD" not in command:
        assert judge(command)[0] in ("allow", "warn")


@pytest.mark.parametrize(
    "command",
    [
        "chmod -R 000 /",
        "chown -R nobody ~",
        "chgrp -R x /home/*",
        "setfacl -R -m u:x:rwx /[a-z]*",
        "cd ~ && rm -rf -- *",
        "pushd / && rm -rf *",
        "find / -maxdepth 1 -exec rm -rf {} +",
        "perl -MFile::Path -e 'rmtree(\"/\")'",
        "rm -rf ${HOME}/",
    ],
)
def test_more_spellings_of_destroying_root_or_home_block(command: str) -> None:
    assert judge(command)[0] == "block"


@pytest.mark.parametrize("command", ["chmod -R u+w build", "chmod 755 ~", "chown -R me:me ./dist"])
def test_ordinary_permission_changes_stay_allowed(command: str) -> None:
    assert judge(command)[0] in ("allow", "warn")


# -- deleting a tree deletes the protected files inside it ----------------------------------------


@pytest.mark.parametrize(
    ("command", "cwd"),
    [
        ("rm -rf .", CWD),
        ("rm -r ..", f"{CWD}/sub"),
        ("rm -rf ../../..", f"{CWD}/a/b"),
        (f"rm -fr {CWD}", "/tmp"),
        ("mv . ../elsewhere", CWD),
        (f"mv {CWD} /tmp/gone", "/tmp"),
        ("cmake -E rm -rf .", CWD),
    ],
)
def test_deleting_a_tree_that_holds_a_protected_file_is_blocked(command: str, cwd: str) -> None:
    action, rules = judge(command, cwd)
    assert ("block", True) == (action, "write_protected_path" in rules), command


@pytest.mark.parametrize("command", ["rm -rf build", "rm -rf ./dist ./.cache", "find . -name '*.pyc' -delete"])
def test_deleting_a_tree_without_protected_files_is_not_blocked_for_it(command: str) -> None:
    assert "write_protected_path" not in judge(command)[1], command
