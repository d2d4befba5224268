"""network = "proxied": each run has its own network namespace and its own door to the proxy.

Runs of one workspace share the sandbox (its PID namespace: a command can read another run's
``/proc/<pid>/environ``, and with it that run's proxy credential). Runs of different principals take
turns (tests/exec/test_run_turns.py), so only runs of one principal ever meet; even then what a run can
reach is decided by the listener its connection arrived on, made in the run's own network namespace,
not by the secret: another run's credential opens nothing, and is recorded as refused on the run that
tried it.

Two calls of one agent run at once on one sandbox; they meet through FIFOs in the workspace (each open
blocks until the other side comes), never through sleeps.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from aleph_exec import _namespace
from aleph_exec._sandbox import bwrap_available

from .conftest import make_runtime
from .egress_servers import network_toml, serve
from .test_egress import bash, needs

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot create namespaces here"),
]

# The agent reaches files.example and pypi.example, nothing else.
TOML = (
    network_toml(allow=("files.example", "pypi.example"), extra='unlisted = "refuse"')
    # Without an overlay per run, the FIFOs the test makes are the same files in both runs.
    + "\n[exec]\ntransactions = false\n"
)

SETNS = """\
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(f"/proc/{sys.argv[1]}/ns/net", os.O_RDONLY)
print("setns", libc.setns(fd, 0x40000000), ctypes.get_errno())
"""


@pytest.fixture
def site(tmp_path: Path) -> Any:
    root = tmp_path / "site"
    root.mkdir()
    (root / "hello.txt").write_text("hello\n")
    with serve(root) as port:
        yield port


def lines_of(result: dict[str, Any]) -> dict[str, str]:
    """``key value`` lines of a command's stdout."""
    return dict(line.split(" ", 1) for line in result["stdout"].splitlines() if " " in line)


async def test_a_run_cannot_use_another_runs_proxy_credential_or_reach_its_door(workspace: Path, site: int) -> None:
    needs("curl")
    for name in ("ready", "done"):
        os.mkfifo(workspace / name)
    (workspace / "setns.py").write_text(SETNS)
    code = '-sS -o /dev/null -w "%{http_code}"'
    connect = '-s -o /dev/null -w "%{http_connect}"'  # a tunnel's answer to CONNECT
    files, pypi = f"http://files.example:{site}/hello.txt", f"http://pypi.example:{site}/hello.txt"
    # A: its credential to a file, its pid to B (the open waits for B), then waits for B to finish.
    run_a = (
        'printf %s "$HTTP_PROXY" > a.cred; echo "ns $(readlink /proc/$$/ns/net)"; echo $$ > ready; cat done; '
        'echo "own $(curl ' + code + " " + files + ')"'
    )
    # B: A's credential from A's environment and from the file; each used through B's own proxy port
    # and at A's URL as written (the same 127.0.0.1:<port>: in B's namespace, B's own door).
    run_b = (
        'pid=$(cat ready); echo "ns $(readlink /proc/$$/ns/net)"; '
        "environ=$(tr '\\0' '\\n' < /proc/$pid/environ | sed -n 's/^HTTP_PROXY=//p'); "
        'echo "read_environ $([ "$environ" = "$(cat a.cred)" ] && echo yes)"; '
        'echo "differs $([ "$environ" != "$HTTP_PROXY" ] && echo yes)"; '
        f'echo "stolen_files $(curl {code} -x "$(cat a.cred)" {files})"; '
        f'echo "stolen_connect $(curl {connect} -p -x "$environ" {files})"; '
        f'echo "stolen_pypi $(curl {code} -x "$environ" {pypi})"; '
        f'echo "own_files $(curl {code} {files})"; '
        f'echo "own_pypi $(curl {code} {pypi})"; '
        "python3 setns.py $pid; "
        "echo > done"
    )
    async with make_runtime(workspace, TOML) as rt:
        a, b = await asyncio.gather(bash(rt, run_a), bash(rt, run_b))
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        await ledger.flush()
        rows = list(ledger.rows("default"))
    out_a, out_b = lines_of(a), lines_of(b)
    # Each run is in a network namespace of its own.
    assert out_a["ns"].startswith("net:[") and out_a["ns"] != out_b["ns"]
    # B could read A's credential (same PID namespace, same user): it is worth nothing to B.
    assert ("yes", "yes") == (out_b["read_environ"], out_b["differs"])
    assert "407" == out_b["stolen_files"] == out_b["stolen_connect"] == out_b["stolen_pypi"], (a, b)
    # Each reaches what it may with its own credential.
    assert ("200", "200") == (out_b["own_files"], out_b["own_pypi"])
    assert "200" == out_a["own"]
    # B cannot enter A's network namespace either (no capability).
    assert "setns -1 1" == f"setns {out_b['setns']}"
    # A's row has A's one connection; B's refusals of A's credential are on B's row, not A's.
    assert (1, 0) == (a["connections"]["allowed"], a["connections"]["refused"])
    net_b = b["connections"]
    assert (2, 3) == (net_b["allowed"], net_b["refused"])
    stolen = [c for c in net_b["connections"] if "credential" in c.get("reason", "")]
    assert [("files.example", "refused")] * 2 + [("pypi.example", "refused")] == [
        (c["host"], c["verdict"]) for c in stolen
    ]
    assert "the proxy credential is not this command's own" in stolen[0]["reason"]
    row = next(r for r in rows if r.target == "bash" and (r.refs or {}).get("net_refused"))
    assert ("2", "3") == ((row.refs or {})["net_allowed"], (row.refs or {})["net_refused"])


async def test_a_made_up_credential_is_refused_on_the_runs_own_row(workspace: Path, site: int) -> None:
    needs("curl")
    async with make_runtime(workspace, TOML) as rt:
        result = await bash(
            rt,
            'forged=$(echo "$HTTP_PROXY" | sed "s#//aleph:[^@]*@#//aleph:guessed@#"); '
            f'curl -sS -o /dev/null -w "%{{http_code}}" -x "$forged" http://files.example:{site}/hello.txt',
        )
    assert "407" == result["stdout"], result
    assert (0, 1) == (result["connections"]["allowed"], result["connections"]["refused"])


async def test_every_run_gets_a_fresh_network_namespace_with_its_listener_alone(workspace: Path) -> None:
    # Nothing a run leaves listening is there for the next: each starts with only its own door open.
    async with make_runtime(workspace, TOML) as rt:
        first = await bash(rt, "readlink /proc/self/ns/net; tail -n +2 /proc/net/tcp | wc -l")
        second = await bash(rt, "readlink /proc/self/ns/net; tail -n +2 /proc/net/tcp | wc -l")
    ns_1, sockets_1 = first["stdout"].split()
    ns_2, sockets_2 = second["stdout"].split()
    assert ns_1 != ns_2
    assert ("1", "1") == (sockets_1, sockets_2)  # the run's own listener on 127.0.0.1


async def test_without_a_network_namespace_per_run_runs_get_no_network_not_a_shared_one(
    workspace: Path, site: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A zygote that cannot bring a new namespace's loopback up (no CAP_NET_ADMIN) cannot give runs doors
    # of their own: they get none, as when the proxy is missing, and the reason is kept for aleph doctor.
    needs("curl")
    caps = tuple(cap for cap in _namespace._ZYGOTE_CAPS if cap != "CAP_NET_ADMIN")
    monkeypatch.setattr(_namespace, "_ZYGOTE_CAPS", caps)
    async with make_runtime(workspace, TOML) as rt:
        result = await bash(rt, f'echo "proxy=$HTTP_PROXY"; curl -sS http://files.example:{site}/hello.txt')
        sandbox = rt.registry.get("bash").tool.sandbox  # type: ignore[union-attr]
        why = sandbox._zygote.proxy_error if sandbox._zygote is not None else None
    assert "none" == result["network"], why
    assert result["stdout"].startswith("proxy=\n") and "hello" not in result["stdout"]
    assert why is not None and "network namespace" in why, why
