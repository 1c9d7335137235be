"""The official MCP conformance suite (npm @modelcontextprotocol/conformance) against the real ``hermes-mcp --http``.

Every server scenario that applies to a general server must pass with no failed check and no warning.
The suite reaches the server through a loopback proxy that adds the bearer token and changes nothing
else (tests/hermes_mcp/conformance_support.py), so the server's own defaults are what is tested.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.messages import UserMessage
from core.store import SessionStore
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp import conformance_support as suite
from tests.hermes_mcp.harness import mcp_env
from tests.hermes_mcp.test_http import Served, http_server

pytestmark = pytest.mark.timeout(300)  # the suite's own waits (up to 15 s in server-sse-polling) on a busy machine

# The scenarios a general server answers: the protocol's lifecycle, utilities, listings, logging,
# completions, subscriptions, streamable HTTP's SSE behaviour and DNS-rebinding protection; with the
# checks each must pass (beside no check failing or warning), so a scenario that only records cannot pass.
APPLY = {
    "server-initialize": ["server-initialize"],
    "ping": ["ping"],
    "tools-list": ["tools-list"],
    "resources-list": ["resources-list"],
    "prompts-list": ["prompts-list"],
    "logging-set-level": ["logging-set-level"],
    "completion-complete": ["completion-complete"],
    "resources-subscribe": ["resources-subscribe"],
    "resources-unsubscribe": ["resources-unsubscribe"],
    # The call's stream is closed mid-call and its result comes on the stream resumed with Last-Event-ID.
    "server-sse-polling": ["server-sse-priming-event", "server-sse-retry-field", "server-sse-disconnect-resume"],
    "server-sse-multiple-streams": ["server-accepts-multiple-post-streams", "server-sse-streams-functional"],
    "dns-rebinding-protection": ["localhost-host-rebinding-rejected", "localhost-host-valid-accepted"],
}
# server-sse-polling calls the suite's tool test_reconnection, which hermes-mcp serves only when asked
# to (HERMES_MCP_CONFORMANCE=1); the other scenarios meet the server as users run it.
WITH_TEST_TOOL = {"server-sse-polling"}

# The rest test the suite's reference ("everything") server: they call tools, prompts and resources
# by fixed names (test_simple_text, test://static-text, test_simple_prompt, ...) and expect fixed
# content back. A general server offers its own tools and content, so these cannot apply.
_FIXTURE = "needs the suite's reference server's fixed {what} {name}"
LEFT_OUT = {
    "tools-call-simple-text": _FIXTURE.format(what="tool", name="test_simple_text"),
    "tools-call-image": _FIXTURE.format(what="tool", name="test_image_content"),
    "tools-call-audio": _FIXTURE.format(what="tool", name="test_audio_content"),
    "tools-call-embedded-resource": _FIXTURE.format(what="tool", name="test_embedded_resource"),
    "tools-call-mixed-content": _FIXTURE.format(what="tool", name="test_multiple_content_types"),
    "tools-call-with-logging": _FIXTURE.format(what="tool", name="test_tool_with_logging"),
    "tools-call-error": _FIXTURE.format(what="tool", name="test_error_handling"),
    "tools-call-with-progress": _FIXTURE.format(what="tool", name="test_tool_with_progress"),
    "tools-call-sampling": _FIXTURE.format(what="tool", name="test_sampling"),
    "tools-call-elicitation": _FIXTURE.format(what="tool", name="test_elicitation"),
    "json-schema-2020-12": _FIXTURE.format(what="tool", name="json_schema_2020_12_tool"),
    "elicitation-sep1034-defaults": _FIXTURE.format(what="tool", name="test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": _FIXTURE.format(what="tool", name="test_elicitation_sep1330_enums"),
    "resources-read-text": _FIXTURE.format(what="resource", name="test://static-text"),
    "resources-read-binary": _FIXTURE.format(what="resource", name="test://static-binary"),
    "resources-templates-read": _FIXTURE.format(what="resource template", name="test://template/{id}/data"),
    "prompts-get-simple": _FIXTURE.format(what="prompt", name="test_simple_prompt"),
    "prompts-get-with-args": _FIXTURE.format(what="prompt", name="test_prompt_with_arguments"),
    "prompts-get-embedded-resource": _FIXTURE.format(what="prompt", name="test_prompt_with_embedded_resource"),
    "prompts-get-with-image": _FIXTURE.format(what="prompt", name="test_prompt_with_image"),
}


@dataclass
class Target:
    url: str  # the proxy's endpoint, given to the suite
    results: Path
    proxy: suite.TokenProxy = field(repr=False)  # neither shows the token in a failure's report
    served: Served = field(repr=False)


def _skill(root: Path, name: str, description: str) -> None:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nRun make {name}.\n")


async def _a_session(home: Path) -> None:
    async with SessionStore.open(home / "state.db") as store:
        record = await store.create_session(cwd=str(home.parent / "project"), surface="acp", title="fix the flux capacitor")
        await store.append_message(record.id, UserMessage.of("the flux capacitor needs a fix"))


@contextlib.contextmanager
def _serving(base: Path, extra: dict[str, str]) -> Iterator[Target]:
    """A real hermes-mcp --http (a skill, a memory, a session in its home; a scripted model configured),
    and the token proxy in front of it."""
    home = base / "hermes-home"
    home.mkdir()
    (base / "user-home").mkdir()
    _skill(home / "skills", "deploy", "Ship to production")
    (home / "memories").mkdir()
    (home / "memories" / "MEMORY.md").write_text("- uses uv\n")
    asyncio.run(_a_session(home))
    with ScriptedOpenAIServer([]) as model, http_server(mcp_env(home, model.base_url, extra=extra)) as served:
        with suite.token_proxy(served.url, served.token) as proxy:
            yield Target(proxy.url, base / "results", proxy, served)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The server as users run it, for the module."""
    with _serving(tmp_path_factory.mktemp("conformance"), {}) as served:
        yield served


@pytest.fixture(scope="module")
def target_with_test_tool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """The server asked to serve the suite's test tool, for the module."""
    with _serving(tmp_path_factory.mktemp("conformance-tool"), {"HERMES_MCP_CONFORMANCE": "1"}) as served:
        yield served


def _run(target: Target, scenario: str) -> list[dict]:
    checks, output = suite.run_scenario(target.url, scenario, target.results)
    assert checks, f"{scenario}: the suite reported no checks:\n{output[-3000:]}"
    return checks


@pytest.mark.parametrize("scenario", APPLY)
def test_conformance_scenario_passes_without_warnings(request, scenario):
    target = request.getfixturevalue("target_with_test_tool" if scenario in WITH_TEST_TOOL else "target")
    checks = _run(target, scenario)
    counts = suite.summary(checks)
    assert counts["failed"] == 0 and counts["warnings"] == 0, f"{scenario} {counts}:\n{suite.verdicts(checks)}"
    status = {c.get("id"): c.get("status") for c in checks}
    missing = [check for check in APPLY[scenario] if status.get(check) != "SUCCESS"]
    assert not missing, f"{scenario}: these checks did not pass: {missing}; checks: {status}"


def test_every_server_scenario_of_the_suite_is_run_or_left_out_for_a_reason():
    """A newer suite with a new server scenario fails here until it is added to APPLY or LEFT_OUT."""
    known = suite.server_scenarios()
    assert sorted(known) == sorted([*APPLY, *LEFT_OUT]), (
        f"new: {sorted(set(known) - set(APPLY) - set(LEFT_OUT))}; gone: {sorted(set(APPLY) | set(LEFT_OUT) - set(known))}"
    )


def test_dns_rebinding_is_refused_by_the_servers_own_check_not_by_the_token(target):
    """Through the proxy the request carries the token and the suite's Host and Origin unchanged, so the
    refusal comes from the server's Host check (421), not from the missing token (401)."""
    before = len(target.proxy.requests)
    checks = {c["id"]: c for c in _run(target, "dns-rebinding-protection")}
    rejected, accepted = checks["localhost-host-rebinding-rejected"], checks["localhost-host-valid-accepted"]
    assert rejected["status"] == "SUCCESS" and rejected["details"]["statusCode"] == 421, rejected
    assert accepted["status"] == "SUCCESS" and accepted["details"]["statusCode"] == 200, accepted
    forwarded = [headers for _, _, headers in target.proxy.requests[before:]]
    evil = [h for h in forwarded if h.get("host") == "evil.example.com"]
    assert evil and evil[0]["origin"] == "http://evil.example.com"
    assert all(h["authorization"] == f"Bearer {target.served.token}" for h in forwarded)
    proxy_host = target.url.split("/")[2]
    assert any(h.get("host") == proxy_host and h.get("origin") == f"http://{proxy_host}" for h in forwarded)
