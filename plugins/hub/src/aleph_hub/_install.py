"""hub_install_run and hub_install_verify: installs that are permission changes, and their receipts."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Literal

from packaging.utils import canonicalize_name
from pydantic import Field

import aleph
from aleph import AlephTool, ToolArgs, ToolFacts
from aleph_hub._attest import check_attestation
from aleph_hub._hub_tools import requirement_for
from aleph_hub._index import IndexClient
from aleph_hub._inspector import Inspector
from aleph_hub._pip import (
    LockEntry,
    PipError,
    lock_text,
    parse_requirement,
    pip_install,
    pip_resolve,
    pip_uninstall,
    unsatisfied,
)
from aleph_hub._receipts import (
    ReceiptError,
    compile_bytecode,
    find_distribution,
    remove_installed,
    take_receipt,
    verify_receipt,
)
from aleph_hub._state import HubState, consent
from aleph_hub._store import receipt_message

__all__ = ["HubInstallRun", "HubInstallVerify", "verify_all"]


class InstallArgs(ToolArgs):
    requirement: str = Field(min_length=1, max_length=500)
    """A requirement (``aleph-foo``, ``aleph-foo==1.2``) or a catalog id from hub_catalog_search."""
    target: Literal["folder", "environment"] | None = None
    """Where to install (default ``[hub] install_target``): the plugin folder or the runtime's environment."""


def _shown(adds: dict[str, Any], receipt: dict[str, Any], deps: list[str], sandbox: str) -> dict[str, Any]:
    """What the human reads: every tool with its facts, every hook, and where the code came from."""
    return {
        "distribution": adds["distribution"],
        "version": adds["version"],
        "entry_points": adds["entry_points"],
        "tools": [{"name": t["name"], "description": t["description"], "facts": t["facts"]} for t in adds["tools"]],
        "hooks": adds["hooks"],
        "mcp_servers": [],
        "index_url": receipt["index_url"],
        "artifact": receipt["artifact"],
        "attestation": receipt["attestation"],
        "files_installed": len(receipt["files"]),
        "also_installed": deps,
        "inspected_in": sandbox or "an ordinary child process (bubblewrap not available)",
    }


class HubInstallRun(AlephTool[InstallArgs]):
    NAME = "hub_install_run"
    DESCRIPTION = (
        "Install an Aleph plugin from the package index. This is a permission change: the human sees every tool "
        "it adds (with its facts) and its hooks, and approves; until then its tools are held back."
    )
    Args = InstallArgs
    FACTS = ToolFacts(sink=True, max_duration_ms=1_200_000, tags=("network", "hub", "install"))

    def __init__(self, state: HubState) -> None:
        self.state = state
        self._lock = asyncio.Lock()

    def _progress(self, text: str) -> None:
        aleph.notify_tool_streaming_chunk(self.NAME, text.rstrip("\n") + "\n")

    async def call(self, args: InstallArgs) -> dict[str, Any]:
        requirement = requirement_for(self.state, args.requirement, self.NAME)
        target = args.target or self.state.config.install_target
        folder = self.state.plugin_folder() if target == "folder" else None
        inspector = Inspector()
        await inspector.start()  # imports Aleph while pip runs
        try:
            async with self._lock:
                return await self._run(requirement, target, folder, inspector)
        finally:
            await inspector.aclose()

    async def _run(self, requirement: str, target: str, folder: Path | None, inspector: Inspector) -> dict[str, Any]:
        cfg = self.state.config
        store = self.state.store
        name = canonicalize_name(aleph_requirement_name(requirement))
        lock: list[LockEntry] = []
        fresh: list[str] = []
        trust = self.state.context.plugin_trust
        if not self._already_installed(requirement, name, folder):
            previous = trust.get(name)
            if previous is None or previous.status != "trusted":
                # Held before a single file lands: a runtime starting meanwhile (or after a crash here)
                # must not load it unrecorded. The disclosure replaces this once it is known.
                trust.hold({"distribution": name, "version": None, "installing": requirement}, source="hub")
            # One pip run installs the plugin itself (what `pip install` of its wheel costs); packaging
            # then checks its requirements against what is installed, and only what is missing goes
            # back to pip's resolver.
            self._progress(f"[1/4] installing {requirement} from {cfg.index_url}")
            try:
                # The index client's TLS set-up (~0.2 s of CPU) overlaps with pip's run.
                lock, _ = await asyncio.gather(
                    pip_install(requirement, cfg.index_url, folder, cfg.pip_timeout_seconds, self._progress),
                    asyncio.to_thread(self.state.http),
                )
                fresh = [e.name for e in lock]
                for _ in range(3):
                    missing = unsatisfied(lock, folder)
                    if not missing:
                        break
                    self._progress(f"[1/4] resolving what it needs: {', '.join(missing)}")
                    more = await pip_resolve(missing, cfg.index_url, folder, cfg.pip_timeout_seconds, self._progress)
                    if more:
                        await pip_install(more, cfg.index_url, folder, cfg.pip_timeout_seconds, self._progress)
                    fresh += [e.name for e in more]
                    lock += more
                else:
                    raise PipError(f"its requirements stay unsatisfied: {', '.join(unsatisfied(lock, folder))}")
                self._hold_plugin_dependencies(lock, name, folder)
                self._progress(f"[2/4] recording receipts of {', '.join(f'{e.name}=={e.version}' for e in lock)}")
                lockfile = self.state.locks_dir() / f"{name}.lock"
                lockfile.parent.mkdir(parents=True, exist_ok=True)
                lockfile.write_text(lock_text(lock), encoding="utf-8")
                await self._receipts(lock, target, folder, requirement)
            except (PipError, ReceiptError) as exc:
                await self._rollback(fresh, folder)
                raise aleph.ExecutionFailed(self.NAME, f"install failed: {exc}") from None
        elif store.receipt(name) is None:
            raise aleph.ExecutionFailed(
                self.NAME, f"{name} is already installed outside the hub; it is managed by whoever installed it"
            )
        receipt = store.receipt(name)
        assert receipt is not None
        if receipt["attestation"].get("status") == "mismatch":
            await self._rollback(fresh, folder)
            raise aleph.ExecutionFailed(self.NAME, f"attestation check failed: {receipt['attestation']['detail']}")
        self._progress(f"[3/4] inspecting what {name} adds")
        try:
            dist = find_distribution(name, folder)
            if not [ep for ep in dist.entry_points if ep.group == "aleph"]:
                raise RuntimeError(f"{name} is not an Aleph plugin (it has no 'aleph' entry point)")
            adds = await inspector.adds(name, folder)
        except (RuntimeError, ReceiptError, TimeoutError) as exc:
            await self._rollback(fresh, folder)
            raise aleph.ExecutionFailed(self.NAME, f"{name} cannot be loaded: {exc}") from None
        record = trust.get(name)
        digest = aleph.adds_digest(adds)
        deps = [f"{e.name}=={e.version}" for e in lock if e.name != name]
        shown = _shown(adds, receipt, deps, inspector.sandbox)
        if record is None or record.status != "trusted" or record.digest != digest:
            trust.hold(adds, source="hub")
            self._progress(f"[4/4] asking for approval of {len(adds['tools'])} tools and {len(adds['hooks'])} hooks")
            try:
                await consent(self.NAME, "plugin", f"{name} {adds['version']}", digest, shown)
            except aleph.ApprovalDenied as exc:
                # Also when an earlier run installed it and left it held: a "no" removes it, or it would
                # load unrecorded (and so unchecked) at the next start.
                await self._rollback(fresh or [name], folder)
                trust.remove(name)
                return {"status": "rejected", "reason": f"a human did not approve it: {exc}", "disclosure": shown}
            except (aleph.ApprovalUnavailable, aleph.ApprovalExpired) as exc:
                return {
                    "status": "held",
                    "reason": f"installed but held back until a human approves what it adds: {exc}",
                    "approve_with": f"aleph plugins trust {name}" + (f" --path {folder}" if folder else ""),
                    "disclosure": shown,
                }
            trust.trust(adds, source="hub")
        loaded = self.state.context.load_distribution(name, folder)
        if isinstance(loaded, aleph.HeldPlugin):
            return {"status": "held", "reason": loaded.reason, "disclosure": shown}
        report = verify_all(self.state, [name])[0]
        return {
            "status": "installed",
            "distribution": name,
            "version": adds["version"],
            "target": target,
            "location": receipt["location"],
            "tools": loaded.tools,
            "hooks": adds["hooks"],
            "also_installed": deps,
            "lockfile": str(self.state.locks_dir() / f"{name}.lock"),
            "verify": report,
            "note": "hooks other than tool registration take effect when the runtime next loads",
        }

    def _hold_plugin_dependencies(self, lock: list[LockEntry], name: str, folder: Path | None) -> None:
        """A dependency that is itself a plugin is not approved with the requested one: hold it back."""
        trust = self.state.context.plugin_trust
        for entry in lock:
            if entry.name == name:
                continue
            try:
                dist = find_distribution(entry.name, folder)
            except ReceiptError:
                continue
            record = trust.get(entry.name)
            trusted = record is not None and record.status == "trusted" and record.version == entry.version
            if not trusted and any(ep.group == "aleph" for ep in dist.entry_points):
                trust.hold({"distribution": entry.name, "version": entry.version, "dependency_of": name}, source="hub")

    def _already_installed(self, requirement: str, name: str, folder: Path | None) -> bool:
        """Whether a hub receipt already covers ``name`` at a version ``requirement`` accepts (a re-run)."""
        receipt = self.state.store.receipt(name)
        if receipt is None:
            for where in {folder, None}:
                try:
                    find_distribution(name, where, exclude=self.state.context.config.plugin_folders)
                except ReceiptError:
                    continue
                return True  # installed by someone else: reported by the caller
            return False
        from packaging.version import Version

        return parse_requirement(requirement).specifier.contains(Version(receipt["version"]), prereleases=True)

    async def _receipts(self, lock: list[LockEntry], target: str, folder: Path | None, requirement: str) -> None:
        client = IndexClient(self.state.config, self.state.http())
        try:
            seal = self.state.context.state_seal("receipts")
            for entry in lock:
                base, files = take_receipt(find_distribution(entry.name, folder))
                files.update(compile_bytecode(base, files))
                receipt = {
                    "distribution": entry.name,
                    "version": entry.version,
                    "target": target,
                    "location": str(base),
                    "index_url": self.state.config.index_url,
                    "artifact": {"url": entry.url, "sha256": entry.sha256},
                    "files": files,
                    "attestation": await check_attestation(client, entry),
                    "requirement": requirement,
                    "installed_at": time.time(),
                }
                # Sealed: a receipt rewritten to match planted files verifies as tampered, not as clean.
                receipt["seal"] = seal.sign(receipt_message(receipt))
                self.state.store.put_receipt(receipt)
        finally:
            await client.aclose()

    async def _rollback(self, names: list[str], folder: Path | None) -> None:
        store = self.state.store
        for name in names:
            receipt = store.receipt(name)
            if folder is not None and receipt is not None:
                remove_installed(Path(receipt["location"]), receipt["files"])
            elif folder is not None:
                try:
                    dist = find_distribution(name, folder)
                    remove_installed(Path(str(dist.locate_file(""))), _record_files(dist))
                except ReceiptError:
                    pass
            store.drop_receipt(name)
            record = self.state.context.plugin_trust.get(name)
            if record is not None and record.status == "pending":
                self.state.context.plugin_trust.remove(name)
        if folder is None and names:
            try:
                await pip_uninstall(names, self.state.config.pip_timeout_seconds, self._progress)
            except PipError as exc:
                self._progress(f"rollback: {exc}")


def _record_files(dist: Any) -> dict[str, str]:
    return {str(f): "" for f in dist.files or []}


def aleph_requirement_name(requirement: str) -> str:
    """The distribution name of a requirement string."""
    return parse_requirement(requirement).name


def verify_all(state: HubState, names: list[str] | None = None) -> list[dict[str, Any]]:
    """Each receipt (or those of ``names``) checked against the disk and its lockfile."""
    receipts = state.store.receipts()
    seal = state.context.state_seal("receipts")
    reports = []
    for receipt in receipts:
        if names is not None and receipt["distribution"] not in names:
            continue
        base = Path(receipt["location"])
        others: dict[str, str] = {}
        for other in receipts:
            if other is not receipt and other["location"] == receipt["location"]:
                others.update(other["files"])
        found = verify_receipt(base, receipt["files"], others, whole_folder=receipt["target"] == "folder")
        problems = [f"{k}: {len(v)}" for k, v in found.items() if v]
        sealed = seal.verify(receipt_message(receipt), receipt.get("seal"))
        if not sealed:
            problems.append("the receipt itself was not written by the hub (its seal does not verify)")
        lockfile = state.locks_dir() / f"{receipt['distribution']}.lock"
        reports.append(
            {
                "distribution": receipt["distribution"],
                "version": receipt["version"],
                "ok": not problems,
                **found,
                "receipt_sealed": sealed,
                "files_checked": len(receipt["files"]),
                "location": receipt["location"],
                "index_url": receipt["index_url"],
                "artifact": receipt["artifact"],
                "attestation": receipt["attestation"],
                "lockfile": str(lockfile) if lockfile.exists() else None,
            }
        )
    return reports


class VerifyArgs(ToolArgs):
    distribution: str | None = Field(default=None, max_length=200)
    """One installed distribution to check (default: every plugin the hub installed)."""


class HubInstallVerify(AlephTool[VerifyArgs]):
    NAME = "hub_install_verify"
    DESCRIPTION = (
        "Check every file the hub installed against its install receipt (per-file SHA-256 from the wheels' "
        "RECORD): reports files modified, added or removed since the install."
    )
    Args = VerifyArgs
    FACTS = ToolFacts(idempotent=True, concurrent_safe=True, tags=("hub",))

    def __init__(self, state: HubState) -> None:
        self.state = state

    async def call(self, args: VerifyArgs) -> dict[str, Any]:
        names = [str(canonicalize_name(args.distribution))] if args.distribution else None
        reports = verify_all(self.state, names)
        if names and not reports:
            raise aleph.ExecutionFailed(
                self.NAME, f"no install receipt for {args.distribution}; the hub did not install it"
            )
        return {"ok": all(r["ok"] for r in reports), "distributions": reports}
