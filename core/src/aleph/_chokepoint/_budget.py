"""Per-call budgets: spend caps the chokepoint enforces before a call runs.

A :class:`Budget` caps tool calls, wall-clock time, and tokens or cost (which the host reports through
:meth:`Budget.report`, since only the host sees its model's usage). A budget rides on the turn
(``TurnContext.budget``); the chokepoint charges one call against it before the tool runs and refuses
with :class:`~aleph.PermissionDenied` when the call would exceed it, and it bounds the call's run time
by the wall-clock time left. Budgets nest: :meth:`Budget.reserve` carves a child out of its parent's
pool (team → member → task), so a child can never spend what its parent has not set aside for it;
:meth:`Budget.release` hands back what the child did not use.

Charging is atomic across threads (one lock per budget tree), so concurrent members sharing a pool
never overshoot a hard call cap.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Budget", "BudgetExhausted", "BudgetUsage"]

_DIMENSIONS = ("calls", "tokens", "cost")


class BudgetExhausted(Exception):
    """A charge or reservation does not fit; ``str()`` says which budget and which dimension."""


@dataclass(frozen=True, slots=True)
class BudgetUsage:
    """What a budget has spent, and what its children hold reserved."""

    calls: int
    tokens: int
    cost: float
    elapsed_s: float
    reserved_calls: int
    reserved_tokens: int
    reserved_cost: float


class Budget:
    """A spend cap on tool calls, wall-clock seconds, and host-reported tokens and cost.

    A limit of None means "no cap of its own": the charge goes on to the parent, whose cap then
    applies. The wall-clock deadline starts when the budget is made and never outlives the parent's.
    """

    def __init__(
        self,
        *,
        calls: int | None = None,
        wall_seconds: float | None = None,
        tokens: int | None = None,
        cost: float | None = None,
        name: str = "budget",
        used_calls: int = 0,
        used_tokens: int = 0,
        used_cost: float = 0.0,
        _parent: Budget | None = None,
    ) -> None:
        for label, value in (("calls", calls), ("wall_seconds", wall_seconds), ("tokens", tokens), ("cost", cost)):
            if value is not None and (not isinstance(value, int | float) or value < 0 or not math.isfinite(value)):
                raise ValueError(f"budget {name!r}: {label} must be a finite number >= 0, got {value!r}")
        self.name = name
        self.parent = _parent
        self._lock: threading.RLock = _parent._lock if _parent is not None else threading.RLock()
        self.limits: dict[str, float | None] = {"calls": calls, "tokens": tokens, "cost": cost}
        self.used: dict[str, float] = {"calls": used_calls, "tokens": used_tokens, "cost": used_cost}
        self.reserved: dict[str, float] = dict.fromkeys(_DIMENSIONS, 0)
        self.started = time.monotonic()
        own = self.started + wall_seconds if wall_seconds is not None else math.inf
        self.deadline: float = min(own, _parent.deadline) if _parent is not None else own
        self.released = False
        self._holder: dict[str, Budget] = {}
        """For each dimension this budget reserved: the ancestor holding the reservation."""
        self._held: dict[str, tuple[float, float]] = {}
        """For each reserved dimension: (amount set aside, what was already spent before)."""

    # -- nesting ------------------------------------------------------------------------------------

    def reserve(
        self,
        *,
        calls: int | None = None,
        wall_seconds: float | None = None,
        tokens: int | None = None,
        cost: float | None = None,
        name: str = "",
        spent: Mapping[str, float] | None = None,
    ) -> Budget:
        """Carve a child budget out of this one's pool; raises :class:`BudgetExhausted` if it does not fit.

        Each amount given is set aside from the nearest ancestor that caps that dimension, so siblings
        cannot jointly exceed it; an amount left None shares this budget's pool as it is charged.
        ``spent`` (``{"calls": n, ...}``) is what the child already spent in an earlier life (a resumed
        task): it is counted as the child's usage and already in this budget's, so only the rest of the
        child's cap is set aside.
        """
        child_name = name or f"{self.name}/child"
        before = {dim: float((spent or {}).get(dim, 0)) for dim in _DIMENSIONS}
        limits = {"calls": calls, "tokens": tokens, "cost": cost}
        asked = {dim: None if v is None else max(0.0, v - before[dim]) for dim, v in limits.items()}
        with self._lock:
            self._check_usable()
            for dim, amount in asked.items():
                if amount is None:
                    continue
                owner = self._capping(dim)
                if owner is not None and owner._free(dim) < amount:
                    raise BudgetExhausted(
                        f"budget {child_name!r} asks for {_fmt(dim, amount)} but {owner.name!r} has only "
                        f"{_fmt(dim, owner._free(dim))} left"
                    )
            child = Budget(
                calls=calls, wall_seconds=wall_seconds, tokens=tokens, cost=cost, name=child_name, _parent=self
            )
            child.used.update(before)
            for dim, amount in asked.items():
                owner = self._capping(dim) if amount is not None else None
                if owner is not None and amount is not None:
                    owner.reserved[dim] += amount
                    child._holder[dim] = owner
                    child._held[dim] = (amount, before[dim])
            return child

    def release(self) -> None:
        """Give back to the parent's pool what this child reserved, keeping only what it spent."""
        with self._lock:
            if self.released:
                return
            self.released = True
            for dim, owner in self._holder.items():
                held, before = self._held[dim]
                owner.reserved[dim] -= held
                node = self.parent
                while node is not None:  # what the child spent now counts as spent by its ancestors
                    node.used[dim] += self.used[dim] - before
                    if node is owner:
                        break
                    node = node.parent

    # -- charging -----------------------------------------------------------------------------------

    def charge_call(self, tool: str) -> float:
        """Charge one call of ``tool``; returns the wall-clock seconds left (``inf`` when uncapped).

        Raises :class:`BudgetExhausted` naming the budget and dimension, and charges nothing, when the
        call would exceed a call cap, the deadline has passed, or tokens or cost are already spent.
        """
        with self._lock:
            self._check_usable()
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise BudgetExhausted(f"budget {self.name!r}: its wall-clock time is used up, so `{tool}` cannot start")
            for dim in ("tokens", "cost"):
                owner = self._capping(dim)
                if owner is not None and owner._free(dim) <= 0:
                    raise BudgetExhausted(
                        f"budget {owner.name!r}: its {dim} are spent ({_fmt(dim, owner._spent(dim))} of "
                        f"{_fmt(dim, owner.limits[dim] or 0)}), so `{tool}` cannot run"
                    )
            owner = self._capping("calls")
            if owner is not None and owner._free("calls") < 1:
                raise BudgetExhausted(
                    f"budget {owner.name!r}: its cap of {int(owner.limits['calls'] or 0)} tool calls is reached, "
                    f"so `{tool}` cannot run"
                )
            self._add("calls", 1)
            return left

    def report(self, *, tokens: int = 0, cost: float = 0.0) -> None:
        """Record tokens and cost the host's model spent for this budget (the next call sees them)."""
        if tokens < 0 or cost < 0 or not math.isfinite(cost):
            raise ValueError("reported tokens and cost must be >= 0")
        with self._lock:
            if tokens:
                self._add("tokens", tokens)
            if cost:
                self._add("cost", cost)

    def usage(self) -> BudgetUsage:
        """A consistent snapshot of what this budget spent and holds reserved."""
        with self._lock:
            return BudgetUsage(
                calls=int(self.used["calls"]),
                tokens=int(self.used["tokens"]),
                cost=float(self.used["cost"]),
                elapsed_s=time.monotonic() - self.started,
                reserved_calls=int(self.reserved["calls"]),
                reserved_tokens=int(self.reserved["tokens"]),
                reserved_cost=float(self.reserved["cost"]),
            )

    def remaining_seconds(self) -> float:
        """Wall-clock seconds left before the deadline (``inf`` when uncapped)."""
        return self.deadline - time.monotonic()

    # -- internals (callers hold the lock) ----------------------------------------------------------

    def _check_usable(self) -> None:
        node: Budget | None = self
        while node is not None:
            if node.released:
                raise BudgetExhausted(f"budget {node.name!r} was released and takes no more charges")
            node = node.parent

    def _capping(self, dim: str) -> Budget | None:
        """The nearest budget, from this one up, that caps ``dim``."""
        node: Budget | None = self
        while node is not None:
            if node.limits[dim] is not None:
                return node
            node = node.parent
        return None

    def _spent(self, dim: str) -> float:
        return self.used[dim]

    def _free(self, dim: str) -> float:
        limit = self.limits[dim]
        return math.inf if limit is None else limit - self.used[dim] - self.reserved[dim]

    def _add(self, dim: str, amount: float) -> None:
        # Usage counts on every budget from this one up to the first that caps ``dim``: a capped budget
        # spends inside the reservation its parent already set aside, so the charge stops there.
        node: Budget | None = self
        while node is not None:
            node.used[dim] += amount
            if node.limits[dim] is not None:
                break
            node = node.parent


def _fmt(dim: str, amount: float) -> str:
    if dim == "cost":
        return f"{amount:.4f} cost"
    return f"{int(amount)} {dim}"
