"""Policy at scale: request-time layers cached by content, argument rules indexed by the tool they name (issue 34).

The cache must never answer for a table, agent or channel other than the one it parsed; the index must
try exactly the rules a linear scan would, in the table's order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aleph
from aleph import ToolSource
from aleph._chokepoint._layers import REQUEST_POLICY_CACHE, AccessControl
from aleph._chokepoint._permissions import CallSubjects, PermissionLayer, PermissionPolicy

WS = "/srv/ws"


def access(workspace: Path, toml: str = "") -> AccessControl:
    (workspace / "aleph.toml").write_text(toml)
    return AccessControl(aleph.load_config())


def table(default: str = "allow", **overrides: str) -> dict[str, object]:
    return {"default": default, "overrides": dict(overrides)}


# -- request layers cached by content ---------------------------------------------------------------


def test_the_same_request_table_sent_again_is_parsed_once(workspace: Path) -> None:
    ac = access(workspace)
    first = ac.policy(channel="gw", channel_permissions=table(shell="deny"))
    again = ac.policy(channel="gw", channel_permissions=table(shell="deny"))
    assert again is first
    assert again.decide("shell").action == "deny"


def test_a_changed_rule_never_meets_the_cached_policy(workspace: Path) -> None:
    ac = access(workspace)
    assert ac.policy(channel_permissions=table(shell="deny")).decide("shell").action == "deny"
    assert ac.policy(channel_permissions=table(shell="allow")).decide("shell").action == "allow"
    assert ac.policy(channel_permissions=table("deny", shell="allow")).decide("other").action == "deny"
    assert ac.policy(channel_permissions=table(shell="ask")).decide("shell").action == "ask"


def test_the_rule_order_a_refusal_names_is_part_of_the_key(workspace: Path) -> None:
    ac = access(workspace)
    one = {"default": "allow", "overrides": {"file_read(*.env)": "deny", "file_read(*.e*)": "deny"}}
    two = {"default": "allow", "overrides": {"file_read(*.e*)": "deny", "file_read(*.env)": "deny"}}
    call = CallSubjects(paths=("a.env",))
    assert ac.policy(channel_permissions=one).decide("file_read", None, lambda: call).rule == "file_read(*.env)"
    assert ac.policy(channel_permissions=two).decide("file_read", None, lambda: call).rule == "file_read(*.e*)"


def test_a_cached_request_policy_belongs_to_its_agent_and_channel(workspace: Path) -> None:
    toml = (
        '[agents.ana.tool_permissions.overrides]\nshell = "deny"\n[channels.ops.tool_permissions]\ndefault = "deny"\n'
    )
    ac = access(workspace, toml)
    same = table(web_fetch="ask")
    assert ac.policy("ana", None, same).decide("shell").action == "deny"
    assert ac.policy("bob", None, same).decide("shell").action == "allow"
    assert ac.policy("bob", "ops", same).decide("shell").action == "deny"
    assert ac.policy("bob", "lobby", same).decide("shell").action == "allow"


def test_tables_that_print_alike_but_validate_differently_are_never_confused(workspace: Path) -> None:
    ac = access(workspace)
    valid = ac.policy(channel_permissions={"default": "deny", "overrides": {"1": "allow"}})
    assert valid.decide("1").action == "allow"
    # an int key prints as the same JSON text; it is judged on its own (here: malformed, so it denies)
    other = ac.policy(channel_permissions={"default": "deny", "overrides": {1: "allow"}})
    assert other is not valid
    assert other.decide("1").action == "deny"
    assert ac.policy(channel_permissions={"default": "deny", "overrides": {1: "allow"}}) is not other


def test_the_request_cache_is_bounded_and_drops_the_least_recently_used(workspace: Path) -> None:
    ac = access(workspace)
    kept = ac.policy(channel_permissions=table(keep="deny"))
    dropped = ac.policy(channel_permissions=table(drop="deny"))
    for i in range(REQUEST_POLICY_CACHE - 1):
        ac.policy(channel_permissions=table(**{f"t{i}": "deny"}))
        assert ac.policy(channel_permissions=table(keep="deny")) is kept  # used, so kept
    assert ac.policy(channel_permissions=table(keep="deny")) is kept
    again = ac.policy(channel_permissions=table(drop="deny"))
    assert again is not dropped and again.decide("drop").action == "deny"


def test_a_malformed_request_table_still_fails_closed_when_cached(workspace: Path) -> None:
    ac = access(workspace)
    for _ in range(2):
        policy = ac.policy(channel_permissions={"default": "sometimes"})
        assert policy.decide("anything").action == "deny"


# -- argument rules indexed by tool -------------------------------------------------------------------


def linear(layer: PermissionLayer, name: str, source: ToolSource | None) -> list[str]:
    return [r.key for r in layer.specs if r.matches_name(name, source)]


def test_a_call_tries_exactly_the_argument_rules_a_scan_would_in_table_order() -> None:
    rules = {f"tool{i}(path:*.x{i})": "deny" for i in range(50)}
    rules |= {
        "file_read(*.env)": "deny",
        "file_*(*.key)": "deny",
        "file_read(docs/**)": "allow",
        "srv__file_read(*.pem)": "deny",
        "srv*__*(*.tmp)": "ask",
        "File_Read(*.bak)": "ask",
    }
    layer = PermissionLayer.from_config("global", {"overrides": rules}, workspace=WS)
    mcp = ToolSource(type="mcp", server_id="srv")
    for name, source in [("file_read", None), ("file_write", None), ("srv__file_read", mcp), ("tool7", None)]:
        assert [r.key for r in layer.specs_for(name, source)] == linear(layer, name, source)
        assert layer.has_specs_for(name, source) == bool(linear(layer, name, source))
    assert [r.key for r in layer.specs_for("file_read", None)] == [
        "file_read(*.env)",
        "file_*(*.key)",
        "file_read(docs/**)",
        "File_Read(*.bak)",
    ]
    assert not layer.has_specs_for("nothing", None)


def test_argument_rules_for_other_tools_never_decide_a_call() -> None:
    rules = {f"other{i}(path:**)": "deny" for i in range(1000)}
    rules["file_read(secret/**)"] = "deny"
    policy = PermissionPolicy([PermissionLayer.from_config("global", {"overrides": rules}, workspace=WS)])
    secret = CallSubjects(paths=("secret/a",))
    open_file = CallSubjects(paths=("notes/a",))
    assert policy.decide("file_read", None, lambda: secret).action == "deny"
    assert policy.decide("file_read", None, lambda: open_file).action == "allow"
    assert policy.decide("other7", None, lambda: open_file).rule == "other7(path:**)"
    assert policy.allowing_rules("file_read") is None  # nothing denies the name itself


@pytest.mark.parametrize("action", ["deny", "ask"])
def test_a_layer_of_many_plain_name_rules_still_sorts_exact_from_glob(action: str) -> None:
    rules = {f"tool_{i}": action for i in range(2000)} | {"tool_*": "allow"}
    layer = PermissionLayer.from_config("global", {"overrides": rules}, workspace=WS)
    assert [r.key for r in layer.globs] == ["tool_*"]
    assert layer.decide_name("tool_5", None).action == action
    assert layer.decide_name("tool_x", None).action == "allow"


# -- globs: translated at parse, compiled at first match; the meaning is the documented one ----------


@pytest.mark.parametrize(
    ("spec", "path", "expected"),
    [
        ("path:src/*.py", "src/a.py", True),
        ("path:src/*.py", "src/sub/a.py", False),  # "*" stays in its segment
        ("path:src/**/*.py", "src/a.py", True),  # "**/" matches zero directories
        ("path:src/**/*.py", "src/x/y/a.py", True),
        ("path:src/**", "src/x/y", True),
        ("path:src/?.py", "src/ab.py", False),
        ("path:src/?.py", "src/a.py", True),
        ("path:a+b (1).[ch]", "a+b (1).[ch]", True),  # regex characters in a glob are literal
        ("path:a+b (1).[ch]", "aab (1).c", False),
        ("path:notes.md", "notesxmd", False),
        ("path:**/.env", ".env", True),
        ("path:**/.env", "deep/er/.env", True),
        ("path:**/.env", "deep/er/.envrc", False),
    ],
)
def test_path_globs_keep_their_meaning(spec: str, path: str, expected: bool, workspace: Path) -> None:
    layer = PermissionLayer.from_config("t", {"default": "allow", "overrides": {f"file_read({spec})": "deny"}})
    decision = layer.decide("file_read", None, lambda: CallSubjects(paths=(path,)))
    assert (decision.action == "deny") is expected


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        ("deploy(env=prod*)", "production", True),
        ("deploy(env=prod*)", "pre-prod", False),
        ("deploy(env=a/**)", "a/b/c", True),  # outside paths "*" crosses "/"
        ("deploy(env=a?c)", "a/c", True),
        ("deploy(env=v1.2)", "v1x2", False),
    ],
)
def test_field_globs_keep_their_meaning(rule: str, value: str, expected: bool) -> None:
    layer = PermissionLayer.from_config("t", {"default": "allow", "overrides": {rule: "deny"}})
    decision = layer.decide("deploy", None, lambda: CallSubjects(arguments={"env": value}))
    assert (decision.action == "deny") is expected


def test_a_request_layer_of_thousands_of_rules_decides_by_the_rule_a_call_meets(workspace: Path) -> None:
    # A gateway's layer of thousands of rules is parsed without compiling its patterns (bench_scale shows the
    # cost); the pattern of the rule a call meets is compiled then and decides.
    ac = access(workspace)
    overrides = {f"tool_{i}(path:src/{i}/**)": "deny" for i in range(3_000)}
    policy = ac.policy(channel_permissions=table(**overrides))
    assert policy.decide("tool_1234", None, lambda: CallSubjects(paths=("src/1234/x",))).action == "deny"
    assert policy.decide("tool_1234", None, lambda: CallSubjects(paths=("src/1235/x",))).action == "allow"
