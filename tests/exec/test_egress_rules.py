"""[exec.network] as configuration and as one call's rules, without a sandbox."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from aleph_exec._config import ExecConfig
from aleph_exec._egress_rules import RunNetwork
from aleph_exec._netconfig import NetworkConfig
from pydantic import ValidationError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "egress.md"


def rules(who: tuple[str, ...] = (), where: tuple[str, ...] = (), **cfg: object) -> RunNetwork:
    """A call's rules for agents ``who`` and channels ``where``."""
    return RunNetwork(NetworkConfig.model_validate(cfg), agents=who, channels=where)


def test_the_documented_configuration_is_valid_and_means_what_the_page_says() -> None:
    block = re.findall(r"^```toml\n(.*?)^```$", DOCS.read_text(), flags=re.M | re.S)[0]
    cfg = ExecConfig.model_validate(tomllib.loads(block)["exec"]).network
    run = RunNetwork(cfg, agents=["ci"], channels=[])
    assert ("proxied", "10.1.2.3") == (cfg.mode, cfg.hosts["mirror.internal"])
    assert "allow" == run.judge("files.pythonhosted.org")[0]
    assert ("deny", "host api.github.com is not in [exec.network.agents.ci] allow") == run.judge("api.github.com")
    assert "allow" == RunNetwork(cfg).judge("api.github.com")[0]
    assert ("deny", "host gist.github.com is denied by [exec.network] deny") == RunNetwork(cfg).judge("gist.github.com")


def test_the_short_form_and_the_old_modes_still_load() -> None:
    assert ["none", "host", "proxied"] == [
        ExecConfig.model_validate({"network": mode}).network.mode for mode in ("none", "host", "proxied")
    ]
    assert "proxied" == ExecConfig().network.mode


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"allow": ["pypi.org/simple"]}, "is not a host pattern"),
        ({"allow": ["*.*.example"]}, "is not a host pattern"),
        ({"hosts": {"a.example": "not-an-ip"}}, "is not an IP address"),
        ({"private_networks": ["10.0.0.0/40"]}, "is not a network"),
        ({"mode": "open"}, "Input should be 'proxied', 'none' or 'host'"),
        ({"alow": ["x"]}, "Extra inputs are not permitted"),
    ],
)
def test_bad_settings_are_refused_with_a_reason(value: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        NetworkConfig.model_validate(value)


def test_wildcards_cover_subdomains_and_never_addresses() -> None:
    run = rules(allow=["*.github.com", "*"], unlisted="refuse")
    assert "allow" == run.judge("api.github.com")[0]
    assert "allow" == run.judge("example.org")[0]  # "*" allows any name ...
    verdict, why = run.judge("10.0.0.1")  # ... never a raw address
    assert ("deny", True) == (verdict, why.startswith("10.0.0.1 is a raw IP address"))
    only_sub = rules(allow=["*.github.com"], unlisted="refuse")
    assert "deny" == only_sub.judge("github.com")[0]  # the domain itself is not a subdomain
    assert "deny" == only_sub.judge("evilgithub.com")[0]


def test_every_principal_of_the_chain_narrows_and_a_deny_anywhere_wins() -> None:
    cfg = {
        "allow": ["a.example", "b.example", "c.example"],
        "agents": {"lead": {"allow": ["a.example", "b.example"]}, "helper": {"allow": ["b.example", "c.example"]}},
        "channels": {"public": {"deny": ["b.example"]}},
        "unlisted": "refuse",
    }
    both = rules(("helper", "lead"), **cfg)  # helper acting for lead: the intersection
    assert ["deny", "allow", "deny"] == [both.judge(h)[0] for h in ("a.example", "b.example", "c.example")]
    public = rules(("helper", "lead"), ("public",), **cfg)
    assert ("deny", "host b.example is denied by [exec.network.channels.public] deny") == public.judge("b.example")


def test_unlisted_hosts_are_asked_about_only_when_someone_can_answer() -> None:
    async def yes(host: str, port: int) -> bool:
        return True

    cfg = NetworkConfig.model_validate({"allow": ["a.example"]})
    assert "ask" == RunNetwork(cfg, ask=yes).judge("z.example")[0]
    assert ("deny", "host z.example is not in [exec.network] allow; ask the user to add it") == RunNetwork(cfg).judge(
        "z.example"
    )


def test_bounds_count_per_call_and_per_host() -> None:
    run = rules(allow=["*"], max_connections=3, host_rate_per_minute=2, max_bytes_mb=1)
    assert [None, None] == [run.admit("a.example"), run.admit("a.example")]
    assert "host_rate_per_minute" in (run.admit("a.example") or "")
    assert run.admit("b.example") is None
    assert "max_connections" in (run.admit("c.example") or "")
    conn = run.record("b.example", 443, "allowed")
    assert run.moved(conn, 512 * 1024, 512 * 1024) is None
    assert "max_bytes_mb" in (run.moved(conn, 0, 1) or "")
