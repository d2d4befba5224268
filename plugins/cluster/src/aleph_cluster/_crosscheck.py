"""``aleph cluster crosscheck``: match the center's ledger rows of remote calls with a node's rows.

Each side proves its own half with ``aleph ledger verify``; the cross-check then pairs rows by request id
and compares what both signed: the node, the calling principal, the argv digest and the result digest. A
center row with no node row means the node never recorded (or lost) a call the center relied on; a node
row with no center row means the node acted on a request the center does not account for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aleph import Ledger, LedgerRow

__all__ = ["CrossCheck", "crosscheck"]


@dataclass
class CrossCheck:
    """The outcome: matched request ids and every disagreement, each with a reason."""

    matched: list[str] = field(default_factory=list)
    missing_on_node: list[str] = field(default_factory=list)
    missing_on_center: list[str] = field(default_factory=list)
    mismatched: list[dict[str, str]] = field(default_factory=list)
    broken_chains: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Both halves verify and every request is accounted for identically on both sides."""
        return not (self.missing_on_node or self.missing_on_center or self.mismatched or self.broken_chains)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready report."""
        return {
            "ok": self.ok,
            "matched": len(self.matched),
            "missing_on_node": self.missing_on_node,
            "missing_on_center": self.missing_on_center,
            "mismatched": self.mismatched,
            "broken_chains": self.broken_chains,
        }


def _rows(directory: Path, report: CrossCheck, side: str) -> list[LedgerRow]:
    ledger = Ledger(directory)
    out: list[LedgerRow] = []
    try:
        for agent in ledger.agents():
            verdict = ledger.verify(agent)
            if not verdict.ok:
                report.broken_chains.append(f"{side}:{agent}")
            out.extend(ledger.rows(agent))
    finally:
        ledger.close()
    return out


def crosscheck(center_ledger: Path, node_ledger: Path, *, node: str | None = None) -> CrossCheck:
    """Cross-check the ledger directory of the center with the ledger directory of one node."""
    report = CrossCheck()
    center: dict[str, LedgerRow] = {}
    for row in _rows(Path(center_ledger), report, "center"):
        refs = row.refs or {}
        if "request_id" in refs and "argv_digest" in refs and (node is None or refs.get("node") == node):
            center[refs["request_id"]] = row
    remote: dict[str, LedgerRow] = {}
    for row in _rows(Path(node_ledger), report, "node"):
        refs = row.refs or {}
        if "request_id" in refs and "kind" in refs:
            remote[refs["request_id"]] = row
            node = node or refs.get("node")
    for rid, crow in center.items():
        if (crow.refs or {}).get("node") != node:
            continue  # a call to another node: that node's ledger answers for it
        nrow = remote.get(rid)
        if nrow is None:
            report.missing_on_node.append(rid)
            continue
        crefs = crow.refs or {}
        problems = []
        if nrow.args_fp != crefs.get("argv_digest"):
            problems.append("argv digest")
        if nrow.result_fp != crefs.get("result_digest"):
            problems.append("result digest")
        if nrow.principal != crefs.get("principal", crow.agent_id):
            problems.append("principal")
        if problems:
            report.mismatched.append({"request_id": rid, "differs": ", ".join(problems)})
        else:
            report.matched.append(rid)
    report.missing_on_center = sorted(rid for rid in remote if rid not in center)
    return report
