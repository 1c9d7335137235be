"""``completion/complete`` through the real hermes-mcp: session ids by id and title (most recent first), skill
names, memory files, the 100-value cap with total and hasMore, in both eras, over stdio and HTTP; and what is
suggested for project folders and models."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import PromptReference, ResourceTemplateReference

from core.config import load_config
from core.messages import UserMessage
from core.store import SessionStore
from hermes_mcp.completions import model_values, project_values
from tests.hermes_mcp.harness import ERAS, connected, mcp_env
from tests.hermes_mcp.test_http import http_server

SESSION = ResourceTemplateReference(uri="hermes://sessions/{session_id}")
SKILL = ResourceTemplateReference(uri="hermes://skills/{name}")
MEMORY = ResourceTemplateReference(uri="hermes://memory/{file}")


def _skill(root: Path, name: str) -> None:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: The {name} skill\n---\n\n# {name}\n")


async def _sessions() -> dict[str, str]:
    """Three conversations (and a subagent's run inside one); "flux" is touched last, so it is the most recent."""
    async with SessionStore.open() as store:
        flux = await store.create_session(cwd="/work/p", surface="acp", title="Flux capacitor fix")
        web = await store.create_session(cwd="/work/p", surface="mcp", title="Deploy the web app")
        again = await store.create_session(cwd="/work/q", surface="gateway", title="flux, again")
        await store.create_session(cwd="/work/p", surface="acp", title="flux subagent", parent_id=flux.id, parent_call_id="call_1")
        await store.append_message(flux.id, UserMessage.of("one more thing"))
    return {"flux": flux.id, "web": web.id, "again": again.id}


async def _values(client, ref, name: str, value: str) -> tuple[list[str], int | None, bool | None]:
    completion = (await client.complete(ref, {"name": name, "value": value})).completion
    return completion.values, completion.total, completion.has_more


@pytest.mark.parametrize("mode", ERAS)
async def test_completions_for_sessions_skills_and_memory_files(hermes_home, mode):
    ids = await _sessions()
    for name in ("deploy", "lint-deploy", "debug-web"):
        _skill(hermes_home / "skills", name)
    async with connected(mcp_env(hermes_home), mode=mode) as client:
        if mode == "legacy":
            assert client.server_capabilities.completions is not None
        else:  # the client adopted the version without asking; server/discover says what the server offers
            assert (await client.session.send_discover(mode))["capabilities"]["completions"] == {}
        by_title = await _values(client, SESSION, "session_id", "FLUX")
        by_word = await _values(client, SESSION, "session_id", "web")
        by_id = await _values(client, SESSION, "session_id", ids["web"][:8])
        every = await _values(client, SESSION, "session_id", "")
        nothing = await _values(client, SESSION, "session_id", "zzz")
        skills = await _values(client, SKILL, "name", "dep")
        files = await _values(client, MEMORY, "file", "u")
        both_files = await _values(client, MEMORY, "file", "")
        task = await _values(client, PromptReference(name="deploy"), "task", "the")
        # What clients probe with (the conformance suite's own prompt) is answered, with nothing.
        unknown_prompt = await _values(client, PromptReference(name="test_prompt_with_arguments"), "arg1", "test")
        unknown_variable = await _values(client, SKILL, "session_id", "")
    assert by_title == ([ids["flux"], ids["again"]], 2, False), "by the title's start or a word of it, most recent first"
    assert by_word == ([ids["web"]], 1, False)
    assert by_id == ([ids["web"]], 1, False)
    assert every == ([ids["flux"], ids["again"], ids["web"]], 3, False), "conversations only, not a subagent's run"
    assert nothing == ([], 0, False)
    assert skills[0][:2] == ["deploy", "lint-deploy"], "names that start with it, then those that contain it"
    assert "debug-web" not in skills[0]
    assert files == (["USER.md"], 1, False) and both_files == (["MEMORY.md", "USER.md"], 2, False)
    assert task == ([], 0, False), "a task is free text"
    assert unknown_prompt == ([], 0, False) and unknown_variable == ([], 0, False)


async def test_at_most_a_hundred_values_with_the_total_and_has_more(hermes_home):
    async with SessionStore.open() as store:
        made = [(await store.create_session(cwd="/work/p", surface="mcp", title=f"bulk job {n}")).id for n in range(130)]
        await store.append_message(made[0], UserMessage.of("the oldest, touched last"))
    async with connected(mcp_env(hermes_home)) as client:
        values, total, has_more = await _values(client, SESSION, "session_id", "bulk")
        exact, exact_total, exact_more = await _values(client, SESSION, "session_id", made[5])
    assert len(values) == 100 and total == 130 and has_more is True
    assert values[0] == made[0] and values[1] == made[-1], "most recently active first"
    assert (exact, exact_total, exact_more) == ([made[5]], 1, False)


async def test_completions_over_http(hermes_home):
    ids = await _sessions()
    with http_server(mcp_env(hermes_home)) as served:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"}) as http:
            async with Client(streamable_http_client(served.url, http_client=http), mode="legacy", cache=None) as client:
                found = await _values(client, SESSION, "session_id", "flux")
    assert found == ([ids["flux"], ids["again"]], 2, False)


def test_project_folders_are_suggested_by_name_path_and_subfolder(tmp_path):
    work = tmp_path / "work"
    hermes, other = work / "hermes-editor", work / "other"
    for folder in (hermes / "src", hermes / "scripts", hermes / ".git", other):
        folder.mkdir(parents=True)
    (hermes / "setup.py").write_text("")
    allowed = [hermes.resolve(), other.resolve()]
    assert project_values(allowed, "") == [str(p) for p in allowed]
    assert project_values(allowed, "HERM") == [str(allowed[0])]
    assert project_values(allowed, f"{work.resolve()}/o") == [str(allowed[1])]
    # Inside a project: its subfolders (not its files, not hidden ones unless asked for).
    assert project_values(allowed, f"{allowed[0]}/s") == [str(allowed[0] / "scripts"), str(allowed[0] / "src")]
    assert project_values(allowed, f"{allowed[0]}/.") == [str(allowed[0] / ".git")]
    # Outside every project nothing is listed.
    assert project_values(allowed, f"{work.resolve()}/") == [str(p) for p in allowed]
    assert project_values(allowed, "/etc/") == []


def test_models_are_suggested_by_label_or_model_name(hermes_home):
    (hermes_home / "config.toml").write_text(
        'model = "local:qwen3-coder"\n\n'
        '[providers.local]\nbase_url = "http://127.0.0.1:1234/v1"\nmodels = ["qwen3-coder", "gpt-oss"]\n\n'
        '[providers.lab]\nbase_url = "http://127.0.0.1:5678/v1"\nmodels = ["gpt-4.1"]\n'
    )
    choices = load_config().model_choices()
    assert choices == ["local:qwen3-coder", "local:gpt-oss", "lab:gpt-4.1"]
    assert model_values(choices, "") == choices
    assert model_values(choices, "gpt") == ["local:gpt-oss", "lab:gpt-4.1"]
    assert model_values(choices, "LOCAL:") == ["local:qwen3-coder", "local:gpt-oss"]
    assert model_values(choices, "la") == ["lab:gpt-4.1"]
