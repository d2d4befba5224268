"""Layers handed to the zygote ahead of the runs that go on them (the zygote's protocol, flag ``p``).

Mounting a run's overlay (overlayfs probes its work directory as it mounts) is the dearest part of a
transaction's start. :class:`Transactions` makes its next layers between calls; each is offered to
the running zygote then (:meth:`LayerOffers.offer_layer`), which mounts its overlay in a mount namespace
of its own while idle. The run that goes on the layer names it instead of passing it, and the zygote
only enters that namespace to start the command. A layer the zygote mounted holds an empty ``upper``
and the overlay's ``work``: the run's changeset is still its writes alone.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aleph_exec._capture import SandboxError

if TYPE_CHECKING:
    from aleph_exec._zygote_client import _Zygote

__all__ = ["LayerOffers", "fresh_layer"]

_MAX_OFFERED = 4  # the zygote's MAX_OFFERED: Transactions keeps two made ahead


def fresh_layer(path: Path) -> bool:
    """Whether a non-empty layer directory is one whose overlay is mounted ahead, and nothing written since.

    It holds an empty ``upper`` directory and a ``work`` directory (no symlinks), the overlay's own,
    which overlayfs empties again when it mounts; or only ``upper`` yet, while the zygote mounts it (it
    finishes before it reads the run that names the layer).
    """
    try:
        with os.scandir(path) as entries:
            kinds = {entry.name: entry.is_dir(follow_symlinks=False) for entry in entries}
        if kinds not in ({"upper": True}, {"upper": True, "work": True}):
            return False
        with os.scandir(path / "upper") as entries:
            return next(entries, None) is None
    except OSError:
        return False


class LayerOffers:
    """Offering fresh layers to the running zygote, and claiming one for the run that goes on it."""

    _lock: threading.Lock
    _zygote: _Zygote | None
    _transactions: list[str | None]
    _offered: dict[str, tuple[_Zygote, bytes, int, int]]
    bwrap: str | None
    # And WorkspaceSandbox's _check_layer and Namespaces' _layer_fd.

    def offer_layer(self, layer: Path) -> None:
        """Hand ``layer``, a fresh empty layer directory, to the running zygote, which mounts its overlay now.

        For a caller that makes layers ahead, off any call's path (:class:`Transactions` does), before
        any run may be given the layer. A run with ``layer=`` that names it then starts without mounting.
        Does nothing when no zygote runs, transactions are not known to work yet, enough layers are held,
        or the layer cannot be handed over: the run mounts it itself then.
        """
        if self.bwrap is None:
            return
        key = str(layer)
        with self._lock:
            zygote = self._zygote
            if self._transactions != [None] or zygote is None or not zygote.alive() or zygote.retired:
                return
            if len(self._offered) >= _MAX_OFFERED or key in self._offered:
                return
        try:
            self._check_layer(layer)  # type: ignore[attr-defined]
            st = os.lstat(layer)
            fd = self._layer_fd(layer)  # type: ignore[attr-defined]
        except (OSError, ValueError, SandboxError):
            return
        try:
            layer_id = zygote.offer_layer(fd)
        finally:
            os.close(fd)
        if layer_id is not None and stat.S_ISDIR(st.st_mode):
            with self._lock:
                self._offered[key] = (zygote, layer_id, st.st_dev, st.st_ino)

    def _claim_offer(self, layer: Path, zygote: Any) -> bytes:
        """The id under which ``zygote`` holds ``layer`` mounted (see :meth:`offer_layer`), else b"".

        Claimed once. Offered to a zygote that has been replaced since, or the directory replaced since:
        the run mounts it itself (the zygote takes the ``upper`` and ``work`` an earlier mount left).
        """
        with self._lock:
            held = self._offered.pop(str(layer), None)
        if held is None or held[0] is not zygote:
            return b""
        try:
            st = os.lstat(layer)
        except OSError:
            return b""
        return held[1] if (st.st_dev, st.st_ino) == held[2:] else b""
