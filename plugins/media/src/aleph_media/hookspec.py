"""The media family's own hooks: a host plugs in a vision/audio model or a better speech engine.

The plugin module lists this module in ``ALEPH_HOOKSPECS``, so Aleph's plugin manager adds it when
aleph-media loads and a third-party plugin can implement the hooks without core knowing the family::

    @aleph.hookimpl
    def aleph_media_describers(register):
        register("my-vision-model", describe)      # async describe(item: MediaItem) -> str

    @aleph.hookimpl
    def aleph_media_speech_engines(register):
        register("whisper", transcribe)            # async transcribe(audio: SpeechAudio) -> list[dict]
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pluggy

from aleph_media._types import MediaItem, SpeechAudio

__all__ = ["aleph_media_describers", "aleph_media_speech_engines"]

hookspec = pluggy.HookspecMarker("aleph")


@hookspec
def aleph_media_describers(register: Callable[[str, Callable[[MediaItem], Awaitable[str]]], None]) -> None:
    """Called when the media tools are registered, to collect models that describe images, audio and video.

    :param register: call ``register(name, describe)`` once per model. ``await describe(item)`` gets a
        :class:`aleph_media.MediaItem` (the image, or a video's keyframes, as PNG bytes; audio as 16 kHz
        mono PCM; the facts ``media_understand`` measured; the caller's question) and returns the
        model's description as text. It runs at call time and may do I/O. A name registered twice is an
        error. ``[media] describer`` picks one by name; default: the first registered.
    The result is ignored. Without any describer ``media_understand`` lists ``description`` under
    ``missing`` and never writes a caption of its own.
    """


@hookspec
def aleph_media_speech_engines(
    register: Callable[[str, Callable[[SpeechAudio], Awaitable[list[dict[str, Any]]]]], None],
) -> None:
    """Called when the media tools are registered, to collect speech-to-text engines for ``audio_transcribe``.

    :param register: call ``register(name, transcribe)`` once per engine. ``await transcribe(audio)`` gets
        a :class:`aleph_media.SpeechAudio` (16 kHz mono signed 16-bit PCM and the language asked for) and
        returns segments ``{"start": s, "end": s, "text": str, "words"?: [{"word", "start", "end"}]}`` with
        times in seconds from the start of that audio. It runs at call time and may do I/O. A name
        registered twice (or the built-in ``pocketsphinx``) is an error. ``[media] speech_engine`` picks
        one by name; default: the first registered, else the built-in pocketsphinx engine.
    The result is ignored.
    """
