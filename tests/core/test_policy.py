"""Permission rules and layers: parsing, validation, matching, merging (reference §2.5, §6.3)."""

from __future__ import annotations

import pytest

from aleph import ConfigError, ToolSource
from aleph._chokepoint._permissions import CallSubjects, PermissionLayer, PermissionPolicy, parse_rule

WS = "/srv/ws"


def layer(name: str = "global", default: str = "allow", **overrides: str) -> PermissionLayer:
    return PermissionLayer.from_config(name, {"default": default, "overrides": overrides}, workspace=WS)


def layer_of(rules: dict[str, str], default: str = "allow", name: str = "global") -> PermissionLayer:
    return PermissionLayer.from_config(name, {"default": default, "overrides": rules}, workspace=WS)


def decide(policy: PermissionPolicy, name: str, source: ToolSource | None = None, **subjects: object) -> str:
    call = CallSubjects(**subjects) if subjects else None  # type: ignore[arg-type]
    return policy.decide(name, source, (lambda: call) if call else None).action


# -- single layer -------------------------------------------------------------------------------


def test_empty_policy_allows_everything() -> None:
    policy = PermissionPolicy([layer()])
    assert policy.is_empty
    assert decide(policy, "anything") == "allow"


def test_exact_override_and_default() -> None:
    policy = PermissionPolicy([layer_of({"shell": "ask"}, default="deny")])
    assert decide(policy, "shell") == "ask"
    assert decide(policy, "other") == "deny"


def test_exact_beats_glob_inside_one_layer_so_carve_outs_work() -> None:
    policy = PermissionPolicy([layer_of({"*_delete": "deny", "file_delete": "allow"})])
    assert decide(policy, "file_delete") == "allow"
    assert decide(policy, "agent_delete") == "deny"


def test_most_restrictive_glob_wins_and_ties_go_to_the_smallest_key() -> None:
    policy = PermissionPolicy([layer_of({"file_*": "ask", "*_delete": "deny"})])
    assert decide(policy, "file_delete") == "deny"
    assert decide(policy, "file_read") == "ask"
    d = PermissionPolicy([layer_of({"zzz_*": "ask", "a*": "ask", "aaa*": "ask"})]).decide("aaa_zzz_x")
    assert d.rule == "a*"


def test_star_glob_denies_everything() -> None:
    assert decide(PermissionPolicy([layer_of({"*": "deny"})]), "whatever") == "deny"


# -- across layers ------------------------------------------------------------------------------


def test_glob_deny_beats_exact_allow_across_layers() -> None:
    mcp = ToolSource.mcp("github")
    policy = PermissionPolicy(
        [layer_of({"github__*": "deny"}), layer_of({"github__create_issue": "allow"}, name="agent:a")]
    )
    d = policy.decide("github__create_issue", mcp)
    assert (d.action, d.rule, d.layer) == ("deny", "github__*", "global")


def test_deny_default_plus_explicit_allow_exposes_only_that_tool() -> None:
    policy = PermissionPolicy([layer_of({"alpha": "allow"}, default="deny")])
    assert decide(policy, "alpha") == "allow"
    assert decide(policy, "beta") == "deny"


def test_explicitness_survives_merging_even_when_equal_to_default() -> None:
    policy = PermissionPolicy([layer_of({"bash": "allow"}), layer_of({}, default="allow", name="agent:a")])
    assert policy.decide("bash").explicit is True
    assert policy.decide("other").explicit is False


def test_defaults_merge_to_the_strictest() -> None:
    policy = PermissionPolicy([layer(default="allow"), layer(name="agent:a", default="ask")])
    d = policy.decide("x")
    assert (d.action, d.rule, d.layer, d.explicit) == ("ask", None, "agent:a", False)


def test_symmetric_denies_from_either_layer() -> None:
    for a, b in (({"x": "deny"}, {}), ({}, {"x": "deny"})):
        assert decide(PermissionPolicy([layer_of(a), layer_of(b, name="channel:c")]), "x") == "deny"


# -- MCP server globs ----------------------------------------------------------------------------


def test_server_glob_matches_the_recorded_server_id_not_the_string() -> None:
    policy = PermissionPolicy([layer_of({"github__*": "deny"})])
    assert decide(policy, "github__x", ToolSource.mcp("github")) == "deny"
    assert decide(policy, "github_evil__x", ToolSource.mcp("github_evil")) == "allow"
    # a non-MCP tool can never be matched by a server rule
    assert decide(policy, "github__x", ToolSource.plugin("github")) == "allow"


def test_exact_mcp_rule_is_a_carve_out_inside_the_server_glob() -> None:
    policy = PermissionPolicy([layer_of({"github__*": "ask", "github__get_issue": "allow"})])
    assert decide(policy, "github__get_issue", ToolSource.mcp("github")) == "allow"
    assert decide(policy, "github__delete_repo", ToolSource.mcp("github")) == "ask"


# -- argument specifiers ---------------------------------------------------------------------------


def test_command_rules_cover_every_sub_command_for_allow_and_any_for_deny() -> None:
    policy = PermissionPolicy(
        [layer_of({"bash": "ask", "bash(git status)": "allow", "bash(git log *)": "allow", "bash(rm *)": "deny"})]
    )
    assert decide(policy, "bash", commands=(("git", "status"),)) == "allow"
    assert decide(policy, "bash", commands=(("git", "log", "--oneline"),)) == "allow"
    assert decide(policy, "bash", commands=(("git", "log"),)) == "allow"
    assert decide(policy, "bash", commands=(("git", "status"), ("git", "log"))) == "allow"
    assert decide(policy, "bash", commands=(("git", "status"), ("curl", "x"))) == "ask"
    assert decide(policy, "bash", commands=(("git", "status"), ("/bin/rm", "-rf", "x"))) == "deny"
    assert decide(policy, "bash", commands=(("git", "status", "--porcelain"),)) == "ask"


def test_an_opaque_command_is_never_covered_by_an_allow_rule() -> None:
    policy = PermissionPolicy([layer_of({"bash": "ask", "bash(git status)": "allow"})])
    assert decide(policy, "bash", commands=(("git", "status"),), opaque=True, is_shell=True) == "ask"


def test_path_rules_use_workspace_relative_normalised_paths_and_star_stays_in_one_segment() -> None:
    policy = PermissionPolicy(
        [layer_of({"file_read": "deny", "file_read(src/*.py)": "allow", "file_read(docs/**)": "allow"})]
    )
    assert decide(policy, "file_read", paths=("src/a.py",)) == "allow"
    assert decide(policy, "file_read", paths=("src/sub/a.py",)) == "deny"
    assert decide(policy, "file_read", paths=("docs/a/b/c.md",)) == "allow"
    assert decide(policy, "file_read", paths=("docs/x.md", "secret.txt")) == "deny"


def test_path_rule_that_escapes_the_workspace_is_a_dead_rule() -> None:
    with pytest.raises(ConfigError, match=r"rule 'file_read\(\.\./x\)'.*outside the workspace"):
        layer_of({"file_read(../x)": "allow"})


def test_domain_and_field_specifiers() -> None:
    policy = PermissionPolicy(
        [
            layer_of(
                {
                    "web_fetch": "ask",
                    "web_fetch(domain:example.com)": "allow",
                    "web_fetch(domain:*.evil.com)": "deny",
                    "file_ops(operation=delete)": "deny",
                }
            )
        ]
    )
    assert decide(policy, "web_fetch", hosts=("example.com",)) == "allow"
    assert decide(policy, "web_fetch", hosts=("a.evil.com",)) == "deny"
    assert decide(policy, "web_fetch", hosts=("other.org",)) == "ask"
    assert decide(policy, "file_ops", arguments={"operation": "delete"}) == "deny"
    assert decide(policy, "file_ops", arguments={"operation": "list"}) == "allow"


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        ("", "empty rule"),
        ("bash(", "balanced parentheses"),
        ("bash()", "empty argument specifier"),
        ("ba sh", "balanced parentheses"),
        ("fïle_read", "ASCII"),
        ("github__", "'<server>__<tool>'"),
        ("web_fetch(domain:)", "needs a host"),
        ("bash(*)", "covers every command"),
        ("bash('unterminated)", "does not parse"),
    ],
)
def test_malformed_or_never_matchable_rules_are_config_errors_naming_the_rule(rule: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        layer_of({rule: "allow"})
    assert why in str(info.value)
    assert repr(rule) in str(info.value)


def test_parse_rule_keeps_the_key_as_written() -> None:
    rule = parse_rule("bash(git log *)", "allow")
    assert (rule.key, rule.spec_kind, rule.name_pattern) == ("bash(git log *)", "command", "bash")


def test_server_rules_with_a_tool_glob_match_only_that_servers_tools() -> None:
    policy = PermissionPolicy([layer_of({"github__delete_*": "deny", "*__get_*": "allow"}, default="ask")])
    assert decide(policy, "github__delete_repo", ToolSource.mcp("github")) == "deny"
    assert decide(policy, "github__create_repo", ToolSource.mcp("github")) == "ask"
    assert decide(policy, "gitlab__delete_repo", ToolSource.mcp("gitlab")) == "ask"
    assert decide(policy, "gitlab__get_repo", ToolSource.mcp("gitlab")) == "allow"


def test_every_tier_has_its_own_model_facing_line() -> None:
    from aleph._chokepoint._tiers import ExecTier

    lines = [tier.prompt_line for tier in ExecTier]
    assert len(set(lines)) == 4
    assert all(line.startswith(f"Approval mode: {tier.id} — ") for tier, line in zip(ExecTier, lines, strict=True))
