"""Sending updates and permission requests with the exact shape editors rely on.

The SDK drops every ``None`` field when it serialises. ACP editors rely on ``"oldText": null``
to show a diff as a new file, so diffs are patched back in before sending.
"""

from __future__ import annotations

import json
import logging
from typing import Any

__all__ = ["request_permission", "send_update", "send_updates"]

log = logging.getLogger(__name__)


def _with_null_old_text(payload: Any) -> Any:
    if isinstance(payload, dict):
        if payload.get("type") == "diff" and "newText" in payload and "oldText" not in payload:
            payload["oldText"] = None
        for value in payload.values():
            _with_null_old_text(value)
    elif isinstance(payload, list):
        for value in payload:
            _with_null_old_text(value)
    return payload


def _raw(conn: Any) -> Any:
    # AgentSideConnection keeps its JSON-RPC connection here; it sends dicts as they are.
    return conn._conn


async def send_update(conn: Any, session_id: str, update: Any) -> None:
    """``session/update`` with ``update`` (an SDK model); dropped once the client has gone
    (stdin closed), so that requests it sent before still finish and are answered."""
    from acp.schema import SessionNotification
    from acp.utils import serialize_params

    params = serialize_params(SessionNotification(session_id=session_id, update=update))
    try:
        await _raw(conn).send_notification("session/update", _with_null_old_text(params))
    except ConnectionError:
        log.debug("session/update for %s dropped: the client has gone", session_id)


async def send_updates(conn: Any, session_id: str, updates: list[str]) -> None:
    """``session/update`` for each of ``updates``, already encoded as the wire has them (a
    replay); dropped once the client has gone."""
    raw = _raw(conn)
    # Our stdio transport writes them at once; any other goes through the SDK one by one.
    together = getattr(getattr(raw, "_transport", None), "send_updates", None)
    try:
        if together is not None:
            await together(session_id, updates)
        else:
            for update in updates:
                await raw.send_notification("session/update", {"sessionId": session_id, "update": json.loads(update)})
    except ConnectionError:
        log.debug("session/update for %s dropped: the client has gone", session_id)


async def request_permission(conn: Any, session_id: str, tool_call: Any, options: list) -> Any:
    """``session/request_permission``; returns the SDK's RequestPermissionResponse."""
    from acp.schema import RequestPermissionRequest, RequestPermissionResponse
    from acp.utils import serialize_params

    params = serialize_params(RequestPermissionRequest(session_id=session_id, tool_call=tool_call, options=options))
    result = await _raw(conn).send_request("session/request_permission", _with_null_old_text(params))
    return RequestPermissionResponse.model_validate(result)
