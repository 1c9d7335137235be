"""A chat whose project is a docker project: its commands run in the session's container, which
goes when the gateway stops."""

from __future__ import annotations

import os
import time
import uuid

from tests.docker_support import busybox_image, containers_of
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, start


def test_a_chat_runs_commands_in_the_projects_container(hermes_home, project, telegram):
    image = busybox_image()
    name = f"chat-{uuid.uuid4().hex[:8]}"
    os.chown(project, 1234, 1234)
    script = [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "readlink /bin/sh; id -u"}}]},
        {"text": "Ran it."},
    ]
    extra = f'[projects.{name}]\npath = "{project}"\nhost = "docker"\nimage = "{image}"\n'
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, extra=extra) as gateway:
        telegram.send_user_message(OWNER, "/mode accept-edits")
        telegram.wait_text(OWNER, "accept-edits")
        telegram.send_user_message(OWNER, "what shell is there?")
        telegram.wait_text(OWNER, "Ran it.")
        (result,) = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"]
        assert result == "exit code 0\n/bin/busybox\n1234", result
        assert [c.status for c in containers_of(name)] == ["running"]
        gateway.stop()
    deadline = time.monotonic() + 30
    while containers_of(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert containers_of(name) == [], "the container goes with the gateway"


def test_new_closes_the_previous_sessions_container(hermes_home, project, telegram):
    image = busybox_image()
    name = f"chat-{uuid.uuid4().hex[:8]}"
    os.chown(project, 1234, 1234)
    script = [
        {"tool_calls": [{"id": "b1", "name": "run_command", "arguments": {"command": "sleep 600", "background": True}}]},
        {"text": "Started it."},
    ]
    extra = f'[projects.{name}]\npath = "{project}"\nhost = "docker"\nimage = "{image}"\n'
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, extra=extra):
        telegram.send_user_message(OWNER, "/mode accept-edits")
        telegram.wait_text(OWNER, "accept-edits")
        telegram.send_user_message(OWNER, "start the long job")
        telegram.wait_text(OWNER, "Started it.")
        assert [c.status for c in containers_of(name)] == ["running"]
        telegram.send_user_message(OWNER, "/new")
        telegram.wait_text(OWNER, "background command is stopped with it")
        deadline = time.monotonic() + 30
        while containers_of(name) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert containers_of(name) == [], "the previous session's container goes on /new, while the gateway runs"
