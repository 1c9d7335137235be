"""A profile's sandboxed commands see neither the main home nor the other profiles in it.

The sandbox hides the state home; with a profile, the state home is ``profiles/NAME`` inside the
main one, which holds every other profile's conversations. Commands run for real through
``LocalHost`` inside bubblewrap, as in tests/core/test_sandbox.py.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from core.host import sandbox
from core.host.local import LocalHost
from core.host.sandbox import Confinement, Grants


async def _show(_content) -> None:
    return None


@pytest.fixture
def homes(monkeypatch):
    if not sys.platform.startswith("linux"):
        pytest.skip("these run bubblewrap, which exists on Linux only")
    assert sandbox.status().name == "bubblewrap", sandbox.status().detail
    # Under /var/tmp: the sandbox gives commands a private /tmp, which would hide things anyway.
    base = Path(tempfile.mkdtemp(prefix="hermes-profile-sandbox-", dir="/var/tmp")).resolve()
    main, project = base / "home", base / "project"
    for path in (main / "profiles" / "work", main / "profiles" / "other", project):
        path.mkdir(parents=True)
    (main / "state.db").write_text("MAIN-HOME-CONVERSATION")
    (main / "profiles" / "other" / "state.db").write_text("OTHER-PROFILE-CONVERSATION")
    (main / "profiles" / "work" / "state.db").write_text("WORK-PROFILE-CONVERSATION")
    monkeypatch.setenv("HERMES_EDITOR_HOME", str(main))
    monkeypatch.setenv("HERMES_EDITOR_PROFILE", "work")
    yield main, project
    shutil.rmtree(base, ignore_errors=True)


async def test_the_main_home_and_other_profiles_are_hidden(homes):
    main, project = homes
    command = (
        f"cat {main}/state.db {main}/profiles/*/state.db; ls -A {main}; echo x > {main}/profiles/other/state.db; "
        "echo 'what the command saw:'; ls -A " + str(main)
    )
    host = LocalHost()
    try:
        confinement = Confinement((project,), Grants())
        result = await host.run_command(command, project, timeout=60, output_limit=1 << 20, show=_show, confinement=confinement)
    finally:
        await host.aclose()
    for secret in ("MAIN-HOME-CONVERSATION", "OTHER-PROFILE-CONVERSATION", "WORK-PROFILE-CONVERSATION"):
        assert secret not in result.output
    assert result.output.endswith("what the command saw:\n"), "the main home looks empty from inside"
    assert (main / "profiles" / "other" / "state.db").read_text() == "OTHER-PROFILE-CONVERSATION"
