"""aleph-cluster: Aleph's tools on many machines, over Dask distributed with mutual TLS and one ledger story.

The center runs the five tools (``node_list``, ``node_invoke``, ``node_invoke_many``, ``node_file``,
``node_manage``); each node runs ``aleph cluster node``, a Dask worker with its own Aleph runtime and policy.
See docs/cluster.md.
"""

from aleph_cluster._center import Backend, DaskBackend, NodeError
from aleph_cluster._config import ClusterConfig, NodeConfig
from aleph_cluster._crosscheck import CrossCheck, crosscheck
from aleph_cluster._pki import PkiError, init_ca, issue

__all__ = [
    "Backend",
    "ClusterConfig",
    "CrossCheck",
    "DaskBackend",
    "NodeConfig",
    "NodeError",
    "PkiError",
    "crosscheck",
    "init_ca",
    "issue",
]
