"""Which directories may be a workspace without being named: never ``/``, the home directory or above it.

An MCP client often launches its servers from ``/`` or the home directory; taking that as the workspace
would hand every file the user owns to the tools. Such a workspace is refused unless it was named on
purpose: ``--workspace DIR``, ``[workspace] root`` in a configuration file, or ``ALEPH__WORKSPACE__ROOT``.
"""

from __future__ import annotations

from pathlib import Path

from aleph._config import AlephConfig
from aleph._errors import ConfigError

__all__ = ["broad_workspace_reason", "check_workspace"]


def broad_workspace_reason(root: Path, home: Path | None = None) -> str | None:
    """Why ``root`` is too broad to be a workspace nobody named, or None when it is fine."""
    root = root.resolve()
    try:
        home = (home or Path.home()).resolve()
    except (RuntimeError, KeyError):  # no home directory for this user: only "/" is too broad
        home = None
    if root == Path(root.anchor):
        return "it is the root of the filesystem"
    if home is not None and root == home:
        return "it is your home directory"
    if home is not None and home.is_relative_to(root):
        return f"it contains your home directory {home}"
    return None


def check_workspace(config: AlephConfig, *, named: bool = False) -> None:
    """Raise :class:`ConfigError` when the workspace is ``/``, home or above home and nobody named it.

    :param named: the caller was given the workspace explicitly (``--workspace DIR``, MCP roots).
    """
    if named or config.origin("workspace.root") != "default":
        return
    root = config.workspace_root
    reason = broad_workspace_reason(root)
    if reason is None:
        return
    raise ConfigError(
        f"refusing the workspace {root}: {reason}, and Aleph's tools would work on everything in it. "
        "Start Aleph from a project directory, pass --workspace DIR, or name it in aleph.toml "
        '([workspace] root = "...")'
    )
