"""The checks a run's layer passes before a command starts on it, and whether this sandbox can give one.

A mixin of :class:`~aleph_exec._sandbox.WorkspaceSandbox` (moved out of it unchanged).
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aleph_exec._capture import SandboxError, TransactionUnavailable
from aleph_exec._layers import LAYERS_DIR
from aleph_exec._offers import fresh_layer
from aleph_exec._tree import remove_tree

if TYPE_CHECKING:
    from aleph_exec._capture import RunResult

__all__ = ["LayerChecks"]


class LayerChecks:
    """Whether a run can get a copy-on-write layer here, and the checks of a layer a caller gives."""

    workspace: Path
    bwrap: str | None
    _lock: threading.Lock
    _transactions: list[str | None]
    _root: bool
    _layers: Path
    _layer_parents: dict[Path, Path]

    if TYPE_CHECKING:

        def run(self, argv: list[str], **kwargs: Any) -> RunResult: ...

        def _sandbox_state(self) -> Any: ...

    def transaction_support(self) -> str | None:
        """None when a run can get a per-run copy-on-write view of the workspace (``layer=``); else why not.

        Probed once (a run of ``true`` on a scratch layer), then cached.
        """
        with self._lock:
            if self._transactions:
                return self._transactions[0]
        reason = self._transaction_reason()
        if reason is None:
            import tempfile

            scratch = Path(tempfile.mkdtemp(prefix="aleph-layer-probe-"))
            try:
                result = self.run(["true"], cwd=self.workspace, timeout=30, layer=scratch, _probe=True)
                if result.exit_code != 0 or not (scratch / "upper").is_dir():
                    reason = (
                        f"a probe run on an overlay failed (exit {result.exit_code}): {result.stderr.strip()[:200]}"
                    )
            except (SandboxError, OSError) as exc:
                reason = str(exc)
            finally:
                remove_tree(scratch, ignore_errors=True)
        with self._lock:
            if not self._transactions:
                self._transactions.append(reason)
            return self._transactions[0]

    def _transaction_reason(self) -> str | None:
        """Why this sandbox can give no overlay, as far as is known without a probe."""
        if self.bwrap is None:
            return "isolation is none (no bubblewrap sandbox to mount an overlay in)"
        try:
            state = self._sandbox_state()
        except SandboxError as exc:
            return str(exc)
        if state.userns is None:
            return f"Aleph cannot make the sandbox's user namespace here: {state.userns_error}"
        if not self._root:
            try:
                state.layer_cloner()
            except OSError as exc:
                return f"the layer cannot be handed to the sandbox: {exc}"
        return None

    def _tidy_layer(self, layer: Path) -> None:
        """After a run on ``layer``: remove its ``work`` directory, which no caller needs.

        overlayfs leaves ``work/work`` with mode 000: root removes it anyway, a user (its owner) only
        after a chmod. ``upper`` is left as the command made it (its modes are part of the changeset).
        """
        if self._root:
            return
        work = layer / "work"
        remove_tree(work, ignore_errors=True)  # gone already, or the caller's removal reports what is left

    def _check_layer(self, layer: Path, probe: bool = False) -> None:
        """Refuse a ``layer`` this sandbox cannot use (the command does not start)."""
        layer = Path(layer)
        try:
            st = os.lstat(layer) if layer.is_absolute() else None
        except OSError:
            st = None
        if st is None or not (stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise ValueError(f"layer {layer}: not an absolute path to an existing directory")
        parent = self._layer_parents.get(layer.parent)
        if parent is None:
            if len(self._layer_parents) >= 64:
                self._layer_parents.clear()
            parent = self._layer_parents[layer.parent] = layer.parent.resolve()
        # The parent is resolved once; a layer that is itself a symlink is resolved every time.
        real = layer.resolve() if stat.S_ISLNK(st.st_mode) or layer.name in ("", ".", "..") else parent / layer.name
        if not real.is_dir():
            raise ValueError(f"layer {layer}: not an absolute path to an existing directory")
        in_layers = real.is_relative_to(self._layers) and real != self._layers
        if not in_layers and (real.is_relative_to(self.workspace) or self.workspace.is_relative_to(real)):
            where = f"outside the workspace {self.workspace} or in its {LAYERS_DIR}"
            raise ValueError(f"layer {layer}: it must lie {where}")
        with os.scandir(real) as entries:
            if next(entries, None) is not None and not fresh_layer(real):  # an overlay mounted ahead leaves two
                raise ValueError(f"layer {layer}: not empty")
        reason = self._transaction_reason() if probe else self.transaction_support()
        if reason is not None:
            raise TransactionUnavailable(reason)
