"""Splitting and rendering for Telegram: every chunk fits, code fences survive a split, HTML is valid."""

from __future__ import annotations

import plistlib
from pathlib import Path

from hermes_gateway.render import LIMIT, number_chunks, split_markdown, to_html
from hermes_gateway.telegram_io import fit_chunks
from tests.fakes.telegram_server import html_error

ROOT = Path(__file__).resolve().parents[2]


def test_short_text_is_one_chunk():
    assert split_markdown("hello") == ["hello"] and number_chunks(["hello"]) == ["hello"]


def test_long_text_splits_at_paragraphs_and_keeps_everything():
    paragraphs = [f"Paragraph {i}: " + "word " * 150 for i in range(30)]
    chunks = split_markdown("\n\n".join(paragraphs))
    assert len(chunks) > 1 and all(len(c) <= LIMIT for c in number_chunks(chunks))
    assert all(c.startswith("Paragraph") for c in chunks)  # cut between paragraphs, not inside
    assert " ".join(" ".join(chunks).split()) == " ".join(" ".join(paragraphs).split())


def test_a_split_code_block_is_closed_and_reopened_with_its_language():
    text = "Intro\n\n```python\n" + "".join(f"x{i} = {i}\n" for i in range(1500)) + "```\nAfter."
    chunks = split_markdown(text)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert chunk.count("```") % 2 == 0
    assert all(c.lstrip().startswith("```python") for c in chunks[1:-1])
    rendered = [to_html(c) for c in chunks]
    assert all(html_error(r) is None for r in rendered)


def test_one_enormous_line_is_cut():
    chunks = split_markdown("x" * 10_000)
    assert len(chunks) == 3 and "".join(chunks) == "x" * 10_000


def test_html_rendering_escapes_and_maps_markdown():
    html = to_html("# Title\n**b** *i* `a<b>` [link](https://example.com/?a=1&b=2) ~~s~~ 1 < 2 & 3\n> quoted\n- item")
    assert html_error(html) is None
    assert "<b>Title</b>" in html and "<b>b</b>" in html and "<i>i</i>" in html and "<code>a&lt;b&gt;</code>" in html
    assert '<a href="https://example.com/?a=1&amp;b=2">link</a>' in html and "<s>s</s>" in html
    assert "1 &lt; 2 &amp; 3" in html and "<blockquote>quoted</blockquote>" in html and "• item" in html


def test_chunks_that_grow_as_html_are_split_again_to_fit():
    text = "<&>" * 5000  # every character becomes an entity
    chunks = number_chunks(fit_chunks(text))
    assert all(len(to_html(c)) <= LIMIT for c in chunks)
    assert "".join(c.split("\n", 1)[1] for c in chunks).replace("\n", "") == text


def test_service_units_run_the_gateway():
    unit = (ROOT / "editor-configs" / "hermes-gateway.service").read_text()
    assert "hermes-gateway run" in unit and "KillSignal=SIGTERM" in unit
    plist = plistlib.loads((ROOT / "editor-configs" / "com.hermes-editor.gateway.plist").read_bytes())
    assert plist["ProgramArguments"][-1] == "run" and plist["ProgramArguments"][0].endswith("hermes-gateway")


def test_service_units_restart_after_a_failure_exit():
    """Exit 1 (a crash, or another gateway holding the bot) is restarted; only exit 2 (fix the config) is not."""
    settings = {}
    for line in (ROOT / "editor-configs" / "hermes-gateway.service").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            settings[key.strip()] = value.strip()
    assert settings["Restart"] in ("on-failure", "always") and float(settings["RestartSec"]) > 0
    assert "1" not in settings.get("RestartPreventExitStatus", "").split()
    assert settings.get("StartLimitIntervalSec") == "0"
    plist = plistlib.loads((ROOT / "editor-configs" / "com.hermes-editor.gateway.plist").read_bytes())
    keep_alive = plist["KeepAlive"]
    assert keep_alive is True or keep_alive == {"SuccessfulExit": False}
    assert plist["ThrottleInterval"] > 0
