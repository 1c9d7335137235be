"""python-telegram-bot's requests over aiohttp instead of its default httpx.

Every update and every reply is a Bot API call, so the HTTP client's own cost is paid a few times
per message: through httpx a call took about 0.8 ms of CPU, through aiohttp (already a dependency,
for Slack) about 0.25 ms, with the same library above it. The behaviour is python-telegram-bot's:
form-encoded parameters (multipart with files), the status and body handed back to it, a timeout
as ``TimedOut`` and any other transport failure as ``NetworkError``. Proxies come from the
environment (``HTTPS_PROXY``, ``NO_PROXY``), as with httpx, looked up once per host (aiohttp's own
``trust_env`` looks them up again in a thread for every request).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yarl
from aiohttp.helpers import get_env_proxy_for_url
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

__all__ = ["AiohttpRequest"]

# What python-telegram-bot passes for a timeout the caller did not give (BaseRequest.DEFAULT_NONE).
_Default = type(BaseRequest.DEFAULT_NONE)


class AiohttpRequest(BaseRequest):
    """Bot API requests on one aiohttp session: at most ``pool_size`` connections, a request
    waiting up to ``pool_timeout`` seconds for a free one (then ``connect_timeout`` to connect)
    and ``read_timeout`` seconds for each read of the answer."""

    def __init__(
        self,
        *,
        pool_size: int = 256,
        read_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
    ) -> None:
        self._pool_size = pool_size
        self._read_timeout = read_timeout
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._session: aiohttp.ClientSession | None = None
        # (scheme, host) -> the proxy and its credentials from the environment, or None.
        self._proxies: dict[tuple[str, str], tuple[Any, Any] | None] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                headers={"User-Agent": self.USER_AGENT},
            )

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: Any = BaseRequest.DEFAULT_NONE,
        write_timeout: Any = BaseRequest.DEFAULT_NONE,
        connect_timeout: Any = BaseRequest.DEFAULT_NONE,
        pool_timeout: Any = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._session is None or self._session.closed:
            # Shut down with the platform while the library still held it initialized (a start
            # that failed half-way): the next start, or a call, opens it again.
            await self.initialize()
        session = self._session
        assert session is not None
        read = self._read_timeout if isinstance(read_timeout, _Default) else read_timeout
        connect = self._connect_timeout if isinstance(connect_timeout, _Default) else connect_timeout
        pool = self._pool_timeout if isinstance(pool_timeout, _Default) else pool_timeout
        # aiohttp's connect timeout covers the wait for a free connection and the connecting.
        waiting = None if pool is None or connect is None else pool + connect
        timeout = aiohttp.ClientTimeout(total=None, connect=waiting, sock_connect=connect, sock_read=read)
        data: Any = None
        if request_data is not None:
            fields = request_data.json_parameters
            files = request_data.multipart_data
            if files:
                form = aiohttp.FormData()
                for name, value in fields.items():
                    form.add_field(name, value)
                for name, (filename, content, mime) in files.items():
                    form.add_field(name, content, filename=filename, content_type=mime)
                data = form
            else:
                data = fields
        parts = urlsplit(url)
        where = (parts.scheme, parts.hostname or "")
        if where not in self._proxies:
            self._proxies[where] = await asyncio.to_thread(_env_proxy, url)
        proxy, proxy_auth = self._proxies[where] or (None, None)
        try:
            async with session.request(method, url, data=data, timeout=timeout, proxy=proxy, proxy_auth=proxy_auth) as response:
                return response.status, await response.read()
        except TimeoutError as exc:  # aiohttp's timeouts (asyncio's are this one)
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{exc.__class__.__name__}: {exc}") from exc


def _env_proxy(url: str) -> tuple[Any, Any] | None:
    """The proxy the environment gives for ``url`` (HTTP(S)_PROXY, NO_PROXY, credentials from
    .netrc), or None."""
    try:
        return get_env_proxy_for_url(yarl.URL(url))
    except LookupError:
        return None
