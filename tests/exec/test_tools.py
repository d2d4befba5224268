"""code_exec, code_check, pdf_generate and image_generate on real interpreters, linters and files."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import aleph

from .conftest import make_runtime, run


@pytest.mark.anyio
async def test_code_exec_runs_python_from_stdin_in_the_workspace(workspace: Path) -> None:
    code = "import os, sys\nprint(os.getcwd())\nopen('made.txt', 'w').write('hi')\nsys.exit(4)\n"
    out = await run(workspace, "code_exec", {"language": "python", "code": code})
    assert (4, f"{workspace}\n", "python") == (out["exit_code"], out["stdout"], out["language"])
    assert "hi" == (workspace / "made.txt").read_text()


@pytest.mark.anyio
async def test_code_exec_runs_shell(workspace: Path) -> None:
    out = await run(workspace, "code_exec", {"language": "shell", "code": "echo $((6 * 7))"})
    assert "42\n" == out["stdout"]


@pytest.mark.anyio
@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
async def test_code_exec_runs_node(workspace: Path) -> None:
    out = await run(workspace, "code_exec", {"language": "node", "code": "console.log([1,2,3].map(x => x * 2))"})
    assert (0, "[ 2, 4, 6 ]\n") == (out["exit_code"], out["stdout"])


@pytest.mark.anyio
async def test_code_exec_python_timeout_is_reported(workspace: Path) -> None:
    out = await run(workspace, "code_exec", {"language": "python", "code": "while True: pass", "timeout_seconds": 0.5})
    assert (True, None) == (out["timed_out"], out["exit_code"])


@pytest.fixture
def project(workspace: Path) -> Path:
    (workspace / "calc.py").write_text("import os\n\n\ndef add(a, b):\n    return a - b\n")
    (workspace / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\ndef test_ok():\n    assert True\n"
    )
    return workspace


@pytest.mark.anyio
async def test_code_check_reports_the_failing_test_and_lint_error(project: Path) -> None:
    out = await run(project, "code_check", {})
    by_name = {c["name"]: c for c in out["checks"]}
    assert False is out["passed"]
    assert ("failed", "failed") == (by_name["ruff"]["status"], by_name["pytest"]["status"])
    assert any("calc.py:1:8: F401" in line for line in by_name["ruff"]["failures"])
    assert any(line.startswith("FAILED test_calc.py::test_add") for line in by_name["pytest"]["failures"])
    assert "1 failed, 1 passed" in by_name["pytest"]["output_tail"]


@pytest.mark.anyio
async def test_code_check_passes_after_the_fix_and_runs_configured_checks(project: Path) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    toml = '[exec.checks]\nhas-readme = "test -f README.md"\n'
    out = await run(project, "code_check", {"checks": ["ruff", "pytest", "has-readme"]}, toml)
    assert [("ruff", "passed"), ("pytest", "passed"), ("has-readme", "failed")] == [
        (c["name"], c["status"]) for c in out["checks"]
    ]
    with pytest.raises(aleph.ValidationFailed, match="unknown check 'mypy'"):
        await run(project, "code_check", {"checks": ["mypy"]})


@pytest.mark.anyio
async def test_pdf_generate_writes_a_valid_pdf_inside_the_workspace(workspace: Path) -> None:
    doc = "# Report\n\nSome **bold** text, a list:\n\n- one\n- two\n\n"
    doc += "| a | b |\n|---|---|\n| 1 | 2 |\n\nUnicode: café ✓\n\n```\ncode block\n```\n"
    out = await run(workspace, "pdf_generate", {"content": doc, "output_path": "out/report.pdf", "title": "R"})
    data = (workspace / "out/report.pdf").read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert (out["bytes"], out["pages"], out["path"]) == (len(data), 1, "out/report.pdf")
    if shutil.which("pdftotext"):
        import subprocess

        text = subprocess.run(["pdftotext", str(workspace / "out/report.pdf"), "-"], capture_output=True, text=True)
        assert "Report" in text.stdout


@pytest.mark.anyio
async def test_pdf_generate_refuses_escapes_protected_paths_and_silent_overwrites(workspace: Path) -> None:
    for path in ("../x.pdf", "/tmp/x.pdf", ".git/hooks/x.pdf"):
        with pytest.raises(aleph.ExecutionFailed, match="output_path"):
            await run(workspace, "pdf_generate", {"content": "x", "output_path": path})
    await run(workspace, "pdf_generate", {"content": "x", "output_path": "a.pdf", "format": "text"})
    with pytest.raises(aleph.ExecutionFailed, match="already exists"):
        await run(workspace, "pdf_generate", {"content": "x", "output_path": "a.pdf"})
    with pytest.raises(aleph.ValidationFailed, match="output_path"):
        await run(workspace, "pdf_generate", {"content": "x", "output_path": "a.txt"})


class ImageProvider:
    """A real local image provider: draws the prompt's length as a bar chart with Pillow."""

    ALEPH_PLUGIN_NAME = "local_images"

    @aleph.hookimpl
    def aleph_image_providers(self, register: Any) -> None:
        async def generate(prompt: str, size: str) -> bytes:
            from PIL import Image, ImageDraw

            width, height = (int(v) for v in size.split("x"))
            image = Image.new("RGB", (width, height), "white")
            ImageDraw.Draw(image).rectangle((0, 0, min(width, len(prompt) * 4), height // 2), fill="navy")
            buf = io.BytesIO()
            image.save(buf, format="PNG")
            return buf.getvalue()

        register("pillow", generate)


@pytest.mark.anyio
async def test_image_generate_saves_what_a_provider_returns(workspace: Path) -> None:
    out = await run(workspace, "image_generate", {"prompt": "A blue bar", "size": "64x32"}, plugins=(ImageProvider(),))
    assert re.fullmatch(r"images/a-blue-bar-[0-9a-f]{6}\.png", out["path"])
    from PIL import Image

    with Image.open(workspace / out["path"]) as image:
        assert (64, 32) == image.size


@pytest.mark.anyio
async def test_image_generate_without_a_provider_says_so(workspace: Path) -> None:
    with pytest.raises(aleph.ExecutionFailed, match="image generation not available: no provider configured"):
        await run(workspace, "image_generate", {"prompt": "x"})


# -- transactions at the tool level ------------------------------------------------------------------------


def _tools(rt: aleph.Aleph) -> dict[str, Any]:
    return {name: rt.registry.get(name).tool for name in ("bash", "code_exec")}  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("toml", "reason"),
    [
        ("[exec]\ntransactions = false\n", "transactions are off ([exec] transactions = false)"),
        ('[exec]\nnetwork = "host"\n', "network is enabled ([exec] network = host)"),
    ],
)
async def test_a_call_that_cannot_be_held_back_says_why(workspace: Path, toml: str, reason: str) -> None:
    async with make_runtime(workspace, toml) as rt:
        tools = _tools(rt)
        assert [reason, reason] == [tools["bash"].uncontained({"command": "true"}), tools["code_exec"].uncontained({})]
        out = await aleph.UnscopedToolService(rt.registry).execute("bash", {"command": "echo x > landed.txt"})
    result = json.loads(out.text)
    assert (False, reason) == (result["transaction"], result["uncontained"])
    assert "x\n" == (workspace / "landed.txt").read_text()  # uncontained: it ran on the workspace itself


@pytest.mark.anyio
async def test_uncontained_follows_the_sandbox(workspace: Path) -> None:
    async with make_runtime(workspace) as rt:
        tools = _tools(rt)
        sandbox = tools["bash"].sandbox
        assert sandbox.transaction_support() == tools["bash"].uncontained({"command": "true"})


async def _contained_runtime(workspace: Path, toml: str = "") -> aleph.Aleph:
    rt = make_runtime(workspace, toml)
    await rt.__aenter__()
    reason = _tools(rt)["bash"].uncontained({})
    if reason is not None:
        await rt.aclose()
        pytest.skip(f"no transaction here: {reason}")
    return rt


@pytest.mark.anyio
async def test_bash_commits_a_normal_edit_and_refuses_a_protected_write(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    rt = await _contained_runtime(workspace, '[exec]\nprotected_paths = ["secrets/**"]\n')
    try:
        service = rt.tool_service(turn=aleph.TurnContext(call_id="call1"))
        out = json.loads((await service.execute("bash", {"command": "echo hi > a.txt"})).text)
        changes = out["changes"]
        assert (True, "committed", ["create a.txt"]) == (out["transaction"], changes["status"], changes["paths"])
        toml = (workspace / "aleph.toml").read_bytes()
        trick = {"command": "echo owned > ../aleph.toml", "working_dir": "sub"}
        try:
            out = json.loads((await rt.tool_service(tier="full").execute("bash", trick)).text)
        except aleph.PermissionDenied:  # the text floor judged it from working_dir: refused before it ran
            pass
        else:  # refused at commit, or the sandbox's read-only bind stopped it
            assert "committed" != out["changes"]["status"]
        assert toml == (workspace / "aleph.toml").read_bytes()
        trick = {"command": "mkdir -p ../secrets && echo k > ../secrets/key", "working_dir": "sub"}
        out = json.loads((await rt.tool_service(tier="full").execute("bash", trick)).text)
        assert ("refused", False) == (out["changes"]["status"], (workspace / "secrets").exists())
    finally:
        await rt.aclose()


@pytest.mark.anyio
async def test_code_exec_deleting_the_workspace_is_held_back(workspace: Path) -> None:
    for i in range(20):
        (workspace / f"canary{i}.txt").write_text(str(i))
    rt = await _contained_runtime(workspace, '[policies.tool_permissions.overrides]\ncode_exec = "allow"\n')
    human = aleph.ScriptedRequester([aleph.ApprovalOutcome.DENIED])
    snippet = {"language": "python", "code": "import os; os.system('rm -rf ./* ./.[!.]*')"}
    try:
        out = json.loads((await rt.tool_service(requester=human).execute("code_exec", snippet)).text)
    except aleph.PermissionDenied:
        out = None  # the text floor stopped it before it ran: also held back
    finally:
        await rt.aclose()
    assert out is None or "refused" == out["changes"]["status"]
    assert [str(i) for i in range(20)] == [(workspace / f"canary{i}.txt").read_text() for i in range(20)]


@pytest.mark.anyio
async def test_code_check_writes_are_discarded(workspace: Path) -> None:
    (workspace / "test_x.py").write_text("def test_x():\n    open('written.txt', 'w').write('x')\n")
    rt = await _contained_runtime(workspace)
    try:
        out = json.loads((await rt.tool_service().execute("code_check", {"checks": ["pytest"]})).text)
    finally:
        await rt.aclose()
    assert (True, True) == (out["passed"], out["transaction"])
    assert not (workspace / "written.txt").exists()
