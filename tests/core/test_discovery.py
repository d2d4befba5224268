"""Discovery building blocks (reference §2.12-2.14, §6.4): tokeniser, BM25, disclosure, deferral, modes, sessions."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from aleph import ToolDefinition, ToolSource
from aleph._discovery import (
    DeferredSet,
    ProgressiveDisclosure,
    SessionStore,
    ToolIndex,
    collapse_note,
    core_for_mode,
    defers_tool,
    first_sentence,
    tokenize,
)
from aleph._discovery._tokens import _walk, search_terms

sys.path.insert(0, str(Path(__file__).parent))
from discovery_relevance import catalog_definitions


def d(name: str, description: str, properties: dict[str, str] | None = None) -> ToolDefinition:
    props = {k: {"type": "string", "description": v} for k, v in (properties or {}).items()}
    return ToolDefinition(name, description, {"type": "object", "properties": props, "additionalProperties": False})


# -- tokeniser (R12.3) ---------------------------------------------------------------------------


def test_tokeniser_splits_snake_case_colons_and_camel_case() -> None:
    assert ["browser", "navigate"] == tokenize("browser_navigate")
    assert ["mcp", "slack", "post"] == tokenize("mcp:slack:post")
    assert ["get", "user", "by", "id"] == tokenize("getUserById")


def test_tokeniser_drops_one_byte_tokens_and_keeps_uppercase_runs_together() -> None:
    assert ["httpserver", "id2", "name", "bc"] == tokenize("HTTPServer ID2Name a.BC x")


def test_cjk_gives_unigrams_and_bigrams_never_the_whole_phrase() -> None:
    tokens = tokenize("发送消息")
    assert ["发", "送", "发送", "消", "送消", "息", "消息"] == tokens
    assert "发送消息" not in tokens


def test_mixed_ascii_and_cjk_identifier() -> None:
    assert ["slack", "发", "送", "发送"] == tokenize("slack_发送")


def test_ascii_fast_path_agrees_with_the_character_walk() -> None:
    for text in ["browser_navigate", "getUserById", "HTTPServer ID2Name", "aBC ABc Ab2Cd a1b2C", "x-y.z:w  Q9q"]:
        assert _walk(text) == tokenize(text)


def test_search_terms_drop_stop_words_and_fold_simple_suffixes() -> None:
    assert ["sav", "fil"] == search_terms("saving the files")
    assert search_terms("saved") == search_terms("save")


# -- BM25 index (R12.4) --------------------------------------------------------------------------


def test_bm25_score_matches_the_reference_formula_for_a_single_term() -> None:
    defs = [d("alpha", "zebra zebra"), d("beta", "lion"), d("gamma", "tiger")]
    hits = ToolIndex(defs).search("zebra", 5)
    # doc alpha: tokens alpha alpha zebra zebra (name counted twice); n=1 of N=3
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    dls = [4, 3, 3]
    avgdl = sum(dls) / 3
    expected = idf * 2 * 2.5 / (2 + 1.5 * (1 - 0.75 + 0.75 * 4 / avgdl))
    assert ["alpha"] == [h.name for h in hits]
    assert round(expected, 9) == round(hits[0].score, 9)


def test_ties_are_ordered_by_name_and_only_positive_scores_are_kept() -> None:
    defs = [d("zeta_tool", "send mail"), d("alpha_tool", "send mail"), d("other", "nothing here")]
    assert ["alpha_tool", "zeta_tool"] == [h.name for h in ToolIndex(defs).search("send", 5)]
    assert [] == ToolIndex(defs).search("unrelated", 5)


def test_parameter_names_and_descriptions_are_searchable() -> None:
    defs = [d("tool_a", "Does a thing.", {"latitude": "Degrees north of the equator."}), d("tool_b", "Other.")]
    assert ["tool_a"] == [h.name for h in ToolIndex(defs).search("equator", 5)]
    assert ["tool_a"] == [h.name for h in ToolIndex(defs).search("latitude", 5)]


def test_a_chinese_query_finds_the_chinese_tool() -> None:
    defs = [d("slack_post", "发送消息到频道"), d("file_read", "读取文件内容"), d("weather", "查询天气预报")]
    assert "slack_post" == ToolIndex(defs).search("发送消息", 3)[0].name


def test_accept_filters_before_the_limit() -> None:
    defs = [d(f"mail_{i:02}", "send mail") for i in range(30)]
    hits = ToolIndex(defs).search("mail", 3, accept=lambda n: n.endswith("7"))
    assert ["mail_07", "mail_17", "mail_27"] == [h.name for h in hits]


def test_limit_is_respected() -> None:
    defs = [d(f"mail_{i:02}", "send mail") for i in range(30)]
    assert 4 == len(ToolIndex(defs).search("mail", 4))


# -- progressive disclosure (R14.1-R14.3) ----------------------------------------------------------


def test_non_core_tools_are_collapsed_and_core_tools_kept() -> None:
    rewrite = ProgressiveDisclosure(["file_read"])
    core = d("file_read", "Read a file.", {"path": "Path."})
    other = d("browser_click", "Click. Then wait.", {"target": "Ref."})
    assert core is rewrite(core)
    out = rewrite(other)
    assert "browser_click" == out.name
    assert {"type": "object", "additionalProperties": True} == out.input_schema
    assert "Click. Then wait." + collapse_note("browser_click") == out.description
    assert out.description.endswith(
        ' [Parameters collapsed — call get_tool_schema(tool_name="browser_click") to load the full input schema '
        "before calling this tool.]"
    )


def test_discovery_tools_are_always_core() -> None:
    rewrite = ProgressiveDisclosure(["file_read"])
    for name in ("get_tool_schema", "tool_search"):
        definition = d(name, "x", {"q": "y"})
        assert definition is rewrite(definition)


def test_truncation_cuts_to_the_first_sentence() -> None:
    rewrite = ProgressiveDisclosure(["x"], truncate_descriptions=True)
    out = rewrite(d("browser_click", "Click an element. Then wait for the page."))
    assert "Click an element." + collapse_note("browser_click") == out.description


def test_abbreviations_do_not_end_a_sentence() -> None:
    assert "Use a unit, e.g. metres, here." == first_sentence("Use a unit, e.g. metres, here. More text.")
    assert "Compare A vs. B and i.e. C." == first_sentence("Compare A vs. B and i.e. C. Next.")
    assert "See Fig. 3 for no. 5 details" == first_sentence("See Fig. 3 for no. 5 details")


@pytest.mark.parametrize("core", [["*"], [], ["file_read", "*"]])
def test_disclosure_is_off_for_star_empty_and_mixed_lists(core: list[str]) -> None:
    rewrite = ProgressiveDisclosure(core, truncate_descriptions=True)
    definition = d("browser_click", "Click. More.", {"target": "Ref."})
    assert definition is rewrite(definition)
    assert not rewrite.enabled


def test_rewriting_is_deterministic() -> None:
    rewrite = ProgressiveDisclosure(["a"], truncate_descriptions=True)
    definition = d("b_tool", "One. Two.", {"p": "q"})
    assert rewrite(definition) == rewrite(definition)


def test_disclosure_cuts_the_reference_catalog_schemas_by_more_than_half() -> None:
    defs = catalog_definitions()
    rewrite = ProgressiveDisclosure(["file_read", "bash", "search", "web_fetch", "ask_user"])
    full = sum(len(json.dumps(x.input_schema)) for x in defs)
    collapsed = sum(len(json.dumps(rewrite(x).input_schema)) for x in defs)
    assert collapsed < full * 0.5
    # The whole definitions shrink too, although the mandated note (~140 characters) eats into the saving
    # for tools with small schemas; bench/bench_discovery.py prints both figures.
    whole = sum(len(json.dumps(x.to_function())) for x in defs)
    assert sum(len(json.dumps(rewrite(x).to_function())) for x in defs) < whole


# -- deferred set (R12.6) ------------------------------------------------------------------------


def test_undefer_promotes_and_bumps_the_generation() -> None:
    deferred = DeferredSet(["a", "b"])
    assert ["a"] == deferred.undefer(["a", "zzz"])
    assert "a" not in deferred and "b" in deferred
    assert 1 == deferred.generation


def test_a_no_op_undefer_keeps_the_generation() -> None:
    deferred = DeferredSet(["a"])
    assert [] == deferred.undefer(["x"])
    assert 0 == deferred.generation


def test_the_set_only_shrinks_a_promoted_tool_never_returns() -> None:
    deferred = DeferredSet()
    deferred.admit(["a", "b"], defer=["a", "b"])
    deferred.undefer(["a"])
    deferred.admit(["a", "b", "c"], defer=["a", "b", "c"])
    assert ["b", "c"] == list(deferred)


# -- session modes (R14.4) -----------------------------------------------------------------------

CORE = ("ask_user", "bash", "code_exec", "file_read", "file_write", "file_edit", "file_ops", "search")


def test_mode_core_sets() -> None:
    assert CORE == core_for_mode(CORE, "work")
    assert ("ask_user", "file_read", "search") == core_for_mode(CORE, "chat")
    assert (*CORE, "apply_patch", "ctx_search") == core_for_mode(CORE, "code")
    assert ("bash",) == core_for_mode(("bash",), "chat")  # emptied → the configured list
    assert ("*",) == core_for_mode(("*",), "chat")
    assert () == core_for_mode((), "code")


@pytest.mark.parametrize(
    ("name", "chat", "work", "code"),
    [
        ("tool_search", False, False, False),
        ("get_tool_schema", False, False, False),
        ("ask_user", False, False, False),
        ("session_set_mode", False, False, False),
        ("self_config", False, False, False),
        ("github__create_issue", False, False, False),
        ("browser_click", True, True, True),
        ("browser_open", True, False, False),
        ("browser_snapshot", True, False, False),
        ("desktop", True, False, True),
        ("desktop_som", True, False, True),
        ("team_create", True, False, False),
        ("heartbeat_list", True, False, False),
        ("apply_patch", True, False, False),
        ("media", True, False, True),
        ("media_send", True, False, True),
        ("media_understand", False, False, False),
        ("image_generate", True, False, True),
        ("hub_install_run", True, False, False),
        ("hubris", False, False, False),
        ("file_read", False, False, False),
    ],
)
def test_mode_deferral_table(name: str, chat: bool, work: bool, code: bool) -> None:
    assert (chat, work, code) == (defers_tool(name, "chat"), defers_tool(name, "work"), defers_tool(name, "code"))


# -- session store ---------------------------------------------------------------------------------


def test_session_store_persists_mode_and_exec_tier(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SessionStore(path)
    assert "work" == store.get("s1").mode
    assert not path.exists()  # reading creates nothing
    store.set_mode("s1", "code")
    store.set_exec_tier("s1", "ask")
    again = SessionStore(path)
    assert ("code", "ask") == (again.get("s1").mode, again.get("s1").exec_tier)
    assert "work" == again.get("s2").mode


def test_session_store_refuses_bad_modes_tiers_and_keys(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s.sqlite3")
    with pytest.raises(ValueError, match="unknown session mode 'play'; choose one of: chat, work, code"):
        store.set_mode("s1", "play")
    with pytest.raises(ValueError):
        store.set_exec_tier("s1", "turbo")
    with pytest.raises(ValueError, match="session key is required"):
        store.set_mode("", "chat")
    with pytest.raises(ValueError, match="limit is 512"):
        store.set_mode("k" * 513, "chat")
    assert "work" == store.get("k" * 513).mode  # reading never fails: such a session just has the defaults


def test_mcp_source_tools_are_never_mode_deferred() -> None:
    # '__' names belong to MCP servers; modes leave them to defer_mcp_tools.
    assert ToolSource.mcp("gh").type == "mcp"
    assert not defers_tool("gh__browser_click", "chat")


def test_tools_core_entries_must_be_tool_names_or_star(tmp_path: Path) -> None:
    from aleph import ConfigError, load_config

    (tmp_path / "aleph.toml").write_text('[tools]\ncore = ["file_read", "bad name!"]\n')
    with pytest.raises(ConfigError, match="'bad name!' is not a tool name"):
        load_config(tmp_path / "aleph.toml", user_file=False)
    (tmp_path / "aleph.toml").write_text('[tools]\ncore = ["*", "file_read"]\ndefer = "auto:10"\n')
    assert ["*", "file_read"] == load_config(tmp_path / "aleph.toml", user_file=False).tools.core
