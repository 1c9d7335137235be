"""The cron tool outside a chat: from an editor session on the real hermes-acp, with the scripted model.

Jobs run in the session's project; ``deliver`` names files and webhooks; a destination outside
the project asks in every mode, shows the path or URL plainly and never offers "always"; files
that make something run later are refused; the scheduler-only gateway then runs the job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import acp

from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import cli
from tests.hermes_gateway.test_cron_without_bot import start_scheduler, stop, wait_until


class AskedClient(Client):
    """Records the options each question offered, too."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.options: list[set[str]] = []

    async def request_permission(self, options, session_id, tool_call, **kwargs: Any):
        self.options.append({o.option_id for o in options})
        return await super().request_permission(options, session_id, tool_call, **kwargs)


def add_call(call_id: str, **args: Any) -> dict:
    return {"tool_calls": [{"id": call_id, "name": "cron", "arguments": {"action": "add", "schedule": "every 1h", **args}}]}


def tool_result(server: ScriptedOpenAIServer, request: int) -> str:
    body = server.requests[request].get("body", server.requests[request])
    return [m["content"] for m in body["messages"] if m["role"] == "tool"][-1]


def shown(asked: Any) -> str:
    return asked.title + " " + " ".join(getattr(c.content, "text", "") for c in asked.content or [])


async def turn(conn: Any, project: Path, text: str, mode: str) -> None:
    sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
    await conn.set_session_mode(session_id=sid, mode_id=mode)
    await conn.prompt(session_id=sid, prompt=[acp.text_block(text)])


def jobs(home: Path) -> list[dict]:
    return json.loads(cli(home, "cron", "list", "--json").stdout)


async def test_editor_session_schedules_a_job_that_appends_to_a_project_file_and_the_scheduler_runs_it(hermes_home, tmp_path):
    (hermes_home / "config.toml").write_text("[gateway]\nshutdown_grace = 5\n[cron]\ntick = 0.3\n", encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    report = project / "reports" / "deps.md"
    script = [
        add_call("c1", prompt="check for outdated dependencies", name="deps", deliver=["file:reports/deps.md"]),
        {"text": "Scheduled."},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = AskedClient(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await turn(conn, project, "check dependencies every hour and keep a report", mode="ask")
        added = tool_result(server, 1)
    (asked,) = client.permission_requests
    assert str(report) in shown(asked) and str(project) in shown(asked)  # the file, plainly, and the project the job runs in
    assert "allow_always" in client.options[0]  # inside the project: asked as any change is
    assert f"file {report}" in added and "hermes-editor cron runs" in added, added
    assert "no scheduler is running" in added and "hermes-gateway run" in added  # nothing would run it yet
    (job,) = jobs(hermes_home)
    assert job["project"] == str(project) and job["deliver"] == [f"file:{report}"] and job["chat_key"] is None

    with ScriptedOpenAIServer([{"text": "Two packages are outdated."}]) as model:
        proc = start_scheduler(hermes_home, model.base_url)
        try:
            assert cli(hermes_home, "cron", "run", job["id"]).returncode == 0
            wait_until(lambda: report.exists() and "outdated" in report.read_text(), 60, "the report file")
        finally:
            code, _, err = stop(proc)
    assert code == 0, err
    assert "Two packages are outdated." in report.read_text() and f"deps (job {job['id']}" in report.read_text()


async def test_destinations_outside_the_project_ask_every_time_and_never_offer_always(hermes_home, tmp_path):
    (hermes_home / "config.toml").write_text("[cron]\ntick = 0.3\n", encoding="utf-8")
    project = tmp_path / "project"
    (project / ".git" / "hooks").mkdir(parents=True)
    outside = tmp_path / "elsewhere" / "log.md"
    hook = "http://127.0.0.1:9/collect?token=abc"
    script = [
        add_call("c1", prompt="summarise the logs", deliver=[f"file:{outside}"]),  # auto mode: still asks; rejected
        {"text": "Not scheduled."},
        add_call("c2", prompt="summarise the logs", deliver=[hook]),  # accept-edits: asks; allowed
        {"text": "Scheduled."},
        add_call("c3", prompt="append to the hook", deliver=["file:.git/hooks/post-commit"]),  # refused without asking
        {"text": "Refused."},
        add_call("c4", prompt="summarise", deliver=["webhook:ops"]),  # no such named webhook
        {"text": "No."},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = AskedClient(answer=["reject_once", "allow_once"])
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await turn(conn, project, "log summary to my notes", mode="auto")
            await turn(conn, project, "log summary to the webhook", mode="accept-edits")
            await turn(conn, project, "log summary to the hook", mode="auto")
            await turn(conn, project, "log summary to ops", mode="auto")
        results = [tool_result(server, n) for n in (1, 3, 5, 7)]

    first, second = client.permission_requests  # the .git and unknown-webhook calls asked nobody
    assert str(outside) in shown(first) and "outside the project" in shown(first)
    assert hook in shown(second) and "sent to" in shown(second)
    assert client.options == [{"allow_once", "reject_once", "reject_always"}] * 2  # never "always allow"
    assert "declined" in results[0] and not outside.exists() and not outside.parent.exists()
    assert "Added job" in results[1] and hook in results[1]
    assert "may not append" in results[2] and not (project / ".git" / "hooks" / "post-commit").exists()
    assert "no webhook named 'ops'" in results[3]
    (job,) = jobs(hermes_home)
    assert job["deliver"] == [f"webhook:{hook}"] and job["project"] == str(project)
