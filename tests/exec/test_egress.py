"""network = "proxied": the egress proxy is a sandboxed command's only way out, and only to allowed hosts.

Servers of the tests' own on loopback stand for named hosts: ``[exec.network] hosts`` pins
``files.example`` and friends to 127.0.0.1 for the proxy (which alone resolves names). Inside the
sandbox, 127.0.0.1 is the sandbox's own loopback: only the proxy reaches the servers.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from aleph_exec._sandbox import bwrap_available
from aleph_exec._tools import uncontained_reason

import aleph

from .conftest import make_runtime
from .egress_servers import git_repository, network_toml, package_index, serve

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap cannot create namespaces here"),
]


@pytest.fixture
def site(tmp_path: Path) -> Any:
    root = tmp_path / "site"
    root.mkdir()
    (root / "hello.txt").write_text("hello from files.example\n")
    (root / "big.bin").write_bytes(b"x" * (3 * 1024 * 1024))
    with serve(root) as port:
        yield port


async def bash(
    rt: aleph.Aleph, command: str, *, unscoped: bool = False, tier: str = "full", **service: Any
) -> dict[str, Any]:
    """Run ``command`` through the chokepoint, or past it where the command floor would ask."""
    svc = aleph.UnscopedToolService(rt.registry) if unscoped else rt.tool_service(tier=tier, **service)
    out = await svc.execute("bash", {"command": command, "timeout_seconds": 60})
    result: dict[str, Any] = json.loads(out.text)
    return result


def needs(program: str) -> None:
    if shutil.which(program) is None:
        pytest.fail(f"{program} not available: scripts/setup-system installs it")


async def test_an_allowed_host_is_reached_with_curl_and_the_call_stays_contained(workspace: Path, site: int) -> None:
    needs("curl")
    async with make_runtime(workspace, network_toml()) as rt:
        result = await bash(rt, f"curl -sS --fail http://files.example:{site}/hello.txt")
        # -p: through a CONNECT tunnel, as HTTPS goes (the proxy relays bytes it cannot read).
        tunnel = await bash(rt, f"curl -sS --fail -p http://files.example:{site}/hello.txt")
        sandbox = rt.registry.get("bash").tool.sandbox  # type: ignore[union-attr]
        assert uncontained_reason(sandbox) is None
    assert ("hello from files.example\n", "proxied", True) == (
        result["stdout"],
        result["network"],
        result["transaction"],
    )
    [conn] = result["connections"]["connections"]
    assert (conn["host"], conn["port"], conn["verdict"], conn["address"]) == (
        "files.example",
        site,
        "allowed",
        "127.0.0.1",
    )
    assert conn["bytes_down"] > len("hello from files.example\n") and conn["bytes_up"] > 0
    assert "hello from files.example\n" == tunnel["stdout"]
    assert [("files.example", site, "allowed")] == [
        (c["host"], c["port"], c["verdict"]) for c in tunnel["connections"]["connections"]
    ]


async def test_pip_downloads_from_an_index_through_the_proxy(workspace: Path, tmp_path: Path) -> None:
    root = tmp_path / "index"
    wheel = package_index(root)
    with serve(root) as port:
        async with make_runtime(workspace, network_toml()) as rt:
            result = await bash(
                rt,
                f"{sys.executable} -m pip download --no-deps --no-cache-dir --disable-pip-version-check "
                f"--index-url http://pypi.example:{port}/simple/ --trusted-host pypi.example:{port} "
                "-d $TMPDIR/dl egresspkg && ls $TMPDIR/dl",
                unscoped=True,  # the command floor asks about `python -m`; the network is the subject here
            )
    assert 0 == result["exit_code"], result["stderr"]
    assert wheel.name in result["stdout"]
    hosts = {(c["host"], c["verdict"]) for c in result["connections"]["connections"]}
    assert {("pypi.example", "allowed")} == hosts


async def test_git_clones_over_http_through_the_proxy(workspace: Path, tmp_path: Path) -> None:
    needs("git")
    root = tmp_path / "git"
    git_repository(root)
    with serve(root) as port:
        async with make_runtime(workspace, network_toml()) as rt:
            result = await bash(
                rt, f"git clone -q http://git.example:{port}/repo.git $TMPDIR/out && cat $TMPDIR/out/README"
            )
    assert (0, "cloned through the proxy\n") == (result["exit_code"], result["stdout"]), result["stderr"]
    assert {"git.example"} == {c["host"] for c in result["connections"]["connections"]}


async def test_a_host_not_on_the_list_is_refused_with_a_message_naming_it(workspace: Path, site: int) -> None:
    needs("curl")
    toml = network_toml(allow=("pypi.example",), extra='unlisted = "refuse"')
    async with make_runtime(workspace, toml) as rt:
        result = await bash(
            rt, f"curl -sS -i http://files.example:{site}/hello.txt; curl -sS https://files.example/ 2>&1"
        )
    assert "HTTP/1.1 403 Forbidden" in result["stdout"]
    assert "host files.example is not in [exec.network] allow; ask the user to add it" in result["stdout"]
    assert "CONNECT tunnel failed, response 403" in result["stdout"]
    verdicts = [(c["host"], c["port"], c["verdict"]) for c in result["connections"]["connections"]]
    assert [("files.example", site, "refused"), ("files.example", 443, "refused")] == verdicts


async def test_raw_addresses_and_private_addresses_are_refused(workspace: Path, site: int) -> None:
    needs("curl")
    # Listed, but loopback: the address guard refuses what no private_hosts entry names.
    toml = network_toml(allow=("internal.example", "127.0.0.1"))
    proxy = '--noproxy "" -x "$HTTP_PROXY"'  # through the proxy even for an address NO_PROXY names
    async with make_runtime(workspace, toml) as rt:
        result = await bash(
            rt,
            f"curl -sS {proxy} http://10.1.2.3/; curl -sS {proxy} http://169.254.169.254/latest/meta-data/; "
            f"curl -sS {proxy} http://127.0.0.1:{site}/hello.txt; curl -sS http://internal.example:{site}/hello.txt",
        )
    lines = result["stdout"].splitlines()
    assert 4 == len(lines), result
    assert "10.1.2.3 is a raw IP address; addresses are refused unless listed" in lines[0]
    assert "169.254.169.254 is a raw IP address" in lines[1]
    assert "127.0.0.1 resolves to 127.0.0.1, a loopback address" in lines[2]
    assert "internal.example resolves to 127.0.0.1, a loopback address" in lines[3]
    assert "hello" not in result["stdout"]
    assert 4 == result["connections"]["refused"] and 0 == result["connections"]["allowed"]


async def test_there_is_no_dns_and_no_route_around_the_proxy(workspace: Path, site: int) -> None:
    code = (
        "import socket\n"
        "for name in ('files.example', 'pypi.org', 'localhost.'):\n"
        "    try:\n"
        "        socket.getaddrinfo(name, 80)\n"
        "        print('resolved', name)\n"
        "    except OSError:\n"
        "        print('no dns for', name)\n"
        f"for addr in (('127.0.0.1', {site}), ('1.1.1.1', 80), ('8.8.8.8', 53)):\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=3).close()\n"
        "        print('connected', addr)\n"
        "    except OSError as exc:\n"
        "        print('no route', addr[0], type(exc).__name__)\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "try:\n"
        "    s.sendto(b'q', ('8.8.8.8', 53))\n"
        "    print('udp sent')\n"
        "except OSError:\n"
        "    print('no udp route')\n"
    )
    async with make_runtime(workspace, network_toml()) as rt:
        svc = rt.tool_service(tier="full")
        out = json.loads((await svc.execute("code_exec", {"language": "python", "code": code})).text)
    lines = out["stdout"].splitlines()
    assert ["no dns for files.example", "no dns for pypi.org"] == lines[:2], out
    assert not any(line.startswith(("connected", "resolved files", "resolved pypi", "udp sent")) for line in lines), out
    assert "no route 127.0.0.1 ConnectionRefusedError" in lines  # the sandbox's own loopback: no server there
    assert "no udp route" in lines
    assert not out.get("connections", {}).get("connections")


async def test_a_connection_without_the_runs_credential_gets_407(workspace: Path, site: int) -> None:
    needs("curl")
    async with make_runtime(workspace, network_toml()) as rt:
        result = await bash(
            rt,
            'bare=$(echo "$HTTP_PROXY" | sed "s#//aleph:[^@]*@#//#"); '
            f'curl -sS -o /dev/null -w "%{{http_code}}" -x "$bare" http://files.example:{site}/hello.txt',
        )
    assert "407" == result["stdout"]
    assert "connections" not in result or not result["connections"]["connections"]


async def test_the_ledger_row_lists_the_connections(workspace: Path, site: int) -> None:
    needs("curl")
    async with make_runtime(workspace, network_toml(allow=("files.example",), extra='unlisted = "refuse"')) as rt:
        turn = aleph.TurnContext(session_key="s1", call_id="call-egress-1")
        await bash(
            rt,
            f"curl -sS http://files.example:{site}/hello.txt; curl -sS http://evil.example/",
            turn=turn,
        )
        ledger = rt.chokepoint.ledger
        assert ledger is not None
        await ledger.flush()
        rows = list(ledger.rows("default"))
    call_row = next(r for r in rows if r.target == "bash" and (r.refs or {}).get("net_allowed"))
    refs = call_row.refs or {}
    assert ("1", "1") == (refs["net_allowed"], refs["net_refused"])
    assert f"files.example:{site} allowed x1" in refs["net_hosts"]
    assert "evil.example:80 refused x1" in refs["net_hosts"]
    events = [r.refs for r in rows if r.refs and r.refs.get("event") == "egress"]
    assert {("files.example", "allowed"), ("evil.example", "refused")} == {(e["host"], e["verdict"]) for e in events}


async def test_a_byte_cap_cuts_a_big_download_and_says_so(workspace: Path, site: int) -> None:
    needs("curl")
    async with make_runtime(workspace, network_toml(extra="max_bytes_mb = 1")) as rt:
        result = await bash(rt, f"curl -sS http://files.example:{site}/big.bin | wc -c; echo exit=${{PIPESTATUS[0]}}")
    assert "exit=18" in result["stdout"]  # curl: transfer closed with bytes remaining
    net = result["connections"]
    assert 1 == net["cut"] and net["bytes_up"] + net["bytes_down"] <= 1024 * 1024  # nothing past the bound
    assert [
        f"a connection to files.example:{site} was cut: the call moved more than 1 MiB, [exec.network] max_bytes_mb"
    ] == net["notes"]


async def test_the_per_host_rate_and_connection_count_hold(workspace: Path, site: int) -> None:
    needs("curl")
    url = f"http://files.example:{site}/hello.txt"
    async with make_runtime(workspace, network_toml(extra="host_rate_per_minute = 2")) as rt:
        result = await bash(rt, f'for i in 1 2 3; do curl -sS -o /dev/null -w "%{{http_code}} " {url}; done')
    assert "200 200 429 " == result["stdout"]
    async with make_runtime(workspace, network_toml(extra="max_connections = 1")) as rt:
        result = await bash(rt, f"curl -sS {url} {url}")
    assert "hello from files.example\n" in result["stdout"] and "max_connections" in result["stdout"]


async def test_agent_and_channel_layers_only_narrow(workspace: Path, site: int) -> None:
    needs("curl")
    extra = '\n[exec.network.agents.ci]\nallow = ["pypi.example"]\n[exec.network.channels.public]\ndeny = ["*"]\n'
    url = f"http://files.example:{site}/hello.txt"
    async with make_runtime(workspace, network_toml() + extra) as rt:
        default = await bash(rt, f"curl -sS {url}")
        ci = await bash(rt, f"curl -sS {url}", agent="ci")
        public = await bash(rt, f"curl -sS {url}", channel="public")
    assert "hello from files.example\n" == default["stdout"]
    assert "host files.example is not in [exec.network.agents.ci] allow" in ci["stdout"]
    assert "host files.example is denied by [exec.network.channels.public] deny" in public["stdout"]


async def test_an_unlisted_host_is_asked_about_and_the_person_sees_it(workspace: Path, site: int) -> None:
    needs("curl")
    url = f"http://files.example:{site}/hello.txt"
    async with make_runtime(workspace, network_toml(allow=("pypi.example",))) as rt:
        yes = aleph.ScriptedRequester([aleph.ApprovalOutcome.APPROVED])
        # Under auto the contained bash call itself runs without a question; the unlisted host is asked about.
        approved = await bash(rt, f"curl -sS {url}; curl -sS {url}", requester=yes, tier="auto")
        no = aleph.ScriptedRequester([aleph.ApprovalOutcome.DENIED])
        denied = await bash(rt, f"curl -sS {url}", requester=no, tier="auto")
        unattended = aleph.TurnContext(unattended=True)
        nobody = await bash(rt, f"curl -sS {url}", tier="auto", turn=unattended)  # never asked: refused
        # The allowlist is the policy: even the `full` tier asks about a host it does not name.
        full = aleph.ScriptedRequester([aleph.ApprovalOutcome.DENIED])
        under_full = await bash(rt, f"curl -sS {url}", requester=full, tier="full")
    assert "hello from files.example\n" * 2 == approved["stdout"]
    assert 1 == len(yes.requests)  # asked once per call and host
    request = yes.requests[0]
    asked = (request.tool_name, request.arguments["host"], request.arguments["port"])
    assert ("exec_network", "files.example", site) == asked
    assert "was not approved; ask the user to add it" in denied["stdout"]
    assert "hello" not in nobody["stdout"] and 1 == nobody["connections"]["refused"]
    assert (1, "hello" in under_full["stdout"]) == (len(full.requests), False)


async def test_network_none_and_host_still_mean_what_they_say(workspace: Path, site: int) -> None:
    needs("curl")
    async with make_runtime(workspace, '[exec]\nnetwork = "none"\n') as rt:
        off = await bash(rt, f"curl -sS http://files.example:{site}/ 2>&1; env | grep -c -i _proxy=")
    assert "none" == off["network"] and "connections" not in off
    assert off["stdout"].strip().endswith("0")  # no proxy variables: there is nothing to reach
    async with make_runtime(workspace, '[exec]\nnetwork = "host"\n') as rt:
        host = await bash(rt, f"curl -sS http://127.0.0.1:{site}/hello.txt")
    assert ("host", "hello from files.example\n") == (host["network"], host["stdout"])


RAW_CLIENT = """
import base64, os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
head = f"Proxy-Authorization: Basic {auth}\\r\\n"
def send(raw, until_eof=True):
    s = socket.create_connection((proxy.hostname, proxy.port))
    s.sendall(raw.replace("{AUTH}", head).encode())
    data = b""
    while (b"\\r\\n\\r\\n" not in data or not data.endswith(b"ok") and not until_eof) and (chunk := s.recv(65536)):
        data += chunk
        if data.startswith(b"HTTP/1.1 200") and data.endswith(b"ok"):
            break
    s.close()
    return data.decode(errors="replace").split("\\r\\n")[0]
port = sys.argv[1]
get, host = f"GET http://files.example:{port}/ HTTP/1.1\\r\\n", f"Host: files.example:{port}\\r\\n"
print(send(f"{get}{host}Host: evil.example\\r\\n{{AUTH}}\\r\\n"))
print(send(f"{get}{host}X-A: 1\\nHost: evil.example\\r\\n{{AUTH}}\\r\\n"))
post = f"POST http://files.example:{port}/ HTTP/1.1\\r\\n{host}Content-Length: 3\\r\\nTransfer-Encoding: chunked\\r\\n"
print(send(f"{post}{{AUTH}}\\r\\n"))
print(send(
    f"{get}{host}{{AUTH}}\\r\\n"
    "GET /steal HTTP/1.1\\r\\nHost: evil.example\\r\\n\\r\\n",
    until_eof=False,
))
"""


async def test_one_connection_carries_one_judged_request_and_nothing_smuggled(workspace: Path) -> None:
    from .egress_servers import KeepAliveRecorder

    upstream = KeepAliveRecorder()
    try:
        async with make_runtime(workspace, network_toml()) as rt:
            svc = aleph.UnscopedToolService(rt.registry)
            args = {"command": f"python3 -c '{RAW_CLIENT}' {upstream.port}", "timeout_seconds": 60}
            out = json.loads((await svc.execute("bash", args)).text)
        assert upstream.closed.wait(30), "the proxy never closed the upstream connection"
    finally:
        upstream.close()
    lines = out["stdout"].splitlines()
    assert ["HTTP/1.1 400 Bad Request"] * 3 + ["HTTP/1.1 200 OK"] == lines, out
    assert b"GET / HTTP/1.1\r\n" in upstream.received and b"Connection: close\r\n" in upstream.received
    assert b"evil.example" not in upstream.received and b"/steal" not in upstream.received
    assert b"Proxy-Authorization" not in upstream.received  # the run's credential never leaves the proxy


async def test_every_spelling_of_an_address_is_an_address(workspace: Path, site: int) -> None:
    needs("curl")
    proxy = '--noproxy "" -x "$HTTP_PROXY"'
    async with make_runtime(workspace, network_toml(allow=("*",))) as rt:
        result = await bash(
            rt,
            f"for h in 2130706433 0x7f.1 127.1 '[::ffff:127.0.0.1]'; do curl -sS {proxy} http://$h:{site}/; done",
        )
    assert 4 == result["stdout"].count("is a raw IP address"), result
    assert "hello" not in result["stdout"] and 4 == result["connections"]["refused"]


POST_CLIENT = """
import base64, os, socket, sys, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
auth = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
port, framing = sys.argv[1], sys.argv[2]
head = f"POST http://files.example:{port}/up HTTP/1.1\\r\\nHost: files.example:{port}\\r\\n"
head += f"Proxy-Authorization: Basic {auth}\\r\\n"
if framing == "chunked":
    chunks = "5;x=1\\r\\nhello\\r\\n6\\r\\n world\\r\\n0\\r\\nX-T: 1\\r\\n\\r\\n"
    raw = head + "Transfer-Encoding: chunked\\r\\n\\r\\n" + chunks
else:
    raw = head + "Content-Length: 11\\r\\n\\r\\nhello world"
s = socket.create_connection((proxy.hostname, proxy.port))
s.sendall(raw.encode() + b"GET /after HTTP/1.1\\r\\n\\r\\n")
data = b""
while not data.endswith(b"ok") and (chunk := s.recv(65536)):
    data += chunk
print(data.split(b"\\r\\n")[0].decode())
"""


@pytest.mark.parametrize("framing", ["chunked", "length"])
async def test_a_request_body_is_forwarded_exactly_by_its_framing(workspace: Path, framing: str) -> None:
    from .egress_servers import KeepAliveRecorder

    end = b"0\r\nX-T: 1\r\n\r\n" if framing == "chunked" else b"hello world"
    upstream = KeepAliveRecorder(answer_after=end)
    try:
        async with make_runtime(workspace, network_toml()) as rt:
            svc = aleph.UnscopedToolService(rt.registry)
            args = {"command": f"python3 -c '{POST_CLIENT}' {upstream.port} {framing}", "timeout_seconds": 60}
            out = json.loads((await svc.execute("bash", args)).text)
        assert upstream.closed.wait(30), "the proxy never closed the upstream connection"
    finally:
        upstream.close()
    assert "HTTP/1.1 200 OK\n" == out["stdout"], out
    head, _, body = upstream.received.partition(b"\r\n\r\n")
    expected = b"5;x=1\r\nhello\r\n6\r\n world\r\n" + end if framing == "chunked" else end
    assert expected == body  # the body, exactly: nothing the client sent after it
    assert head.startswith(b"POST /up HTTP/1.1\r\n")
    [conn] = out["connections"]["connections"]
    assert conn["bytes_up"] == len(upstream.received)
