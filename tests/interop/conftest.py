from __future__ import annotations

import sys
from pathlib import Path

import aleph_exec.plugin
import aleph_files.plugin
import aleph_interop.plugin

import aleph
from aleph.testing import isolated_runtime

AGENT = Path(__file__).parent / "agents" / "acp_agent.py"


def acp_config(extra: str = "", isolation: str = "bubblewrap") -> str:
    return f"""
[interop.acp_agents.script]
command = "{sys.executable}"
args = ["{AGENT}"]
isolation = "{isolation}"
network = false
{extra}
"""


def runtime(workspace: Path, config: str = "") -> aleph.Aleph:
    return isolated_runtime(workspace, aleph_interop.plugin, aleph_files.plugin, aleph_exec.plugin, config_toml=config)
