"""aleph.AddressGuard and aleph.address_problem: the one address decision families share."""

from __future__ import annotations

import re

import pytest

import aleph


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("10.0.0.1", "private"),
        ("192.168.1.1", "private"),
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("100.64.0.1", "non-public"),  # CGNAT
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("::ffff:10.0.0.1", "private"),  # IPv4-mapped: judged as the IPv4 address
        ("64:ff9b::a9fe:a9fe", "cloud metadata"),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("2001::1", "Teredo tunnel"),
    ],
)
def test_non_public_addresses_say_what_they_are(text: str, kind: str) -> None:
    addr = aleph.parse_address(text)
    assert addr is not None
    assert (kind, False) == (aleph.address_problem(addr), aleph.is_public_address(addr))


def test_public_addresses_pass_and_names_are_not_addresses() -> None:
    for text in ("8.8.8.8", "[2606:4700:4700::1111]", "1.1.1.1"):
        addr = aleph.parse_address(text)
        assert addr is not None and aleph.address_problem(addr) is None
    assert aleph.parse_address("pypi.org") is None


def test_a_guard_allows_only_what_a_setting_names() -> None:
    guard = aleph.AddressGuard.of(private_hosts=["db.internal", "*.corp.example"], private_networks=["10.1.0.0/16"])
    private = [aleph.parse_address("10.9.9.9")]
    assert guard.problem("db.internal", private) is None
    assert guard.problem("git.corp.example", private) is None
    assert guard.problem("corp.example", private) == "corp.example resolves to 10.9.9.9, a private address"
    assert guard.problem("anything.example", [aleph.parse_address("10.1.2.3")]) is None
    # One bad address among several refuses the name (a DNS answer mixing public and private ones).
    mixed = [aleph.parse_address("8.8.8.8"), aleph.parse_address("169.254.169.254")]
    assert "a cloud metadata address" in (guard.problem("evil.example", mixed) or "")
    with pytest.raises(ValueError, match=re.escape("'10.0.0.0/33' is not a network")):
        aleph.AddressGuard.of(private_networks=["10.0.0.0/33"])
