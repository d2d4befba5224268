from __future__ import annotations

from aleph import repair_tool_name, suggest_candidates

OFFERED = ["read", "web_search", "session_search", "real"]


def test_repair_tiers_from_the_reference() -> None:
    assert repair_tool_name("read", OFFERED) == ("read", "exact")
    assert repair_tool_name("Read", ["read", "web_search"]) == ("read", "case")
    assert repair_tool_name("web.search", ["read", "web_search"]) == ("web_search", "separator")
    assert repair_tool_name("Web.Search", ["read", "web_search"]) == ("web_search", "separator")
    assert repair_tool_name("web_serch", ["read", "web_search"]) == ("web_search", "fuzzy")
    assert repair_tool_name("web_serh", ["read", "web_search"]) == ("web_search", "fuzzy")


def test_repair_gives_up_when_ambiguous_or_too_short() -> None:
    assert repair_tool_name("reaf", ["read", "real"]) is None
    assert repair_tool_name("rd", ["read", "real"]) is None
    assert repair_tool_name("reet", ["read", "real"]) is None
    assert repair_tool_name("read", ["Read", "READ"]) is None
    assert repair_tool_name("", OFFERED) is None


def test_suggestions_from_the_reference() -> None:
    assert suggest_candidates("search", ["session_search", "web_search", "read"], 5) == ["session_search", "web_search"]
    assert suggest_candidates("reaf", ["read", "real", "web_search"], 5) == ["read", "real"]
    assert suggest_candidates("rd", ["read", "real"], 5) == []
    assert suggest_candidates("x", [], 5) == []
    assert suggest_candidates("read", ["read"], 0) == []
