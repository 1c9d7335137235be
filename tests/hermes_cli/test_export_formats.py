"""``hermes-editor sessions export`` in the training and evaluation formats, over sessions made the
real way: a ``hermes-acp`` turn and a ``hermes-mcp`` ask against the scripted OpenAI server, with
a file written, a tool call that fails, and a tool result carrying credentials. Each format is
validated against a JSON Schema of its published shape (tests/export_schemas/) plus the rules a
schema cannot state."""

from __future__ import annotations

import asyncio
import datetime
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acp
from jsonschema import Draft202012Validator

from core.store import SessionStore
from tests.acp_harness import Client, agent_env, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_cli.entry import hermes_editor
from tests.hermes_mcp.harness import allow_projects, connected, data, mcp_env

SCHEMAS = Path(__file__).parent.parent / "export_schemas"
USER = "quokkadev"
# Credential shapes a tool printed: none is a configured secret, so the store keeps them as they came.
SK_KEY = "sk-proj-FAKEabcdefghijklmnop1234"
JSON_KEY = "zq8Xw2LmN4pR7tY1uV"
BEARER = "eyJhbGciOiJIUzI1NiJ9fakepayload0123"
EMAIL = "quokka.dev@example.org"


@dataclass
class World:
    home: Path  # the user's home directory (HOME)
    alpha: Path
    beta: Path
    acp_id: str
    failed_id: str
    mcp_id: str


def _settings(home: Path) -> str:
    return (
        f"owner: {USER} <{EMAIL}>\n"
        f"api key: {SK_KEY}\n"
        f'{{"service": {{"api_key": "{JSON_KEY}"}}}}\n'
        f"Authorization: Bearer {BEARER}\n"
        f"cache: {home}/.cache/quokka/data.db\n"
    )


async def _build(hermes_home: Path, tmp_path: Path) -> World:
    home = tmp_path / "user-home"
    alpha, beta = home / "code" / "alpha", home / "code" / "beta"
    alpha.mkdir(parents=True)
    beta.mkdir(parents=True)
    (alpha / "settings.txt").write_text(_settings(home))
    (beta / "app.py").write_text("print('hi')\n")
    (hermes_home / "config.toml").write_text("[retry]\nbase_delay = 0\nmax_attempts = 1\n")
    allow_projects(hermes_home, beta)
    script = [
        {
            "thinking": "Write the notes, then look for the missing file.",
            "tool_calls": [
                {"id": "call_1", "name": "write_file", "arguments": {"path": "notes.txt", "content": f"notes by {USER}"}},
                {"id": "call_2", "name": "read_file", "arguments": {"path": "missing.txt"}},
            ],
        },
        # The same id again, as some models number their calls per step.
        {"tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "settings.txt"}}]},
        {"text": f"Wrote notes.txt in {alpha}. The settings name {EMAIL}."},
        {"text": "Nothing else to do."},
        {"error": 400, "message": "the request is malformed"},
        {"tool_calls": [{"id": "r1", "name": "read_file", "arguments": {"path": "app.py"}}]},
        {"text": "app.py prints hi."},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            acp_id = (await conn.new_session(cwd=str(alpha), mcp_servers=[])).session_id
            await conn.prompt(session_id=acp_id, prompt=[acp.text_block("write notes and read the settings")])
            await conn.prompt(session_id=acp_id, prompt=[acp.text_block("anything else?")])
            failed_id = (await conn.new_session(cwd=str(alpha), mcp_servers=[])).session_id
            await conn.prompt(session_id=failed_id, prompt=[acp.text_block("this one breaks")])
        async with connected(mcp_env(hermes_home, server.base_url)) as mcp:
            view = data(await mcp.call_tool("ask", {"prompt": "what does app.py print?", "cwd": str(beta), "mode": "read-only"}))
    assert (alpha / "notes.txt").read_text() == f"notes by {USER}"
    return World(home, alpha, beta, acp_id, failed_id, view["session_id"])


def export(*args: str) -> str:
    done = hermes_editor("sessions", "export", *args, env={"USER": USER, "LOGNAME": USER})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def valid(name: str, document: Any) -> Any:
    problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator(name).iter_errors(document)]
    assert not problems, "\n".join(problems[:10])
    return document


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def assert_clean(text: str) -> None:
    for secret in (SK_KEY, JSON_KEY, BEARER, "sk-test-not-a-real-key-123456"):
        assert secret not in text, f"{secret} leaked"


def assert_anonymous(text: str, world: World) -> None:
    assert str(world.home) not in text and USER not in text.lower() and EMAIL not in text
    assert str(world.home.parent) not in text  # nothing of the test's own paths either


async def test_every_format_keeps_its_published_shape_order_and_results_without_secrets(hermes_home, tmp_path):
    world = await _build(hermes_home, tmp_path)
    # The store holds the credentials as the tool printed them: the export is what removes them.
    stored = (hermes_home / "state.db").read_bytes().decode("utf-8", "replace")
    assert SK_KEY in stored or JSON_KEY in stored

    # OpenAI chat fine-tuning: one line per session (those with a model reply).
    rows = lines(export("--all", "--format", "openai", "--project", str(world.alpha)))
    assert len(rows) == 1, "the session whose only turn failed has no reply to train on"
    row = valid("openai_chat_finetune.schema.json", rows[0])
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "user", "assistant"]
    called: dict[str, str] = {}
    for message in row["messages"]:
        for call in message.get("tool_calls", []):
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
            assert call["id"] not in called, "call ids are unique within a line"
            called[call["id"]] = call["function"]["name"]
        if message["role"] == "tool":
            assert message["tool_call_id"] in called, "every tool message answers an earlier call"
    answered = [m["tool_call_id"] for m in row["messages"] if m["role"] == "tool"]
    assert sorted(answered) == sorted(called), "every call has its result"
    first, second = row["messages"][2], row["messages"][5]
    assert [c["function"]["name"] for c in first["tool_calls"]] == ["write_file", "read_file"]
    assert json.loads(first["tool_calls"][0]["function"]["arguments"]) == {"path": "notes.txt", "content": f"notes by {USER}"}
    assert "missing.txt" in row["messages"][4]["content"] or "not" in row["messages"][4]["content"].lower()
    assert second["tool_calls"][0]["id"] != "call_1" and "[redacted]" in row["messages"][6]["content"]
    assert row["parallel_tool_calls"] is True
    assert {t["function"]["name"] for t in row["tools"]} == {"write_file", "read_file"}
    assert row["tools"][0]["function"]["parameters"]["properties"]["path"]["type"] == "string"
    assert_clean(json.dumps(row))

    # ShareGPT (LLaMA-Factory): one array, alternating positions, tools as a JSON string.
    sharegpt = valid("sharegpt_llamafactory.schema.json", json.loads(export("--format", "sharegpt")))
    assert len(sharegpt) == 2  # the ACP session and the MCP one
    for item in sharegpt:
        turns = [t["from"] for t in item["conversations"]]
        assert len(turns) % 2 == 0 and turns[-1] == "gpt"
        assert all(t in ("human", "observation") for t in turns[0::2]) and all(t in ("gpt", "function_call") for t in turns[1::2])
        for index, entry in enumerate(item["conversations"]):
            if entry["from"] == "function_call":
                assert item["conversations"][index + 1]["from"] == "observation", "every call has its result"
                calls = json.loads(entry["value"])
                assert all(isinstance(c["arguments"], dict) for c in (calls if isinstance(calls, list) else [calls]))
        assert {t["name"] for t in json.loads(item["tools"])} <= {"write_file", "read_file"}
    acp_item = sharegpt[0]
    assert [t["from"] for t in acp_item["conversations"]] == [
        "human", "function_call", "observation", "function_call", "observation", "gpt", "human", "gpt",
    ]  # fmt: skip
    assert len(json.loads(acp_item["conversations"][2]["value"])) == 2  # two calls, two results in call order
    assert acp_item["conversations"][-1]["value"] == "Nothing else to do."
    assert_clean(json.dumps(sharegpt))

    # Trajectories: every step, call, result, status and time; the session's outcome and usage.
    trajectories = {t["session"]["id"]: valid("trajectory.schema.json", t) for t in lines(export("--format", "trajectory"))}
    assert set(trajectories) == {world.acp_id, world.failed_id, world.mcp_id}
    acp_run = trajectories[world.acp_id]
    assert acp_run["session"]["outcome"] == "completed" and acp_run["session"]["surface"] == "acp"
    assert acp_run["session"]["usage"]["input_tokens"] > 0 and acp_run["session"]["model"]
    kinds = [s["kind"] for s in acp_run["steps"]]
    assert kinds == ["user", "model", "model", "model", "user", "model"]
    assert [s["index"] for s in acp_run["steps"]] == list(range(6))
    assert [s["seq"] for s in acp_run["steps"]] == sorted(s["seq"] for s in acp_run["steps"])
    step = acp_run["steps"][1]
    assert step["thinking"] == "Write the notes, then look for the missing file."
    (write, missing) = step["tool_calls"]
    assert write["status"] == "completed" and write["approval"] == "allowed" and write["files_changed"] == [str(world.alpha / "notes.txt")]
    assert missing["status"] == "failed" and missing["result"]
    for call in [c for s in acp_run["steps"] if s["kind"] == "model" for c in s["tool_calls"]]:
        started, finished = (datetime.datetime.fromisoformat(call[k]) for k in ("started_at", "finished_at"))
        assert finished >= started and abs(call["duration_s"] - (finished - started).total_seconds()) < 0.002
    assert acp_run["counts"] == {"steps": 6, "tool_calls": 3, "failed_tool_calls": 1}
    assert trajectories[world.failed_id]["session"]["outcome"] == "failed"
    assert trajectories[world.failed_id]["session"]["stop_reason"] == "end_turn"
    assert trajectories[world.mcp_id]["session"]["surface"] == "mcp"
    assert_clean(json.dumps(trajectories))

    # jsonl and md still work, and carry no secret either.
    assert_clean(export(world.acp_id, "--format", "jsonl") + export(world.acp_id))


async def test_anonymise_replaces_home_user_project_and_email_consistently(hermes_home, tmp_path):
    world = await _build(hermes_home, tmp_path)
    plain = export(world.acp_id, "--format", "trajectory")
    assert str(world.alpha) in plain and EMAIL in plain and USER in plain  # there is something to replace
    for fmt in ("trajectory", "openai", "sharegpt", "jsonl", "md"):
        text = export("--all", "--format", fmt, "--anonymise")
        assert_anonymous(text, world)
        assert_clean(text)
    run = lines(export(world.acp_id, "--format", "trajectory", "--anonymise"))[0]
    assert run["session"]["project"] == "<project>"
    write = run["steps"][1]["tool_calls"][0]
    assert write["arguments"] == {"path": "notes.txt", "content": "notes by <user>"}
    assert write["files_changed"] == ["<project>/notes.txt"]
    settings = run["steps"][2]["tool_calls"][0]["result"]
    assert "owner: <user> <user1@example.com>" in settings and "cache: ~/.cache/quokka/data.db" in settings
    assert run["steps"][3]["text"] == "Wrote notes.txt in <project>. The settings name user1@example.com."


async def test_filters_by_project_surface_outcome_and_dates(hermes_home, tmp_path):
    world = await _build(hermes_home, tmp_path)
    with sqlite3.connect(hermes_home / "state.db") as conn:  # the MCP session was started in January
        january = datetime.datetime(2026, 1, 15, 12, 0).timestamp()
        conn.execute("UPDATE sessions SET created_at = ? WHERE id = ?", (january, world.mcp_id))

    def ids(*args: str) -> set[str]:
        done = hermes_editor("sessions", "export", "--format", "trajectory", *args)
        assert done.returncode in (0, 1), done.stderr
        return {json.loads(line)["session"]["id"] for line in done.stdout.splitlines()}

    everything = {world.acp_id, world.failed_id, world.mcp_id}
    assert ids() == ids("--all") == everything
    assert ids("--project", str(world.alpha)) == {world.acp_id, world.failed_id}
    assert ids("--project", str(world.home / "code")) == everything  # a folder holding both projects
    assert ids("--project", str(world.home / "code" / "alp")) == set()  # a name prefix is not a folder
    assert ids("--surface", "mcp") == {world.mcp_id}
    assert ids("--surface", "mcp", "--surface", "acp") == everything
    assert ids("--surface", "gateway") == set()
    assert ids("--outcome", "failed") == {world.failed_id}
    assert ids("--outcome", "completed") == {world.acp_id, world.mcp_id}
    assert ids("--until", "2026-01-15") == {world.mcp_id}
    assert ids("--since", "2026-01-16") == {world.acp_id, world.failed_id}
    assert ids("--since", "2026-01-15", "--until", "2026-01-15", "--surface", "mcp") == {world.mcp_id}
    # Oldest first.
    order = [json.loads(line)["session"]["id"] for line in export("--format", "trajectory").splitlines()]
    assert order[0] == world.mcp_id

    none = hermes_editor("sessions", "export", "--surface", "gateway", "--format", "sharegpt")
    assert none.returncode == 1 and json.loads(none.stdout) == [] and "No session matches" in none.stderr


async def test_a_cancelled_turn_is_the_sessions_outcome_until_a_later_turn_ends(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    with ScriptedOpenAIServer([{"hang": True}, {"text": "Here it is."}]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("take your time")]))
            await until(lambda: len(server.requests) == 1, what="the model request")
            await conn.cancel(session_id=sid)
            assert (await turn).stop_reason == "cancelled"
            (run,) = lines(export("--format", "trajectory", "--outcome", "cancelled"))
            assert run["session"]["id"] == sid and run["session"]["stop_reason"] == "cancelled"
            assert hermes_editor("sessions", "export", "--outcome", "completed").returncode == 1
            await conn.prompt(session_id=sid, prompt=[acp.text_block("now then")])
    (run,) = lines(export("--format", "trajectory", "--outcome", "completed"))
    assert run["session"]["id"] == sid and [s["kind"] for s in run["steps"]] == ["user", "user", "model"]
    assert run["session"]["stop_reason"] == "end_turn"


def test_bad_arguments_are_named_and_a_failed_export_leaves_no_file(hermes_home, tmp_path):
    async def seed() -> str:
        async with SessionStore.open(hermes_home / "state.db") as store:
            return (await store.create_session(cwd=str(tmp_path), surface="cli")).id

    sid = asyncio.run(seed())
    both = hermes_editor("sessions", "export", sid, "--surface", "acp")
    assert both.returncode == 2 and "--surface" in both.stderr
    day = hermes_editor("sessions", "export", "--since", "2026-01-01", "--until", "last week")
    assert day.returncode == 2 and "--until takes a day as YYYY-MM-DD (got 'last week')" in day.stderr
    nowhere = hermes_editor("sessions", "export", "--all", "-o", str(tmp_path / "no" / "such" / "out.json"))
    assert nowhere.returncode != 0 and "does not exist" in nowhere.stderr
    folder = hermes_editor("sessions", "export", "--all", "-o", str(tmp_path))
    assert folder.returncode != 0 and "it is a folder" in folder.stderr and tmp_path.is_dir()
    empty = hermes_editor("sessions", "export", sid, "--format", "openai", "-o", str(tmp_path / "out.jsonl"))
    assert empty.returncode == 1 and "no model reply" in empty.stderr
    assert not (tmp_path / "out.jsonl").exists() and not list(tmp_path.glob(".out.jsonl.*"))


def test_the_parser_lists_what_core_knows():
    from core.learning.export import FORMATS, OUTCOMES
    from core.store.records import SURFACES
    from hermes_cli.sessions_cmd import EXPORT_FORMATS, EXPORT_OUTCOMES, EXPORT_SURFACES

    assert EXPORT_FORMATS == FORMATS and EXPORT_OUTCOMES == OUTCOMES and set(EXPORT_SURFACES) == SURFACES
