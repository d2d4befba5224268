"""``clawhub``: find and install skills from ClawHub (the OpenClaw skill registry) through aleph-hub's path.

Search and skill details come from the registry's HTTP API (``/api/v1/search``, ``/api/v1/skills/{slug}``);
an install downloads the version's zip (bounded, hashed) and hands it to aleph-hub's ``skill_install`` as
a sub-call through the chokepoint: the hub validates it against the Agent Skills spec, scans it, shows a
person what it contains and pins their approval to its digest, so a ClawHub skill is never served before
a human approved its bytes. Without aleph-hub, installing says so.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from pathlib import Path
from typing import Any, Literal

import httpx
from pydantic import Field, model_validator

import aleph
from aleph import AlephTool, ExecutionFailed, ToolArgs, ToolFacts
from aleph_interop._config import ClawhubSettings

__all__ = ["Clawhub"]

_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$")
MAX_RESULTS = 50


class ClawhubArgs(ToolArgs):
    action: Literal["search", "info", "install"] = "search"
    """``search`` the registry, show one skill's ``info``, or ``install`` it (a person approves what it holds)."""
    query: str | None = Field(default=None, max_length=500)
    """For search: what you are looking for."""
    slug: str | None = Field(default=None, max_length=100)
    """For info and install: the skill's slug (from search)."""
    version: str | None = Field(default=None, max_length=64)
    """For install: a version (default: the latest)."""
    scope: Literal["project", "user"] = "project"
    """For install: into the workspace's skills or the user's."""
    limit: int = Field(default=10, ge=1, le=MAX_RESULTS)

    @model_validator(mode="after")
    def _needs(self) -> ClawhubArgs:
        if self.action == "search" and not (self.query or "").strip():
            raise ValueError("search needs a query")
        if self.action in ("info", "install") and (not self.slug or not _SLUG.fullmatch(self.slug)):
            raise ValueError(f"{self.action} needs slug: lowercase letters, digits, '.', '_' or '-'")
        if self.version is not None and not _VERSION.fullmatch(self.version):
            raise ValueError("version: letters, digits, '.', '+' or '-'")
        return self


class Clawhub(AlephTool[ClawhubArgs]):
    NAME = "clawhub"
    DESCRIPTION = (
        "ClawHub, the OpenClaw skill registry: search it, read a skill's details, or install a skill. An install "
        "goes through aleph-hub's skill_install: scanned, shown to a person, approved byte for byte."
    )
    Args = ClawhubArgs
    FACTS = ToolFacts(idempotent=False, concurrent_safe=True, max_duration_ms=600_000, tags=("skills", "hub"))

    def __init__(self, settings: ClawhubSettings, staging: Path) -> None:
        self._settings = settings
        self._staging = staging

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self._settings.registry_url.rstrip("/"), timeout=self._settings.timeout_s, follow_redirects=True
        )

    async def _json(self, client: httpx.AsyncClient, path: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await client.get(path, params=params)
        except httpx.HTTPError as exc:
            raise ExecutionFailed(
                self.NAME, f"ClawHub not reachable at {self._settings.registry_url}: {type(exc).__name__}"
            ) from None
        if response.status_code == 404:
            raise ExecutionFailed(self.NAME, "ClawHub has no such skill")
        if response.status_code >= 300:
            raise ExecutionFailed(self.NAME, f"ClawHub answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise ExecutionFailed(self.NAME, "ClawHub answered something that is not JSON") from None
        if not isinstance(data, dict):
            raise ExecutionFailed(self.NAME, "ClawHub answered an unexpected shape")
        return data

    async def call(self, args: ClawhubArgs) -> dict[str, Any]:
        async with self._client() as client:
            if args.action == "search":
                data = await self._json(client, "/api/v1/search", {"q": args.query, "limit": args.limit})
                results = [
                    {k: r.get(k) for k in ("slug", "displayName", "summary", "version", "score")}
                    for r in data.get("results", [])[: args.limit]
                    if isinstance(r, dict)
                ]
                return {"results": results, "untrusted": True}
            info = await self._json(client, f"/api/v1/skills/{args.slug}", {})
            skill = info.get("skill") or {}
            latest = (info.get("latestVersion") or {}).get("version")
            summary = {
                "slug": skill.get("slug", args.slug),
                "name": skill.get("displayName"),
                "summary": skill.get("summary"),
                "latest_version": latest,
                "owner": (info.get("owner") or {}).get("handle"),
                "untrusted": True,
            }
            if args.action == "info":
                return summary
            version = args.version or latest
            if not version or not _VERSION.fullmatch(str(version)):
                raise ExecutionFailed(self.NAME, f"ClawHub names no installable version of {args.slug!r}")
            archive, digest, size = await self._download(client, args.slug or "", str(version))
        return await self._install(args, archive, digest, size, str(version))

    async def _download(self, client: httpx.AsyncClient, slug: str, version: str) -> tuple[Path, str, int]:
        self._staging.mkdir(parents=True, exist_ok=True)
        limit = self._settings.max_download_bytes
        sha = hashlib.sha256()
        size = 0
        handle = tempfile.NamedTemporaryFile(
            dir=self._staging, prefix=f"{slug}-{version}-", suffix=".zip", delete=False
        )
        path = Path(handle.name)
        try:
            with handle:
                async with client.stream(
                    "GET", "/api/v1/download", params={"slug": slug, "version": version}
                ) as response:
                    if response.status_code >= 300:
                        raise ExecutionFailed(self.NAME, f"ClawHub refused the download (HTTP {response.status_code})")
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise ExecutionFailed(
                                self.NAME, f"the skill archive is over {limit:,} bytes; not installed"
                            )
                        sha.update(chunk)
                        handle.write(chunk)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return path, sha.hexdigest(), size

    async def _install(self, args: ClawhubArgs, archive: Path, digest: str, size: int, version: str) -> dict[str, Any]:
        call = aleph.current_call()
        try:
            if call is None:
                raise ExecutionFailed(
                    self.NAME, "clawhub install runs only through a tool service (it needs the chokepoint)"
                )
            call.annotate(clawhub_slug=args.slug or "", clawhub_version=version, archive_sha256=digest)
            try:
                out = await call.subcall("skill_install", {"source": str(archive), "scope": args.scope})
            except aleph.ToolNotFound:
                raise ExecutionFailed(
                    self.NAME,
                    "installing a ClawHub skill needs aleph-hub (its skill_install tool is not available here)",
                ) from None
        finally:
            archive.unlink(missing_ok=True)
        try:
            installed = json.loads(out.text)
        except ValueError:
            installed = {"message": out.text}
        return {"installed": True, "slug": args.slug, "version": version, "archive_sha256": digest, "bytes": size,
                "skill_install": installed}  # fmt: skip
