from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aleph_channels.plugin
import pytest

import aleph
from aleph.testing import isolated_runtime

from .servers import IrcPerson, Ngircd


@pytest.fixture
def ngircd(tmp_path: Path) -> Iterator[Ngircd]:
    server = Ngircd(tmp_path)
    yield server
    server.stop()


def irc_config(port: int, extra: str = "") -> str:
    return f"""
[channel_adapters.irc]
kind = "irc"
host = "127.0.0.1"
port = {port}
tls = false
nick = "alephbot"
join = ["#ops"]

[channels.irc]
role = "member"
{extra}
"""


def runtime(workspace: Path, config: str = "") -> aleph.Aleph:
    return isolated_runtime(workspace, aleph_channels.plugin, config_toml=config)


@pytest.fixture
async def irc_rt(workspace: Path, ngircd: Ngircd) -> AsyncIterator[aleph.Aleph]:
    async with runtime(workspace, irc_config(ngircd.port)) as rt:
        await aleph_channels.channel_hub(rt).ensure_started("irc")
        yield rt


@pytest.fixture
async def person(ngircd: Ngircd) -> AsyncIterator[IrcPerson]:
    people: list[IrcPerson] = []

    async def make(nick: str) -> IrcPerson:
        p = await IrcPerson(nick).connect(ngircd.port)
        people.append(p)
        return p

    yield make  # type: ignore[misc]
    for p in people:
        await p.close()
