"""The ``cluster`` plugin: node_list, node_invoke, node_invoke_many, node_file and node_manage; ``aleph cluster``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aleph
from aleph_cluster._config import ClusterConfig
from aleph_cluster._confine import ConfinedDir
from aleph_cluster._filetool import NodeFileTool
from aleph_cluster._handle import CenterHandle
from aleph_cluster._tools import NodeInvokeManyTool, NodeInvokeTool, NodeListTool, NodeManageTool

ALEPH_PLUGIN_NAME = "cluster"


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Register the cluster tools; the center connects on the first call that needs it."""
    config = context.config.section("cluster", ClusterConfig)
    origin = context.config.origin("cluster.tls_dir")
    # relative TLS paths are read from the directory of the file that set them
    base = Path(origin).resolve().parent if origin not in ("default", "") and Path(origin).is_file() else None
    base = base or context.config.workspace_root
    handle = CenterHandle(config, base, context.config.data_dir, context)
    context.add_cleanup(handle.aclose)
    register(
        NodeListTool(handle),
        NodeInvokeTool(handle),
        NodeInvokeManyTool(handle),
        NodeFileTool(handle, ConfinedDir(context.workspace, context.protected_paths)),
        NodeManageTool(handle),
    )


@aleph.hookimpl
def aleph_cli_commands(register: Any) -> None:
    """``aleph cluster init|issue|scheduler|node|crosscheck``."""
    from aleph_cluster._cli import add_cluster_parser

    register("cluster", add_cluster_parser)
