"""/model and /cost through the real gateway: the configured choices, a switch kept with the session
across a restart, and costs from the price table override, from the provider, or unknown."""

from __future__ import annotations

import asyncio
import html

from core.store import SessionStore
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, start


def providers(model_url: str) -> str:
    return f"""
[providers.openai]
models = ["scripted", "gpt-4.1-mini"]
[providers.local]
profile = "openai-compatible"
base_url = "{model_url}"
models = ["tiny"]
[pricing."openai:scripted"]
input = 2.0
output = 8.0
"""


def replies(telegram, needle: str) -> list[str]:
    """The bot's messages containing ``needle``, as the user reads them (entities decoded, `code` as <code>)."""
    texts = [html.unescape(m["text"]) for m in telegram.sent(OWNER)]
    return [text for text in texts if needle in text]


def ask(telegram, command: str, needle: str) -> str:
    """Send ``command`` and return the new reply that contains ``needle``."""
    before = len(replies(telegram, needle))
    telegram.send_user_message(OWNER, command)
    telegram.wait_for(lambda: len(replies(telegram, needle)) > before, 20, f"the reply to {command}")
    return replies(telegram, needle)[-1]


def stored_model(session_prefix: str) -> tuple[str, dict]:
    async def body() -> tuple[str, dict]:
        async with SessionStore.open() as store:
            records = [r for r in await store.list_sessions(limit=50) if r.id.startswith(session_prefix)]
            assert len(records) == 1, records
            return records[0].model, records[0].meta

    return asyncio.run(body())


def test_model_lists_the_choices_and_a_switch_is_kept_with_the_session(hermes_home, project, telegram):
    script = [{"text": "From the default."}, {"text": "From tiny."}, {"text": "Tiny again, after the restart."}]
    with ScriptedOpenAIServer(script) as model:
        extra = providers(model.base_url)
        with start(hermes_home, project, telegram, model, extra=extra):
            shown = ask(telegram, "/model", "Model:")
            assert "→ <code>openai:scripted</code>" in shown and "openai:gpt-4.1-mini" in shown and "local:tiny" in shown, shown
            refused = ask(telegram, "/model nowhere:gpt-9", "No provider named")
            assert "'nowhere'" in refused and "[providers.nowhere]" in refused and "local:tiny" in refused, refused
            telegram.send_user_message(OWNER, "hello")
            telegram.wait_text(OWNER, "From the default.")
            switched = ask(telegram, "/model local:tiny", "Model set to")
            assert "local:tiny" in switched, switched
            session = switched.split("session (")[1][:8]
            telegram.send_user_message(OWNER, "and now?")
            telegram.wait_text(OWNER, "From tiny.")
        assert [r["model"] for r in model.requests] == ["scripted", "tiny"]
        column, meta = stored_model(session)
        assert column == "local:tiny" and meta["model"] == "local:tiny"
        # After a restart the chat's session still answers with the model picked for it.
        with start(hermes_home, project, telegram, model, extra=extra):
            assert "→ <code>local:tiny</code>" in ask(telegram, "/model", "Model:")
            telegram.send_user_message(OWNER, "still there?")
            telegram.wait_text(OWNER, "Tiny again, after the restart.")
        assert model.requests[-1]["model"] == "tiny"


def test_cost_from_the_price_override_the_provider_or_unknown(hermes_home, project, telegram):
    script = [
        {"text": "Priced by config.", "usage": {"input_tokens": 1000, "output_tokens": 500}},
        {"text": "Priced by the provider.", "usage": {"input_tokens": 100, "output_tokens": 10, "cost": 0.0123}},
        {"text": "Nobody knows the price.", "usage": {"input_tokens": 40, "output_tokens": 4}},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, extra=providers(model.base_url)):
        assert "No session yet" in ask(telegram, "/cost", "No session yet")
        telegram.send_user_message(OWNER, "hello")
        telegram.wait_text(OWNER, "Priced by config.")
        cost = ask(telegram, "/cost", "Input tokens")
        # 1000 input at $2/M and 500 output at $8/M
        assert "Input tokens: 1,000" in cost and "Output tokens: 500" in cost and "Cost: $0.0060" in cost, cost
        assert "$2 in, $8 out per million tokens (config.toml [pricing])" in cost, cost

        ask(telegram, "/model local:tiny", "Model set to")
        telegram.send_user_message(OWNER, "again")
        telegram.wait_text(OWNER, "Priced by the provider.")
        cost = ask(telegram, "/cost", "Input tokens")
        assert "Input tokens: 1,100" in cost and "Cost: $0.0183" in cost, cost  # 0.0060 + the reported 0.0123

        ask(telegram, "/new", "New conversation")  # the chat keeps local:tiny, which has no known price
        telegram.send_user_message(OWNER, "once more")
        telegram.wait_text(OWNER, "Nobody knows the price.")
        cost = ask(telegram, "/cost", "Input tokens")
        assert "Input tokens: 40" in cost and "unknown price for local:tiny" in cost and '[pricing."local:tiny"]' in cost, cost
