"""Exec calls as transactions: run on a layer, read the changeset, decide, commit or discard.

:class:`Transactions` is one per runtime (workspace + data directory). A tool asks it for a fresh
layer directory, runs its command with ``layer=`` (the sandbox mounts the copy-on-write view), and
hands the layer to :meth:`Transactions.settle`, which returns what happened for the tool's result:

* ``status: "committed"`` with counts, up to ``[exec] result_paths`` paths, the digest and the undo id;
* ``status: "refused"`` with the reason, and that nothing in the workspace changed;
* ``status: "unchanged"`` when the command changed nothing.

A changeset past the thresholds is asked about through ``aleph.current_call().authorize("exec_commit",
...)``: the human sees the changeset summary, never the command text; nobody to ask means refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import anyio.to_thread

import aleph
from aleph_exec._changeset import Changeset, ChangesetTooLarge, is_opaque, read_changeset
from aleph_exec._commit import CommitError, commit, recover
from aleph_exec._config import ExecConfig
from aleph_exec._decision import DEFAULT_PROTECTED, Decision, ProtectedPaths, decide
from aleph_exec._layers import LAYERS_DIR, LayerRoot, fallback_dir
from aleph_exec._tally import Prior, Tally
from aleph_exec._tree import remove_tree
from aleph_exec._undo import UndoStore, exec_lock

__all__ = ["COMMIT_TOOL", "Transactions"]

COMMIT_TOOL = "exec_commit"
MiB = 1024 * 1024
_READY_LAYERS = 2
"""Empty layers kept made ahead, so a run's mkdir is off its path."""
_CLOSE_WAIT_S = 60.0
"""How long closing waits for the layer removals still under way."""


def _inside(path: Path, root: Path) -> str | None:
    try:
        rel = path.resolve().relative_to(root)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts else None


def _empty(upper: Path) -> bool:
    """Whether the upper directory holds nothing (or is missing); an opaque root is not empty."""
    try:
        with os.scandir(upper) as it:
            if next(it, None) is not None:
                return False
    except FileNotFoundError:
        return True
    return not is_opaque(str(upper))


class Transactions:
    """Layers, decisions, commits and undo for one workspace and data directory."""

    def __init__(
        self,
        workspace: Path,
        data_dir: Path,
        config: ExecConfig,
        protected: Iterable[Path] = (),
        patterns: Iterable[str] = (),
    ) -> None:
        self.workspace = workspace.resolve()
        self.config = config
        self.root = data_dir.resolve() / "exec"
        self.journal_dir = self.root / "journal"
        literals = [rel for p in protected if (rel := _inside(p, self.workspace)) is not None]
        self.protected = ProtectedPaths([*DEFAULT_PROTECTED, *patterns, *config.protected_paths], literals)
        self._uncounted = frozenset([*literals, LAYERS_DIR])
        self.tally = Tally(config.commit_ask_window_minutes * 60.0)
        self.undo = UndoStore(self.root, max_calls=config.undo_max_calls, max_bytes=config.undo_max_mb * MiB)
        # Layers live on the workspace's filesystem (a commit then renames), under .aleph-tx; see _layers.
        self.layers = LayerRoot(self.workspace, fallback_dir(self.workspace, data_dir))
        self._ready: list[Path] = []  # empty layers made ahead by _recycle (list append/pop are atomic)
        self.on_ready: Callable[[Path], None] | None = None
        """Called with each layer made ahead, before any run may get it (the sandbox mounts its overlay then)."""
        self._idle = threading.Condition()
        self._pending = 0  # layers being removed off the call's path (close waits for them)
        self._closed = False

    def prepare(self) -> None:
        """Place the layers now (make ``.aleph-tx``), before the sandbox starts: it masks what exists then."""
        self.layers.place()

    def recover(self) -> list[str]:
        """Finish or roll back commits a crash interrupted; then remove the layers of runtimes that are gone."""
        done: list[str] = []
        if self.root.is_dir():
            with exec_lock(self.root):
                done = recover(self.journal_dir)  # needs the layers it names: before the sweep
        self.layers.sweep()
        return done

    def new_layer(self) -> Path:
        """An empty directory for one run's copy-on-write layer (one made ahead when there is one)."""
        try:
            return self._ready.pop()
        except IndexError:
            return self._make_layer()

    def _make_layer(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="layer-", dir=self.layers.mine()))

    def close(self) -> None:
        """Wait for the removals under way, then remove the layers made ahead and this runtime's directory."""
        with self._idle:
            self._closed = True
            self._idle.wait_for(lambda: self._pending == 0, timeout=_CLOSE_WAIT_S)
        while self._ready:
            self.discard(self._ready.pop())
        self.layers.close()

    @staticmethod
    def discard(layer: Path) -> None:
        """Remove a layer and whatever it holds."""
        remove_tree(layer, ignore_errors=True)

    def read(self, layer: Path) -> Changeset:
        """The changeset in ``layer/upper``."""
        return read_changeset(
            layer / "upper",
            self.workspace,
            max_entries=self.config.max_changeset_files,
            max_bytes=self.config.max_changeset_mb * MiB,
        )

    def judge(self, cs: Changeset, prior: Prior | None = None) -> Decision:
        """Refuse, ask or commit (no human is asked here); ``prior``: the session's or principal's running total."""
        cfg = self.config
        return decide(
            cs,
            self.protected.with_git_names(self.workspace),  # what the repository's git config runs, as of now
            ask_files=cfg.commit_ask_files,
            ask_fraction=cfg.commit_ask_fraction,
            ask_min_files=cfg.commit_ask_min_files,
            uncounted=self._uncounted,
            prior=prior or Prior(),
        )

    def _paths(self, cs: Changeset) -> list[str]:
        n = self.config.result_paths
        shown = [f"{c.action} {c.path}" + ("/" if c.kind == "dir" else "") for c in cs.changes[:n]]
        if len(cs.changes) > n:
            shown.append(f"... and {len(cs.changes) - n:,} more")
        return shown

    def commit(self, cs: Changeset, tool: str, call_id: str, digest: str) -> dict[str, Any]:
        """Commit under the data directory's lock and prune the undo store; the manifest."""
        with exec_lock(self.root):
            entry = self.undo.new_entry(call_id)
            meta = {"call_id": call_id, "tool": tool, "digest": digest, "seq": time.time_ns(), "time": time.time()}
            manifest = commit(cs, journal_dir=self.journal_dir, undo_dir=entry, meta=meta)
            dropped = self.undo.prune()
        return manifest | {"dropped": dropped, "entry": entry.name}

    async def settle(self, tool: str, layer: Path) -> dict[str, Any]:
        """Judge and commit (or discard) what the run on ``layer`` did; the ``changes`` part of the result."""
        try:
            if _empty(layer / "upper"):  # most calls change nothing: nothing to read or judge
                return {"status": "unchanged"}
            return await self._settle(tool, layer)
        finally:
            self.discard_later(layer)

    def discard_later(self, layer: Path) -> None:
        """Remove a layer off the call's path (an rmdir on a busy ext4 can take milliseconds)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: remove it now
            self.discard(layer)
            return
        with self._idle:
            self._pending += 1
        try:
            loop.run_in_executor(None, self._recycle, layer)
        except BaseException:
            self._done()
            raise

    def _done(self) -> None:
        with self._idle:
            self._pending -= 1
            self._idle.notify_all()

    def _recycle(self, layer: Path) -> None:
        """Remove a used layer and, while few are ready, make the next one (a mkdir off the call's path)."""
        try:
            self.discard(layer)
            if len(self._ready) < _READY_LAYERS and not self._closed:
                with contextlib.suppress(OSError):
                    ready = self._make_layer()
                    if self.on_ready is not None:
                        self.on_ready(ready)  # before it is handed out: no run is on it yet
                    self._ready.append(ready)
        finally:
            self._done()

    async def _settle(self, tool: str, layer: Path) -> dict[str, Any]:
        call = aleph.current_call()
        call_id = call.call_id if call is not None else uuid.uuid4().hex[:16]
        nothing = "nothing in the workspace was changed"
        try:
            cs = await anyio.to_thread.run_sync(self.read, layer)
        except ChangesetTooLarge as exc:
            await self._note(call, status="refused")
            return {"status": "refused", "reason": f"{exc}; {nothing}"}
        except (OSError, RecursionError) as exc:  # a tree too deep or names too long to judge: fail closed
            await self._note(call, status="refused")
            return {"status": "refused", "reason": f"the changeset could not be read ({exc!r}); {nothing}"}
        if not cs:
            return {"status": "unchanged"}
        principal = Tally.keys(call.agent, call.turn.session_key if call.turn else None) if call is not None else []
        decision = await anyio.to_thread.run_sync(self.judge, cs, self.tally.prior(principal))
        digest = cs.digest()
        counts = {k: v for k, v in decision.counts.items() if v}
        about = {"summary": cs.summary(), **counts, "digest": digest}
        if decision.action == "ask":
            if call is None:
                decision = Decision("refuse", f"{decision.reason}, and there is nobody to ask", decision.counts)
            else:
                try:
                    await call.authorize(
                        COMMIT_TOOL,
                        {
                            "tool": tool,
                            "call_id": call_id[:128],
                            "about": cs.summary(),
                            "created": decision.counts["created"],
                            "modified": decision.counts["modified"],
                            "deleted": decision.counts["deleted"],
                            "top_dirs": cs.top_dirs(),
                            "digest": digest,
                        },
                    )
                except aleph.ToolError as exc:
                    decision = Decision("refuse", f"{decision.reason}; not approved: {exc}", decision.counts)
                else:
                    self.tally.approved(principal)  # the person saw the totals: they start again
                    principal = []
        if decision.action == "refuse":
            await self._note(call, status="refused", digest=digest, counts=counts)
            return {"status": "refused", "reason": f"{decision.reason}; {nothing}", **about, "paths": self._paths(cs)}
        try:
            manifest = await anyio.to_thread.run_sync(self.commit, cs, tool, call_id, digest)
        except CommitError as exc:
            await self._note(call, status="failed", digest=digest, counts=counts)
            return {"status": "refused", "reason": f"{exc}; {nothing}", **about}
        self.tally.add(principal, counts.get("deleted", 0) + counts.get("modified", 0), counts.get("deleted", 0))
        await self._note(call, status="committed", digest=digest, counts=counts)
        out = {"status": "committed", **about, "paths": self._paths(cs), "undo": manifest["entry"]}
        if manifest["entry"] in manifest["dropped"] or manifest["call_id"] in manifest["dropped"]:
            out["undo"] = None
            out["undo_note"] = "not kept: larger than [exec] undo_max_mb"
        return out

    @staticmethod
    async def _note(call: aleph.CallContext | None, *, status: str, digest: str = "", **extra: Any) -> None:
        """Put the changeset's digest and counts on the call's ledger row."""
        if call is None:
            return
        refs: dict[str, str | int] = {"changeset_status": status}
        if digest:
            refs["changeset"] = digest
        refs.update({f"changeset_{k}": v for k, v in extra.get("counts", {}).items()})
        with contextlib.suppress(ValueError):
            call.annotate(**refs)
