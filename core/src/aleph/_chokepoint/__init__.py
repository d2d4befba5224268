"""The one permission chokepoint every tool call of every source passes.

``_scoped`` is :class:`~aleph.ScopedToolService`; ``_judge`` turns a call into a ``_verdict`` from the
permission layers (``_layers``, ``_permissions``), the tiers (``_tiers``) and the floors; ``_gate`` and
``_approval`` ask a human through ``_requesters``; ``_callguard``, ``_budget`` and ``_results`` hold
budgets and exactly-once; ``_recording`` writes the ledger rows and session events; ``_boundary``
makes every input plain JSON data first; ``_call`` is the running call tools can read.
"""
