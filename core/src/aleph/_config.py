"""Configuration: TOML files (user, then project) with environment overrides, validated by pydantic.

Precedence, lowest first: built-in defaults → the user file (``$XDG_CONFIG_HOME/aleph/config.toml``)
→ the project file (``$ALEPH_CONFIG`` or an explicit path; or ``aleph.toml`` in the workspace, which only
tightens unless the operator trusts it, see :mod:`aleph._config_tighten`) → environment variables
``ALEPH__SECTION__KEY=value`` (the value is read as a TOML value when it parses as one, else as a
string). A bad value fails at load with the file, the key and the reason.

Sections core does not know (``[browser]``, ``[files]``, ...) belong to plugins, which validate
them through :meth:`AlephConfig.section`.
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from aleph._config_ledger import LedgerConfig
from aleph._config_managed import data_dir_for, managed_layer
from aleph._config_merge import copy_table, drop_invalid, env_overrides, merge, record_changes, with_env
from aleph._config_tighten import tighten
from aleph._errors import ConfigError
from aleph._protected import check_pattern
from aleph._workspace_trust import WorkspaceTrust

__all__ = [
    "DEFAULT_CORE_TOOLS",
    "AgentConfig",
    "AlephConfig",
    "ChannelConfig",
    "CommandPolicyConfig",
    "CustomCommandRule",
    "LedgerConfig",
    "McpConfig",
    "McpServerConfig",
    "PluginsConfig",
    "PoliciesConfig",
    "SandboxConfig",
    "ToolPermissionsConfig",
    "ToolsConfig",
    "WorkspaceConfig",
    "load_config",
]

log = logging.getLogger("aleph.config")

Action = Literal["allow", "ask", "deny"]
ModelT = TypeVar("ModelT", bound=BaseModel)

DEFAULT_CORE_TOOLS: tuple[str, ...] = (
    "ask_user",
    "subagent",
    "bash",
    "code_exec",
    "code_check",
    "file_read",
    "file_write",
    "file_edit",
    "file_ops",
    "search",
    "web_fetch",
    "memory_search",
    "remember",
    "skill_read",
    "skill_list",
    "scratchpad",
    "note_manage",
    "system",
    "get_tool_schema",
    "moa",
    "session_set_mode",
    "mcp_read_resource",
    "mcp_get_prompt",
    "mcp_list_resources",
    "mcp_list_prompts",
    "mcp_list_resource_templates",
    "browser_open",
    "browser_snapshot",
    "browser_exec",
    "tool_search",
)
"""The reference's default core set, plus the resident browser tools and ``tool_search``."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ToolPermissionsConfig(_Section):
    """One layer of tool permissions: a default action and per-rule overrides."""

    default: Action = "allow"
    """Action for tools no override names."""
    overrides: dict[str, Action] = Field(default_factory=dict)
    """Rule → action. A rule is a tool name, a glob (``github__*``) or a tool with an argument specifier."""


class PoliciesConfig(_Section):
    """``[policies]``: install-wide permission policy and execution tier."""

    exec_tier: Literal["ask", "auto", "full"] = "auto"
    """Install-wide execution tier (``plan`` is a per-session choice only)."""
    tool_permissions: ToolPermissionsConfig = Field(default_factory=ToolPermissionsConfig)
    """The global permission layer."""
    terminal: dict[str, Any] = Field(default_factory=dict)
    """Terminal surface settings; writing them is a gate-removal floor."""


class AgentConfig(_Section):
    """``[agents.<name>]``: one agent's layer."""

    tool_permissions: ToolPermissionsConfig | None = None
    """This agent's permission layer, merged over the global one (most restrictive wins)."""
    allowed_tools: list[str] | None = None
    """If set, the only tools this agent may see or call (an empty list allows nothing)."""
    exec_tier: Literal["plan", "ask", "auto", "full"] | None = None
    """This agent's default execution tier."""
    bounded_by: list[str] = []
    """Agents whose layers judge its every call too (``agent_create`` sets its creator): it never holds more."""
    accepts_delegation_from: list[str] = []
    """Agents that may have this agent act for them without asking an operator (``"*"``: any agent).

    Every agent of the delegating chain must be listed; otherwise an operator approves each delegation.
    """


class ChannelConfig(_Section):
    """``[channels.<name>]``: one channel's layer (a chat, a device, an MCP client)."""

    tool_permissions: ToolPermissionsConfig | None = None
    """This channel's permission layer, merged last (most restrictive wins)."""
    role: Literal["operator", "member", "guest"] | None = None
    """The caller role of requests from this channel; guests are clamped to the ``auto`` tier."""


class CustomCommandRule(_Section):
    """A custom command-policy rule."""

    name: str
    """Rule name shown in refusals."""
    regex: str | None = None
    """Regular expression matched against each analysed sub-command."""
    program: str | None = None
    """Structured matcher: the program basename (``git``)."""
    args: list[str] | None = None
    """Structured matcher: arguments that must all be present (``["push", "--force"]``)."""
    action: Literal["block", "warn", "ask"] = "block"
    """What a match does."""
    description: str = ""
    """Reason shown to the model; defaults to ``custom rule '<name>'``."""


class CommandPolicyConfig(_Section):
    """``[sandbox.command_policy]``: the floor under every shell command."""

    enabled: bool = True
    """False keeps only the hardline rules, which always apply."""
    enforcement: Literal["block", "warn", "off"] = "block"
    """How tunable rules act: as declared, downgraded to warnings, or skipped."""
    use_default_rules: bool = True
    """Include the built-in tunable rules."""
    custom_rules: list[CustomCommandRule] = Field(default_factory=list)
    """Extra rules."""


class SandboxConfig(_Section):
    """``[sandbox]``."""

    command_policy: CommandPolicyConfig = Field(default_factory=CommandPolicyConfig)
    """The command-policy floor."""


_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}", re.ASCII)


class ToolsConfig(_Section):
    """``[tools]``: discovery and disclosure."""

    core: list[str] = Field(default_factory=lambda: list(DEFAULT_CORE_TOOLS))
    """Tools whose full schema is always sent; ``[]`` or ``["*"]`` sends every schema."""
    truncate_tool_descriptions: bool = False
    """Cut non-core descriptions to their first sentence."""
    defer_mcp_tools: bool = False
    """Start every MCP tool deferred (reachable through ``tool_search``)."""
    defer: str | None = None
    """``"auto:N"`` defers non-core tools once full definitions exceed N% of ``context_budget_tokens``."""
    context_budget_tokens: int = Field(default=200_000, ge=1_000, le=10_000_000)
    """The model's context size used by ``defer = "auto:N"`` (tokens ≈ characters / 4)."""
    max_input_bytes: int = Field(default=1_000_000, ge=1_000, le=100_000_000)
    """Largest tool input accepted (strings and keys counted); larger calls fail validation."""
    max_output_chars: int = Field(default=100_000, ge=1_000, le=100_000_000)
    """Larger tool outputs are saved under the data directory and replaced by a preview and the path."""

    @field_validator("core")
    @classmethod
    def _check_core(cls, value: list[str]) -> list[str]:
        if len(value) > 10_000:
            raise ValueError(f"lists {len(value)} tools; at most 10000")
        for name in value:
            if name != "*" and not _TOOL_NAME.fullmatch(name):
                raise ValueError(f'{name!r} is not a tool name (ASCII letters, digits, "_" or "-") or "*"')
        return value

    @field_validator("defer")
    @classmethod
    def _check_defer(cls, value: str | None) -> str | None:
        if value is None:
            return value
        match = re.fullmatch(r"auto:(\d{1,3})", value)
        if not match or not 1 <= int(match.group(1)) <= 100:
            raise ValueError('must be "auto:N" with N a percentage from 1 to 100')
        return value


_SERVER_ID = re.compile(r"[A-Za-z0-9_-]{1,32}", re.ASCII)


class McpServerConfig(_Section):
    """``[mcp.servers.<id>]``: one MCP server (stdio: ``command``; Streamable HTTP: ``url``)."""

    command: str | None = None
    """Program to start (stdio transport)."""
    args: list[str] = Field(default_factory=list)
    """Its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the child (``${VAR}`` is expanded)."""
    cwd: str | None = None
    """Working directory of the child."""
    url: str | None = None
    """Streamable HTTP endpoint."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers (``${VAR}`` is expanded; values are never logged)."""
    enabled: bool = True
    """Connect this server at startup."""
    timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    """Connect and per-request timeout."""
    protocol: Literal["auto", "legacy"] = "auto"
    """``auto`` tries 2026-07-28 ``server/discover`` first; ``legacy`` forces ``initialize``."""
    tool_filter: list[str] | None = None
    """If set, only these tool names (globs allowed) are registered."""
    trust_annotations: bool = False
    """Believe the server's ``idempotentHint``/``readOnlyHint`` for retries and the ledger.

    Off by default: annotations are hints from an untrusted party."""


class McpConfig(_Section):
    """``[mcp]``."""

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    """Server id → configuration. Ids are ASCII letters, digits, ``_`` or ``-`` without ``__``."""

    @field_validator("servers")
    @classmethod
    def _check_ids(cls, servers: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for server_id, server in servers.items():
            if not _SERVER_ID.fullmatch(server_id) or "__" in server_id:
                raise ValueError(f"server id {server_id!r}: use 1-32 ASCII letters, digits, '_' or '-', without '__'")
            if (server.command is None) == (server.url is None):
                raise ValueError(f"server {server_id!r}: set exactly one of command (stdio) or url (HTTP)")
        return servers


class ApprovalConfig(_Section):
    """``[approval]``: asking a human."""

    timeout: float = Field(default=600.0, gt=0, le=86_400)
    """Seconds to wait for an answer; after that the call ends as "nobody answered" (ApprovalExpired)."""


class WorkspaceConfig(_Section):
    """``[workspace]``."""

    root: str | None = None
    """The directory tools work in; default the directory holding ``aleph.toml``, else the current one."""
    data_dir: str | None = None
    """Aleph's own data (ledger, sessions, profiles); default ``$ALEPH_DATA_DIR`` or ``~/.local/share/aleph``."""
    protected: list[str] = Field(default_factory=list, max_length=256)
    """More workspace globs no tool may write (``*``, ``?`` in one component, ``**`` across), added to
    :data:`aleph.ProtectedPaths.HOST_EXECUTED`: files a program on this machine runs code from."""

    @field_validator("protected")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        return [check_pattern(p) for p in value]


class PluginsConfig(_Section):
    """``[plugins]``."""

    disable: list[str] = Field(default_factory=list)
    """Entry-point names not to load (also ``ALEPH_DISABLE_PLUGINS=a,b``)."""
    strict: bool = False
    """Re-raise plugin load failures instead of recording them (also ``ALEPH_STRICT_PLUGINS=1``)."""
    require_trust: bool = False
    """Hold back every installed plugin no human approved (see ``aleph plugins trust``). Off by default:
    a distribution someone installed by hand with pip was put there by a person; plugins installed by a
    tool (the hub) are recorded and held until approved whatever this says."""
    paths: list[str] = Field(default_factory=list)
    """Extra plugin folders (``pip install --target`` layouts) to load entry points from, besides
    ``<data_dir>/plugins/site``; relative paths are relative to the configuration file."""


class AlephConfig(BaseModel):
    """The whole configuration. Unknown top-level sections are kept for plugins."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    policies: PoliciesConfig = Field(default_factory=PoliciesConfig)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    channels: dict[str, ChannelConfig] = Field(default_factory=dict)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    ledger: LedgerConfig = Field(default_factory=LedgerConfig)
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)

    _origins: dict[str, str] = PrivateAttr(default_factory=dict)
    _files: list[str] = PrivateAttr(default_factory=list)
    _base_dir: Path = PrivateAttr(default_factory=Path.cwd)
    _claimed: set[str] = PrivateAttr(default_factory=set)
    _workspace_layers: dict[str, dict[str, Any]] = PrivateAttr(default_factory=dict)
    _workspace_file: tuple[str, bool, list[str]] | None = PrivateAttr(default=None)

    @property
    def workspace_layers(self) -> dict[str, dict[str, Any]]:
        """Restricting permission tables from an untrusted workspace file (``global``, ``agent:<n>``, ``channel:<n>``).

        The chokepoint adds each as one more layer; across layers the most restrictive decision wins.
        """
        return dict(self._workspace_layers)

    @property
    def workspace_file(self) -> dict[str, Any] | None:
        """The workspace's own ``aleph.toml``: ``{"file", "trusted", "ignored"}``, or None when none was read."""
        if self._workspace_file is None:
            return None
        file, trusted, ignored = self._workspace_file
        return {"file": file, "trusted": trusted, "ignored": list(ignored)}

    @property
    def files(self) -> list[str]:
        """The configuration files that were read, lowest precedence first."""
        return list(self._files)

    def origin(self, key: str) -> str:
        """Where ``key`` (dotted) was set: a file path, ``env ALEPH__...``, or ``default``."""
        parts = key.split(".")
        while parts:
            found = self._origins.get(".".join(parts))
            if found:
                return found
            parts.pop()
        return "default"

    @property
    def workspace_root(self) -> Path:
        """The resolved workspace directory."""
        root = self.workspace.root
        return (self._base_dir / root).resolve() if root else self._base_dir.resolve()

    @property
    def data_dir(self) -> Path:
        """The resolved data directory (not created here)."""
        return data_dir_for(self._base_dir, self.workspace.data_dir, os.environ)

    @property
    def managed_file(self) -> Path:
        """The operator's file Aleph's own tools write (``<data_dir>/managed/config.toml``; see docs/admin.md)."""
        return self.data_dir / "managed" / "config.toml"

    @property
    def key_dir(self) -> Path:
        """The keystore directory: ``<ledger dir>/keys`` (``[ledger] directory`` or ``<data_dir>/ledger``)."""
        if self.ledger.directory:
            return (self._base_dir / self.ledger.directory).expanduser().resolve() / "keys"
        return self.data_dir / "ledger" / "keys"

    @property
    def plugin_folders(self) -> list[Path]:
        """Folders holding plugin distributions outside the environment: ``<data_dir>/plugins/site`` first."""
        folders = [self.data_dir / "plugins" / "site"]
        folders.extend((self._base_dir / p).expanduser().resolve() for p in self.plugins.paths)
        return folders

    def plugin_sections(self) -> dict[str, Any]:
        """Top-level sections core does not know, by name."""
        return dict(self.model_extra or {})

    def claimed_sections(self) -> set[str]:
        """The plugin sections some plugin has read through :meth:`section` (``aleph config check``)."""
        return set(self._claimed)

    def section(self, name: str, model: type[ModelT]) -> ModelT:
        """Validate the plugin section ``[name]`` with ``model``; a bad value raises :class:`ConfigError`."""
        self._claimed.add(name)
        raw = (self.model_extra or {}).get(name, {})
        if not isinstance(raw, Mapping):
            raise ConfigError("must be a table", file=self.origin(name), key=name)
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            raise _config_error(exc, self, prefix=(name,)) from None


def _user_config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "aleph" / "config.toml"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from None


def _config_error(
    exc: ValidationError,
    config: AlephConfig | None,
    origins: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
) -> ConfigError:
    messages = []
    first_key = ""
    first_file = ""
    for err in exc.errors(include_url=False):
        key = ".".join(str(p) for p in (*prefix, *err["loc"]))
        if config is not None:
            where = config.origin(key)
        else:
            parts = key.split(".")
            where = "default"
            while parts:
                if ".".join(parts) in (origins or {}):
                    where = (origins or {})[".".join(parts)]
                    break
                parts.pop()
        message = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        if err["type"] not in ("missing", "extra_forbidden") and not isinstance(err.get("input"), dict | list):
            message += f" (got {err.get('input')!r})"
        messages.append(f"{where}: {key}: {message}")
        first_key, first_file = first_key or key, first_file or where
    if len(messages) == 1:
        return ConfigError(messages[0].split(": ", 2)[2], file=first_file, key=first_key)
    error = ConfigError("invalid configuration:\n  " + "\n  ".join(messages))
    error.problems = tuple(messages)
    return error


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    user_file: bool = True,
    workspace_file: bool = True,
    problems: list[str] | None = None,
) -> AlephConfig:
    """Read, merge and validate the configuration. Raises :class:`ConfigError` naming file, key and reason.

    The user file, an explicit ``path`` (or ``$ALEPH_CONFIG``), the managed file Aleph's own tools write
    (:attr:`AlephConfig.managed_file`) and ``ALEPH__*`` variables are the operator's.
    A workspace's own ``aleph.toml`` (read when no explicit file is given) is the operator's only once they
    trusted it (``aleph config trust``, bound to its path and bytes, or ``ALEPH_TRUST_WORKSPACE_CONFIG=1``);
    otherwise it may only tighten what the operator configured (:mod:`aleph._config_tighten`).
    ``workspace_file=False`` reads the operator's sources only.

    With ``problems`` (``aleph config check``), a key that does not validate is reported there and left
    out, so one run finds every problem; a file that does not parse still raises.
    """
    env = os.environ if env is None else env
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    files: list[str] = []
    base_dir = Path(workspace).resolve() if workspace is not None else Path.cwd()

    layers: list[Path] = []
    user = _user_config_path(env)
    if user_file and user.is_file():
        layers.append(user)
    explicit = path if path is not None else env.get("ALEPH_CONFIG")
    found: Path | None = None
    if explicit:
        project = Path(explicit).expanduser()
        if not project.is_file():
            raise ConfigError("configuration file not found", file=str(project))
        layers.append(project)
        if workspace is None:
            base_dir = project.resolve().parent
    elif workspace_file and (base_dir / "aleph.toml").is_file():
        found = base_dir / "aleph.toml"

    for layer in layers:
        merge(merged, _read_toml(layer), str(layer), origins)
        files.append(str(layer))
    project_file = layers[-1] if layers and layers[-1] != user else None
    managed = managed_layer(merged, origins, project_file, base_dir, env, _read_toml)
    if managed is not None:
        merge(merged, copy_table(managed[1]), managed[0], origins)
        files.append(managed[0])
    overrides = env_overrides(env)
    if found is None:
        return _validated(with_env(merged, origins, overrides), origins, files, base_dir, problems)

    data = _read_bytes(found)
    try:
        theirs = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"not valid TOML: {exc}", file=str(found)) from None
    operator_origins = dict(origins)
    operator = _validated(
        with_env(copy_table(merged), operator_origins, overrides), operator_origins, files, base_dir, problems
    )
    trusted = env.get("ALEPH_TRUST_WORKSPACE_CONFIG", "") not in ("", "0") or WorkspaceTrust.at(
        operator.data_dir, operator.key_dir
    ).trusted(found, data)
    files.append(str(found))
    as_if_trusted = copy_table(merged)
    trusted_origins = dict(origins)
    merge(as_if_trusted, theirs, str(found), trusted_origins)
    if managed is not None:  # the operator's managed file stays on top
        merge(as_if_trusted, copy_table(managed[1]), managed[0], trusted_origins)
    # Validated whole either way: a bad workspace file is an error naming it, trusted or not.
    config = _validated(with_env(as_if_trusted, trusted_origins, overrides), trusted_origins, files, base_dir, problems)
    if trusted:
        config._workspace_file = (str(found), True, [])
        return config
    before = with_env(merged, origins, overrides)
    tightened = tighten(before, theirs, AlephConfig().model_dump())
    record_changes(before, tightened.config, str(found), origins)
    config = _validated(tightened.config, origins, files, base_dir, problems)
    config._workspace_layers = tightened.layers
    config._workspace_file = (str(found), False, tightened.ignored)
    if tightened.ignored:
        log.warning(
            "%s is not trusted, so it may only tighten the configuration; not applied: %s "
            "(trust it with `aleph config trust %s`)",
            found,
            "; ".join(tightened.ignored),
            found.parent,
        )
    return config


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from None


def _validated(
    merged: dict[str, Any],
    origins: dict[str, str],
    files: list[str],
    base_dir: Path,
    problems: list[str] | None = None,
) -> AlephConfig:
    found: list[str] = []
    while True:
        try:
            config = AlephConfig.model_validate(merged)
            break
        except ValidationError as exc:
            if problems is None:
                raise _config_error(exc, None, origins) from None
            found.extend(_config_error(exc, None, origins).problems)
            if not drop_invalid(merged, exc):
                raise _config_error(exc, None, origins) from None
    if problems is not None:  # the same key judged in two views of the configuration is reported once
        problems.extend(p for p in found if p not in problems)
    config._origins = origins
    config._files = list(files)
    config._base_dir = base_dir
    return config
