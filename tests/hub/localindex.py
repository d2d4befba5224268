"""A PEP 503/691 package index on loopback and wheels built from plugins/_template, for tests and bench.

Nothing here reaches a real index. The index is a small threaded HTTP server on 127.0.0.1 serving
the JSON simple API (PEP 691) or HTML (PEP 503) by the Accept header, with SHA-256 hashes, PEP 658
metadata files and, where asked, PEP 740 provenance objects. No pytest here: bench/bench_hub.py uses it.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "plugins" / "_template"


def build_plugin_wheel(
    out: Path,
    family: str,
    version: str = "1.0.0",
    description: str = "",
    urls: dict[str, str] | None = None,
    requires: tuple[str, ...] = (),
) -> Path:
    """A wheel of plugins/_template renamed to ``aleph-<family>`` (tool ``<family>_echo``), built by pip."""
    src = out / f"src-{family}-{version}"
    shutil.copytree(TEMPLATE, src, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    (src / "src" / "aleph_template").rename(src / "src" / f"aleph_{family}")
    for path in [src / "pyproject.toml", *(src / "src" / f"aleph_{family}").glob("*.py")]:
        text = path.read_text()
        text = text.replace("aleph-template", f"aleph-{family}").replace("aleph_template", f"aleph_{family}")
        text = text.replace("template", family).replace("Template", family.capitalize())
        text = text.replace('version = "0.1.0"', f'version = "{version}"')
        if description and path.name == "plugin.py":
            text = text.replace("Replace me with a real tool.", description)
        if path.name == "pyproject.toml":
            if description:
                text = text.replace("One line saying what this tool family does", description)
            if requires:
                extra = "".join(f', "{r}"' for r in requires)
                text = text.replace(
                    'dependencies = ["aleph-core>=0.1,<0.2"]', f'dependencies = ["aleph-core>=0.1,<0.2"{extra}]'
                )
            if urls:
                links = "".join(f'"{k}" = "{v}"\n' for k, v in urls.items())
                text = text.replace(
                    "[project.entry-points.aleph]", f"[project.urls]\n{links}\n[project.entry-points.aleph]"
                )
        path.write_text(text)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "PIP_CONFIG_FILE": "/dev/null", "HOME": str(out)},
    )
    return out / f"aleph_{family}-{version}-py3-none-any.whl"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def provenance_for(filename: str, sha256: str) -> dict[str, Any]:
    """A PEP 740 provenance object whose one attestation's in-toto statement names ``filename``/``sha256``."""
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": filename, "digest": {"sha256": sha256}}],
        "predicateType": "https://docs.pypi.org/attestations/publish/v1",
        "predicate": {},
    }
    envelope = {"statement": base64.b64encode(json.dumps(statement).encode()).decode(), "signature": ""}
    attestation = {"version": 1, "verification_material": {}, "envelope": envelope}
    return {"version": 1, "attestation_bundles": [{"publisher": {"kind": "test"}, "attestations": [attestation]}]}


@dataclass
class LocalIndex:
    """A served index: ``projects`` maps a canonical name to its wheel paths."""

    url: str
    projects: dict[str, list[Path]] = field(default_factory=dict)
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    json_api: bool = True
    """False: answer PEP 503 HTML only, as an older index does."""
    corrupt: set[str] = field(default_factory=set)
    """Wheel file names served with bytes that do not match their hash."""

    def add(self, name: str, wheel: Path, *, provenance: dict[str, Any] | None = None) -> None:
        self.projects.setdefault(name, []).append(wheel)
        if provenance is not None:
            self.provenance[wheel.name] = provenance


def _metadata_of(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return zf.read(name)


def _handler(index: LocalIndex) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _send(self, body: bytes, kind: str, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            index.requests.append(self.path)
            wants_json = index.json_api and "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            files = {w.name: w for ws in index.projects.values() for w in ws}
            if parts == ["simple"]:
                if wants_json:
                    body = {"meta": {"api-version": "1.1"}, "projects": [{"name": n} for n in sorted(index.projects)]}
                    return self._send(json.dumps(body).encode(), "application/vnd.pypi.simple.v1+json")
                links = "".join(f'<a href="/simple/{n}/">{n}</a>\n' for n in sorted(index.projects))
                return self._send(f"<html><body>{links}</body></html>".encode(), "text/html")
            if len(parts) == 2 and parts[0] == "simple" and parts[1] in index.projects:
                entries = []
                for wheel in index.projects[parts[1]]:
                    data = wheel.read_bytes()
                    entry: dict[str, Any] = {
                        "filename": wheel.name,
                        "url": f"/files/{wheel.name}",
                        "hashes": {"sha256": _sha256(data)},
                        "core-metadata": {"sha256": _sha256(_metadata_of(wheel))},
                    }
                    if wheel.name in index.provenance:
                        entry["provenance"] = f"/provenance/{wheel.name}"
                    entries.append(entry)
                if wants_json:
                    body = {"meta": {"api-version": "1.1"}, "name": parts[1], "files": entries}
                    return self._send(json.dumps(body).encode(), "application/vnd.pypi.simple.v1+json")
                links = "".join(
                    f'<a href="{e["url"]}#sha256={e["hashes"]["sha256"]}" data-core-metadata="true">'
                    f"{html.escape(e['filename'])}</a>\n"
                    for e in entries
                )
                return self._send(f"<html><body>{links}</body></html>".encode(), "text/html")
            if len(parts) == 2 and parts[0] == "files":
                name = parts[1]
                if name.endswith(".metadata") and name[: -len(".metadata")] in files:
                    return self._send(_metadata_of(files[name[: -len(".metadata")]]), "application/octet-stream")
                if name in files:
                    data = files[name].read_bytes()
                    return self._send(data[:-1] + b"!" if name in index.corrupt else data, "application/octet-stream")
            if len(parts) == 2 and parts[0] == "provenance" and parts[1] in index.provenance:
                return self._send(json.dumps(index.provenance[parts[1]]).encode(), "application/json")
            if len(parts) == 2 and parts[0] == "docs":  # a project's documentation page
                return self._send(b"<html><body><h1>Greet docs</h1><p>Use greet_echo.</p></body></html>", "text/html")
            self._send(b"not found", "text/plain", 404)

    return Handler


@contextmanager
def serve_index() -> Iterator[LocalIndex]:
    """An empty index on a free loopback port, stopped on exit; callers add wheels to it."""
    index = LocalIndex("")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()


def build_test_wheels(out: Path) -> dict[str, Path]:
    """aleph-greet 1.0.0 and 1.1.0, aleph-shout 1.0.0 (from the template) and aleph-plain (no entry point)."""
    built = {
        "greet-1.0.0": build_plugin_wheel(out, "greet", "1.0.0", "Greet someone by name in a friendly way."),
        "greet-1.1.0": build_plugin_wheel(out, "greet", "1.1.0", "Greet someone by name in a friendly way."),
        "shout": build_plugin_wheel(out, "shout", "1.0.0", "Shout the text back in capital letters."),
    }
    plain = out / "aleph_plain-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(plain, "w") as zf:
        zf.writestr("aleph_plain/__init__.py", "")
        info = "aleph_plain-1.0.0.dist-info"
        zf.writestr(
            f"{info}/METADATA", "Metadata-Version: 2.1\nName: aleph-plain\nVersion: 1.0.0\nSummary: Not a plugin\n"
        )
        zf.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{info}/RECORD", "")
    built["plain"] = plain
    return built
