"""Validate ACP transcripts against the published v1 JSON schema (npm @agentclientprotocol/sdk)."""

from __future__ import annotations

import functools
import json

from jsonschema import Draft202012Validator

from tests.acp_harness import schema_path

# Requests the agent sends to the client, and what each request's params must be.
AGENT_REQUESTS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
}
AGENT_NOTIFICATIONS = {"session/update": "SessionNotification"}
# Results the agent returns, by the client's request method.
AGENT_RESULTS = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/prompt": "PromptResponse",
    "session/load": "LoadSessionResponse",
    "session/list": "ListSessionsResponse",
    "session/resume": "ResumeSessionResponse",
    "session/close": "CloseSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    # session/fork is only in the unstable schema.
    "session/fork": "unstable:ForkSessionResponse",
}


@functools.cache
def _schema(name: str = "schema.json") -> dict:
    return json.loads((schema_path().parent / name).read_text())


@functools.cache
def _validator(definition: str | None) -> Draft202012Validator:
    root = _schema()
    if definition and definition.startswith("unstable:"):
        root, definition = _schema("schema.unstable.json"), definition.split(":", 1)[1]
    if definition is None:  # a whole message from the agent
        (agent,) = [entry for entry in root["anyOf"] if entry.get("title") == "Agent"]
        return Draft202012Validator({**agent, "$defs": root["$defs"]})
    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": root["$defs"]})


def _check(definition: str | None, instance: object, where: str) -> list[str]:
    return [f"{where}: {e.message} at {list(e.absolute_path)}" for e in _validator(definition).iter_errors(instance)]


def validate_transcript(messages: list[tuple[str, dict]]) -> list[str]:
    """Every message the agent sent, checked as a message and by its method. Returns the problems."""
    problems: list[str] = []
    asked: dict[object, str] = {}
    for direction, message in messages:
        if direction == "outgoing":  # client -> agent
            if "method" in message and "id" in message:
                asked[message["id"]] = message["method"]
            continue
        problems += _check(None, message, f"message {json.dumps(message)[:200]}")
        method = message.get("method")
        if method is not None and "id" in message:
            if method not in AGENT_REQUESTS:
                problems.append(f"agent sent an unexpected request {method}")
            else:
                problems += _check(AGENT_REQUESTS[method], message.get("params"), method)
        elif method is not None:
            if method not in AGENT_NOTIFICATIONS:
                problems.append(f"agent sent an unexpected notification {method}")
            else:
                problems += _check(AGENT_NOTIFICATIONS[method], message.get("params"), method)
        elif "result" in message:
            request_method = asked.get(message["id"])
            if request_method in AGENT_RESULTS:
                problems += _check(AGENT_RESULTS[request_method], message["result"], f"result of {request_method}")
    return problems
