"""media_understand: facts of images, audio and video; a plugged-in describer; never an invented caption."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from aleph_media import MediaItem

import aleph
from aleph import ExecutionFailed

from .conftest import Call, caller, make_runtime
from .makers import make_speech, make_video, need, text_image

pytestmark = pytest.mark.anyio


def gps_jpeg(path: Path) -> Path:
    from PIL import Image

    image = Image.new("RGB", (64, 48), "red")
    exif = Image.Exif()
    exif[0x010F] = "AlephCam"
    exif.get_ifd(0x8825).update({1: "N", 2: (48.0, 51.0, 29.0), 3: "E", 4: (2.0, 17.0, 40.0)})
    image.save(path, exif=exif)
    return path


class Describer:
    """A stand-in vision/audio model plugged in through the family's hook; it records what it was given."""

    def __init__(self) -> None:
        self.items: list[MediaItem] = []

    @aleph.hookimpl
    def aleph_media_describers(self, register: Any) -> None:
        async def describe(item: MediaItem) -> str:
            self.items.append(item)
            return f"a {item.kind} with {len(item.images)} image(s)"

        register("stand-in", describe)


async def test_an_image_gives_size_colours_and_ocr_text(workspace: Path, call: Call) -> None:
    need("tesseract", "tesseract-ocr")
    text_image("STOP 99").save(workspace / "sign.png")
    out = await call("media_understand", path="sign.png")
    assert (out["kind"], out["media_type"], out["width"], out["height"]) == ("image", "image/png", 900, 200)
    assert out["colours"][0]["hex"] == "#ffffff" and out["colours"][0]["share"] > 0.8
    assert out["ocr_text"] == "STOP 99"


async def test_exif_gps_is_stripped_unless_asked_for(workspace: Path, call: Call) -> None:
    gps_jpeg(workspace / "photo.jpg")
    out = await call("media_understand", path="photo.jpg", ocr=False)
    assert out["exif"]["Make"] == "AlephCam"
    assert out["gps"] == "stripped (ask with include_gps=true)"
    assert "48.8" not in str(out)
    located = await call("media_understand", path="photo.jpg", ocr=False, include_gps=True)
    assert located["gps"]["latitude"] == pytest.approx(48.858056, abs=1e-5)
    assert located["gps"]["longitude"] == pytest.approx(2.294444, abs=1e-5)


async def test_a_video_gives_streams_duration_and_spread_keyframes(workspace: Path, call: Call) -> None:
    make_video(workspace / "clip.mp4", seconds=4)
    out = await call("media_understand", path="clip.mp4")
    assert (out["kind"], out["media_type"]) == ("video", "video/mp4")
    assert out["duration"] == pytest.approx(4.0, abs=0.1)
    codecs = {s["type"]: s["codec"] for s in out["streams"]}
    assert codecs == {"video": "h264", "audio": "aac"}
    video = next(s for s in out["streams"] if s["type"] == "video")
    assert (video["width"], video["height"], video["fps"]) == (320, 240, 10.0)
    assert [k["time"] for k in out["keyframes"]] == [0.0, 1.0, 2.0, 3.0]
    assert all(k["colours"] for k in out["keyframes"])
    assert out["gps"] == "stripped (ask with include_gps=true)" and "location" not in out.get("tags", {})
    located = await call("media_understand", path="clip.mp4", include_gps=True)
    assert located["tags"]["location"].startswith("+48.8584")


async def test_audio_gives_duration_and_format(workspace: Path, call: Call) -> None:
    make_speech(workspace / "talk.wav", "testing one two three")
    out = await call("media_understand", path="talk.wav")
    assert (out["kind"], out["media_type"], out["container"]) == ("audio", "audio/wav", "wav")
    assert out["streams"][0]["sample_rate"] == 22050 and out["duration"] > 0.5
    assert "keyframes" not in out


async def test_without_a_model_the_description_is_missing_never_invented(workspace: Path, call: Call) -> None:
    text_image("x").save(workspace / "a.png")
    out = await call("media_understand", path="a.png", ocr=False)
    assert out["description"] is None
    assert out["missing"] == [
        "description: no vision or audio model is plugged in (a plugin implements aleph_media_describers)"
    ]


async def test_a_plugged_in_describer_gets_the_image_facts_and_question(workspace: Path) -> None:
    from PIL import Image

    gps_jpeg(workspace / "photo.jpg")
    model = Describer()
    async with make_runtime(workspace, plugins=(model,)) as rt:
        out = await caller(rt)("media_understand", path="photo.jpg", question="what colour?", ocr=False)
    assert out["description"] == "a image with 1 image(s)" and out["described_by"] == "stand-in"
    assert "missing" not in out
    (item,) = model.items
    assert (item.kind, item.media_type, item.path, item.prompt) == ("image", "image/jpeg", "photo.jpg", "what colour?")
    with Image.open(io.BytesIO(item.images[0])) as sent:
        assert (sent.format, sent.size) == ("PNG", (64, 48))
        assert "exif" not in sent.info  # GPS never leaves through the copy sent to a model
    assert item.facts["width"] == 64 and item.facts["gps"] == "stripped (ask with include_gps=true)"


async def test_a_describer_gets_keyframes_and_the_sound_of_a_video(workspace: Path) -> None:
    make_video(workspace / "clip.mp4", seconds=3)
    model = Describer()
    async with make_runtime(workspace, plugins=(model,)) as rt:
        out = await caller(rt)("media_understand", path="clip.mp4")
    assert out["description"] == "a video with 3 image(s)"
    (item,) = model.items
    assert all(png.startswith(b"\x89PNG") for png in item.images)
    assert item.audio is not None and len(item.audio) == pytest.approx(3 * 16_000 * 2, rel=0.05)


async def test_a_failing_describer_leaves_the_facts_and_names_the_failure(workspace: Path) -> None:
    class Broken:
        @aleph.hookimpl
        def aleph_media_describers(self, register: Any) -> None:
            async def describe(item: MediaItem) -> str:
                raise ConnectionError("model server down")

            register("flaky", describe)

    text_image("x").save(workspace / "a.png")
    async with make_runtime(workspace, plugins=(Broken(),)) as rt:
        out = await caller(rt)("media_understand", path="a.png", ocr=False)
    assert out["width"] == 900 and out["description"] is None
    assert out["missing"] == ["description: the describer 'flaky' failed: ConnectionError: model server down"]


async def test_describe_false_skips_the_model(workspace: Path) -> None:
    text_image("x").save(workspace / "a.png")
    model = Describer()
    async with make_runtime(workspace, plugins=(model,)) as rt:
        out = await caller(rt)("media_understand", path="a.png", ocr=False, describe=False)
    assert model.items == [] and out["description"] is None
    assert out["missing"] == ["description: not asked for (describe=false)"]


async def test_a_text_file_is_not_media(workspace: Path, call: Call) -> None:
    need("ffprobe", "ffmpeg")
    (workspace / "notes.txt").write_text("just words\n" * 50)
    with pytest.raises(ExecutionFailed, match=r"'notes.txt' is not an audio or video file ffmpeg can read"):
        await call("media_understand", path="notes.txt")
