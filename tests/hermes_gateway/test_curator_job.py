"""The curator as a scheduled job of the real ``hermes-gateway`` (no chat platform): it runs when
due, stores its proposals and reports them like a cron result, changes nothing, and only
``hermes-editor skills apply-proposal`` acts, once, and not on what changed since."""

from __future__ import annotations

import json
import time
from pathlib import Path

from core.learning import hub, skills
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, cli, start
from tests.hermes_gateway.test_cron_without_bot import start_scheduler, stop, wait_until

CURATOR_ON = '[curator]\nenabled = true\nschedule = "every 1s"\n'


def write_config(home: Path, curator: str) -> None:
    (home / "config.toml").write_text(
        f'log_level = "debug"\n[gateway]\nshutdown_grace = 5\n[cron]\ntick = 0.5\n{curator}', encoding="utf-8"
    )


def agent_skill(name: str, description: str, *, days_ago: float, who: str = "agent") -> None:
    """A personal skill written by ``who`` ``days_ago`` days ago and never used since."""
    skills.create_skill(name, f"---\nname: {name}\ndescription: {description}\n---\n\nSteps for {name}.\n", who=who)
    set_usage(name, created_at=time.time() - days_ago * 86400)


def set_usage(name: str, **values: object) -> None:
    path = skills.personal_dir() / ".usage.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.setdefault(name, {}).update(values)
    path.write_text(json.dumps(data))


def tree(home: Path) -> dict[str, bytes]:
    """Every file of the skills and memories with its bytes."""
    return {str(p.relative_to(home)): p.read_bytes() for d in ("skills", "memories") for p in sorted((home / d).rglob("*")) if p.is_file()}


def ok(home: Path, *args: str) -> str:
    done = cli(home, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def curator_job(home: Path) -> dict | None:
    return next((job for job in json.loads(ok(home, "cron", "list", "--json")) if job["name"] == "curator"), None)


def test_a_due_curator_job_stores_proposals_changes_nothing_and_apply_acts_once(hermes_home):
    agent_skill("old-unused", "something nobody uses", days_ago=90)
    agent_skill("deploy-staging", "Deploy the app to the staging server", days_ago=1)
    agent_skill("deploy-stagings", "Deploy the app to the staging servers", days_ago=1)
    agent_skill("old-pinned", "an old skill the user pinned", days_ago=90)
    hub.pin("old-pinned")
    agent_skill("by-hand", "written by the user, never used", days_ago=90, who="cli")
    set_usage("write-agents-md", created_by="agent", created_at=time.time() - 90 * 86400)  # a bundled skill, whatever its record says
    before = tree(hermes_home)
    write_config(hermes_home, CURATOR_ON)
    with ScriptedOpenAIServer([]) as model:  # the gateway's agents need a model; the curator's heuristics never call it
        proc = start_scheduler(hermes_home, model.base_url)
        try:
            job = wait_until(lambda: curator_job(hermes_home), 30, "the curator's job to be made")

            def finished() -> list[dict] | None:
                rows = json.loads(ok(hermes_home, "cron", "runs", job["id"], "--json"))
                done = [r for r in rows if r["status"] not in ("running", "queued") and r["delivery_status"] != "pending"]
                return done if len(done) >= 2 else None  # a second run proposes the same again, under the same ids

            runs = wait_until(finished, 60, "two curator runs to finish")
        finally:
            code, _, err = stop(proc)
        assert code == 0 and "Traceback" not in err, err
        assert model.requests == []
    assert job["schedule"] == "every 1" and job["prompt"].startswith("built-in") and "curator" in ok(hermes_home, "cron", "list")
    assert tree(hermes_home) == before, "a curator run changed a skill or a memory file"
    pending = json.loads(ok(hermes_home, "skills", "proposals", "--json"))
    assert sorted((p["action"], p["name"], p["into"]) for p in pending) == [
        ("archive", "old-unused", None),
        ("merge", "deploy-stagings", "deploy-staging"),
    ]
    archive, merge = sorted(pending, key=lambda p: p["action"])
    for run in runs[:2]:
        assert run["status"] == "ok" and archive["id"] in run["result"] and merge["id"] in run["result"], run
        assert run["delivery_status"] == "skipped" and "no chat platform" in run["delivery_error"], run
        assert "old-pinned" not in run["result"] and "write-agents-md" not in run["result"] and "by-hand" not in run["result"]
    listed = ok(hermes_home, "skills", "proposals")
    assert archive["id"] in listed and "archive old-unused" in listed

    applied = ok(hermes_home, "skills", "apply-proposal", archive["id"][:5])
    assert "archived old-unused" in applied and skills.find("old-unused") is None
    assert any(p.name.startswith("old-unused-") for p in (hermes_home / "skills" / ".archive").iterdir())
    again = cli(hermes_home, "skills", "apply-proposal", archive["id"])
    assert again.returncode == 1 and "was applied" in again.stderr and "nothing was done" in again.stderr

    keep = skills.find("deploy-staging")
    assert keep is not None
    keep.path.write_text(keep.path.read_text() + "\nOne more step.\n")
    stale = cli(hermes_home, "skills", "apply-proposal", merge["id"])
    assert stale.returncode == 1 and "stale" in stale.stderr and "hermes-editor skills curate" in stale.stderr
    assert skills.find("deploy-stagings") is not None and "Merged from" not in keep.path.read_text()
    twice = cli(hermes_home, "skills", "apply-proposal", merge["id"])
    assert twice.returncode == 1 and "was stale" in twice.stderr
    assert json.loads(ok(hermes_home, "skills", "proposals", "--json")) == []


def test_the_curator_job_is_weekly_by_default_and_exists_only_while_the_configuration_enables_it(hermes_home):
    write_config(hermes_home, "")  # no [curator] table: on, Mondays at 09:00
    assert cli(hermes_home, "cron", "list", "--json").stdout.strip() == "[]"
    with ScriptedOpenAIServer(lambda body: {"text": "checked"}) as model:
        proc = start_scheduler(hermes_home, model.base_url)
        try:
            job = wait_until(lambda: curator_job(hermes_home), 30, "the curator's job to be made")
            ok(hermes_home, "cron", "run", job["id"])  # on demand, ahead of its slot
            run = wait_until(
                lambda: next((r for r in json.loads(ok(hermes_home, "cron", "runs", job["id"], "--json")) if r["finished_at"]), None),
                60,
                "the curator's run to finish",
            )
        finally:
            stop(proc)
        assert job["schedule"] == "cron 0 9 * * 1" and job["next_run_at"] is not None
        # Nothing to propose: the report is kept, not delivered, and no model was asked.
        assert run["status"] == "silent" and "nothing to propose" in run["result"] and model.requests == [], run
        write_config(hermes_home, "[curator]\nenabled = false\n")
        proc = start_scheduler(hermes_home, model.base_url)
        try:
            wait_until(lambda: curator_job(hermes_home) is None, 30, "the curator's job to be removed")
            # An agent job still runs: only the curator's job went.
            project = hermes_home.parent / "proj"
            project.mkdir()
            added = ok(hermes_home, "cron", "add", "every 1h", "check", "--project", str(project))
            job_id = added.split("Added job ")[1].split(":")[0]
            ok(hermes_home, "cron", "run", job_id)
            wait_until(
                lambda: [r for r in json.loads(ok(hermes_home, "cron", "runs", job_id, "--json")) if r["status"] == "ok"], 60, "the run"
            )
        finally:
            code, _, err = stop(proc)
    assert code == 0, err
    assert [job["name"] for job in json.loads(ok(hermes_home, "cron", "list", "--json"))] == ["check"]


def test_the_curators_report_goes_to_the_owners_chat(hermes_home, project, telegram):
    agent_skill("old-unused", "something nobody uses", days_ago=90)
    weekly = '[curator]\nenabled = true\nschedule = "0 9 * * 1"\n'
    with ScriptedOpenAIServer([]) as model, start(hermes_home, project, telegram, model, extra=weekly):
        job = telegram.wait_for(lambda: curator_job(hermes_home), 30, "the curator's job")
        assert job["chat_key"] == f"telegram:{OWNER}:0"
        ok(hermes_home, "cron", "run", job["id"])
        sent = telegram.wait_text(OWNER, "archive old-unused", timeout=30)
    (proposal,) = json.loads(ok(hermes_home, "skills", "proposals", "--json"))
    assert proposal["id"] in sent["text"] and "skills apply-proposal" in sent["text"] and sent["text"].startswith("⏰ curator")
    assert skills.find("old-unused") is not None and model.requests == []
