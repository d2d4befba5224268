"""PEP 740 attestations: where the index offers a provenance object for a file, check it.

The in-toto statement inside every attestation must name the file and its SHA-256; a provenance whose
statements name another file or digest means the artifact is not what was attested, and the install
is refused. The Sigstore signature over the statement is verified with ``pypi-attestations`` when it
is installed (``pip install aleph-hub[attestations]``); otherwise the result says the signature was
not checked, and why.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlsplit

from aleph_hub._index import IndexClient, IndexError_
from aleph_hub._pip import LockEntry

__all__ = ["check_attestation"]


def _statements(provenance: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(bundle publisher, attestation, decoded statement) for every attestation of the provenance."""
    out = []
    for bundle in provenance.get("attestation_bundles") or []:
        for att in bundle.get("attestations") or []:
            try:
                raw = base64.b64decode(att["envelope"]["statement"])
                statement = json.loads(raw)
            except (KeyError, TypeError, ValueError):
                continue
            if isinstance(statement, dict):
                out.append((bundle.get("publisher") or {}, att, statement))
    return out


def _names_file(statement: dict[str, Any], filename: str, sha256: str) -> bool:
    for subject in statement.get("subject") or []:
        if isinstance(subject, dict) and subject.get("name") == filename:
            if (subject.get("digest") or {}).get("sha256", "").lower() == sha256.lower():
                return True
    return False


def _verify_signature(publisher: dict[str, Any], att: dict[str, Any], filename: str, sha256: str) -> str:
    try:
        from pydantic import TypeAdapter
        from pypi_attestations import Attestation, Distribution, Publisher  # type: ignore[import-not-found]
    except ImportError:
        return "signature not checked: pypi-attestations not available (pip install aleph-hub[attestations])"
    try:
        who = TypeAdapter(Publisher).validate_python(publisher)
        Attestation.model_validate(att).verify(who, Distribution(name=filename, digest=sha256))
    except Exception as exc:  # the library's errors, and a trust root it cannot reach, alike
        return f"signature verification failed: {type(exc).__name__}: {exc}"
    return "signature verified"


async def check_attestation(client: IndexClient, entry: LockEntry) -> dict[str, Any]:
    """``{"status": "absent" | "verified" | "subject-verified" | "mismatch" | "unavailable", "detail"}``."""
    filename = urlsplit(entry.url).path.rsplit("/", 1)[-1]
    try:
        files = await client.files(entry.name)
    except IndexError_ as exc:
        return {"status": "unavailable", "detail": str(exc)}
    match = next((f for f in files if f.filename == filename), None)
    if match is None or not match.provenance:
        return {"status": "absent", "detail": "the index offers no PEP 740 provenance for this file"}
    try:
        provenance = await client.provenance(match)
    except IndexError_ as exc:
        return {"status": "unavailable", "detail": str(exc)}
    statements = _statements(provenance or {})
    if not statements:
        return {"status": "mismatch", "detail": "the provenance holds no readable attestation"}
    wrong = [s for _, _, s in statements if not _names_file(s, filename, entry.sha256)]
    if wrong:
        return {"status": "mismatch", "detail": f"an attestation does not name {filename} with SHA-256 {entry.sha256}"}
    signature = _verify_signature(statements[0][0], statements[0][1], filename, entry.sha256)
    if signature.startswith("signature verification failed"):
        return {"status": "mismatch", "detail": signature}
    status = "verified" if signature == "signature verified" else "subject-verified"
    return {"status": status, "detail": signature, "attestations": len(statements)}
