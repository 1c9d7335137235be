"""Seeing images: which models take them, the auxiliary ``[models] vision`` model for those that
do not, and the requests that ask a model about an image."""

from __future__ import annotations

import base64
import binascii
import logging
import re

from core.config import Config, ConfigError
from core.messages import ImagePart, TextPart, UserMessage
from core.models.base import Model, ModelRequest

__all__ = [
    "DESCRIBE",
    "MAX_IMAGE_BYTES",
    "VISION_SYSTEM",
    "ImageError",
    "accepts_images",
    "build_vision_model",
    "decode_data_url",
    "image_part",
    "media_type_of",
    "vision_request",
]

log = logging.getLogger(__name__)

# What providers take in one image (Anthropic: 5 MB; OpenAI: 20 MB); larger ones are refused before sending.
MAX_IMAGE_BYTES = 5_000_000
VISION_SYSTEM = "You look at images for a coding agent that cannot see them. Answer factually; never guess at text you cannot read."
DESCRIBE = (
    "Describe this image thoroughly for someone who cannot see it: what it shows and how it is laid out, "
    "then every piece of text in it, verbatim (code, error messages, labels, numbers)."
)
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^,;]*)*?);base64,(?P<data>.*)", re.DOTALL)


class ImageError(ValueError):
    """Bytes or a URL that are not an image a model can take; the message says why."""


def accepts_images(config: Config, label: str) -> bool:
    """Whether the model ``label`` ("provider:model") takes images, as its provider's profile says."""
    profile = config.profile(label)
    return bool(profile and profile.images)


def build_vision_model(config: Config) -> tuple[Model | None, str | None]:
    """The ``[models] vision`` model, and why it cannot be used when it is set but does not resolve
    (None, None when unset). A configured vision model is taken to see images, whatever its
    provider's ``images`` setting says."""
    spec = config.models.vision
    if not spec:
        return None, None
    from core.models import build_model

    try:
        return build_model(config.model_copy(update={"model": spec, "fallback_models": []})), None
    except ConfigError:
        known = ", ".join(sorted(config.providers)) or "none"
        problem = (
            f"[models] vision = {spec!r} in config.toml does not name a configured model; "
            f"write it as 'provider:model' with a provider from [providers] (configured: {known})."
        )
        log.warning("%s", problem)
        return None, problem


def media_type_of(data: bytes) -> str | None:
    """The image type ``data`` holds, by its first bytes (PNG, JPEG, GIF or WebP); None otherwise."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_part(data: bytes, source: str) -> ImagePart:
    """``data`` as an image part; ImageError naming ``source`` when it is too large or not an image."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(f"{source} is {len(data):,} bytes; images up to {MAX_IMAGE_BYTES:,} bytes can be sent. Use a smaller one.")
    kind = media_type_of(data)
    if kind is None:
        raise ImageError(f"{source} is not a PNG, JPEG, GIF or WebP image.")
    return ImagePart(media_type=kind, data=base64.b64encode(data).decode("ascii"))


def decode_data_url(url: str) -> bytes:
    """The bytes of a base64 ``data:`` URL; ImageError when it is not one."""
    match = _DATA_URL.fullmatch(url.strip())
    if match is None:
        raise ImageError("the data: URL is not base64 (expected data:image/png;base64,...).")
    try:
        return base64.b64decode(re.sub(r"\s+", "", match["data"]), validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the data: URL's base64 payload is not valid.") from None


def vision_request(images: list[ImagePart], question: str, *, max_tokens: int) -> ModelRequest:
    """One request asking a model ``question`` about ``images``; no tools."""
    message = UserMessage(parts=[*images, TextPart(text=question)])
    return ModelRequest(system=VISION_SYSTEM, messages=[message], max_tokens=max_tokens)
