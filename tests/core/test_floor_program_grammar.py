"""Programs that run code read as the programs read their command lines (red-team round, area "redfloor").

sed, awk and ``env -S`` took "the first word not starting with ``-``" as their code, so an option's value
(``awk -v x=1 PROG``), a long option with ``=`` (``sed --expr=``), a clustered flag (``env -iS``) or a
sed address before ``e`` (``1!e cmd``) ran code the floor never read. Perl, Ruby, Node, PHP and Lua calls
kept only their first string literal, so ``system("rm -rf " + dir)`` was judged as ``rm -rf``.

Where the machine has the program, each spelling is first run for real (it touches a marker file in a
scratch directory) to show it does run a command; the floor must then not allow it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from aleph import CommandPolicy
from aleph._floor._sedawk import sed_effects

from .command_corpus import CWD, HOME, PROTECTED

POLICY = CommandPolicy(home=Path(HOME), protected_paths=PROTECTED)


def _verdict(command: str) -> str:
    return POLICY.check(command, cwd=Path(CWD)).action


def _runs_for_real(command: str, tmp_path: Path) -> bool:
    """Whether ``command`` (which touches ./MARK when it runs what it hides) runs it under bash here."""
    marker = tmp_path / "MARK"
    marker.unlink(missing_ok=True)
    (tmp_path / "x").write_text("a\n")
    subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=30, check=False)
    return marker.exists()


HIDDEN_COMMANDS = [
    # awk: the value of -v / -F taken for the program
    ("awk", "awk -v x=1 'BEGIN{system(\"touch MARK\")}'"),
    ("awk", "awk -F : 'BEGIN{system(\"touch MARK\")}'"),
    ("awk", "awk -v x=1 -F, '{print | \"touch MARK\"}' x"),
    ("awk", "awk -f /dev/stdin x <<< 'BEGIN{system(\"touch MARK\")}'"),
    ("awk", "awk -v x=1 -f - x <<< 'BEGIN{system(\"touch MARK\")}'"),
    # sed: addresses before e, other delimiters, long options with =, scripts on stdin
    ("sed", "sed '1!e touch MARK' x; sed '$e touch MARK' x"),
    ("sed", "sed '/a/ e touch MARK' x"),
    ("sed", "sed -n '$e touch MARK' x"),
    ("sed", "sed 's|a|touch MARK|e' x"),
    ("sed", "sed 's,a,touch MARK,e' x"),
    ("sed", "sed --expr='1e touch MARK' x"),
    ("sed", "sed --expression='1e touch MARK' x"),
    ("sed", "sed -n -e p --expr '1 e touch MARK' x"),
    ("sed", "sed -f /dev/stdin x <<< '1e touch MARK'"),
    ("sed", "sed -f - x <<< 's/a/touch MARK/e'"),
    ("sed", "sed '1,$ ! b; e touch MARK' x"),
    ("sed", "sed 's/[/]/x/;1e touch MARK' x"),
]


@pytest.mark.parametrize(("program", "command"), HIDDEN_COMMANDS)
def test_a_command_hidden_in_a_programs_script_is_never_allowed(program: str, command: str, tmp_path: Path) -> None:
    if shutil.which(program) is not None:
        assert _runs_for_real(command, tmp_path), f"the spelling no longer runs a command here: {command}"
    elif os.environ.get("CI") == "true":
        pytest.fail(f"{program} is not installed")
    assert _verdict(command) != "allow", command


ENV_SPELLINGS = [
    # short options clustered with -S or -C, and env's own escapes in -S text
    ("env -iS 'touch MARK'", "env -iS 'rm -rf ~'"),
    ("env -vS 'touch MARK'", "env -vS 'rm -rf /'"),
    ("env -uX -iS'touch MARK'", "env -uX -iS'rm -rf ~'"),
    ("env -S 'touch\\_MARK'", "env -S 'rm\\_-rf\\_/'"),
    ("env -S'touch\\_MARK'", "env -S'rm\\_-rf\\_~'"),
    ("env -S 'sh -c \"touch\\_MARK\"'", "env -S 'sh -c \"rm\\_-rf\\_/\"'"),
    ("mkdir -p d && env -iC d touch ../MARK", "env -iC / rm -rf *"),
]


@pytest.mark.parametrize(("harmless", "attack"), ENV_SPELLINGS)
def test_env_runs_what_its_options_and_escapes_say_and_the_floor_reads_it_so(
    harmless: str, attack: str, tmp_path: Path
) -> None:
    assert _runs_for_real(harmless, tmp_path), f"the spelling no longer runs its command here: {harmless}"
    assert _verdict(harmless) == "allow", harmless
    assert _verdict(attack) == "block", attack


HARDLINE = [
    "awk -v x=1 'BEGIN{system(\"rm -rf ~\")}'",
    "awk -F : 'BEGIN{system(\"rm -rf /\")}' /etc/passwd",
    "gawk --source='BEGIN{system(\"rm -rf ~\")}'",
    "awk -v x=1 '{print > \"/home/user/.bashrc\"}' x",
    "awk -F : '{print >> \"/home/user/.ssh/authorized_keys\"}' k",
    "sed -n --expr='w /home/user/.bashrc' x",
    "sed --expression 's/a/b/w /home/user/.profile' x",
    # inline code: a literal prefix of a computed command still meets the hardline rules
    "ruby -e 'system(\"rm -rf / \" + x)'",
    'node -e \'require("child_process").execSync("rm -rf ~/" + x)\'',
    "perl -MFile::Path -e 'remove_tree \"/home/user\"'",
    "ruby -rfileutils -e 'FileUtils.rm_rf \"/home/user\"'",
]


@pytest.mark.parametrize("command", HARDLINE)
def test_a_destructive_command_through_these_spellings_blocks(command: str) -> None:
    assert _verdict(command) == "block", command


COMPUTED = [
    'node -e \'require("child_process").execSync("rm -rf " + process.env.HOME)\'',
    'node -e \'require("child_process").spawnSync("rm", ["-rf", process.env.HOME])\'',
    'node -e \'require("child_process").execFileSync("rm", ["-rf", require("os").homedir()])\'',
    "ruby -e 'system(\"rm -rf \" + Dir.home)'",
    "ruby -e 'system(\"rm -rf #{Dir.home}\")'",
    'ruby -e \'system("rm", "-rf", Dir.home)\'',
    "perl -e 'system(\"rm -rf \" . $ENV{HOME})'",
    'perl -e \'system "rm", "-rf", $ENV{HOME}\'',
    'perl -e \'exec "rm", "-rf", $ENV{HOME}\'',
    'php -r \'system("rm -rf " . getenv("HOME"));\'',
    'lua -e \'os.execute("rm -rf " .. os.getenv("HOME"))\'',
    "lua -e 'os.execute(cmd)'",
    # tree deletes with a computed target, as python's shutil.rmtree(computed) already asks
    "ruby -rfileutils -e 'FileUtils.rm_rf(Dir.home)'",
    "ruby -rfileutils -e 'FileUtils.rm_rf Dir.home'",
    'node -e \'require("fs").rmSync(require("os").homedir(), {recursive: true})\'',
    "node -e 'require(\"fs\").promises.rm(process.env.HOME, {recursive: true})'",
    "perl -MFile::Path=rmtree -e 'rmtree($ENV{HOME})'",
    "perl -MFile::Path -e 'remove_tree $ENV{HOME}'",
]


@pytest.mark.parametrize("command", COMPUTED)
def test_inline_code_whose_command_or_tree_delete_is_computed_is_never_allowed(command: str) -> None:
    assert _verdict(command) != "allow", command


EVERYDAY = [
    "sed -n '1,20p' file.txt",
    "sed -i 's/foo/bar/g' src/app.py",
    "sed -i.bak -e 's/a/b/' -e '/^#/d' x.conf",
    "sed ':a;N;$!ba;s/\\n/ /g' x",
    "sed -n '/start/,/end/{/end/!p}' x",
    "sed '1i\\\nheader' x",
    "sed '$a footer' x",
    "sed 's#/usr/local#/opt#g' x",
    "sed 'y/abc/xyz/' x",
    "sed -e '/x/{' -e 's/a/b/' -e '}' x",
    "sed '0,/foo/s//bar/' x",
    "sed -n '2~3p' x",
    "sed 's/[/]/_/g' x",
    "sed 's/x/y/w changes.log' x",
    "sed --in-place --expression='s/a/b/' x",
    "sed '/pattern/ {\n  s/a/b/\n  p\n}' x",
    "awk '{print $1}' x",
    "awk -F: '{print $1}' /etc/passwd",
    "awk -F, -v OFS='\\t' '{print $1, $3}' data.csv",
    "awk -v n=3 'NR<=n' x",
    "awk '/a|b/ {print}' x",
    'awk \'{ print > "out/" $1 ".txt" }\' x',
    "env -S 'python3 -m pytest -q'",
    'node -e \'require("child_process").execSync("npm test", {stdio: "inherit"})\'',
    'node -e \'require("fs").rmSync("dist", {recursive: true, force: true})\'',
    'ruby -e \'system("git", "status")\'',
    'perl -e \'system("make test") == 0 or die "failed"\'',
    "lua -e 'os.execute(\"ls -la\")'",
]


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_scripts_and_inline_code_stay_allowed(command: str) -> None:
    assert _verdict(command) == "allow", command


SED_SCRIPTS = [
    "1e touch MARK",
    "2!e touch MARK",
    "$ e touch MARK",
    "/b/,/c/ ! e touch MARK",
    "\\%a% e touch MARK",
    "0~1e touch MARK",
    "s/a/touch MARK/e",
    "s|a|touch MARK|ge",
    "s/[/]/x/;s/a/touch MARK/e",
    "y/a/b/;1e touch MARK",
    "{\ne touch MARK\n}",
    "s/a/b/;#comment\n1e touch MARK",
    "1a text e touch MARK",
    "1i\\\ne touch MARK",
    "s/a/b/w out.txt",
    "1w out.txt; e touch MARK",
    "p;p;s/a/b/g",
    ":a;N;$!ba",
]


@pytest.mark.parametrize("script", SED_SCRIPTS)
def test_the_sed_reader_finds_e_exactly_when_gnu_sed_runs_a_command(script: str, tmp_path: Path) -> None:
    sed = shutil.which("sed")
    if sed is None:
        pytest.fail("sed is not installed") if os.environ.get("CI") == "true" else pytest.skip("no sed")
    (tmp_path / "x").write_text("a\n")
    subprocess.run([sed, "-n", script, "x"], cwd=tmp_path, capture_output=True, timeout=30, check=False)
    ran = (tmp_path / "MARK").exists()
    assert sed_effects(script).runs == ran, script


TIMEIT = [
    ('python3 -m timeit -n 1 -r 1 \'open("MARK", "w")\'', "python3 -m timeit 'import os; os.system(\"rm -rf ~\")'"),
    (
        'python3 -m timeit -n 1 -r 1 -s \'open("MARK", "w")\' pass',
        "python3 -m timeit -s 'import shutil; shutil.rmtree(\"/home/user\")' pass",
    ),
    (
        'python3 -mtimeit -n1 -r1 --setup=\'open("MARK", "w")\' pass',
        "python3 -mtimeit --setup='import os' 'os.system(\"rm -rf /\")'",
    ),
]


@pytest.mark.parametrize(("harmless", "attack"), TIMEIT)
def test_python_m_timeit_runs_its_arguments_as_code_and_the_floor_reads_them(
    harmless: str, attack: str, tmp_path: Path
) -> None:
    assert _runs_for_real(harmless, tmp_path), harmless
    assert _verdict(attack) == "block", attack
    assert _verdict('python3 -m timeit "$x"') == "ask"


MORE_WAYS_TO_RUN_OR_WRITE = [
    # Perl's two-argument open and Ruby's Kernel#open run the command a `|` marks
    ("perl -e 'open(F, \"|rm -rf ~\")'", "block"),
    ("perl -e 'open(my $f, \"rm -rf /|\")'", "block"),
    ("ruby -e 'open(\"|rm -rf ~\")'", "block"),
    ("ruby -e 'Kernel.open(\"| rm -rf /\")'", "block"),
    # pathlib writes besides write_text/unlink
    ('python3 -c \'import pathlib; pathlib.Path("/home/user/.bashrc").open("w")\'', "block"),
    ('python3 -c \'import pathlib; pathlib.Path("/tmp/x").rename("/home/user/.bashrc")\'', "block"),
    ('python3 -c \'import pathlib; pathlib.Path("/tmp/x").replace("/home/user/.profile")\'', "block"),
    ('python3 -c \'import pathlib; pathlib.Path("/home/user/.bashrc").symlink_to("/tmp/x")\'', "block"),
    ("python3 -c 'import os; os.chmod(\"/home/user/.ssh/authorized_keys\", 0o666)'", "block"),
    # an interactive shell's start-up file is a script it runs; gawk's @load loads native code
    ("bash --rcfile <(echo 'rm -rf ~') -i", "ask"),
    ("tee rc <<< 'rm -rf ~'; bash --rcfile rc -i", "ask"),
    ("awk '@load \"./evil\"; BEGIN { }'", "ask"),
]


@pytest.mark.parametrize(("command", "expected"), MORE_WAYS_TO_RUN_OR_WRITE)
def test_more_ways_inline_code_and_shells_run_or_write_are_read(command: str, expected: str) -> None:
    assert _verdict(command) == expected, command


@pytest.mark.parametrize(
    "command",
    [
        'perl -e \'open(my $f, "<", "data.txt") or die\'',
        "ruby -e 'open(\"data.txt\") { |f| puts f.read }'",
        "python3 -c 'import pathlib; print(pathlib.Path(\"README.md\").open().read())'",
        'python3 -c \'import pathlib; pathlib.Path("out.txt").open("w").write("x")\'',
    ],
)
def test_reading_and_workspace_writes_through_those_calls_stay_allowed(command: str) -> None:
    assert _verdict(command) == "allow", command
