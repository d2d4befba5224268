"""Where a command writes, read as bash and the programs read it (red-team round, area "redfloor").

Three holes of one kind: the floor did not see where a write lands. ``dd of=~/.bashrc`` (bash expands a
tilde after the ``=`` of an assignment-like argument), programs that put a tree of unknown names into a
directory given by an option (``unzip -od ~/.ssh``, ``git clone x ~/.ssh``, ``patch -d ~``, ``wget -P ~``,
``tar -C ~/.ssh``) and a recursive delete of the whole working directory once a ``cd`` made it unknown
(``cd "$d" && rm -rf *``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from aleph import CommandPolicy

from .command_corpus import CWD, HOME, PROTECTED

POLICY = CommandPolicy(home=Path(HOME), protected_paths=PROTECTED)


def _verdict(command: str) -> str:
    return POLICY.check(command, cwd=Path(CWD)).action


@pytest.mark.parametrize(
    ("word", "expanded"), [("of=~/x", "of={home}/x"), ("P=/a:~/b", "P=/a:{home}/b"), ("x=~", "x={home}")]
)
def test_bash_expands_a_tilde_after_the_equals_sign_of_an_argument(word: str, expanded: str, tmp_path: Path) -> None:
    out = subprocess.run(
        ["bash", "-c", f"printf %s {word}"], env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True
    )
    assert out.stdout == expanded.format(home=tmp_path)


@pytest.mark.parametrize(
    "command",
    [
        "dd of=~/.bashrc < x",
        "dd if=payload of=~/.ssh/authorized_keys",
        "dd if=payload of=~/.profile conv=notrunc",
        "patch ~/.bashrc < fix.patch",
        "patch -o ~/.profile notes < fix.patch",
        "patch -p0 --output=/home/user/.zshrc x < fix.patch",
    ],
)
def test_a_write_into_a_start_up_file_through_these_spellings_blocks(command: str) -> None:
    assert _verdict(command) == "block", command


TREES = [
    "unzip -o x.zip -d ~",
    "unzip -od ~ x.zip",
    "unzip -qod /home/user x.zip",
    "unzip x.zip -d ~/.ssh",
    "tar -xzf x.tgz -C ~/.ssh",
    "tar -xf x.tar -C ~/.config",
    "cpio -idm -D ~ < x.cpio",
    "git clone https://example.org/dots.git ~/.ssh",
    "git clone --depth 1 x /home/user/.config/fish",
    "git clone x ~",
    "git worktree add ~/.ssh HEAD",
    "git checkout-index --prefix=/home/user/ -a",
    "patch -d ~ -p1 < fix.patch",
    "patch --directory=/home/user -p0 < fix.patch",
    "curl -O --output-dir ~ https://example.org/.bashrc",
    "wget -P ~ https://example.org/.bashrc",
    "wget --directory-prefix=/home/user/.ssh https://example.org/authorized_keys",
    "aria2c -d ~ https://example.org/.bashrc",
    "unzip x.zip -d /home/user/.local/share",
]


@pytest.mark.parametrize("command", TREES)
def test_a_tree_of_unknown_names_into_home_or_a_protected_directory_is_never_allowed(command: str) -> None:
    assert _verdict(command) != "allow", command


def test_unzip_reads_a_clustered_d_as_its_destination(tmp_path: Path) -> None:
    """The spelling the floor now reads as a destination is the one unzip obeys."""
    if shutil.which("unzip") is None:
        pytest.fail("unzip is not installed") if os.environ.get("CI") == "true" else pytest.skip("no unzip")
    with zipfile.ZipFile(tmp_path / "x.zip", "w") as z:
        z.writestr(".bashrc", "echo planted\n")
    (tmp_path / "dest").mkdir()
    subprocess.run(["unzip", "-qod", "dest", "x.zip"], cwd=tmp_path, check=True, capture_output=True)
    assert (tmp_path / "dest" / ".bashrc").read_text() == "echo planted\n"


@pytest.mark.parametrize(
    "command",
    [
        'cd "$d" && rm -rf *',
        'cd "$d"; rm -rf ./*',
        'cd "$d" && rm -rf .',
        "cd $(mktemp -d)/../.. && rm -rf *",
        'cd "$d" && rm -rf ../..',
    ],
)
def test_deleting_all_of_a_directory_only_known_at_run_time_is_never_allowed(command: str) -> None:
    assert _verdict(command) != "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "tar -xzf x.tgz",
        "tar -xf x.tar -C build",
        "unzip -o x.zip -d vendor",
        "unzip -q x.zip",
        "git clone https://example.org/y.git",
        "git clone x deps/y",
        "git worktree add ../wt-feature",
        "curl -fsSLO --output-dir downloads https://example.org/a.tgz",
        "wget -P vendor https://example.org/a.tgz",
        "patch -p1 < fix.patch",
        "patch -d sub -p1 < fix.patch",
        "patch src/app.py < fix.patch",
        'cd "$d" && rm -rf build dist',
        'cd "$d" && find . -name "*.pyc" -delete',
        "make PREFIX=~/.local install",
        "echo PATH=/usr/bin:~/bin",
    ],
)
def test_everyday_extracts_clones_patches_and_cleanups_stay_allowed(command: str) -> None:
    assert _verdict(command) == "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "find ~ -exec dd if=/dev/zero of={} \\;",
        "find ~ -type f -exec dd if=/dev/null of={} conv=notrunc \\;",
        "find / -name '*.conf' -exec curl -o {} https://example.org/x \\;",
        "find ~ -exec perl -e 'unlink @ARGV' {} +",
        "find /home -exec ruby -e 'ARGV.each { |f| File.write(f, \"\") }' {} +",
        "find ~ -exec node -e 'process.argv.slice(1).forEach(require(\"fs\").unlinkSync)' {} +",
    ],
)
def test_finds_files_over_home_handed_to_an_option_or_inline_code_are_never_allowed(command: str) -> None:
    assert _verdict(command) != "allow", command


@pytest.mark.parametrize(
    "command",
    ["find . -name '*.tmp' -exec dd if=/dev/null of={} \\;", "find src -exec perl -pi -e 's/a/b/' {} +"],
)
def test_the_same_inside_the_working_directory_stays_allowed(command: str) -> None:
    assert _verdict(command) == "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "podman run --rm -v ~:/h alpine rm -rf /h",
        "docker run -v /:/host alpine chroot /host sh",
        "docker run --rm -v /var/run/docker.sock:/var/run/docker.sock docker:cli ps",
        "docker run --privileged alpine",
        "docker run --pid=host alpine",
        "docker run --mount type=bind,source=/home/user,target=/h alpine",
        "docker run -v/etc:/e alpine",
        "docker container run -v ~/.ssh:/s alpine",
        "nerdctl run -v $SRC:/h alpine",
        # a generic wrapper whose command is no program the floor knows, given a wide target
        "npx -y rimraf ~",
        "uv run del /",
    ],
)
def test_a_container_or_wrapped_unknown_program_that_reaches_the_host_asks(command: str) -> None:
    assert _verdict(command) == "ask", command


@pytest.mark.parametrize(
    "command",
    [
        'docker run --rm -v "$PWD":/src -w /src python:3.12 pytest',
        'docker run --rm -v "$(pwd)":/app -w /app node:20 npm test',
        "docker run --rm -v /work/project:/src node:20 npm test",
        "docker run --rm -v cache:/root/.cache alpine true",
        "docker run -it --rm alpine sh",
        "docker build -t x .",
        "npx prettier --write .",
        "uv run pytest -q",
        "strace -f ls ~",
    ],
)
def test_containers_with_the_project_and_known_wrapped_programs_stay_allowed(command: str) -> None:
    assert _verdict(command) == "allow", command
