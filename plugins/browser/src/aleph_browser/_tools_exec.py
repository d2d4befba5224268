"""browser_exec: a batch of actions in one call, one snapshot at the end."""

from __future__ import annotations

from typing import Any, Literal

from playwright.async_api import Error as PlaywrightError
from pydantic import Field

from aleph import ToolArgs, ToolFacts
from aleph_browser._base import BrowserTool, SnapshotChoice, playwright_message
from aleph_browser._manager import BrowserManager, BrowserProblem, PolicyRefusal, Tab
from aleph_browser._paths import PathRefused
from aleph_browser._tools_page import fill_field, goto

__all__ = ["BrowserExec"]


class Step(ToolArgs):
    action: Literal["navigate", "click", "type", "fill", "select", "press", "hover", "check", "uncheck", "wait_for"]
    """What to do: navigate (url), click/hover/check/uncheck (target), type or fill (target, text), select (target,
    values), press (key, optional target), wait_for (text, or target)."""
    target: str | None = Field(default=None, min_length=1, max_length=1000)
    """Element ref (e4) or selector."""
    text: str | None = Field(default=None, max_length=100_000)
    """Text for type/fill; for wait_for, the text to wait for."""
    url: str | None = Field(default=None, min_length=1, max_length=4096)
    """URL for navigate."""
    values: list[str] | None = Field(default=None, min_length=1, max_length=50)
    """Options for select."""
    key: str | None = Field(default=None, min_length=1, max_length=64)
    """Key for press (Enter, Tab, Control+A)."""


class ExecArgs(SnapshotChoice):
    steps: list[Step] = Field(min_length=1, max_length=50)
    """The actions, run in order (at most 50)."""
    continue_on_error: bool = False
    """Keep going after a failed step instead of stopping there."""


def _need(step: Step, name: str) -> Any:
    """The step's ``name`` argument, or a clear error when the action needs it and it is missing."""
    value = getattr(step, name)
    if value is None:
        raise BrowserProblem(f"{step.action} needs {name}")
    return value


async def run_step(manager: BrowserManager, tab: Tab, step: Step) -> str:
    """Do one step on ``tab``; returns a one-line description."""
    action = step.action
    if action == "navigate":
        return await goto(manager, tab, _need(step, "url"))
    if action == "wait_for":
        if step.text is not None:
            await tab.page.get_by_text(step.text).first.wait_for(state="visible")
            return f"Text {step.text!r} is visible."
        target = _need(step, "target")
        await (await manager.locate(tab, target)).wait_for(state="visible")
        return f"{target} is visible."
    if action == "press" and step.target is None:
        key = _need(step, "key")
        await manager.act(tab, lambda: tab.page.keyboard.press(key))
        return f"Pressed {key}."
    target = _need(step, "target")
    if action in ("type", "fill"):
        text = _need(step, "text")
        if action == "fill":
            await manager.act(tab, lambda: fill_field(manager, tab, target, text))
        else:
            resolved = await manager.resolve(tab, target)
            await manager.act(tab, lambda: resolved[0].fill(text), verify=resolved)
        return f"Entered {len(text)} characters into {target}."
    resolved = await manager.resolve(tab, target)
    locator = resolved[0]
    if action == "click":
        await manager.act(tab, locator.click, verify=resolved)
    elif action == "hover":
        await manager.act(tab, locator.hover, verify=resolved)
    elif action in ("check", "uncheck"):
        await manager.act(tab, lambda: locator.set_checked(action == "check"), verify=resolved)
    elif action == "select":
        values = _need(step, "values")
        await manager.act(tab, lambda: locator.select_option(values), verify=resolved)
    else:  # press with a target
        key = _need(step, "key")
        await manager.act(tab, lambda: locator.press(key), verify=resolved)
    return f"{action.capitalize()} {target}: done."


def step_call(step: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The standalone tool call a step is (``click`` is ``browser_click``), for the chokepoint to judge.

    A rule on ``browser_type`` therefore holds for the ``type`` and ``fill`` steps of a batch too.
    """
    action = step.get("action")
    keep = {k: step[k] for k in ("target", "text", "url", "values", "key") if step.get(k) is not None}
    if action == "navigate":
        return "browser_navigate", {"url": keep.get("url")}
    if action in ("click", "check", "uncheck"):
        return "browser_click", {"target": keep.get("target")}
    if action == "hover":
        return "browser_hover", {"target": keep.get("target")}
    if action == "type":
        return "browser_type", {"target": keep.get("target"), "text": keep.get("text")}
    if action == "fill":
        return "browser_fill_form", {"fields": [{"target": keep.get("target"), "value": keep.get("text")}]}
    if action == "select":
        return "browser_select", {"target": keep.get("target"), "values": keep.get("values")}
    if action == "press":
        return "browser_press_key", {k: v for k, v in (("key", keep.get("key")), ("target", keep.get("target"))) if v}
    if action == "wait_for":
        return "browser_wait_for", {k: keep[k] for k in ("text", "target") if k in keep}
    return f"browser_{action}", keep


class BrowserExec(BrowserTool[ExecArgs]):
    NAME = "browser_exec"
    DESCRIPTION = (
        "Run a batch of browser actions (navigate, click, type, fill, select, press, hover, check, uncheck, wait_for) "
        "in order in one call and get one report with a single snapshot at the end — the fastest way to do a known "
        "sequence such as filling and submitting a form. Stops at the first failure unless continue_on_error."
    )
    Args = ExecArgs
    FACTS = ToolFacts(max_duration_ms=300_000, tags=("browser", "network"))

    def sub_calls(self, input: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Each step as the tool call it is: judged under that tool's own name before any step runs."""
        return [step_call(step) for step in input.get("steps") or [] if isinstance(step, dict)]

    async def run(self, args: ExecArgs) -> str:
        manager = self.manager
        tab = await manager.tab()
        lines: list[str] = []
        failed = ran = 0
        for i, step in enumerate(args.steps, 1):
            ran = i
            try:
                lines.append(f"{i}. {await run_step(manager, tab, step)}")
            except PolicyRefusal as exc:
                lines.append(f"{i}. {step.action} BLOCKED: {exc}")
                failed += 1
            except (BrowserProblem, PathRefused) as exc:
                lines.append(f"{i}. {step.action} FAILED: {exc}")
                failed += 1
            except PlaywrightError as exc:
                lines.append(f"{i}. {step.action} FAILED: {playwright_message(exc)}")
                failed += 1
            if failed and not args.continue_on_error:
                skipped = len(args.steps) - i
                if skipped:
                    lines.append(f"Stopped; {skipped} later step(s) not run.")
                break
            if tab.dialog is not None:
                lines.append("A dialog opened; stopped so you can answer it with browser_dialog.")
                break
        summary = f"Ran {ran} of {len(args.steps)} step(s), {failed} failed:\n" + "\n".join(lines)
        return await manager.report(tab, summary, snapshot=args.snapshot)
