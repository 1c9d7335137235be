"""inspect_image: ask the model that sees images (the session's, or ``[models] vision``) about an
image file, an http(s) URL or a data: URL."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel

from core.config import WebConfig
from core.messages import ImagePart
from core.models.vision import MAX_IMAGE_BYTES, ImageError, decode_data_url, image_part
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool
from core.version import version

__all__ = ["inspect_image"]


class InspectImageArgs(BaseModel):
    path_or_url: str
    question: str


def _is_url(value: str) -> bool:
    return value.strip().lower().startswith(("data:", "http://", "https://"))


def _title(args: InspectImageArgs) -> str:
    source = args.path_or_url.strip()
    return "Inspect an image" if source.lower().startswith("data:") else f"Inspect {source[:200]}"


@tool(kind="read", read_only=True, title=_title, paths=lambda a: [] if _is_url(a.path_or_url) else [a.path_or_url])
async def inspect_image(ctx: ToolContext, args: InspectImageArgs) -> ToolOutput:
    """Answer a question about an image (PNG, JPEG, GIF, WebP): a file, an http(s) URL or a data: URL."""
    source = args.path_or_url.strip()
    if ctx.look is None:
        raise ToolError("inspect_image needs a model, which this surface does not give tools.")
    try:
        if source.lower().startswith("data:"):
            image = image_part(decode_data_url(source), "the data: URL")
        elif source.lower().startswith(("http://", "https://")):
            image = await _download(ctx, source, ctx.settings.web)
        else:
            image = image_part(await _read(ctx, source), source)
    except ImageError as exc:
        raise ToolError(str(exc)) from None
    return ToolOutput(await ctx.look([image], args.question))


async def _read(ctx: ToolContext, source: str) -> bytes:
    """The bytes of an image file, read as read_file reads (asking outside the project)."""
    path = ctx.resolve(source)
    await ctx.check_read(path)
    if path.is_dir():
        raise ToolError(f"{path} is a directory; give the path of an image file.")
    try:
        size = path.stat().st_size
        if size > MAX_IMAGE_BYTES:
            raise ToolError(f"{source} is {size:,} bytes; images up to {MAX_IMAGE_BYTES:,} bytes can be sent. Use a smaller one.")
        return await asyncio.to_thread(Path.read_bytes, path)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist. Find the right path with glob or list_dir.") from None
    except OSError as exc:
        raise ToolError(f"{path} cannot be read ({exc.strerror}).") from None


async def _download(ctx: ToolContext, source: str, settings: WebConfig) -> ImagePart:
    """An image from an http(s) URL, downloaded as web_fetch downloads (``[web]`` domain lists and
    timeout; every hop checked and approved before it connects), at most MAX_IMAGE_BYTES."""
    from core.tools.net import download, http_url  # httpx loads on the first download

    headers = {"User-Agent": f"hermes-editor/{version()} (inspect_image)", "Accept": "image/*"}
    got = await download(http_url(source, "inspect_image"), settings, ctx.approve_network, max_bytes=MAX_IMAGE_BYTES, headers=headers)
    if got.status >= 400:
        raise ToolError(f"{got.url} answered {got.status} {got.reason}.")
    if got.cut:
        raise ToolError(f"{got.url} is larger than {MAX_IMAGE_BYTES:,} bytes; images up to that size can be sent.")
    return image_part(got.body, str(got.url))
