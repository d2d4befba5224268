"""A package index client (PEP 691 JSON simple API, PEP 503 HTML as a fallback) and the catalog sync.

An Aleph plugin is a distribution with an ``aleph`` entry point. Entry points live inside the wheel
(``*.dist-info/entry_points.txt``), not in the index's metadata, so the sync downloads the newest
wheel of each candidate project (bounded by ``max_wheel_bytes``), checks it against the index's
SHA-256, and reads METADATA and entry_points.txt from it without installing or importing anything.
"""

from __future__ import annotations

import configparser
import email.parser
import hashlib
import io
import zipfile
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from aleph_hub._config import HubConfig

__all__ = ["IndexClient", "IndexError_", "ProjectFile", "read_wheel_metadata"]

JSON_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
_MAX_PAGE_BYTES = 32 * 1024 * 1024


class IndexError_(RuntimeError):
    """The index could not be read; the message names the URL and the reason."""


@dataclass(frozen=True, slots=True)
class ProjectFile:
    """One file a project page lists."""

    filename: str
    url: str
    sha256: str | None
    yanked: bool = False
    requires_python: str | None = None
    core_metadata: bool = False
    provenance: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class _Links(HTMLParser):
    """Anchors of a PEP 503 page: (href, attributes)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            if found.get("href"):
                self.links.append((str(found["href"]), found))


class IndexClient:
    """Reads one index. Every response is bounded; non-2xx answers raise :class:`IndexError_`."""

    def __init__(self, config: HubConfig, client: httpx.AsyncClient | None = None) -> None:
        self.base = config.index_url
        self.config = config
        self._client = client or httpx.AsyncClient(timeout=config.timeout_seconds, follow_redirects=True)
        self._own = client is None

    async def aclose(self) -> None:
        """Close the HTTP client this object made."""
        if self._own:
            await self._client.aclose()

    async def _get(self, url: str, limit: int, accept: str = JSON_ACCEPT) -> tuple[bytes, str]:
        try:
            async with self._client.stream("GET", url, headers={"Accept": accept}) as response:
                if response.status_code // 100 != 2:
                    raise IndexError_(f"HTTP {response.status_code} for {url}")
                chunks = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise IndexError_(f"{url} is larger than {limit} bytes")
                    chunks.append(chunk)
                return b"".join(chunks), response.headers.get("content-type", "")
        except httpx.HTTPError as exc:
            raise IndexError_(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None

    async def projects(self) -> list[str]:
        """Canonical names of every project on the index."""
        body, kind = await self._get(self.base, _MAX_PAGE_BYTES)
        if "json" in kind:
            data = _json(body, self.base)
            return sorted({canonicalize_name(str(p["name"])) for p in data.get("projects", []) if "name" in p})
        parser = _Links()
        parser.feed(body.decode("utf-8", errors="replace"))
        return sorted({canonicalize_name(href.rstrip("/").rsplit("/", 1)[-1]) for href, _ in parser.links})

    async def files(self, project: str) -> list[ProjectFile]:
        """The files of ``project`` (canonicalised), with hashes, yanked flags and metadata pointers."""
        url = urljoin(self.base, f"{canonicalize_name(project)}/")
        body, kind = await self._get(url, _MAX_PAGE_BYTES)
        out = []
        if "json" in kind:
            for f in _json(body, url).get("files", []):
                hashes = f.get("hashes") or {}
                yanked = f.get("yanked", False)
                out.append(
                    ProjectFile(
                        str(f["filename"]),
                        urljoin(url, str(f["url"])),
                        hashes.get("sha256"),
                        bool(yanked),
                        f.get("requires-python"),
                        bool(f.get("core-metadata") or f.get("dist-info-metadata")),
                        urljoin(url, f["provenance"]) if isinstance(f.get("provenance"), str) else None,
                    )
                )
            return out
        parser = _Links()
        parser.feed(body.decode("utf-8", errors="replace"))
        for href, attrs in parser.links:
            link, frag = urldefrag(urljoin(url, href))
            sha = frag[len("sha256=") :] if frag.startswith("sha256=") else None
            name = urlsplit(link).path.rsplit("/", 1)[-1]
            out.append(
                ProjectFile(
                    name,
                    link,
                    sha,
                    "data-yanked" in attrs,
                    attrs.get("data-requires-python"),
                    bool(attrs.get("data-core-metadata") or attrs.get("data-dist-info-metadata")),
                    attrs.get("data-provenance"),
                )
            )
        return out

    async def download(self, file: ProjectFile, limit: int) -> bytes:
        """The bytes of ``file``, checked against the index's SHA-256 (a file without one is refused)."""
        if not file.sha256:
            raise IndexError_(f"{file.filename}: the index gives no SHA-256 for it, so it cannot be checked")
        body, _ = await self._get(file.url, limit, accept="*/*")
        actual = hashlib.sha256(body).hexdigest()
        if actual != file.sha256.lower():
            raise IndexError_(f"{file.filename}: SHA-256 {actual} does not match the index's {file.sha256}")
        return body

    async def provenance(self, file: ProjectFile) -> dict[str, Any] | None:
        """The PEP 740 provenance object of ``file``, or None when the index offers none."""
        if not file.provenance:
            return None
        body, _ = await self._get(file.provenance, 4 * 1024 * 1024, accept="application/json")
        return _json(body, file.provenance)


def _json(body: bytes, url: str) -> dict[str, Any]:
    import json

    try:
        data = json.loads(body)
    except ValueError as exc:
        raise IndexError_(f"{url} did not return valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise IndexError_(f"{url} did not return a JSON object")
    return data


def newest_wheel(files: list[ProjectFile]) -> tuple[ProjectFile, Version] | None:
    """The newest non-yanked, pure or any-platform wheel among ``files`` (None when there is none)."""
    best: tuple[ProjectFile, Version] | None = None
    for f in files:
        if f.yanked or not f.filename.endswith(".whl"):
            continue
        try:
            _, version, _, _ = parse_wheel_filename(f.filename)
        except InvalidWheelFilename:
            continue
        if version.is_prerelease:
            continue
        if best is None or version > best[1]:
            best = (f, version)
    return best


def read_wheel_metadata(wheel: bytes) -> dict[str, Any]:
    """Name, version, summary, description, keywords, author, project URLs and ``aleph`` entry points.

    They are read from the wheel's ``.dist-info``; nothing is extracted or imported.
    """
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        infos = [n for n in archive.namelist() if n.count("/") == 1 and n.split("/")[0].endswith(".dist-info")]
        meta_name = next((n for n in infos if n.endswith("/METADATA")), None)
        if meta_name is None:
            raise IndexError_("the wheel has no .dist-info/METADATA")
        if archive.getinfo(meta_name).file_size > 4 * 1024 * 1024:
            raise IndexError_("the wheel's METADATA is larger than 4 MiB")
        meta = email.parser.Parser().parsestr(archive.read(meta_name).decode("utf-8", errors="replace"))
        eps_name = next((n for n in infos if n.endswith("/entry_points.txt")), None)
        entry_points: list[str] = []
        if eps_name is not None and archive.getinfo(eps_name).file_size < 1024 * 1024:
            parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
            parser.optionxform = str  # type: ignore[assignment,method-assign]
            parser.read_string(archive.read(eps_name).decode("utf-8", errors="replace"))
            if parser.has_section("aleph"):
                entry_points = sorted(parser.options("aleph"))
    urls: dict[str, str] = {}
    for item in meta.get_all("Project-URL") or []:
        label, _, link = item.partition(",")
        urls[label.strip()] = link.strip()
    if meta.get("Home-page"):
        urls.setdefault("Homepage", str(meta["Home-page"]))
    body = meta.get_payload()
    description = str(meta.get("Description") or (body if isinstance(body, str) else ""))
    return {
        "name": canonicalize_name(str(meta["Name"])),
        "version": str(meta["Version"]),
        "summary": str(meta.get("Summary") or ""),
        "description": description[:100_000],
        "keywords": str(meta.get("Keywords") or ""),
        "author": str(meta.get("Author") or meta.get("Author-email") or ""),
        "project_urls": urls,
        "entry_points": entry_points,
    }


async def sync_catalog(
    client: IndexClient, config: HubConfig
) -> tuple[list[dict[str, Any]], list[dict[str, str]], bool]:
    """(entries, failures, complete): every Aleph plugin among the index's projects matching the prefixes.

    ``complete`` is False when the project listing failed or was cut at ``max_projects``: entries
    not seen this time are then kept rather than dropped.
    """
    failed: list[dict[str, str]] = []
    try:
        projects = await client.projects()
    except IndexError_ as exc:
        return [], [{"project": "*", "error": str(exc)}], False
    prefixes = tuple(canonicalize_name(p.rstrip("-")) + "-" for p in config.catalog_prefixes)
    candidates = [p for p in projects if p.startswith(prefixes) and p != "aleph-core"]
    complete = len(candidates) <= config.max_projects
    host = urlsplit(config.index_url).netloc
    entries = []
    for project in candidates[: config.max_projects]:
        try:
            found = newest_wheel(await client.files(project))
            if found is None:
                failed.append({"project": project, "error": "no installable wheel (sdists are never installed)"})
                continue
            file, _ = found
            meta = read_wheel_metadata(await client.download(file, config.max_wheel_bytes))
        except (IndexError_, zipfile.BadZipFile, KeyError, ValueError) as exc:
            failed.append({"project": project, "error": str(exc)})
            continue
        if not meta["entry_points"]:
            continue  # a distribution without an aleph entry point is not a plugin
        entries.append(
            {
                **meta,
                "id": f"{host}:{meta['name']}",
                "wheel_url": file.url,
                "wheel_sha256": file.sha256,
                "provenance_url": file.provenance,
            }
        )
    return entries, failed, complete
