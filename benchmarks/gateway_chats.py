"""Many chats at once: the real ``hermes-gateway`` against the fake Bot API and an instant scripted model.

The fake Telegram Bot API (``tests/fakes/telegram_server.py``) and the scripted model run here on
127.0.0.1; ``hermes-gateway run`` is started as a separate process configured for Telegram, with
every chat's user on the real allow-list (``[telegram] allowed_users``) except the first
``--paired`` ones, which pair through the real code flow (they write, get a code, and
``hermes-editor pairing approve CODE`` admits them). Then ``--chats`` private chats write
``--messages`` messages each, all chats at once:

- ``--pace reply`` (the default): each user sends the next message as soon as the reply to the
  previous one has arrived (a person waiting for the answer);
- ``--pace burst``: every user sends all their messages at once (the gateway answers a chat's
  messages one after the other, in order).

Per message, the overhead is the time from the update being handed out by ``getUpdates`` (in
burst mode: or from the previous reply in that chat, if later, since a chat's turns run in
order) to the reply's final text arriving at the fake (``sendMessage``/``editMessageText``),
minus the model's own round trip (measured alone with this Python's ``openai`` SDK against the
same scripted model, as ``acp_step_overhead.py`` does). The reply streams into a draft that is
edited at most every ``edit_interval`` seconds (Telegram's limit, not overhead); the final text is
sent when the turn ends, whatever the interval, so the time to it holds no throttling wait: the
figures say how many drafts and edits each reply took. Each reply names its chat and message, so
the script checks that none is lost, each goes to the right chat and a chat's replies come in the
order its messages were sent. Memory: the gateway's peak resident set (VmHWM) and its resident
set once idle after the run.

Run: .venv/bin/python benchmarks/gateway_chats.py [--chats 100] [--messages 5] [--paired 5]
     [--pace reply|burst] [--rounds 3] [--code DIR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hermes_cli.scripted_model import ScriptedOpenAIServer  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram  # noqa: E402

BIN = Path(sys.executable).parent
OWNER = 1  # the bot's owner: configured, never one of the chats
WARM_CHAT = 99_999  # one message before the measured ones (first imports, the model client)
FIRST_CHAT = 100_001
# The reply: ~240 characters streamed in 24-character chunks, ending with a marker that names
# the chat and the message it answers (a draft shows only the first chunk).
FILLER = "This is the scripted answer, long enough to stream in several chunks like a real reply does. " * 2
CHUNK = 24
_ASKED = re.compile(r"chat (\d+) message (\d+)")
_END = re.compile(r"\(end of (\d+)/(\d+)\)")
_CODE = re.compile(r"Pairing code: ([A-Z0-9]+)")

# The model's round trip, measured in a child with the server's own Python and openai SDK.
ROUND_TRIP = """
import asyncio, statistics, sys, time
import openai

async def main(base_url, rounds):
    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench-000000", max_retries=0)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        stream = await client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "x"}], stream=True, stream_options={"include_usage": True}
        )
        async for _chunk in stream:
            pass
        times.append(time.perf_counter() - started)
    await client.close()
    print(statistics.median(times) * 1000)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


# When the model was first asked about each (chat, message): the gateway's intake ends there.
ASKED_AT: dict[tuple[int, int], float] = {}


def respond(body: dict) -> dict:
    """The scripted model: answer the last user message, naming its chat and message."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    asked = _ASKED.search(text_of(users[-1])) if users else None
    chat, number = (asked.group(1), asked.group(2)) if asked else ("0", "0")
    ASKED_AT.setdefault((int(chat), int(number)), time.perf_counter())
    return {"text": f"{FILLER}(end of {chat}/{number})", "chunk_size": CHUNK}


def status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


class Chats:
    """The users' side: what they sent, what came back, in which chat and in which order."""

    def __init__(self, fake: FakeTelegram, chats: list[int], messages: int, pace: str, think: float = 0.0) -> None:
        self.fake, self.chats, self.messages, self.pace, self.think = fake, chats, messages, pace, think
        self.random = random.Random(20)
        self.lock = threading.Lock()
        self.update_of: dict[tuple[int, int], int] = {}  # (chat, n) -> update id
        self.first_done: dict[tuple[int, int], float] = {}  # the complete reply first seen
        self.last_done: dict[tuple[int, int], float] = {}  # its final text (a later edit, if any)
        self.order: dict[int, list[tuple[int, int]]] = {c: [] for c in chats}  # replies as each chat got them
        self.texts: dict[int, int] = {}  # chat -> sendMessage/editMessageText calls
        self.misplaced = 0
        self.all_done = threading.Event()
        self.started = 0.0

    def start(self) -> None:
        self.fake.observers.append(self.observe)
        self.started = time.perf_counter()
        per_chat = 1 if self.pace == "reply" else self.messages
        for n in range(1, per_chat + 1):
            for chat in self.chats:
                self.later(chat, n)

    def later(self, chat: int, n: int) -> None:
        """Send now, or after a think time (uniform between 0 and twice ``think``) when there is one."""
        if not self.think:
            self.push(chat, n)
            return
        timer = threading.Timer(self.random.uniform(0, 2 * self.think), self.push, (chat, n))
        timer.daemon = True
        timer.start()

    def push(self, chat: int, n: int) -> None:
        message = self.fake.user_message(chat, f"Hello from chat {chat} message {n}: please answer.")
        update_id = self.fake.push({"message": message})
        with self.lock:
            self.update_of[(chat, n)] = update_id

    def observe(self, method: str, params: dict[str, Any], status: int, payload: dict[str, Any], when: float) -> None:
        if method not in ("sendMessage", "editMessageText"):
            return
        to = int(params.get("chat_id") or 0)
        if to not in self.order:
            return
        found = _END.search(str(params.get("text", "")))
        with self.lock:
            self.texts[to] = self.texts.get(to, 0) + 1
            if found is None:
                return
            key = (int(found.group(1)), int(found.group(2)))
            if key[0] != to:
                self.misplaced += 1
                return
            self.last_done[key] = when
            if key in self.first_done:
                return
            self.first_done[key] = when
            self.order[to].append(key)
            done = len(self.first_done)
        if self.pace == "reply" and key[1] < self.messages:
            self.later(to, key[1] + 1)
        if done == len(self.chats) * self.messages:
            self.all_done.set()


def start_gateway(home: Path, env: dict[str, str], fake: FakeTelegram, profile: str | None = None) -> subprocess.Popen[bytes]:
    polls = sum(1 for m, _ in fake.calls if m == "getUpdates")
    command = [str(BIN / "hermes-gateway"), "run"]
    if profile:
        command = [sys.executable, "-m", "cProfile", "-o", profile, *command]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=(home / "stderr.log").open("wb"))
    deadline = time.monotonic() + 60
    while sum(1 for m, _ in fake.calls if m == "getUpdates") <= polls:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"hermes-gateway did not start: {(home / 'stderr.log').read_text(errors='replace')[-3000:]}")
        time.sleep(0.02)
    return proc


def pair(fake: FakeTelegram, users: list[int], env: dict[str, str]) -> None:
    """The real pairing flow: each user writes, gets a code, the owner approves it on the machine."""
    for user in users:
        fake.send_user_message(user, "hello")
    for user in users:
        message = fake.wait_for(lambda u=user: next((m for m in fake.sent(u) if _CODE.search(m["text"])), None), 60, "a pairing code")
        code = _CODE.search(message["text"]).group(1)  # type: ignore[union-attr]
        done = subprocess.run([str(BIN / "hermes-editor"), "pairing", "approve", code], env=env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0 or "Approved" not in done.stdout:
            raise SystemExit(f"pairing approve failed: {done.stdout}{done.stderr}")


def idle(fake: FakeTelegram, quiet: float = 0.5, limit: float = 30) -> None:
    """Wait until the gateway has called the Bot API for nothing but polling for ``quiet`` seconds."""
    deadline = time.monotonic() + limit
    seen = -1
    while time.monotonic() < deadline:
        now = sum(1 for m, _ in fake.calls if m != "getUpdates")
        if now == seen:
            return
        seen = now
        time.sleep(quiet)


def cpu_ms(pid: int) -> float:
    """User + system CPU time of a process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def one_round(chats: int, messages: int, paired: int, pace: str, code: str | None, profile: str | None = None, think: float = 0.0) -> dict:
    ASKED_AT.clear()
    with tempfile.TemporaryDirectory() as tmp, FakeTelegram(lifetime=3600) as fake, ScriptedOpenAIServer(respond) as model:
        base = Path(tmp)
        home, project = base / "home", base / "project"
        home.mkdir()
        project.mkdir()
        (base / "user").mkdir()
        ids = [FIRST_CHAT + n for n in range(chats)]
        to_pair = ids[:paired]
        allowed = [WARM_CHAT, *ids[paired:]]
        (home / "config.toml").write_text(
            f"[telegram]\nallowed_users = [{', '.join(map(str, allowed))}]\n\n"
            f'[gateway]\nowner = {OWNER}\nprojects = {{ app = "{project}" }}\n',
            encoding="utf-8",
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(base / "user"),
            "HERMES_EDITOR_HOME": str(home),
            "HERMES_QUIET": "1",
            "TELEGRAM_BOT_TOKEN": fake.token,
            "TELEGRAM_API_BASE_URL": fake.base_url,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-bench-000000",
            "HERMES_MODEL": "openai:scripted",
        }
        if code:
            env["PYTHONPATH"] = str(Path(code).resolve())
        proc = start_gateway(home, env, fake, profile)
        try:
            pair(fake, to_pair, env)
            fake.send_user_message(WARM_CHAT, f"Hello from chat {WARM_CHAT} message 1: please answer.")
            fake.wait_text(WARM_CHAT, f"(end of {WARM_CHAT}/1)", 120)
            idle(fake)
            model_before, calls_before = len(model.requests), len(fake.calls)
            run = Chats(fake, ids, messages, pace, think)
            cpu_before, own_before = cpu_ms(proc.pid), time.process_time()
            run.start()
            finished, seen, last_progress = False, -1, time.monotonic()
            while not finished and time.monotonic() - last_progress < 60:  # give up after a minute without a reply
                finished = run.all_done.wait(1)
                if len(run.first_done) != seen:
                    seen, last_progress = len(run.first_done), time.monotonic()
            wall = time.perf_counter() - run.started
            idle(fake)
            cpu = cpu_ms(proc.pid) - cpu_before
            own_cpu = (time.process_time() - own_before) * 1000
            peak_kb = status_kb(proc.pid, "VmHWM")
            idle_kb = status_kb(proc.pid, "VmRSS")
            model_calls = len(model.requests) - model_before
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        model_ms = float(
            subprocess.run([sys.executable, "-c", ROUND_TRIP, model.base_url, "30"], capture_output=True, text=True, check=True).stdout
        )
        offered = dict(fake.offered)
        calls = list(fake.calls)[calls_before:]
        kept_logs = None
        if len(run.first_done) < chats * messages or run.misplaced:
            # Something was lost: keep the gateway's logs to say why.
            kept_logs = tempfile.mkdtemp(prefix="gateway_chats-logs-")
            for log in [*(home / "logs").glob("*.log"), home / "stderr.log"]:
                shutil.copy(log, kept_logs)
            missing = sorted(set(run.update_of) - set(run.first_done))
            Path(kept_logs, "missing.json").write_text(
                json.dumps(
                    {"missing": missing, "calls": [(m, p) for m, p in calls if int(p.get("chat_id") or 0) in {c for c, _ in missing}]},
                    default=str,
                )
            )

    total = chats * messages
    overheads: list[float] = []
    to_model: list[float] = []
    after_model: list[float] = []
    late_edits = 0
    for (chat, n), final in run.last_done.items():
        start = offered[run.update_of[(chat, n)]]
        if pace == "burst" and n > 1 and (chat, n - 1) in run.last_done:
            start = max(start, run.last_done[(chat, n - 1)])
        overheads.append((final - start) * 1000 - model_ms)
        if (chat, n) in ASKED_AT:
            to_model.append((ASKED_AT[(chat, n)] - start) * 1000)
            after_model.append((final - ASKED_AT[(chat, n)]) * 1000)
        late_edits += final != run.first_done[(chat, n)]
    in_order = sum(run.order[c] == [(c, n) for n in range(1, messages + 1)] for c in ids)
    measured = {"sendMessage", "editMessageText", "sendChatAction"}
    counts = {m: sum(1 for name, p in calls if name == m and int(p.get("chat_id") or 0) in run.order) for m in sorted(measured)}
    return {
        "finished": finished,
        **({"logs_kept_in": kept_logs} if kept_logs else {}),
        "messages_sent": len(run.update_of),
        "messages_answered": len(run.first_done),
        "lost": total - len(run.first_done),
        "misplaced_replies": run.misplaced,
        "chats_in_order": in_order,
        "model_requests": model_calls,
        "model_round_trip_ms": round(model_ms, 2),
        "overhead_ms": {
            "p50": round(percentile(overheads, 50), 1),
            "p95": round(percentile(overheads, 95), 1),
            "max": round(max(overheads, default=0.0), 1),
        },
        # Where the time went (medians): update handed out -> model asked; model asked -> final text.
        "phases_ms": {
            "offered_to_model_request": round(statistics.median(to_model), 1) if to_model else None,
            "model_request_to_final_text": round(statistics.median(after_model), 1) if after_model else None,
        },
        "gateway_cpu_ms_per_message": round(cpu / max(1, len(run.first_done)), 2),
        "fakes_cpu_ms_per_message": round(own_cpu / max(1, len(run.first_done)), 2),
        "final_after_first_complete": late_edits,
        "bot_api_calls_per_message": {m: round(n / max(1, total), 2) for m, n in counts.items()},
        "wall_s": round(wall, 2),
        "messages_per_s": round(len(run.first_done) / wall, 1) if wall else 0.0,
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "idle_rss_mb": round(idle_kb / 1024, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--messages", type=int, default=5, help="messages per chat")
    parser.add_argument("--paired", type=int, default=5, help="chats whose user pairs with a code (the rest are on allowed_users)")
    parser.add_argument("--pace", choices=["reply", "burst"], default="reply")
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="with --pace reply: each user waits a random time (mean SECONDS) before each message, the first included "
        "(0, the default: at once, as fast as the gateway answers)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", metavar="FILE", help="run the gateway under cProfile and write its stats here (last round)")
    parser.add_argument(
        "--code",
        metavar="DIR",
        action="append",
        help="measure the hermes-gateway of another tree of this repository (its packages first on PYTHONPATH, this "
        "virtualenv's libraries); repeat it, `.` being this tree, to interleave rounds of several trees",
    )
    args = parser.parse_args()
    trees = [None if c in (None, ".") else c for c in (args.code or [None])]
    paired = min(args.paired, args.chats)
    load_before = os.getloadavg()
    rounds: dict[str, list[dict]] = {str(t or "."): [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            rounds[str(tree or ".")].append(one_round(args.chats, args.messages, paired, args.pace, tree, args.profile, args.think))
    result: dict[str, Any] = {
        "benchmark": "gateway_chats",
        "chats": args.chats,
        "messages_per_chat": args.messages,
        "paired_with_code": paired,
        "pace": args.pace,
        "think_s": args.think,
        "rounds": args.rounds,
        "machine": f"{os.cpu_count()} cores",
        "load_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }
    for tree, runs in rounds.items():
        summary = {
            "overhead_p50_ms": round(statistics.median(r["overhead_ms"]["p50"] for r in runs), 1),
            "overhead_p95_ms": round(statistics.median(r["overhead_ms"]["p95"] for r in runs), 1),
            "overhead_max_ms": round(max(r["overhead_ms"]["max"] for r in runs), 1),
            "gateway_cpu_ms_per_message": round(statistics.median(r["gateway_cpu_ms_per_message"] for r in runs), 2),
            "peak_rss_mb": round(max(r["peak_rss_mb"] for r in runs), 1),
            "idle_rss_mb": round(statistics.median(r["idle_rss_mb"] for r in runs), 1),
            "messages_sent": sum(r["messages_sent"] for r in runs),
            "messages_answered": sum(r["messages_answered"] for r in runs),
            "lost": sum(r["lost"] for r in runs),
            "misplaced_replies": sum(r["misplaced_replies"] for r in runs),
            "chats_out_of_order": sum(args.chats - r["chats_in_order"] for r in runs),
            "per_round": runs,
        }
        if len(rounds) == 1:
            result.update(summary)
        else:
            result.setdefault("trees", {})[tree] = summary
    result["targets"] = {"overhead_p95_ms": 10, "peak_rss_mb": 150, "lost": 0}
    print(json.dumps(result, indent=2))
    return 0 if all(r["lost"] == 0 and r["misplaced_replies"] == 0 for runs in rounds.values() for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
