"""``aleph doctor``: what protects calls on this machine, and what is broken.

Core checks the configuration, the workspace, the ledger (every agent's chain can still be signed
with the key that signed its last row) and the plugins; each family adds its own checks through the
``aleph_doctor_checks`` hook (aleph-exec: isolation, overlay, cgroup, seccomp).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from aleph._cli._common import EXIT_FAILED, EXIT_OK, load_runtime, print_json
from aleph._ledger import Ledger, ledger_directory

if TYPE_CHECKING:
    from aleph._runtime import Aleph

__all__ = ["Check", "add_parser", "plugin_checks", "run_checks"]

Check = tuple[str, Callable[[], tuple[str, str]]]
_STATUSES = ("ok", "warn", "fail")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``aleph doctor``."""
    p = sub.add_parser(
        "doctor",
        help="check what protects calls here (isolation, ledger keys, plugins)",
        description="Run core's and every plugin's health checks: the workspace, the ledger keys, the plugins, "
        "and what each family reports (aleph-exec: isolation, overlay transactions, cgroup, seccomp). "
        "Exit 1 when a check fails; a warning (less protection than the machine could give) exits 0.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_doctor)


def plugin_checks(rt: Aleph, *, only: Callable[[str], bool] = lambda name: True) -> list[Check]:
    """The checks plugins register through ``aleph_doctor_checks`` (a plugin whose hook raises gets a failing one)."""
    found: list[Check] = []

    def register(name: str, check: Callable[[], tuple[str, str]]) -> None:
        if only(str(name)):
            found.append((str(name), check))

    for plugin, hook in rt.plugins.hook_functions("aleph_doctor_checks"):
        try:
            hook(register=register, config=rt.config)
        except Exception as exc:
            found.append(
                (f"{plugin}.checks", _failing(f"its aleph_doctor_checks hook raised {type(exc).__name__}: {exc}"))
            )
    return found


def _failing(detail: str) -> Callable[[], tuple[str, str]]:
    return lambda: ("fail", detail)


def run_checks(checks: list[Check]) -> list[tuple[str, str, str]]:
    """Run each check: (name, status, detail); a check that raises or answers nonsense fails."""
    out = []
    for name, check in checks:
        try:
            status, detail = check()
        except Exception as exc:
            status, detail = "fail", f"the check raised {type(exc).__name__}: {exc}"
        if status not in _STATUSES:
            status, detail = "fail", f"the check answered status {status!r} (expected ok, warn or fail): {detail}"
        out.append((name, status, str(detail)))
    return out


def _ledger_check(rt: Aleph) -> tuple[str, str]:
    directory = ledger_directory(rt.config)
    if not directory.exists():
        return "ok", f"{directory}: no chains yet (the first recorded call creates one)"
    ledger = Ledger(directory, checkpoint_every=rt.config.ledger.checkpoint_every)
    try:
        agents = ledger.agents()
        problems = []
        for agent in agents:
            rows = ledger.rows(agent, limit=1)
            if not rows:
                continue
            fp = rows[-1].signer_fp
            problem = ledger.keystore.key_problem(agent, fp)
            if problem is not None:
                problems.append(
                    f"agent {agent!r}: the key {fp} that signed its last row cannot sign now ({problem}); "
                    "its chain takes no rows until the key is restored or `aleph ledger verify` is consulted"
                )
    except Exception as exc:
        return "fail", f"{directory}: {type(exc).__name__}: {exc}"
    finally:
        ledger.close()
    if problems:
        return "fail", "; ".join(problems)
    if not os.access(directory, os.W_OK):
        return "fail", f"{directory} is not writable: mutating calls cannot be recorded"
    cannot = ledger.probe()  # the same check the chokepoint makes before a mutating call runs
    if cannot is not None:
        effect = (
            'mutating calls are refused until it can ([ledger] on_failure = "refuse")'
            if rt.config.ledger.on_failure == "refuse"
            else 'mutating calls run unrecorded ([ledger] on_failure = "continue")'
        )
        return "fail", f"{directory}: the ledger cannot record: {cannot}; {effect}"
    return "ok", (
        f"{directory}: {len(agents)} chain(s), each signable with the key that signed its last row; "
        f"can record (reserve of {ledger.reserve.size // 1024} KiB in place, "
        f"on_failure = {rt.config.ledger.on_failure}); {_row_builder()}"
    )


def _row_builder() -> str:
    """Who builds the ledger's rows: the native accelerator, or Python (and why)."""
    from aleph._ledger._speedups import native, speedups_disabled

    if native is not None:
        return "rows built by the native row writer"
    why = "ALEPH_NO_SPEEDUPS is set" if speedups_disabled() else "not built at install: no C compiler or libssl-dev"
    return f"rows built in Python ({why}): the same rows, a ledgered call about twice as slow"


def _workspace_check(rt: Aleph) -> tuple[str, str]:
    root = rt.config.workspace_root
    if not root.is_dir():
        return "fail", f"the workspace {root} is not a directory"
    if not os.access(root, os.W_OK):
        return "warn", f"the workspace {root} is read-only for this user"
    return "ok", f"workspace {root}, tier {rt.config.policies.exec_tier}"


def _plugins_check(rt: Aleph) -> tuple[str, str]:
    report = rt.plugins.report()
    failed = [f"{p['name']} at {p['stage']}: {p['error']}" for p in report["failed"]]
    held = [f"{p['name']}: {p['reason']}" for p in report["held"]]
    held += [f"{p['name']} tool {t}: {why}" for p in report["loaded"] for t, why in p["held_tools"].items()]
    notes = [f"{p['name']} {p['note']}" for p in report["loaded"] if p["note"]]
    loaded = len(report["loaded"])
    if failed:
        return "fail", f"{len(failed)} failed ({'; '.join(failed)}); {loaded} loaded"
    unmarked = [n for n in notes if "no @aleph.hookimpl marker" in n]
    if held or unmarked:
        why = "; ".join(held + unmarked)
        return (
            "warn",
            f"{loaded} loaded, {len(held) + len(unmarked)} held back or empty ({why}): `aleph plugins` says why",
        )
    if notes:
        return "ok", f"{loaded} loaded ({'; '.join(notes)})"
    return "ok", f"{loaded} loaded"


def _doctor(args: argparse.Namespace) -> int:
    rt = load_runtime(args)
    checks: list[Check] = [
        ("core.workspace", lambda: _workspace_check(rt)),
        ("core.ledger", lambda: _ledger_check(rt)),
        ("core.plugins", lambda: _plugins_check(rt)),
        *plugin_checks(rt),
    ]
    results = run_checks(checks)
    failed = any(status == "fail" for _, status, _ in results)
    if args.json:
        print_json({"ok": not failed, "checks": [{"name": n, "status": s, "detail": d} for n, s, d in results]})
    else:
        width = max(len(name) for name, _, _ in results)
        for name, status, detail in results:
            print(f"{status:<4}  {name:<{width}}  {detail}")
        sys.stdout.flush()
    return EXIT_FAILED if failed else EXIT_OK
