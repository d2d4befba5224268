"""The ``exec`` plugin: bash, code_exec, code_check, pdf_generate and image_generate."""

from __future__ import annotations

from typing import Any

import anyio.to_thread

import aleph
from aleph_exec import hookspecs
from aleph_exec._config import ExecConfig
from aleph_exec._generate import ImageFn, ImageGenerateTool, PdfGenerateTool
from aleph_exec._layers import LAYERS_DIR
from aleph_exec._netcall import ExecNetworkTool
from aleph_exec._sandbox import WorkspaceSandbox, bwrap_available
from aleph_exec._tools import BashTool, CodeCheckTool, CodeExecTool, ExecCommitTool
from aleph_exec._transaction import Transactions

ALEPH_PLUGIN_NAME = "exec"
ALEPH_HOOKSPECS = (hookspecs,)


@aleph.hookimpl
def aleph_register_tools(register: aleph.ToolRegistrar, context: aleph.PluginContext) -> None:
    """Register the sandboxed execution tools and the generators over the runtime's workspace."""
    config = context.config.section("exec", ExecConfig)
    if config.isolation == "bwrap" and not bwrap_available():
        raise aleph.ConfigError(
            'bwrap not available: install bubblewrap (Debian package bubblewrap) or set isolation = "auto"',
            file=context.config.origin("exec.isolation"),
            key="exec.isolation",
        )
    protected = context.protected_paths
    sandbox = WorkspaceSandbox(context.workspace, config, protected)
    transactions = Transactions(context.workspace, context.data_dir, config, protected, context.protected_patterns)
    transactions.recover()  # a commit a crash cut short is finished (or rolled back) before any new run
    if config.transactions and sandbox.bwrap is not None:
        # .aleph-tx exists before the sandbox first starts, which then masks it from the start.
        transactions.prepare()
        transactions.on_ready = sandbox.offer_layer  # the zygote mounts each next layer's overlay while idle

    async def stop_sandbox() -> None:
        await anyio.to_thread.run_sync(sandbox.close)
        await anyio.to_thread.run_sync(transactions.close)

    context.add_cleanup(stop_sandbox)
    providers: dict[str, ImageFn] = {}

    def add_provider(name: str, generate: Any) -> None:
        if not isinstance(name, str) or not name or not callable(generate):
            raise ValueError("register(name, generate) needs a non-empty name and an async callable")
        if name in providers:
            raise ValueError(f"image provider {name!r} is registered twice")
        providers[name] = generate

    context.call_hook("aleph_image_providers", register=add_provider)
    register(
        BashTool(sandbox, transactions),
        CodeExecTool(sandbox, transactions),
        CodeCheckTool(sandbox, transactions),
        ExecCommitTool(),
        ExecNetworkTool(),
        PdfGenerateTool(context.workspace, protected),
        ImageGenerateTool(providers, context.workspace, protected),
    )


@aleph.hookimpl
def aleph_protected_paths(register: Any) -> None:
    """``.aleph-tx``: the transactions' layers, which no tool may write (only a commit moves files out)."""
    register(LAYERS_DIR)


@aleph.hookimpl
def aleph_cli_commands(register: Any) -> None:
    """``aleph undo [CALL_ID]``: put the workspace back to just before a committed exec call."""
    from aleph_exec._undo_cmd import add_undo_parser

    register("undo", add_undo_parser)


@aleph.hookimpl
def aleph_doctor_checks(register: Any, config: aleph.AlephConfig) -> None:
    """exec.isolation, exec.overlay, exec.cgroup, exec.seccomp and exec.layers: what exec gets on this machine."""
    from aleph_exec._doctor import register_checks

    register_checks(register, config.section("exec", ExecConfig), config.workspace_root, config.data_dir)
