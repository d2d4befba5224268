"""Importing aleph imports no framework; a missing framework is a clear error naming what to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

FRAMEWORKS = ["pydantic_ai", "agents", "langchain", "langchain_core", "langgraph", "llm"]

# Hides one top-level module from the import system, as if it were not installed.
HIDE = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {name!r} or name.startswith({name!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, Hide())
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_importing_aleph_and_its_integrations_package_imports_no_framework() -> None:
    done = run(f"import sys, aleph, aleph.integrations\nprint(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "hidden", "message"),
    [
        (
            "aleph.integrations.pydantic_ai",
            "pydantic_ai",
            "pydantic-ai not available: pip install 'aleph-core[pydantic-ai]'",
        ),
        (
            "aleph.integrations.openai_agents",
            "agents",
            "openai-agents not available: pip install 'aleph-core[openai-agents]'",
        ),
        ("aleph.integrations.langchain", "langgraph", "langchain not available: pip install 'aleph-core[langchain]'"),
    ],
)
def test_a_missing_framework_says_what_to_install(module: str, hidden: str, message: str) -> None:
    done = run(HIDE.format(name=hidden) + f"import {module}")
    assert done.returncode != 0
    assert message in done.stderr


@pytest.mark.anyio
async def test_derive_keeps_the_policy_and_changes_only_the_turn_and_requester(env: object) -> None:
    import aleph

    service = env.service(turn=aleph.TurnContext(session_key="a"))  # type: ignore[attr-defined]
    requester = aleph.DeferredApprovals()
    derived = service.derive(turn=aleph.TurnContext(session_key="b"), requester=requester)
    assert (derived.turn.session_key, service.turn.session_key) == ("b", "a")
    assert derived.requester is requester and service.requester is not requester
    assert (derived.policy, derived.tier, derived.agent, derived.allowed) == (
        service.policy,
        service.tier,
        service.agent,
        service.allowed,
    )
    assert [d.name for d in await derived.list()] == [d.name for d in await service.list()]
    assert service.derive().turn is service.turn
