"""The managed configuration file's place, and whether it may be read (see ``AlephConfig.managed_file``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aleph._errors import ConfigError

__all__ = ["data_dir_for", "managed_layer"]


def data_dir_for(base_dir: Path, setting: str | None, env: Mapping[str, str]) -> Path:
    if setting:
        return (base_dir / setting).expanduser().resolve()
    value = env.get("ALEPH_DATA_DIR")
    if value:
        return Path(value).expanduser().resolve()
    xdg = env.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "aleph"


def managed_layer(
    merged: Mapping[str, Any],
    origins: Mapping[str, str],
    project: Path | None,
    base_dir: Path,
    env: Mapping[str, str],
    read: Callable[[Path], dict[str, Any]],
) -> tuple[str, dict[str, Any]] | None:
    """The managed file and its table, or None (absent, not safely owned, or its place chosen by the project file)."""
    workspace = merged.get("workspace")
    setting = workspace.get("data_dir") if isinstance(workspace, Mapping) else None
    if setting is not None and project is not None and origins.get("workspace.data_dir") == str(project):
        return None  # a project could otherwise plant the operator's own configuration
    path = data_dir_for(base_dir, setting if isinstance(setting, str) else None, env) / "managed" / "config.toml"
    try:
        info = path.stat()
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise ConfigError("the managed configuration must belong to you and be writable by you alone", file=str(path))
    return str(path), read(path)
