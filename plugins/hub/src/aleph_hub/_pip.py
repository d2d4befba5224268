"""pip as a subprocess: resolve a requirement into an exact hashed set, install it, remove it again.

Aleph writes no resolver and no installer of its own.

pip runs isolated from the user's pip configuration (``PIP_CONFIG_FILE`` is the null device and
every ``PIP_*`` variable is dropped), so an ``extra-index-url`` in someone's ``pip.conf`` cannot add
a second source behind the configured index (dependency confusion). Only wheels are accepted
(``--only-binary :all:``): installing a wheel runs none of its code. A plugin folder is appended to
pip's ``sys.path`` (never prepended, so nothing in it can shadow pip), which makes the distributions
already installed there count as installed when pip resolves.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["LockEntry", "PipError", "lock_text", "parse_requirement", "pip_install", "pip_resolve"]

_BOOT = (
    "import runpy, sys\n"
    "folder = sys.argv.pop(1)\n"
    "if folder: sys.path.append(folder)\n"
    "sys.argv[0] = 'pip'\n"
    "runpy.run_module('pip', run_name='__main__', alter_sys=True)\n"
)
_MAX_LOG_LINES = 400


class PipError(RuntimeError):
    """pip failed; the message carries the end of its output."""


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One exact distribution of a resolution: what pip would install, from where, with which hash."""

    name: str
    version: str
    url: str
    sha256: str
    requested: bool = False
    requires_dist: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The form ``hub_resolve_spec`` returns and receipts keep."""
        return {
            "name": self.name,
            "version": self.version,
            "url": self.url,
            "sha256": self.sha256,
            "requested": self.requested,
        }


def parse_requirement(text: str) -> Requirement:
    """A PEP 508 requirement by name from the index; URLs and local paths are refused."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(f"invalid requirement {text!r}: {exc}") from None
    if req.url:
        raise ValueError(f"requirement {text!r} is a direct reference; name a distribution on the index instead")
    return req


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INPUT="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


async def _run(args: list[str], folder: Path | None, timeout: float, progress: Callable[[str], None]) -> list[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _BOOT,
        str(folder) if folder is not None else "",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=_env(),
        start_new_session=True,
    )
    lines: list[str] = []

    async def pump() -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                lines.append(line)
                del lines[:-_MAX_LOG_LINES]
                progress(line)

    try:
        await asyncio.wait_for(asyncio.gather(pump(), proc.wait()), timeout)
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        raise PipError(f"pip did not finish within {timeout:.0f} s and was stopped") from None
    except asyncio.CancelledError:
        _kill(proc)  # a cancelled install must not go on writing behind the caller's back
        raise
    if proc.returncode != 0:
        tail = "\n".join(lines[-15:])
        raise PipError(f"pip exited with status {proc.returncode}:\n{tail}")
    return lines


def _kill(proc: asyncio.subprocess.Process) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _entries(report: dict[str, Any]) -> list[LockEntry]:
    out = []
    for item in report.get("install", []):
        meta = item.get("metadata", {})
        info = item.get("download_info", {})
        hashes = info.get("archive_info", {}).get("hashes", {})
        sha = hashes.get("sha256") or str(info.get("archive_info", {}).get("hash", "")).removeprefix("sha256=")
        if not sha:
            raise PipError(
                f"{meta.get('name')}: the index gave no SHA-256 for {info.get('url')}; refusing an unhashed file"
            )
        out.append(
            LockEntry(
                canonicalize_name(str(meta["name"])),
                str(meta["version"]),
                str(info.get("url", "")),
                sha,
                bool(item.get("requested")),
                tuple(meta.get("requires_dist") or ()),
            )
        )
    return out


def _common(index_url: str) -> list[str]:
    return ["--no-input", "--progress-bar", "off", "--only-binary", ":all:", "--index-url", index_url]


async def pip_resolve(
    requirement: str | list[str],
    index_url: str,
    folder: Path | None,
    timeout: float,
    progress: Callable[[str], None],
) -> list[LockEntry]:
    """The exact, hashed distributions pip would add for ``requirement`` (nothing is installed).

    What the runtime's environment (and ``folder``) already satisfies is left out.
    """
    requirements = [requirement] if isinstance(requirement, str) else list(requirement)
    for text in requirements:
        parse_requirement(text)
    with tempfile.TemporaryDirectory(prefix="aleph-hub-") as tmp:
        report = Path(tmp) / "report.json"
        await _run(
            ["install", "--dry-run", "--quiet", "--report", str(report), *_common(index_url), *requirements],
            folder,
            timeout,
            progress,
        )
        return _entries(json.loads(report.read_text(encoding="utf-8")))


async def pip_install(
    lock: list[LockEntry] | str,
    index_url: str,
    folder: Path | None,
    timeout: float,
    progress: Callable[[str], None],
) -> list[LockEntry]:
    """Install ``lock`` (exact pins, ``--require-hashes``) or one requirement string, without dependencies.

    The target is ``folder`` (``--target``) or the runtime's environment; returns what pip installed.
    """
    with tempfile.TemporaryDirectory(prefix="aleph-hub-") as tmp:
        report = Path(tmp) / "report.json"
        args = ["install", "--no-deps", "--report", str(report), *_common(index_url)]
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            args += ["--target", str(folder), "--upgrade"]
        if isinstance(lock, str):
            parse_requirement(lock)
            args.append(lock)
        else:
            req_file = Path(tmp) / "lock.txt"
            req_file.write_text(lock_text(lock), encoding="utf-8")
            args += ["--require-hashes", "-r", str(req_file)]
        await _run(args, None, timeout, progress)
        return _entries(json.loads(report.read_text(encoding="utf-8")))


async def pip_uninstall(names: list[str], timeout: float, progress: Callable[[str], None]) -> None:
    """Uninstall ``names`` from the runtime's environment."""
    await _run(["uninstall", "--yes", *names], None, timeout, progress)


def unsatisfied(installed: list[LockEntry], folder: Path | None) -> list[str]:
    """Requirements of ``installed`` that neither the environment, ``folder`` nor ``installed`` satisfy.

    This checks (with packaging's specifiers and markers) what an install without dependencies left
    open; resolving what is missing is pip's job again.
    """
    import importlib.metadata

    from packaging.version import InvalidVersion, Version

    paths = [*sys.path, str(folder)] if folder is not None else list(sys.path)
    have: dict[str, str | None] = {entry.name: entry.version for entry in installed}

    def version_of(name: str) -> str | None:
        key = canonicalize_name(name)
        if key not in have:
            found = next(iter(importlib.metadata.distributions(name=name, path=paths)), None)
            have[key] = found.version if found is not None else None
        return have[key]

    missing = []
    for entry in installed:
        for text in entry.requires_dist:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            version = version_of(req.name)
            try:
                ok = version is not None and req.specifier.contains(Version(version), prereleases=True)
            except InvalidVersion:
                ok = False
            if not ok:
                missing.append(str(req))
    return sorted(set(missing))


def lock_text(lock: list[LockEntry]) -> str:
    """A pip requirements file pinning every entry to its version and SHA-256 (``--require-hashes``)."""
    return "".join(f"{e.name}=={e.version} --hash=sha256:{e.sha256}\n" for e in sorted(lock, key=lambda e: e.name))
