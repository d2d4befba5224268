"""Hostile and broken input: each a clear error naming what was wrong, nothing written, nothing escaped."""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib
from pathlib import Path

import pytest

import aleph
from aleph import ExecutionFailed, PermissionDenied, ValidationFailed

from .conftest import Call, caller, make_runtime
from .makers import make_docx, make_pdf, make_xlsx, need

pytestmark = pytest.mark.anyio


def files_of(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.lstat().st_size
        for p in root.rglob("*")
        if ".aleph-data" not in p.parts and p.name != "aleph.toml"
    }


def bomb_zip(path: Path, parts: dict[str, bytes], bomb_member: str, expanded: int) -> Path:
    """A valid-looking OOXML package whose ``bomb_member`` is ``expanded`` bytes of zeros (compresses ~1000x)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in parts.items():
            z.writestr(name, data)
        with z.open(bomb_member, "w", force_zip64=True) as member:
            block = b"\0" * (1 << 20)
            for _ in range(expanded >> 20):
                member.write(block)
    return path


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` pixels but holds almost no data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


async def test_a_corrupt_pdf_is_a_clear_error(workspace: Path, call: Call) -> None:
    good = make_pdf(workspace / "good.pdf", ["text"]).read_bytes()
    (workspace / "cut.pdf").write_bytes(good[:200])
    (workspace / "noise.pdf").write_bytes(b"%PDF-1.7\n" + os.urandom(4000))
    for name in ("cut.pdf", "noise.pdf"):
        with pytest.raises(ExecutionFailed, match=rf"'{name}' is not a readable PDF"):
            await call("document_extract", path=name)


async def test_a_corrupt_image_is_a_clear_error(workspace: Path, call: Call) -> None:
    (workspace / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(300))
    with pytest.raises(ExecutionFailed, match=r"'broken.png' is"):
        await call("document_extract", path="broken.png")
    with pytest.raises(ExecutionFailed, match=r"'broken.png' is"):
        await call("media_understand", path="broken.png")


async def test_an_image_declaring_too_many_pixels_is_refused_undecoded(workspace: Path, call: Call) -> None:
    (workspace / "bomb.png").write_bytes(png_claiming(60_000, 60_000))
    for tool in ("document_extract", "media_understand"):
        with pytest.raises(ExecutionFailed, match=r"'bomb.png'.*(pixel|decompression bomb)"):
            await call(tool, path="bomb.png")


@pytest.mark.parametrize("kind", ["docx", "xlsx"])
async def test_a_zip_bomb_is_refused_before_parsing(workspace: Path, call: Call, kind: str) -> None:
    real = workspace / f"real.{kind}"
    (make_docx if kind == "docx" else make_xlsx)(real)
    with zipfile.ZipFile(real) as z:
        parts = {i.filename: z.read(i.filename) for i in z.infolist()}
    victim = "word/document.xml" if kind == "docx" else "xl/worksheets/sheet1.xml"
    del parts[victim]
    bomb_zip(workspace / f"bomb.{kind}", parts, victim, 64 << 20)
    assert (workspace / f"bomb.{kind}").stat().st_size < 1 << 20
    with pytest.raises(ExecutionFailed, match=rf"'bomb.{kind}' looks like a zip bomb.*refused unread"):
        await call("document_extract", path=f"bomb.{kind}")


async def test_the_total_uncompressed_size_is_checked_before_parsing(workspace: Path) -> None:
    make_docx(workspace / "r.docx")
    async with make_runtime(workspace, "[media]\nmax_uncompressed_bytes = 4096\n") as rt:
        with pytest.raises(ExecutionFailed, match=r"would expand to [\d,]+ bytes \(limit 4,096"):
            await caller(rt)("document_extract", path="r.docx")


async def test_a_damaged_office_document_is_a_clear_error(workspace: Path, call: Call) -> None:
    with zipfile.ZipFile(workspace / "bad.docx", "w") as z:
        z.writestr("[Content_Types].xml", "<Types")
        z.writestr("word/document.xml", "<w:document>")
    with pytest.raises(ExecutionFailed, match=r"'bad.docx'"):
        await call("document_extract", path="bad.docx")
    (workspace / "plain.zip").write_bytes(_zip_of({"a.txt": b"hello"}))
    with pytest.raises(ExecutionFailed, match=r"ZIP archive but not a DOCX, XLSX, PPTX or EPUB"):
        await call("document_extract", path="plain.zip")


def _zip_of(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


async def test_binary_that_is_no_document_is_refused_by_name(workspace: Path, call: Call) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02" * 1000)
    with pytest.raises(ExecutionFailed, match=r"'blob.bin' is not a document format"):
        await call("document_extract", path="blob.bin")


async def test_wrong_audio_format_is_a_clear_error(workspace: Path, call: Call) -> None:
    need("ffprobe", "ffmpeg")
    (workspace / "song.mp3").write_bytes(os.urandom(5000))
    with pytest.raises(ExecutionFailed, match=r"'song.mp3' is not an audio or video file ffmpeg can read"):
        await call("audio_transcribe", path="song.mp3")
    make_pdf(workspace / "doc.wav", ["not sound"])
    with pytest.raises(ExecutionFailed, match=r"'doc.wav' is not an audio or video file"):
        await call("audio_transcribe", path="doc.wav")


async def test_a_playlist_cannot_make_ffmpeg_read_outside_the_workspace(
    workspace: Path, call: Call, tmp_path: Path
) -> None:
    need("ffprobe", "ffmpeg")
    outside = tmp_path / "outside.wav"
    outside.write_bytes(b"RIFF" + os.urandom(100))
    (workspace / "list.m3u8").write_text(f"#EXTM3U\n#EXTINF:1,\n{outside}\n")
    (workspace / "cat.txt").write_text(f"ffconcat version 1.0\nfile '{outside}'\n")
    for name in ("list.m3u8", "cat.txt"):
        with pytest.raises(ExecutionFailed, match=r"not an audio or video file"):
            await call("media_understand", path=name)


async def test_bad_input_writes_nothing_to_the_workspace(workspace: Path, call: Call) -> None:
    (workspace / "noise.pdf").write_bytes(b"%PDF-1.4\n" + os.urandom(2000))
    (workspace / "noise.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(2000))
    before = files_of(workspace)
    for tool, path in [("document_extract", "noise.pdf"), ("document_extract", "noise.png")]:
        with pytest.raises(ExecutionFailed):
            await call(tool, path=path)
    assert files_of(workspace) == before


# -- confinement ---------------------------------------------------------------------------------


async def test_paths_outside_the_workspace_are_refused(workspace: Path, call: Call, tmp_path: Path) -> None:
    secret = make_pdf(tmp_path / "secret.pdf", ["secret"])
    os.symlink(secret, workspace / "link.pdf")
    os.symlink("..", workspace / "up")
    for tool in ("document_extract", "media_understand", "audio_transcribe", "artifact_publish"):
        for path in ("link.pdf", "../secret.pdf", str(secret), "up/secret.pdf"):
            with pytest.raises(PermissionDenied):
                await call(tool, path=path)


async def test_a_symlink_inside_the_workspace_is_followed(workspace: Path, call: Call) -> None:
    (workspace / "docs").mkdir()
    make_pdf(workspace / "docs" / "real.pdf", ["inside"])
    os.symlink("docs/real.pdf", workspace / "alias.pdf")
    out = await call("document_extract", path="alias.pdf")
    assert out["path"] == "docs/real.pdf" and out["pages"][0]["text"] == "inside"


async def test_special_files_and_bad_paths_are_refused(workspace: Path, call: Call) -> None:
    os.mkfifo(workspace / "pipe")
    (workspace / "dir").mkdir()
    with pytest.raises(ExecutionFailed, match=r"not a regular file"):
        await call("document_extract", path="pipe")
    with pytest.raises(ExecutionFailed, match=r"is a directory"):
        await call("document_extract", path="dir")
    with pytest.raises(ExecutionFailed, match=r"does not exist"):
        await call("document_extract", path="missing.pdf")
    with pytest.raises(ValidationFailed, match=r"NUL"):
        await call("document_extract", path="a\x00b.pdf")


async def test_markup_past_the_markup_limit_is_refused_before_parsing(workspace: Path) -> None:
    (workspace / "page.html").write_text("<p>" + "x" * 5000 + "</p>")
    make_docx(workspace / "r.docx")
    async with make_runtime(workspace, "[media]\nmax_markup_bytes = 4096\n") as rt:
        call = caller(rt)
        with pytest.raises(ExecutionFailed, match=r"'page.html' is 5,007 bytes, more than .*max_markup_bytes"):
            await call("document_extract", path="page.html")
        with pytest.raises(ExecutionFailed, match=r"'r.docx' holds [\d,]+ bytes of XML, more than .*max_markup_bytes"):
            await call("document_extract", path="r.docx")


async def test_files_over_the_input_limit_are_refused_unread(workspace: Path) -> None:
    (workspace / "big.txt").write_bytes(b"x" * 5000)
    async with make_runtime(workspace, "[media]\nmax_input_bytes = 4096\n") as rt:
        with pytest.raises(ExecutionFailed, match=r"more than the 4,096-byte limit"):
            await caller(rt)("document_extract", path="big.txt")


async def test_unknown_config_keys_fail_at_load(workspace: Path) -> None:
    with pytest.raises(aleph.PluginError, match=r"media\.max_pagez: unknown key"):
        async with make_runtime(workspace, "[media]\nmax_pagez = 3\n"):
            pass
