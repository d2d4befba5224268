"""TLS is the trust boundary: no certificate, a foreign one, plaintext, a node's certificate, a forged signature."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from _harness import Cluster
from aleph_cluster import ClusterConfig, NodeConfig, init_ca, issue
from aleph_cluster._center import Center, DaskBackend, NodeError
from aleph_cluster._config import TlsFiles, security_for
from aleph_cluster._serve import load_node_config
from aleph_cluster._wire import REQUEST_DOMAIN, Request
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from distributed.comm import connect
from distributed.security import Security
from pydantic import ValidationError

import aleph


async def refused(address: str, security: Security, role: str = "client") -> None:
    with pytest.raises((OSError, TimeoutError)):
        comm = await connect(address, timeout=3, **security.get_connection_args(role))
        await comm.write({"op": "identity"})
        await comm.read()  # a handshake the server rejects may only show on the first read


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another CA with certificates that look right in every field but one: who signed them."""
    d = tmp_path_factory.mktemp("foreign")
    init_ca(d, hosts=["127.0.0.1"])
    issue(d, "node-a", hosts=["127.0.0.1"])
    return d


def test_clients_and_workers_without_a_valid_certificate_are_refused(cluster: Cluster, foreign: Path) -> None:
    ours = cluster.pki / "ca.crt"

    async def run() -> None:
        address = cluster.scheduler_address
        foreign_client = TlsFiles(
            ca_file=ours, cert_file=foreign / "center/center.crt", key_file=foreign / "center/center.key"
        )
        await refused(address, security_for(foreign_client, "client"))
        foreign_worker = TlsFiles(
            ca_file=ours, cert_file=foreign / "nodes/node-a.crt", key_file=foreign / "nodes/node-a.key"
        )
        await refused(address, security_for(foreign_worker, "worker"), "worker")
        no_cert = ssl.create_default_context(cafile=str(ours))  # trusts the CA, presents no certificate
        no_cert.check_hostname = False
        with pytest.raises((OSError, TimeoutError)):
            comm = await connect(address, timeout=3, ssl_context=no_cert, require_encryption=True)
            await comm.write({"op": "identity"})
            await comm.read()
        with pytest.raises((OSError, TimeoutError)):  # plaintext on the TLS port
            comm = await connect(address.replace("tls://", "tcp://"), timeout=3)
            await comm.write({"op": "identity"})
            await comm.read()
        with pytest.raises(RuntimeError, match="encryption required"):  # and Dask itself will not dial plaintext
            await connect(address.replace("tls://", "tcp://"), timeout=3, require_encryption=True)

    asyncio.run(run())


def test_a_node_certificate_cannot_command_another_node(cluster: Cluster, joined: dict) -> None:
    node_b = TlsFiles(
        ca_file=cluster.pki / "ca.crt",
        cert_file=cluster.pki / "nodes/node-b.crt",
        key_file=cluster.pki / "nodes/node-b.key",
    )
    rt = cluster.center()

    async def run() -> str:
        async with rt:
            handle = rt.registry.get("node_invoke").tool.handle  # type: ignore[union-attr]
            real = await handle.get("node_invoke")
            config = ClusterConfig(scheduler=cluster.scheduler_address, tls_dir=cluster.pki)
            impostor = Center(config, DaskBackend(config, node_b), real.store, real.signer)
            worker, rec = await real.resolve("node-a")
            try:
                with pytest.raises(NodeError) as info:
                    await impostor.request(worker, rec.identity_key, "invoke", {"command": "true"}, timeout=10)
            finally:
                await impostor.backend.aclose()
            return str(info.value)

    assert "answers the center only" in asyncio.run(run())


def test_requests_not_signed_by_the_pinned_center_key_or_replayed_are_refused(cluster: Cluster) -> None:
    rt = cluster.center()

    async def run() -> tuple[str, str, dict]:
        async with rt:
            handle = rt.registry.get("node_invoke").tool.handle  # type: ignore[union-attr]
            real = await handle.get("node_invoke")
            worker, rec = await real.resolve("node-a")
            forger = Center(real.config, real.backend, real.store, Ed25519PrivateKey.generate())
            with pytest.raises(NodeError) as forged:
                await forger.request(worker, rec.identity_key, "invoke", {"command": "true"}, timeout=10)
            _, text = Request.make(node="node-a", kind="info", principal="alice", channel="", body={}, ttl_seconds=30)
            signature = real.signer.sign(REQUEST_DOMAIN + text)
            first = await real.backend.send(worker.address, text, signature, None, 10)
            second = await real.backend.send(worker.address, text, signature, None, 10)
            _, other = Request.make(node="node-b", kind="info", principal="alice", channel="", body={}, ttl_seconds=30)
            misrouted = await real.backend.send(
                worker.address, other, real.signer.sign(REQUEST_DOMAIN + other), None, 10
            )
            assert "node_sig" in first
            return str(forged.value), second["error"]["message"], misrouted

    forged, replayed, misrouted = asyncio.run(run())
    assert "does not verify against this node's pinned center key" in forged
    assert "replay refused" in replayed
    assert "is for node 'node-b', not 'node-a'" in misrouted["error"]["message"]


def test_a_reply_signed_by_another_key_than_the_pinned_one_is_refused(cluster: Cluster, joined: dict) -> None:
    rt = cluster.center()

    async def run() -> str:
        async with rt:
            handle = rt.registry.get("node_invoke").tool.handle  # type: ignore[union-attr]
            real = await handle.get("node_invoke")
            worker, _ = await real.resolve("node-a")
            wrong = joined["node-b"].identity_key  # node-a's replies must carry node-a's pinned key
            with pytest.raises(NodeError) as info:
                await real.request(worker, wrong, "info", {}, timeout=10)
            return str(info.value)

    assert "key other than the one pinned" in asyncio.run(run())


def test_a_node_whose_certificate_names_another_node_does_not_start(cluster: Cluster, tmp_path: Path) -> None:
    config = tmp_path / "aleph.toml"
    config.write_text(
        f'[cluster_node]\nname = "node-x"\nscheduler = "{cluster.scheduler_address}"\n'
        f'center_key = "{cluster.center_key}"\n'
        f'ca_file = "{cluster.pki}/ca.crt"\ncert_file = "{cluster.pki}/nodes/node-a.crt"\n'
        f'key_file = "{cluster.pki}/nodes/node-a.key"\n'
    )
    with pytest.raises(aleph.ConfigError, match="is for 'node-a'"):
        load_node_config(config)


def test_plaintext_addresses_are_refused_in_configuration() -> None:
    with pytest.raises(ValidationError, match="tls://"):
        ClusterConfig(scheduler="tcp://127.0.0.1:8786", tls_dir=Path("x"))
    with pytest.raises(ValidationError, match="tls://"):
        NodeConfig(name="n", scheduler="tcp://127.0.0.1:8786", center_key="0" * 64)


def test_the_scheduler_and_nodes_open_no_plaintext_listener(cluster: Cluster) -> None:
    import socket

    import psutil

    procs = [p.p.pid for p in cluster.procs if p.p.poll() is None]
    ports = {
        c.laddr.port
        for pid in procs
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN
    }
    assert ports
    for port in ports:  # every listener speaks TLS: a plaintext HTTP request gets no HTTP answer
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            try:
                answer = s.recv(64)
            except (ConnectionResetError, TimeoutError):
                answer = b""
        assert not answer.startswith(b"HTTP/"), port
        ctx = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
        ctx.check_hostname = False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as tls:
                assert tls.version() is not None
        except ssl.SSLError as exc:  # the comm ports demand a client certificate: still TLS
            assert "certificate" in str(exc).lower() or "alert" in str(exc).lower(), exc
