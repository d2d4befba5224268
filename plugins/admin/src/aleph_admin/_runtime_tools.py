"""``doctor``, ``self_manage``, ``hooks_manage``, ``list_models``, ``select_model`` and ``gateway_route``."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_admin._agents import apply_managed
from aleph_admin._state import AdminState, caller

__all__ = ["Doctor", "GatewayRoute", "HooksManage", "ListModels", "SelectModel", "SelfManage", "session_model"]

_DOCTOR_TIMEOUT_S = 120


class DoctorArgs(ToolArgs):
    fix: bool = False
    """Repair what is safe to repair (permissions of Aleph's own private files, missing private directories)."""


class Doctor(AlephTool[DoctorArgs]):
    NAME = "doctor"
    DESCRIPTION = (
        "Run `aleph doctor`: the workspace, ledger keys, plugins and every family's checks (isolation, ...). "
        "fix=true repairs only what is safe (private file and directory permissions) and says what it did."
    )
    Args = DoctorArgs
    FACTS = ToolFacts(max_duration_ms=(_DOCTOR_TIMEOUT_S + 10) * 1000, tags=("admin", "read"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: DoctorArgs) -> dict[str, Any]:
        fixed = _safe_repairs(self.state) if args.fix else []
        config = self.state.context.current_config()
        command = [sys.executable, "-m", "aleph", "--workspace", str(config.workspace_root)]
        project = [f for f in config.files if Path(f).name == "aleph.toml"]
        if project:
            command += ["--config", project[-1]]
        proc = await asyncio.create_subprocess_exec(
            *command, "doctor", "--json", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), _DOCTOR_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise aleph.ExecutionFailed(self.NAME, f"aleph doctor did not finish in {_DOCTOR_TIMEOUT_S} s") from None
        try:
            report = json.loads(out)
        except json.JSONDecodeError:
            tail = err.decode(errors="replace")[-1500:]
            raise aleph.ExecutionFailed(self.NAME, f"aleph doctor failed (exit {proc.returncode}): {tail}") from None
        report["fixed"] = fixed
        return dict(report)


def _private(path: Path, mode: int, fixed: list[str]) -> None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid():
        return  # not ours to change: doctor reports it, a human decides
    if stat.S_IMODE(info.st_mode) & ~mode:
        os.chmod(path, stat.S_IMODE(info.st_mode) & mode)
        fixed.append(f"{path}: permissions narrowed to {oct(stat.S_IMODE(info.st_mode) & mode)}")


def _safe_repairs(state: AdminState) -> list[str]:
    """Narrow permissions of Aleph's private files; create missing private directories. Nothing else."""
    fixed: list[str] = []
    config = state.context.current_config()
    data = config.data_dir
    if not data.exists():
        data.mkdir(parents=True, mode=0o700)
        fixed.append(f"{data}: created (0700)")
    keys = state.key_dir()
    _private(keys, 0o700, fixed)
    if keys.is_dir():
        for item in keys.iterdir():
            if item.is_file():
                _private(item, 0o600, fixed)
    _private(config.managed_file.parent, 0o700, fixed)
    _private(config.managed_file, 0o600, fixed)
    _private(state.store.path, 0o600, fixed)
    return fixed


class ManageArgs(ToolArgs):
    action: Literal["status", "reload"]
    """status of this runtime; reload re-reads the configuration files and puts them in force."""


class SelfManage(AlephTool[ManageArgs]):
    NAME = "self_manage"
    DESCRIPTION = (
        "Operators only: this Aleph's status (configuration files, agents, plugins) or reload its configuration."
    )
    Args = ManageArgs
    FACTS = ToolFacts(requires_role="operator", tags=("admin",))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: ManageArgs) -> dict[str, Any]:
        context = self.state.context
        config = context.reload_config() if args.action == "reload" else context.current_config()
        report = context.plugins_report()
        return {
            "action": args.action,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.state.started, 1),
            "files": config.files,
            "data_dir": str(config.data_dir),
            "agents": sorted(config.agents),
            "plugins": [p["name"] for p in report.get("loaded", [])],
            "plugins_failed": [p["name"] for p in report.get("failed", [])],
        }


class HooksArgs(ToolArgs):
    action: Literal["list", "enable", "disable"]
    """list plugins and their hooks; enable or disable a plugin (operators, with a human's approval)."""
    plugin: str | None = Field(default=None, max_length=128)
    """The plugin to enable or disable."""


class HooksManage(AlephTool[HooksArgs]):
    NAME = "hooks_manage"
    DESCRIPTION = (
        "List loaded plugins and the hooks each implements; an operator may enable or disable one (takes effect "
        "at the next start; disabling a policy plugin loosens policy, so a human approves it)."
    )
    Args = HooksArgs
    FACTS = ToolFacts(tags=("admin",))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: HooksArgs) -> dict[str, Any]:
        report = self.state.context.plugins_report()
        if args.action == "list":
            return {
                "plugins": [
                    {"name": p["name"], "distribution": p.get("distribution"), "hooks": p.get("hooks", [])}
                    for p in report.get("loaded", [])
                ],
                "failed": [p["name"] for p in report.get("failed", [])],
                "disabled": sorted(self.state.context.current_config().plugins.disable),
            }
        who = caller(self.NAME)
        if not who.is_operator():
            raise aleph.PermissionDenied(
                self.NAME, f"only an operator may {args.action} a plugin; you are a {who.role}"
            )
        if not args.plugin:
            raise aleph.ExecutionFailed(self.NAME, f"plugin: name the plugin to {args.action}")
        disabled = set(self.state.context.current_config().plugins.disable)
        known = {p["name"] for p in report.get("loaded", [])} | disabled
        if args.plugin not in known:
            raise aleph.ExecutionFailed(self.NAME, f"no plugin {args.plugin!r}: action=list names them")
        (disabled.add if args.action == "disable" else disabled.discard)(args.plugin)
        before, after = apply_managed(self.state, self.NAME, "plugins.disable", sorted(disabled))
        change = self.state.store.add_change(
            who.describe(), f"plugin_{args.action}", "plugins.disable", before, after, f"{args.action} {args.plugin}"
        )
        return {
            "plugin": args.plugin,
            "action": args.action,
            "disabled": sorted(disabled),
            "config_change": change,
            "takes_effect": "at the next start of Aleph",
        }


def _llm_models() -> list[dict[str, Any]] | None:
    try:
        import llm
    except ImportError:
        return None
    return [{"id": m.model_id, "aliases": list(getattr(m, "aliases", []) or [])} for m in llm.get_models()]


def session_model(data_dir: Path, session: str) -> str | None:
    """The model ``select_model`` chose for ``session`` (for integrations): ``None`` when none was chosen."""
    from aleph_admin._store import AdminStore

    store = AdminStore(data_dir / "admin" / "admin.sqlite3")
    try:
        return store.model_choice(session)
    finally:
        store.close()


class ListModelsArgs(ToolArgs):
    pass


class ListModels(AlephTool[ListModelsArgs]):
    NAME = "list_models"
    DESCRIPTION = (
        "List the models this host can use (from simonw's llm when installed, else [models]) and this session's choice."
    )
    Args = ListModelsArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("admin", "read"))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: ListModelsArgs) -> dict[str, Any]:
        return _models(self.state)


def _models(state: AdminState) -> dict[str, Any]:
    found = _llm_models()
    source = "llm"
    if found is None:
        source = "[models]"
        found = [{"id": m, "aliases": []} for m in state.models.available]
    session = (aleph.current_principal() or aleph.Principal()).session
    chosen = state.store.model_choice(session) if session else None
    return {"source": source, "models": found, "selected": chosen or state.models.default, "session": session}


class SelectArgs(ToolArgs):
    model: str = Field(max_length=200)
    """A model id or alias from list_models."""


class SelectModel(AlephTool[SelectArgs]):
    NAME = "select_model"
    DESCRIPTION = "Choose the model for this session (one list_models names); integrations read the choice."
    Args = SelectArgs
    FACTS = ToolFacts(idempotent=True, tags=("admin",))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: SelectArgs) -> dict[str, Any]:
        who = caller(self.NAME)
        if not who.session:
            raise aleph.ExecutionFailed(self.NAME, "this call has no session: a model is chosen per session")
        listing = _models(self.state)
        ids = {m["id"]: m["id"] for m in listing["models"]} | {
            a: m["id"] for m in listing["models"] for a in m["aliases"]
        }
        if args.model not in ids:
            raise aleph.ExecutionFailed(
                self.NAME, f"no model {args.model!r} here; list_models shows {sorted(ids)[:20]}"
            )
        self.state.store.choose_model(who.session, who.owner, ids[args.model])
        return {"session": who.session, "model": ids[args.model]}


class RouteArgs(ToolArgs):
    action: Literal["list", "set", "remove"]
    """list the routing table (anyone); set or remove a route (operators, with a human's approval)."""
    key: str | None = Field(default=None, max_length=200)
    """A channel (``telegram``) or conversation (``telegram:12345``)."""
    agent: str | None = Field(default=None, max_length=64)
    """The agent that answers it (set)."""


class GatewayRoute(AlephTool[RouteArgs]):
    NAME = "gateway_route"
    DESCRIPTION = (
        "The gateway's routing table (channel or conversation -> agent): read by anyone, changed by an operator."
    )
    Args = RouteArgs
    FACTS = ToolFacts(tags=("admin",))

    def __init__(self, state: AdminState) -> None:
        self.state = state

    async def call(self, args: RouteArgs) -> dict[str, Any]:
        if args.action == "list":
            return {"routes": self.state.store.routes()}
        who = caller(self.NAME)
        if not who.is_operator():
            raise aleph.PermissionDenied(self.NAME, f"only an operator may change routes; you are a {who.role}")
        if not args.key:
            raise aleph.ExecutionFailed(self.NAME, "key: name the channel or conversation")
        if args.action == "set":
            if not args.agent or args.agent not in self.state.context.current_config().agents:
                raise aleph.ExecutionFailed(self.NAME, f"agent: {args.agent!r} is not a configured agent")
            self.state.store.set_route(args.key, args.agent, who.describe())
        else:
            self.state.store.set_route(args.key, None, who.describe())
        return {"routes": self.state.store.routes()}
