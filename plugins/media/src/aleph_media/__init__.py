"""aleph-media: documents, images, audio and video in; content-addressed artifacts out.

Tools: ``document_extract``, ``media_understand``, ``audio_transcribe``, ``artifact_publish``,
``artifact_list``, ``artifact_unpublish``. A host plugs in a vision/audio model or a speech engine
through the hooks in :mod:`aleph_media.hookspec`; these are the values those engines receive.
"""

from aleph_media._types import MediaItem, SpeechAudio

__all__ = ["MediaItem", "SpeechAudio"]
