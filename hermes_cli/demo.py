"""``hermes-editor demo``: one real ACP session against the real ``hermes-acp``, printed readably.

The demo is an editor stand-in. It spawns ``hermes-acp``, speaks ACP to it with the SDK's
client side, works in a throwaway calculator project, and afterwards finds the session again
in the store with a full-text search. With no model configured it brings its own: the
bundled scripted OpenAI-compatible server on 127.0.0.1, with a temporary state home, so
nothing leaves the machine and nothing of the user's is touched.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from core.config import ConfigError, config_path, home, load_config
from hermes_cli.acp_terminal import find_hermes_acp, request_error_text, show_log
from hermes_cli.demo_client import Console, DemoClient
from hermes_cli.demo_project import PROMPT, SEARCH_WORD, demo_script, write_project

if TYPE_CHECKING:
    from hermes_cli.scripted_model import ScriptedServer

__all__ = ["find_hermes_acp", "run_demo"]

# Provider settings from the user's environment that must not leak into a scripted run.
_PROVIDER_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENROUTER_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "HERMES_MODEL")
_STARTUP_TIMEOUT = 60.0


@dataclass(slots=True)
class _Plan:
    """How this run gets its model: the user's configuration, or the scripted server."""

    home: Path
    env: dict[str, str]
    server: ScriptedServer | None = None  # the scripted model server, closed at the end


def run_demo(
    *, interactive: bool = False, keep: bool = False, scripted: bool = False, timeout: float = 600.0, stream: TextIO | None = None
) -> int:
    """Run the demo; 0 when the turn ended normally and the session was found again."""
    console = Console(stream or sys.stdout)
    try:
        return asyncio.run(_demo(console, interactive=interactive, keep=keep, scripted=scripted, timeout=timeout))
    except KeyboardInterrupt:
        # By now hermes-acp has been stopped and the temporary files removed (or kept with --keep).
        console.line()
        print("Interrupted.", file=sys.stderr, flush=True)
        return 130


async def _demo(console: Console, *, interactive: bool, keep: bool, scripted: bool, timeout: float) -> int:
    command = find_hermes_acp()
    if command is None:
        console.line("hermes-acp was not found next to this Python or on PATH. Reinstall hermes-editor (pipx install hermes-editor).")
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="hermes-demo-")).resolve()
    project = workdir / "calc-demo"
    write_project(project)
    plan = None
    try:
        plan = _plan(console, workdir, scripted=scripted)
        console.line(f"Project: {project}  (calc.py has a bug; test_calc.py fails)")
        _say_what_is_temporary(console, workdir, plan, keep=keep)
        if plan.server is None:
            # A real model really changes files and runs commands: the user decides each time.
            interactive = True
            console.line("You will be asked before each change: answer y or n (or a, for always, where offered).")
        elif not interactive:
            console.line(
                console.style(
                    "Approvals are answered automatically for the scripted model; pass --interactive to answer them yourself.", "dim"
                )
            )
        client = DemoClient(console, project, interactive=interactive)
        log_path = workdir / "hermes-acp.stderr.log"
        session_id, stop = await _session(console, client, command, plan.env, project, log_path, timeout)
        if session_id is None:
            return 1
        console.line()
        ok = stop == "end_turn"
        console.line(f"Stop reason: {console.style(stop or 'none', 'green' if ok else 'red')}")
        found = await _find_again(console, plan.home, session_id)
        return 0 if ok and found else 1
    finally:
        if plan is not None and plan.server is not None:
            plan.server.close()
        if keep:
            console.line(f"Kept the project: {project}")
            if plan is not None and plan.server is not None:
                console.line(f"Its state home: {plan.home}  (HERMES_EDITOR_HOME={plan.home} hermes-editor sessions)")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _say_what_is_temporary(console: Console, workdir: Path, plan: _Plan, *, keep: bool) -> None:
    """Where the demo's files live, and which of them go away at the end."""
    until = "kept after the demo (--keep)" if keep else "removed when the demo ends"
    if plan.server is not None:
        console.line(f"Its project and store are temporary, in {workdir} ({until}).")
    else:
        console.line(f"Its project is temporary, in {workdir} ({until}); the session is stored in your state home {plan.home}.")


def _plan(console: Console, workdir: Path, *, scripted: bool) -> _Plan:
    """Choose the model: the configured one if it resolves, else the scripted server."""
    env = dict(os.environ)
    # So that the project's own commands (python test_calc.py) find this Python.
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, *(p for p in env.get("PATH", "").split(os.pathsep) if p and p != bindir)])
    env["HERMES_QUIET"] = "1"
    reason = "--scripted was given"
    if not scripted:
        try:
            config = load_config()
            ref = config.model_ref()
        except ConfigError as exc:
            ref, reason = None, f"The configuration has a problem ({exc})"
        else:
            reason = "No model is configured"
        if ref is not None:
            source = config_path() if config_path().exists() else "the environment"
            console.line(f"Using your model {ref.label} (from {source}), with your state home {home()}.")
            return _Plan(home=home(), env=env)

    from hermes_cli.scripted_model import ScriptedOpenAIServer

    python = "python" if shutil.which("python", path=env["PATH"]) else Path(sys.executable).name
    server = ScriptedOpenAIServer(demo_script(python), model="scripted").start()
    demo_home = workdir / "home"
    demo_home.mkdir()
    for key in _PROVIDER_ENV:
        env.pop(key, None)
    env.pop("HERMES_EDITOR_PROFILE", None)  # the throwaway home is the whole home: no profile in it
    env.update(
        {
            "HERMES_EDITOR_HOME": str(demo_home),
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "demo-key-not-a-secret",
            "HERMES_MODEL": "openai:scripted",
        }
    )
    console.line(f"{reason}: using the bundled scripted model on 127.0.0.1:{server.port} (no network, no API key).")
    if reason.startswith("No model"):
        console.line(console.style("Configure a real model with 'hermes-editor setup' and run the demo again.", "dim"))
    return _Plan(home=demo_home, env=env, server=server)


async def _session(
    console: Console, client: DemoClient, command: str, env: dict[str, str], project: Path, log_path: Path, timeout: float
) -> tuple[str | None, str | None]:
    """Spawn hermes-acp, open a session in the project, send the prompt; (session id, stop reason)."""
    import acp

    with open(log_path, "wb") as stderr:
        try:
            async with acp.spawn_agent_process(
                client, command, env=env, cwd=str(project), transport_kwargs={"stderr": stderr.fileno()}
            ) as (conn, process):
                init = await asyncio.wait_for(
                    conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=client.capabilities()),
                    _STARTUP_TIMEOUT,
                )
                info = init.agent_info
                about = f"{info.name} {info.version}, " if info else ""
                session = await asyncio.wait_for(conn.new_session(cwd=str(project), mcp_servers=[]), _STARTUP_TIMEOUT)
                sid = session.session_id
                console.line(f"Started {Path(command).name} ({about}pid {process.pid}) over ACP v{init.protocol_version}; session {sid}")
                console.line()
                console.line(f"{console.style('You:', 'bold')} {PROMPT}")
                turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block(PROMPT)]))
                # Interrupted, the turn ends with the connection; its outcome is of no interest then.
                turn.add_done_callback(lambda t: t.cancelled() or t.exception())
                try:
                    response = await asyncio.wait_for(asyncio.shield(turn), timeout)
                except TimeoutError:
                    console.line(f"The turn took longer than {timeout:g} s; cancelling it.")
                    await conn.cancel(session_id=sid)
                    response = await asyncio.wait_for(turn, 30)
                finally:
                    turn.cancel()
                return sid, response.stop_reason
        except acp.RequestError as exc:
            console.line(f"hermes-acp refused: {request_error_text(exc)}")
        except (TimeoutError, OSError, ConnectionError) as exc:
            console.line(f"The session with hermes-acp failed: {type(exc).__name__}: {exc}")
    show_log(console, log_path)
    return None, None


async def _find_again(console: Console, state_home: Path, session_id: str) -> bool:
    """Search the store for the conversation, as 'hermes-editor search' would; False if the model never answered."""
    from core.store import SessionStore

    async with SessionStore.open(state_home / "state.db") as store:
        hits = await store.search(SEARCH_WORD, limit=50)
        answered = any(m.message.kind == "assistant" for m in await store.messages(session_id))
    ours = [hit for hit in hits if hit.session_id == session_id]
    console.line()
    if not answered:
        # A failing model ends the turn normally, with the error shown as the reply.
        console.line(console.style("The model never answered (see the error above).", "red"))
        console.line("Check the model with 'hermes-editor doctor', or try 'hermes-editor demo --scripted'.")
        return False
    if not ours:
        console.line(console.style(f"Search for {SEARCH_WORD!r} did not find the session {session_id}.", "red"))
        return False
    hit = ours[0]
    console.line(f"Found again by searching {SEARCH_WORD!r} ({len(hits)} hit{'s' if len(hits) != 1 else ''} in the store):")
    console.line(f'  session {hit.session_id}  "{hit.session_title or "(untitled)"}"')
    console.line(f"  {hit.role}: {' '.join(hit.snippet.split())}")
    return True
