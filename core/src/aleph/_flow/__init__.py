"""Data-flow rules: provenance of what entered a session, judged where a sink's arguments leave it.

``_values`` finds and fingerprints identifiers, ``_state`` keeps each session's provenance (bounded),
``_policy`` reads ``[flow]``, and ``_gate`` is the chokepoint's half (observe outputs, judge sinks).
See docs/dataflow.md.
"""
