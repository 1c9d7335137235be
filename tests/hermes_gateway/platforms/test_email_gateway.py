"""The real hermes-gateway process on email: a local mail provider (SMTP and IMAP on 127.0.0.1)
and the scripted model.

Email has no groups and no buttons, so the authorisation matrix is about the sender: a stranger
gets a pairing code by return mail, and a message whose From the receiving server did not verify
is refused whoever it claims to be. Questions are answered by replying with a one-time code.
"""

from __future__ import annotations

import re

import pytest

from tests.fakes.email_server import FakeMail, SentMail
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.speech_server import FakeSpeech, spoken_wav
from tests.hermes_gateway.platform_harness import GatewayProcess, cli, gateway_status, start_gateway, wait_until

ADA = "ada@example.org"  # the owner
BOB = "bob@example.net"  # allowed too
EVE = "eve@example.com"  # a stranger


@pytest.fixture
def mail():
    with FakeMail() as fake:
        yield fake


def run(hermes_home, project, mail: FakeMail, model, *, allowed=(ADA,), extra: str = "") -> GatewayProcess:
    """A gateway with only email; the password comes from the environment."""
    section = mail.section(password=None, allowed_users=list(allowed), owner=ADA) + extra
    return start_gateway(hermes_home, project, section, model=model, wait_for=["email"], env={"EMAIL_PASSWORD": mail.password})


def code_for(question: SentMail, label: str) -> str:
    """The one-time code the question gives for ``label`` ("Allow once")."""
    match = re.search(rf"Reply (\w+) — {label}", question.text)
    assert match, question.text
    return match.group(1)


def test_pairing_and_the_authorisation_matrix(hermes_home, project, mail):
    with ScriptedOpenAIServer([{"text": "Welcome aboard."}]) as model, run(hermes_home, project, mail, model) as gateway:
        mail.receive(EVE, "hello", subject="Hi there")
        told = mail.wait_text(EVE, "Pairing code:")
        code = re.search(r"Pairing code: (\w{8})", told.text).group(1)
        assert f"email:{EVE}" in told.text and told.subject == "Re: Hi there"
        # Someone claiming to be the owner, unverified by the receiving server: refused, unanswered.
        mail.receive(ADA, "delete everything", dkim="fail", subject="urgent")
        mail.receive(ADA, "delete everything", dkim="pass", dkim_domain="evil.example.com", subject="urgent")
        # Mail is handled in order: once Eve's next message is answered, the forged ones were handled.
        mail.receive(EVE, "again?")
        mail.wait_sent(lambda m: EVE in m.rcpt_tos and m.text.count("Pairing code") and m is not told, what="the second answer to Eve")
        assert mail.sent_to(ADA) == [] and model.requests == []
        approved = cli(hermes_home, "pairing", "approve", code)
        assert approved.returncode == 0 and f"email:{EVE}" in approved.stdout
        mail.reply(told, EVE, "now?")
        welcome = mail.wait_text(EVE, "Welcome aboard.")
        assert welcome.subject == "Re: Hi there" and welcome.header("In-Reply-To")
        code_, err = gateway.stop()
    assert code_ == 0
    # The password never reaches a log, the status file or stderr.
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log"))
    statuses = "".join(p.read_text() for p in (hermes_home / "gateway").glob("*.json"))
    assert mail.password not in logs + statuses + err


def test_a_reply_comes_whole_and_a_long_one_in_numbered_emails(hermes_home, project, mail):
    paragraph = "A **bold** claim with `code` and more words to fill the line. " * 20
    long_reply = "\n\n".join(f"{i}. {paragraph}" for i in range(220))  # about 280,000 characters
    script = [{"text": "Short and whole.", "chunk_size": 3}, {"text": long_reply, "chunk_size": 20_000}]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, mail, model):
        mail.receive(ADA, "a short one", subject="Replies")
        short = mail.wait_text(ADA, "Short and whole.")
        mail.reply(short, ADA, "now a long one")
        last = mail.wait_sent(lambda m: re.match(r"\((\d+)/\1\)", m.text), 60, "the last numbered email")
    total = int(re.match(r"\((\d+)/", last.text).group(1))
    sent = mail.sent_to(ADA)
    # No drafts: the short reply is one email, and the long one exactly its numbered chunks.
    assert [m.text for m in sent[:1]] == ["Short and whole.\n"]
    chunks = sent[1:]
    assert total >= 3 and [m.text.split("\n")[0] for m in chunks] == [f"({i}/{total})" for i in range(1, total + 1)]
    assert all(len(m.text) <= 100_000 for m in chunks)
    assert all(m.subject == "Re: Replies" for m in sent)
    joined = "".join(m.text for m in chunks)
    assert all(f"{i}. A **bold** claim" in joined for i in range(220))


def test_an_approval_is_answered_only_by_the_askers_verified_reply(hermes_home, project, mail):
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
        {"text": "Bob's own conversation."},
        {"text": "Wrote it."},
    ]
    with ScriptedOpenAIServer(script) as model, run(hermes_home, project, mail, model, allowed=(ADA, BOB)):
        mail.receive(ADA, "write notes.txt", subject="Notes")
        question = mail.wait_text(ADA, "Approval needed")
        allow_once = code_for(question, "Allow once")
        assert question.subject == "Re: Notes" and "(Each code works once" in question.text
        # A forged reply from Ada's address with the right code: not verified, so not an answer.
        mail.reply(question, ADA, allow_once, dkim="fail")
        # Bob, allowed but not the asker, sends the code: in his own conversation it is just a prompt.
        mail.receive(BOB, allow_once, subject="a code I saw")
        mail.wait_text(BOB, "Bob's own conversation.")
        assert not (project / "notes.txt").exists()
        # Ada answers from her mail client: her reply quotes the whole question with every code in it.
        mail.reply(question, ADA, allow_once)
        mail.wait_text(ADA, "Allowed once")
        mail.wait_text(ADA, "Wrote it.")
        assert (project / "notes.txt").read_text() == "hi\n"
        assert len(model.requests) == 3


def test_an_attachment_reaches_the_model(hermes_home, project, mail):
    with ScriptedOpenAIServer([{"text": "Read your file."}]) as model, run(hermes_home, project, mail, model):
        mail.receive(ADA, "summarise this", subject="Notes", attachments=(("notes.txt", "text/plain", b"line one\nline two\n"),))
        mail.wait_text(ADA, "Read your file.")
        prompt = str(model.requests[0]["messages"][-1]["content"])
    assert "line two" in prompt and "summarise this" in prompt
    assert list((hermes_home / "gateway" / "uploads").rglob("*notes.txt"))


def test_a_cron_job_delivers_to_the_thread_it_was_made_in(hermes_home, project, mail):
    with ScriptedOpenAIServer([{"text": "Nightly report: all green."}]) as model, run(hermes_home, project, mail, model):
        mail.receive(ADA, "/cron add every 1h | report on the build", subject="Jobs")
        added = mail.wait_text(ADA, "Added job")
        job_id = re.search(r"Added job `(\w+)`", added.text).group(1)
        mail.reply(added, ADA, f"/cron run {job_id}")
        delivered = mail.wait_text(ADA, "⏰", 60)
        assert "Nightly report: all green." in delivered.text and delivered.subject == "Re: Jobs"
        assert model.requests


def test_an_audio_attachment_is_a_voice_note_transcribed_and_answered(hermes_home, project, mail):
    memo = spoken_wav("What does the build script do?")  # a real recording, made with espeak-ng
    with FakeSpeech() as speech, ScriptedOpenAIServer([{"text": "The build script compiles the docs."}]) as model:
        speech.expect(memo, "What does the build script do?")
        voice = f'\n[voice]\nstt_base_url = "{speech.base_url}"\nstt_api_key = "gsk-voice-key-not-real-0123456789"\n'
        with run(hermes_home, project, mail, model, extra=voice):
            mail.receive(ADA, "", subject="Voice memo", attachments=(("memo.wav", "audio/wav", memo),))
            mail.wait_text(ADA, "🎤 What does the build script do?")
            mail.wait_text(ADA, "The build script compiles the docs.")
    [upload] = speech.uploads
    assert upload.data == memo and upload.filename == "memo.wav"
    assert "What does the build script do?" in str(model.requests[0]["messages"][-1]["content"])


def test_a_refused_password_keeps_the_gateway_running_and_says_why(hermes_home, project, mail):
    wrong = "not-the-password-0000"
    section = mail.section(password=None, allowed_users=[ADA], owner=ADA)
    with (
        ScriptedOpenAIServer([]) as model,
        start_gateway(hermes_home, project, section, model=model, env={"EMAIL_PASSWORD": wrong}) as gateway,
    ):

        def refused() -> dict:
            state = (gateway_status(hermes_home).get("platforms") or {}).get("email") or {}
            return state if state.get("state") == "retrying" and state.get("error") else {}

        state = wait_until(refused, 30, "email to be retrying")
        assert f"refused the login for {mail.address}" in state["error"] and "EMAIL_PASSWORD" in state["error"]
        shown = cli(hermes_home, "gateway", "status").stdout
        assert "email: retrying" in shown and "refused the login" in shown and wrong not in shown
        code, err = gateway.stop()
    assert code == 0 and mail.imap.logins and not any(ok for _, ok in mail.imap.logins)
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log"))
    statuses = "".join(p.read_text() for p in (hermes_home / "gateway").glob("*.json"))
    assert wrong not in logs + statuses + err
