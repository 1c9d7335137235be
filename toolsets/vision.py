"""inspect_image: ask the model that sees images (the session's, or ``[models] vision``) about an
image file, an http(s) URL or a data: URL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from pydantic import BaseModel

from core.config import WebConfig
from core.models.vision import MAX_IMAGE_BYTES, ImageError, decode_data_url, image_part
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.net import domain_listed, normal_host, pinned_client, resolve, special_address
from core.tools.registry import ToolOutput, tool
from core.version import version

__all__ = ["inspect_image"]

MAX_REDIRECTS = 5
_REDIRECTS = {301, 302, 303, 307, 308}


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
            data, where = await _download(ctx, source, ctx.settings.web)
            image = image_part(data, where)
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


async def _download(ctx: ToolContext, source: str, settings: WebConfig) -> tuple[bytes, str]:
    """An image's bytes from an http(s) URL, and where they came from: as web_fetch fetches
    (``[web]`` domain lists and timeout; every hop's addresses checked and approved before it
    connects, a private or loopback one asking every time), at most MAX_IMAGE_BYTES."""
    url = _checked(source)
    approved: set[str] = set()
    for hop in range(MAX_REDIRECTS + 1):
        if entry := domain_listed(url.host, settings.deny_domains):
            raise ToolError(f"Not allowed: {url.host} is in [web] deny_domains ({entry!r}) in config.toml, so it is never fetched.")
        host = normal_host(url.host)
        try:
            async with asyncio.timeout(settings.timeout):
                addresses = await resolve(host, url.port or (443 if url.scheme == "https" else 80))
        except (OSError, TimeoutError) as exc:
            raise ToolError(f"Could not resolve {host}: {exc or 'timed out'}.") from None
        verb = "Follow a redirect to" if hop else "Fetch"
        special = [(address, why) for address in addresses if (why := special_address(address))]
        if special:
            address, why = special[0]
            named = str(address) if host == str(address) else f"{host} ({address})"
            await ctx.approve_network(
                f"{verb} {url}: {named} is {why}",
                host,
                every_time=f"{address} is {why}, on this machine or its network; such a request asks every time",
            )
        else:
            address = addresses[0]
            if host not in approved and not domain_listed(host, settings.allow_domains):
                await ctx.approve_network(f"{verb} {url}", host)
        approved.add(host)
        headers = {"User-Agent": f"hermes-editor/{version()} (inspect_image)", "Accept": "image/*"}
        try:
            async with pinned_client(host, address, timeout=settings.timeout, headers=headers) as client:
                async with asyncio.timeout(settings.timeout), client.stream("GET", url) as response:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        url = _next_hop(url, location)
                        continue
                    if response.status_code >= 400:
                        raise ToolError(f"{url} answered {response.status_code} {response.reason_phrase}.")
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_IMAGE_BYTES:
                            raise ToolError(f"{url} is larger than {MAX_IMAGE_BYTES:,} bytes; images up to that size can be sent.")
                    return bytes(body), str(url)
        except TimeoutError:
            raise ToolError(f"{url} did not answer within {settings.timeout:g} s ([web] timeout).") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"Could not fetch {url}: {type(exc).__name__}: {exc}.") from None
    raise ToolError(f"{source} redirected more than {MAX_REDIRECTS} times; stopped at {url}.")


def _checked(text: str) -> httpx.URL:
    """``text`` as an http(s) URL with a host; a ToolError saying what is wrong otherwise."""
    try:
        url = httpx.URL(text.strip())
    except (httpx.InvalidURL, ValueError) as exc:
        raise ToolError(f"{text!r} is not a valid URL ({exc}).") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ToolError(f"{text!r} is not an http or https URL with a host.")
    return url


def _next_hop(url: httpx.URL, location: str) -> httpx.URL:
    try:
        target = url.join(location)
    except (httpx.InvalidURL, ValueError):
        raise ToolError(f"{url} redirected to {location!r}, which is not a valid URL.") from None
    if target.scheme not in ("http", "https") or not target.host:
        raise ToolError(f"{url} redirected to {location!r}; only http and https URLs are followed.")
    return target
