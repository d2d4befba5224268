"""audio_transcribe on speech espeak-ng makes: timestamps, ranges, limits, and a plugged-in engine."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from aleph_media import SpeechAudio

import aleph
from aleph import ExecutionFailed

from .conftest import Call, caller, make_runtime
from .makers import make_speech, make_video, need

pytestmark = pytest.mark.anyio


def silence(path: Path, seconds: float) -> Path:
    ffmpeg = need("ffmpeg", "ffmpeg")
    subprocess.run(
        [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "anullsrc=r=16000:cl=mono", "-t", str(seconds), str(path)],
        check=True,
    )
    return path


class Engine:
    """A stand-in speech engine plugged in through the family's hook; it reports the audio it got."""

    def __init__(self, answer: Any = None) -> None:
        self.audio: list[SpeechAudio] = []
        self.answer = answer

    @aleph.hookimpl
    def aleph_media_speech_engines(self, register: Any) -> None:
        async def transcribe(audio: SpeechAudio) -> Any:
            self.audio.append(audio)
            if self.answer is not None:
                return self.answer
            seconds = len(audio.pcm) / (2 * audio.sample_rate)
            return [{"start": 0.0, "end": round(seconds, 2), "text": f"{seconds:.1f} seconds of {audio.language}"}]

        register("stand-in", transcribe)


async def test_speech_is_found_where_it_is_spoken(workspace: Path, call: Call) -> None:
    make_speech(workspace / "talk.wav", "hello world, this is a test of speech", lead_silence=1.5)
    out = await call("audio_transcribe", path="talk.wav", words=True)
    assert out["engine"] == "pocketsphinx" and out["language"] == "en"
    assert out["text"] and out["segments"]
    first = out["segments"][0]
    assert first["start"] >= 1.2  # nothing is heard in the leading silence
    assert out["segments"][-1]["end"] <= out["duration"] + 0.05
    times = [t for seg in out["segments"] for w in seg["words"] for t in (w["start"], w["end"])]
    assert times == sorted(times)
    assert out["text"] == " ".join(s["text"] for s in out["segments"])


async def test_silence_gives_an_empty_transcript(workspace: Path, call: Call) -> None:
    silence(workspace / "quiet.wav", 2)
    out = await call("audio_transcribe", path="quiet.wav")
    assert (out["text"], out["segments"]) == ("", [])
    assert out["duration"] == pytest.approx(2.0, abs=0.01)


async def test_a_range_transcribes_only_that_span_with_file_times(workspace: Path, call: Call) -> None:
    make_speech(workspace / "talk.wav", "one more time with feeling please", lead_silence=2.0)
    out = await call("audio_transcribe", path="talk.wav", start=1.0, duration=2.5)
    assert out["start"] == 1.0 and out["duration"] == pytest.approx(2.5, abs=0.01)
    assert all(1.0 <= s["start"] <= s["end"] <= 3.55 for s in out["segments"])


async def test_a_start_past_the_end_is_refused(workspace: Path, call: Call) -> None:
    silence(workspace / "quiet.wav", 1)
    with pytest.raises(ExecutionFailed, match=r"start=5 is past the end of 'quiet.wav'"):
        await call("audio_transcribe", path="quiet.wav", start=5)


async def test_video_without_sound_has_no_audio_stream(workspace: Path, call: Call) -> None:
    ffmpeg = need("ffmpeg", "ffmpeg")
    subprocess.run(
        [ffmpeg, "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=1:size=64x64", str(workspace / "m.mp4")],
        check=True,
    )
    with pytest.raises(ExecutionFailed, match=r"'m.mp4' has no audio stream"):
        await call("audio_transcribe", path="m.mp4")


async def test_a_language_the_builtin_engine_lacks_is_refused(workspace: Path, call: Call) -> None:
    silence(workspace / "quiet.wav", 1)
    with pytest.raises(ExecutionFailed, match=r"'de' not available.*English model only"):
        await call("audio_transcribe", path="quiet.wav", language="de")


async def test_audio_longer_than_the_limit_is_refused_with_how_to_split(workspace: Path) -> None:
    silence(workspace / "long.wav", 4)
    async with make_runtime(workspace, "[media]\nmax_audio_seconds = 2\n") as rt:
        call = caller(rt)
        with pytest.raises(ExecutionFailed, match=r"more than the 2-second limit.*start, duration"):
            await call("audio_transcribe", path="long.wav")
        out = await call("audio_transcribe", path="long.wav", start=1, duration=2)
        assert out["duration"] == pytest.approx(2.0, abs=0.01)


async def test_a_plugged_in_engine_gets_16k_mono_pcm_and_its_times_are_offset(workspace: Path) -> None:
    make_video(workspace / "clip.mp4", seconds=3)
    engine = Engine()
    async with make_runtime(workspace, plugins=(engine,)) as rt:
        out = await caller(rt)("audio_transcribe", path="clip.mp4", start=1, language="de")
    (audio,) = engine.audio
    assert audio.sample_rate == 16_000 and audio.language == "de"
    assert len(audio.pcm) == pytest.approx(2 * 16_000 * 2, rel=0.02)
    assert out["engine"] == "stand-in"
    assert out["segments"] == [{"start": 1.0, "end": 3.0, "text": "2.0 seconds of de"}]


async def test_an_engine_answering_nonsense_is_a_clear_error(workspace: Path) -> None:
    silence(workspace / "quiet.wav", 1)
    async with make_runtime(workspace, plugins=(Engine(answer=[{"text": "no times"}]),)) as rt:
        with pytest.raises(ExecutionFailed, match=r"'stand-in' returned a segment without start, end and text"):
            await caller(rt)("audio_transcribe", path="quiet.wav")


async def test_a_configured_engine_nobody_registered_is_named(workspace: Path) -> None:
    silence(workspace / "quiet.wav", 1)
    async with make_runtime(workspace, '[media]\nspeech_engine = "whisper"\n') as rt:
        with pytest.raises(ExecutionFailed, match=r"speech engine 'whisper'.*not available"):
            await caller(rt)("audio_transcribe", path="quiet.wav")
