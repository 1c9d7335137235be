"""Cron results delivered to files and webhooks by the real ``hermes-gateway run`` (scheduler only,
no chat platform): a local HTTP receiver plays the webhook, a temp folder the report file."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hermes_gateway.scheduler import append_result
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import cli
from tests.hermes_gateway.test_cron_without_bot import added_id, start_scheduler, stop, wait_until

SECRET = "hook-secret-value-8f3a2c"


class Receiver:
    """A webhook endpoint on 127.0.0.1: records each POST; paths starting with /fail answer 500."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        received = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                received.append({"path": self.path, "headers": dict(self.headers), "json": json.loads(body)})
                self.send_response(500 if self.path.startswith("/fail") else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def at(self, path: str) -> list[dict[str, Any]]:
        return [p for p in self.posts if p["path"] == path]


def write_config(home: Path, extra: str = "") -> None:
    (home / "config.toml").write_text(
        'log_level = "debug"\n[gateway]\nshutdown_grace = 5\n'
        f"[cron]\ntick = 0.3\ndelivery_attempts = 3\ndelivery_retry_delay = 0.2\n{extra}",
        encoding="utf-8",
    )


def settled_runs(home: Path, job_id: str) -> list[dict] | None:
    rows = json.loads(cli(home, "cron", "runs", job_id, "--json").stdout)
    return rows if rows and rows[0]["status"] not in ("running", "queued") and rows[0]["delivery_status"] != "pending" else None


def test_results_go_to_a_file_and_webhooks_and_a_failing_webhook_is_retried_then_failed(hermes_home, project, tmp_path):
    report = tmp_path / "reports" / "nightly" / "build.md"  # its folders do not exist yet
    with Receiver() as hook, ScriptedOpenAIServer([{"text": "All green."}]) as model:
        write_config(
            hermes_home,
            f'[cron.webhooks.ops]\nurl = "{hook.url("/ops")}"\nheaders = {{ Authorization = "Bearer {SECRET}", X-Team = "build" }}\n',
        )
        added = cli(
            hermes_home,
            "cron",
            "add",
            "every 1h",
            "check the build",
            "--project",
            str(project),
            "--name",
            "nightly",
            "--deliver",
            f"file:{report}",
            "--deliver",
            "webhook:ops",
            "--deliver",
            f"webhook:{hook.url('/fail')}",
        )
        job_id = added_id(added)
        assert f"file:{report}" in added.stdout and "webhook:ops" in added.stdout, added.stdout
        listed = cli(hermes_home, "cron", "list")
        assert f"delivers to: the store, file:{report}, webhook:ops, webhook:{hook.url('/fail')}" in listed.stdout, listed.stdout
        (row,) = json.loads(cli(hermes_home, "cron", "list", "--json").stdout)
        assert row["deliver"] == [f"file:{report}", "webhook:ops", f"webhook:{hook.url('/fail')}"] and not row["deliver_defaults"]

        proc = start_scheduler(hermes_home, model.base_url)
        try:
            assert cli(hermes_home, "cron", "run", job_id).returncode == 0
            (run,) = wait_until(lambda: settled_runs(hermes_home, job_id), 60, "the run's deliveries to settle")
        finally:
            code, out, err = stop(proc)
    assert code == 0, err

    assert run["status"] == "ok" and run["result"] == "All green."
    by_target = {d["target"]: d for d in run["deliveries"]}
    assert by_target[f"file:{report}"]["status"] == "delivered" and by_target["webhook:ops"]["status"] == "delivered"
    failing = by_target[f"webhook:{hook.url('/fail')}"]
    assert failing["status"] == "failed" and failing["attempts"] == 3 and "HTTP 500" in failing["error"], failing
    assert run["delivery_status"] == "failed" and "HTTP 500" in run["delivery_error"]

    # The failing webhook was tried three times; the others took the result once, not once per retry.
    assert len(hook.at("/fail")) == 3 and len(hook.at("/ops")) == 1
    text = report.read_text(encoding="utf-8")
    assert text.count("All green.") == 1 and f"nightly (job {job_id}, run {run['id']}) · ok" in text, text
    assert report.stat().st_mode & 0o777 == 0o600

    (ops,) = hook.at("/ops")
    assert ops["headers"]["Authorization"] == f"Bearer {SECRET}" and ops["headers"]["X-Team"] == "build"
    assert ops["headers"]["Idempotency-Key"] == run["id"] and ops["headers"]["Content-Type"] == "application/json"
    payload = ops["json"]
    assert payload["job_id"] == job_id and payload["job_name"] == "nightly" and payload["run_id"] == run["id"]
    assert payload["status"] == "ok" and payload["result"] == "All green." and payload["error"] is None
    assert payload["started_at"] and payload["finished_at"] and "Authorization" not in hook.at("/fail")[0]["headers"]

    shown = cli(hermes_home, "cron", "runs", job_id).stdout
    assert f"-> webhook:{hook.url('/fail')}: failed x3" in shown and f"-> file:{report}: delivered" in shown, shown
    logs = "".join(p.read_text(errors="replace") for p in (hermes_home / "logs").glob("*.log")) + out + err
    assert "delivery of cron run" in logs and "HTTP 500" in logs  # the failures were logged ...
    assert SECRET not in logs and "/fail" not in logs  # ... naming the webhook by its origin, never its header values


def test_an_unwritable_file_is_recorded_on_the_run_and_defaults_apply_to_jobs_that_name_none(hermes_home, project, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where a folder should be\n")
    default_report = tmp_path / "default.md"
    with Receiver() as hook, ScriptedOpenAIServer([{"text": "Report one."}, {"text": "Report two."}]) as model:
        write_config(hermes_home, f'deliver = ["file:{default_report}", "webhook:{hook.url("/default")}"]\n')
        broken = added_id(
            cli(hermes_home, "cron", "add", "every 1h", "one", "--project", str(project), "--deliver", f"file:{blocker}/out.md")
        )
        plain = added_id(cli(hermes_home, "cron", "add", "every 1h", "two", "--project", str(project)))
        (listed,) = [j for j in json.loads(cli(hermes_home, "cron", "list", "--json").stdout) if j["id"] == plain]
        assert listed["deliver_defaults"] and listed["deliver"] == [f"file:{default_report}", f"webhook:{hook.url('/default')}"]
        proc = start_scheduler(hermes_home, model.base_url)
        try:
            assert cli(hermes_home, "cron", "run", broken).returncode == 0
            (failed,) = wait_until(lambda: settled_runs(hermes_home, broken), 60, "the broken job's delivery to give up")
            assert cli(hermes_home, "cron", "run", plain).returncode == 0
            (done,) = wait_until(lambda: settled_runs(hermes_home, plain), 60, "the plain job's delivery")
        finally:
            code, _, err = stop(proc)
    assert code == 0, err
    (dest,) = failed["deliveries"]
    assert failed["status"] == "ok" and dest["status"] == "failed" and dest["attempts"] == 3
    assert f"cannot append to {blocker}/out.md" in dest["error"] and "is a file, not a folder" in dest["error"], dest
    assert blocker.read_text() == "a file where a folder should be\n"
    # The job that named no destination went to the [cron] deliver defaults (and the other job did not).
    assert done["delivery_status"] == "delivered" and {d["status"] for d in done["deliveries"]} == {"delivered"}
    assert "Report two." in default_report.read_text() and "Report one." not in default_report.read_text()
    (posted,) = hook.at("/default")
    assert posted["json"]["result"] == "Report two." and posted["json"]["job_id"] == plain


def test_cron_add_rejects_destinations_it_cannot_use(hermes_home, project):
    write_config(hermes_home)
    for dest, said in (
        ("ftp://example.com/x", "only http and https"),
        ("webhook:ftp://example.com/x", "only http and https"),
        ("webhook:ops", "no webhook named 'ops'"),
        ("mailto:me@example.com", "unknown destination"),
        (f"file:{project}", "is a directory"),
    ):
        refused = cli(hermes_home, "cron", "add", "every 1h", "x", "--project", str(project), "--deliver", dest)
        assert refused.returncode == 2 and said in refused.stdout, (dest, refused.stdout)
    assert json.loads(cli(hermes_home, "cron", "list", "--json").stdout) == []


def test_runs_appending_at_once_never_interleave(tmp_path):
    path = tmp_path / "deep" / "shared.md"
    entries = [f"## run {n}\n\n" + chr(ord("a") + n) * 300_000 + "\n\n" for n in range(8)]
    threads = [threading.Thread(target=append_result, args=(path, text)) for text in entries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    written = path.read_text()
    assert len(written) == sum(map(len, entries))
    for text in entries:
        assert text in written  # each entry whole and contiguous
    os.symlink(tmp_path / "elsewhere.md", tmp_path / "link.md")
    try:
        append_result(tmp_path / "link.md", "x")
    except OSError as exc:
        assert "link" in str(exc) or exc.strerror
    else:
        raise AssertionError("appending through a link put in the path's way should fail")
    assert not (tmp_path / "elsewhere.md").exists()


def test_in_a_chat_a_paired_user_may_deliver_to_a_project_file_but_not_outside_and_both_chat_and_file_get_the_result(
    hermes_home, project, telegram, tmp_path
):
    from tests.hermes_gateway.harness import OWNER, start

    friend = 5151
    outside = tmp_path / "owner-notes.md"
    add = lambda i, deliver: {
        "tool_calls": [
            {"id": f"c{i}", "name": "cron", "arguments": {"action": "add", "schedule": "every 1h", "prompt": "digest", "deliver": deliver}}
        ]
    }
    script = [add(1, [f"file:{outside}"]), {"text": "Turn one over."}, add(2, ["file:notes/digest.md"]), {"text": "Turn two over."}]
    script.append({"text": "Digest ready."})
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, friend)) as gateway:
        telegram.send_user_message(friend, "send the digest to the owner's notes")
        telegram.wait_text(friend, "Turn one over.")
        refused = [m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"][-1]
        telegram.send_user_message(friend, "then keep it in the project")
        asked = telegram.wait_text(friend, "Approval needed")
        assert str(project / "notes" / "digest.md") in asked["text"], asked["text"]
        telegram.press(friend, asked, asked["reply_markup"]["inline_keyboard"][0][0]["callback_data"])
        telegram.wait_text(friend, "Turn two over.")
        (job,) = [j for j in json.loads(cli(hermes_home, "cron", "list", "--json").stdout) if j["kind"] == "agent"]
        assert job["chat_key"] == f"telegram:{friend}:0" and job["deliver"] == [f"file:{project / 'notes' / 'digest.md'}"]
        assert cli(hermes_home, "cron", "run", job["id"]).returncode == 0
        telegram.wait_text(friend, "Digest ready.", timeout=60)
        (run,) = wait_until(lambda: settled_runs(hermes_home, job["id"]), 30, "both deliveries")
        gateway.stop()
    assert "Only the bot's owner" in refused and str(outside) in refused and not outside.exists()
    assert run["delivery_status"] == "delivered" and {d["target"]: d["status"] for d in run["deliveries"]} == {
        f"chat:telegram:{friend}:0": "delivered",
        f"file:{project / 'notes' / 'digest.md'}": "delivered",
    }
    assert "Digest ready." in (project / "notes" / "digest.md").read_text()
