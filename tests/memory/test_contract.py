from __future__ import annotations

import aleph_memory.plugin

from aleph.testing import ToolContractTests


class TestMemoryContract(ToolContractTests):
    plugin = aleph_memory.plugin
    families = ("memory", "remember", "recall", "ctx", "user", "flag", "tool", "governance", "session", "note")
    no_example = {
        "session_new": "needs a session key; tests/memory/test_sessions.py runs it under a TurnContext",
        "session_rename": "needs a session key; tests/memory/test_sessions.py runs it under a TurnContext",
        "session_compact": "needs a session key; tests/memory/test_sessions.py runs it under a TurnContext",
        "session_complete": "needs a session key; tests/memory/test_sessions.py runs it under a TurnContext",
        "session_send": "needs an existing target session; tests/memory/test_sessions.py creates one",
        "memory_timeline": "needs a stored fact id; tests/memory/test_remember.py passes one",
        "tool_usage": "needs the runtime's ledger at call time; tests/memory/test_provenance.py runs it",
    }

    def examples(self) -> list[tuple[str, dict[str, object]]]:
        return [
            ("remember", {"action": "add", "content": "The user prefers dark roast coffee", "subject": "user.coffee"}),
            ("remember", {"action": "add", "content": "The user now prefers green tea", "subject": "user.coffee"}),
            ("memory_search", {"query": "what does the user drink"}),
            ("memory_explore", {"query": "tea"}),
            ("memory_reflect", {"query": "what does the user drink", "extractive": True}),
            ("memory_trace", {"kind": "write_decision"}),
            ("recall_context", {"query": "drink"}),
            ("recall_events", {"query": "remember"}),
            ("ctx_search", {"query": "anything"}),
            ("user_profile", {"action": "read"}),
            ("flag_user_correction", {"content": "It is green tea, not coffee", "severity": "low"}),
            ("governance_metrics", {}),
            ("session_list", {}),
            ("session_search", {"query": "tea"}),
            (
                "note_manage",
                {"action": "create", "path": "projects/aleph", "title": "Aleph", "content": "See [[ideas]]."},
            ),
            (
                "note_manage",
                {"action": "create", "path": "ideas", "title": "Ideas", "content": "Back to [[projects/aleph]]"},
            ),
            ("note_schema", {"action": "write", "content": "# Schema\n## Tags\nUse lowercase tags.\n"}),
            ("note_orient", {}),
            ("note_graph_query", {"op": "neighbors", "target": "ideas"}),
            ("memory_browse", {"action": "list"}),
        ]
