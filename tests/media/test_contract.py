from __future__ import annotations

import math
import struct
import wave
from pathlib import Path

import aleph_media.plugin

import aleph
from aleph.testing import ToolContractTests, isolated_runtime

from .makers import make_pdf, need, text_image

HELLO_SHA256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"


def tone(path: Path, seconds: float = 1.0, rate: int = 16_000) -> None:
    """A 440 Hz tone as 16-bit mono WAV (stdlib only)."""
    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / rate))) for i in range(int(rate * seconds))
    )
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(frames)


class TestMediaContract(ToolContractTests):
    plugin = aleph_media.plugin
    families = ("document", "media", "audio", "artifact")
    no_example = {
        "artifact_unpublish": "requires approval; tests/media/test_artifacts.py approves it through a requester",
    }

    def make_runtime(self, workspace: Path) -> aleph.Aleph:
        need("ffprobe", "ffmpeg")
        make_pdf(workspace / "report.pdf", ["Page one", "Page two"])
        text_image("CONTRACT").save(workspace / "scan.png")
        tone(workspace / "tone.wav")
        (workspace / "note.txt").write_bytes(b"hello")
        return isolated_runtime(workspace, self.plugin, config_toml=self.config_toml)

    def examples(self) -> list[tuple[str, dict[str, object]]]:
        return [
            ("document_extract", {"path": "report.pdf", "pages": "2"}),
            ("media_understand", {"path": "scan.png", "ocr": False}),
            ("audio_transcribe", {"path": "tone.wav"}),
            ("artifact_publish", {"path": "report.pdf"}),
            ("artifact_publish", {"path": "note.txt"}),
            ("artifact_read", {"id": HELLO_SHA256, "content": True}),
            ("artifact_list", {"all_sessions": True}),
        ]
