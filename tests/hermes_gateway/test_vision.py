"""The real hermes-gateway process: a Telegram photo sent to a text-only model is described by the
``[models] vision`` model, and the model reads the description."""

from __future__ import annotations

import base64

from tests.fakes.openai_server import ScriptedOpenAIServer, Spec
from tests.hermes_gateway.harness import OWNER, start

# The smallest thing that looks like a JPEG (SOI ... EOI); the gateway passes the bytes through.
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"
DESCRIPTION = "A whiteboard photo listing: 1. fix login 2. ship v2."
VISION = '[providers.openai]\nimages = false\n[models]\nvision = "openai:scripted-vision"\n'


def _answer(body: dict) -> Spec:
    if body["model"] == "scripted-vision":
        return {"text": DESCRIPTION}
    return {"text": "Two tasks: fix login, then ship v2."}


def test_a_photo_is_described_for_a_text_only_model(hermes_home, project, telegram):
    telegram.files["ph1"] = JPEG
    photo = [{"file_id": "ph1", "file_unique_id": "p1", "width": 800, "height": 600, "file_size": len(JPEG)}]
    with ScriptedOpenAIServer(_answer) as model, start(hermes_home, project, telegram, model, extra=VISION):
        telegram.send_user_message(OWNER, "", photo=photo, caption="what is on my list?")
        telegram.wait_text(OWNER, "Two tasks: fix login, then ship v2.")
    (seen,) = [r for r in model.requests if r["model"] == "scripted-vision"]
    parts = [p for m in seen["messages"] if m["role"] == "user" for p in m["content"]]
    assert [p["image_url"]["url"] for p in parts if p["type"] == "image_url"] == [
        "data:image/jpeg;base64," + base64.b64encode(JPEG).decode()
    ]
    assert any("what is on my list?" in p.get("text", "") for p in parts)
    (main,) = [r for r in model.requests if r["model"] == "scripted"]
    content = [m for m in main["messages"] if m["role"] == "user"][-1]["content"]
    assert isinstance(content, str)  # text only: no image part reaches the text-only model
    assert f"[Image: {DESCRIPTION}]" in content and "what is on my list?" in content
