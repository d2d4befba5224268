"""The node's half of ``node_file``: chunked, resumable, sha256-checked transfers inside its workspace.

Partial uploads live under the node's data directory, one folder per principal (the principal the center
sent; the name is a hash of it), so a transfer is owned by whoever started it: another principal asking to
resume it starts from nothing, exactly as if it did not exist. A finished upload is checked against the
SHA-256 the center announced before it is moved into the workspace; a mismatch discards it.
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import threading
from pathlib import Path
from typing import Any

from aleph_cluster._confine import ConfinedDir, ConfinementError, check_relative

__all__ = ["MAX_CHUNK", "ConfinementError", "TransferError", "Transfers", "file_sha256", "transfer_id"]

MAX_CHUNK = 64 * 1024 * 1024
_MAX_UPLOADS = 1024
MAX_AHEAD = 128 * 1024 * 1024
"""How far ahead of the bytes held in order an early chunk may be (the center keeps a few in flight)."""
_SHA = re.compile(r"[0-9a-f]{64}")


class TransferError(ValueError):
    """A transfer request that cannot be honoured; the message names the path and the reason."""


def transfer_id(principal: str, path: str, size: int, sha256: str) -> str:
    """The id of an upload: the same principal sending the same content to the same path resumes it."""
    return hashlib.sha256(f"{principal}\x00{path}\x00{size}\x00{sha256}".encode()).hexdigest()[:32]


def file_sha256(fd: int) -> str:
    """SHA-256 of a whole file from its descriptor (read from offset 0; the offset is left at the end)."""
    h = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while block := os.read(fd, 4 << 20):
        h.update(block)
    return h.hexdigest()


class _Upload:
    """An upload in progress: bytes on disk up to ``held``, chunks that arrived early, the running hash."""

    def __init__(self, held: int, fresh: bool) -> None:
        self.lock = threading.Lock()
        self.held = held
        self.early: dict[int, bytes] = {}
        # The whole-file SHA-256 kept up to date as bytes land in order, so the final check needs no
        # second pass over the file; a resumed upload (or one from before a restart) is read at the end.
        self.hasher: Any = hashlib.sha256() if fresh else None


class Transfers:
    """Uploads into, and downloads from, one node's workspace."""

    def __init__(self, workspace: ConfinedDir, partial_dir: Path, max_bytes: int) -> None:
        self.workspace = workspace
        self.partial_dir = Path(partial_dir)
        self.max_bytes = max_bytes
        self._uploads: collections.OrderedDict[Path, _Upload] = collections.OrderedDict()
        self._lock = threading.Lock()

    def _owner_dir(self, principal: str) -> Path:
        # One folder per principal: the single place a transfer is filtered by its owner.
        folder = self.partial_dir / hashlib.sha256(principal.encode()).hexdigest()[:32]
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return folder

    def _part(self, principal: str, tid: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{32}", tid):
            raise TransferError("transfer id must be 32 hex characters")
        return self._owner_dir(principal) / f"{tid}.part"

    def _upload(self, part: Path, *, fresh: bool = False) -> _Upload:
        with self._lock:
            upload = None if fresh else self._uploads.get(part)
            if upload is None:
                upload = _Upload(0 if fresh else part.stat().st_size, fresh)
                self._uploads[part] = upload
                while len(self._uploads) > _MAX_UPLOADS:
                    self._uploads.popitem(last=False)
            return upload

    # -- push: center -> node -------------------------------------------------------------------

    def put_begin(self, principal: str, body: dict[str, Any]) -> dict[str, Any]:
        """Start or resume an upload; returns ``{"transfer", "offset"}`` (bytes already held)."""
        path, size, sha = body.get("path"), body.get("size"), body.get("sha256")
        if not isinstance(path, str):
            raise TransferError("path must be a string")
        check_relative(path)
        if not isinstance(size, int) or size < 0:
            raise TransferError("size must be a non-negative integer")
        if size > self.max_bytes:
            raise TransferError(f"{path}: {size} bytes is over this node's limit of {self.max_bytes} bytes")
        if not isinstance(sha, str) or not _SHA.fullmatch(sha):
            raise TransferError("sha256 must be 64 lowercase hex characters")
        if not body.get("overwrite") and self.workspace.size_of(path) is not None:
            raise TransferError(f"{path} exists on the node; pass overwrite=true to replace it")
        tid = transfer_id(principal, path, size, sha)
        part = self._part(principal, tid)
        offset = part.stat().st_size if part.exists() and body.get("resume", True) else 0
        if offset > size:
            offset = 0
        if offset == 0:
            part.write_bytes(b"")
        self._upload(part, fresh=offset == 0).early.clear()
        return {"transfer": tid, "offset": offset}

    def put_chunk(self, principal: str, body: dict[str, Any], data: bytes) -> dict[str, Any]:
        """Take one chunk; its SHA-256 must match what the signed request says.

        Chunks may arrive out of order (the center keeps a few in flight): one that comes early waits in
        memory (at most ``MAX_AHEAD`` bytes ahead) and the file is always written in order, so it never
        has holes and an interrupted upload resumes from its size. Returns the bytes held in order.
        """
        tid, offset, chunk_sha = body.get("transfer"), body.get("offset"), body.get("chunk_sha256")
        if not isinstance(data, bytes) or len(data) > MAX_CHUNK:
            raise TransferError(f"a chunk is bytes of at most {MAX_CHUNK}")
        if not isinstance(tid, str) or not isinstance(offset, int) or offset < 0:
            raise TransferError("transfer and offset are required")
        if hashlib.sha256(data).hexdigest() != chunk_sha:
            raise TransferError(f"chunk at offset {offset} does not match its signed sha256 (corrupted in transit)")
        part = self._part(principal, tid)
        if not part.exists():
            raise TransferError(f"no upload {tid} (start it with put_begin)")
        upload = self._upload(part)
        with upload.lock:
            if offset < upload.held or offset in upload.early:
                raise TransferError(f"chunk at offset {offset} was already received")
            if offset + len(data) > self.max_bytes:
                raise TransferError(f"upload exceeds this node's limit of {self.max_bytes} bytes")
            if offset - upload.held > MAX_AHEAD:
                raise TransferError(f"chunk at offset {offset} is too far ahead of the {upload.held} bytes held")
            upload.early[offset] = data
            with open(part, "ab") as f:
                while upload.held in upload.early:
                    block = upload.early.pop(upload.held)
                    f.write(block)
                    if upload.hasher is not None:
                        upload.hasher.update(block)
                    upload.held += len(block)
            return {"offset": upload.held}

    def put_end(self, principal: str, body: dict[str, Any]) -> dict[str, Any]:
        """Check the whole upload's size and SHA-256, then move it into the workspace atomically."""
        path, size, sha, tid = body.get("path"), body.get("size"), body.get("sha256"), body.get("transfer")
        if not isinstance(path, str) or not isinstance(tid, str) or not isinstance(size, int):
            raise TransferError("path, size and transfer are required")
        if tid != transfer_id(principal, path, size, str(sha)):
            raise TransferError("transfer id does not match path, size and sha256")
        part = self._part(principal, tid)
        if not part.exists():
            raise TransferError(f"no upload {tid}")
        have = part.stat().st_size
        with self._lock:
            upload = self._uploads.pop(part, None)
        if upload is not None and upload.hasher is not None and upload.held == have and not upload.early:
            got = upload.hasher.hexdigest()
        else:
            fd = os.open(part, os.O_RDONLY | os.O_CLOEXEC)
            try:
                got = file_sha256(fd)
            finally:
                os.close(fd)
        if have != size or got != sha:
            part.unlink()
            raise TransferError(f"{path}: received {have} bytes with sha256 {got}, expected {size} bytes {sha}")
        try:
            self.workspace.install(path, part, overwrite=bool(body.get("overwrite")))
        finally:
            part.unlink(missing_ok=True)
        return {"path": path, "size": size, "sha256": got}

    # -- pull: node -> center -------------------------------------------------------------------

    def get_begin(self, body: dict[str, Any]) -> dict[str, Any]:
        """Size and SHA-256 of a workspace file the center is about to read."""
        path = body.get("path")
        if not isinstance(path, str):
            raise TransferError("path must be a string")
        fd, size = self.workspace.open_read(path)
        try:
            if size > self.max_bytes:
                raise TransferError(f"{path}: {size} bytes is over this node's limit of {self.max_bytes} bytes")
            sha = file_sha256(fd)
        finally:
            os.close(fd)
        return {"path": path, "size": size, "sha256": sha}

    def get_chunk(self, body: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """One chunk of a workspace file at ``offset`` (at most ``length`` bytes) and its SHA-256."""
        path, offset, length = body.get("path"), body.get("offset"), body.get("length")
        if not isinstance(path, str) or not isinstance(offset, int) or not isinstance(length, int):
            raise TransferError("path, offset and length are required")
        if offset < 0 or not 0 < length <= MAX_CHUNK:
            raise TransferError(f"offset must be >= 0 and length 1..{MAX_CHUNK}")
        fd, size = self.workspace.open_read(path)
        try:
            data = os.pread(fd, length, offset)
        finally:
            os.close(fd)
        return {"offset": offset, "chunk_sha256": hashlib.sha256(data).hexdigest(), "size": size}, data
