"""Make the console's screenshots in docs/images (the inbox with its cards, the ledger with its timeline).

Run: python scripts/console-screenshots.py   (needs Debian's chromium and playwright)
Everything runs in a scratch data directory with fixture tools; nothing of yours is read.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import aleph
from aleph._console import Console

OUT = Path(__file__).resolve().parent.parent / "docs" / "images"
CONFIG = """
[ledger]
checkpoint_every = 4

[policies.tool_permissions.overrides]
exec_commit = "ask"
self_config = "ask"
deploy = "ask"
"deploy(prod)" = "deny"

[agents.nightly.tool_permissions.overrides]
deploy = "deny"
"""


class Fixture:
    """Tools shaped like the ones whose cards show more than arguments."""

    ALEPH_PLUGIN_NAME = "screenshot_fixture"

    @aleph.hookimpl
    def aleph_register_tools(self, register: aleph.ToolRegistrar) -> None:
        """Register the fixture tools."""

        @aleph.tool
        def deploy(target: str) -> str:
            """Deploy a build."""
            return f"deployed {target}"

        @aleph.tool
        def exec_commit(
            tool: str, about: str, created: int, modified: int, deleted: int, top_dirs: list[str], network: bool
        ) -> str:
            """Commit a command's changeset (the shape aleph-exec asks with)."""
            return "committed"

        @aleph.tool
        def self_config(action: str, config_path: str, value: Any) -> str:
            """Change the configuration (the shape aleph-admin's tool takes)."""
            return "changed"

        for tool in (deploy, exec_commit, self_config):
            register(tool)


async def main() -> None:
    """Fill a scratch ledger and inbox, then screenshot both pages."""
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as scratch:
        os.environ["XDG_DATA_HOME"] = str(Path(scratch) / "data")
        os.environ["XDG_CONFIG_HOME"] = str(Path(scratch) / "config")
        os.environ["ALEPH_TRUST_WORKSPACE_CONFIG"] = "1"  # the scratch aleph.toml is the operator's own
        workspace = Path(scratch) / "ws"
        workspace.mkdir()
        (workspace / "aleph.toml").write_text(CONFIG)
        async with aleph.load(workspace=workspace, plugins=[Fixture()], entry_points=False) as rt:
            yes = aleph.ScriptedRequester(lambda r: aleph.ApprovalResponse(aleph.ApprovalOutcome.APPROVED))
            for agent, target in (("builder", "staging"), ("builder", "qa"), ("reviewer", "docs")):
                await rt.tool_service(agent=agent, requester=yes).execute("deploy", {"target": target})
            for agent, target in (("nightly", "staging"), ("builder", "prod")):
                try:
                    await rt.tool_service(agent=agent).execute("deploy", {"target": target})
                except aleph.PermissionDenied:
                    pass
            ledger = rt.chokepoint.ledger
            assert ledger is not None
            await ledger.flush()
            console = Console(rt)
            await console.start()
            waiting = [
                asyncio.create_task(
                    rt.tool_service(agent="builder", requester=console.inbox).execute(
                        "exec_commit",
                        {
                            "tool": "bash",
                            "about": "deletes 1,204 files under build/, modifies 3 files",
                            "created": 0,
                            "modified": 3,
                            "deleted": 1204,
                            "top_dirs": ["build/", "src/"],
                            "network": False,
                        },
                    )
                ),
                asyncio.create_task(
                    rt.tool_service(agent="builder", requester=console.inbox).execute(
                        "self_config",
                        {
                            "action": "update_config",
                            "config_path": "agents.nightly.tool_permissions.overrides",
                            "value": {"deploy": "allow", "bash": "ask"},
                        },
                    )
                ),
            ]
            while len(console.inbox.pending()) < len(waiting):
                await console.inbox.changed.wait()
            async with async_playwright() as pw:
                browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
                page = await browser.new_page(viewport={"width": 1100, "height": 900})
                await page.goto(console.url)
                await page.screenshot(path=str(OUT / "console-inbox.png"), full_page=True)
                await page.goto(console.url.replace("/?", "/ledger?"))
                await page.screenshot(path=str(OUT / "console-ledger.png"), full_page=True)
                await browser.close()
            for ask in console.inbox.pending():
                console.inbox.answer(ask.id, "deny")
            await asyncio.gather(*waiting, return_exceptions=True)
            await console.stop()


if __name__ == "__main__":
    asyncio.run(main())
