"""Build hook: compiles aleph-memory's optional native kernels, ``aleph_memory/_int8dot.c``.

The kernels score the vector index's int8 copy and rescore its shortlist (see ``docs/memory.md``, "Two passes
over the vectors"). They need a C compiler and the running Python's headers. When either is missing the build
still succeeds: the wheel is pure Python and the index scores every row with numpy's float32 product (the same
nearest rows and the same similarities, more slowly).

A wheel gets the compiled module from a temporary directory (and a platform tag); an editable install compiles
it in place beside its source, which is where the editable install imports ``aleph_memory`` from.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("src/aleph_memory/_int8dot.c")


class NativeBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compile ``_int8dot.c`` for the Python doing the build; skip it (pure Python) when that fails."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile before the wheel is packed: into it (a platform wheel), or in place for an editable install."""
        if self.target_name != "wheel":
            return
        source = Path(self.root) / SOURCE
        name = "_int8dot" + str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")
        if version == "editable":
            out = source.with_name(name)
        else:
            self._scratch = tempfile.mkdtemp(prefix="aleph-memory-native-")
            out = Path(self._scratch) / name
        problem = compile_extension(source, out)
        if problem is not None:
            self.app.display_warning(
                f"aleph-memory: the native vector kernels were not built ({problem}); "
                "the vector index scores every row with numpy (the same results, more slowly)"
            )
            return
        if version != "editable":
            build_data["force_include"][str(out)] = f"aleph_memory/{name}"
            build_data["pure_python"] = False
            build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the scratch directory the wheel's module was compiled in."""
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def compile_extension(source: Path, out: Path) -> str | None:
    """Compile ``source`` into the extension module ``out``; None when it worked, else why not."""
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    include = sysconfig.get_paths()["include"]
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    command = [
        *shlex.split(str(compiler)),
        "-O2",
        "-fPIC",
        "-shared",
        "-fvisibility=hidden",
        # The exact scores are float32 products and sums rounded one at a time, as numpy rounds them: a fused
        # multiply-add would round once and make the native scores differ from numpy's in the last bit.
        "-ffp-contract=off",
        f"-I{include}",
        str(source),
        "-o",
        str(tmp),
        "-lm",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{command[0]}: {exc}"
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = (done.stderr or done.stdout).strip().splitlines()
        return f"{command[0]} exited with {done.returncode}: {last[-1] if last else 'no output'}"
    os.replace(tmp, out)  # atomically: a process importing it meanwhile sees the old module or the new one
    return None
