"""The approval policy: what is allowed, asked or refused, and why."""

from pathlib import Path

import pytest

from core.approvals import Action, ApprovalPolicy, command_program, hard_refused, is_secret_path

ROOT = Path("/work/project")


def _policy(mode="ask", rules=()):
    return ApprovalPolicy(mode=mode, roots=[ROOT], rules=list(rules))


def test_reads_inside_allowed_outside_ask():
    assert _policy().decide(Action("read_file", "read", True, (ROOT / "a.py",)))[0] == "allow"
    verdict, reason = _policy().decide(Action("read_file", "read", True, (Path("/etc/passwd"),)))
    assert verdict == "ask" and "outside the project" in reason
    # A sibling directory that shares the prefix is still outside.
    assert _policy().decide(Action("read_file", "read", True, (Path("/work/project-evil/x"),)))[0] == "ask"


@pytest.mark.parametrize("name", [".env", ".env.local", "id_rsa", "server.pem", "prod.key", ".ssh/config", "client_secret.json"])
def test_secrets_always_ask_even_in_auto_mode(name):
    path = ROOT / name
    assert is_secret_path(path)
    assert _policy("auto").decide(Action("read_file", "read", True, (path,)))[0] == "ask"
    assert _policy("auto", [("write_file", "*", "allow")]).decide(Action("write_file", "edit", False, (path,)))[0] == "ask"


def test_env_example_is_not_a_secret():
    assert not is_secret_path(ROOT / ".env.example")


def test_writes_and_commands_ask_by_mode():
    write = Action("write_file", "edit", False, (ROOT / "a.py",))
    run = Action("run_command", "execute", False, (ROOT,), "pytest -q")
    assert _policy("ask").decide(write)[0] == "ask"
    assert _policy("accept-edits").decide(write)[0] == "allow"
    assert _policy("accept-edits").decide(run)[0] == "ask"
    assert _policy("auto").decide(run)[0] == "allow"
    assert _policy("read-only").decide(write)[0] == "refuse"


def test_always_rules_apply_to_the_tool_or_the_program():
    policy = _policy(rules=[("run_command", "pytest", "allow"), ("write_file", "*", "deny")])
    assert policy.decide(Action("run_command", "execute", False, (ROOT,), "FOO=1 pytest -x"))[0] == "allow"
    assert policy.decide(Action("run_command", "execute", False, (ROOT,), "npm test"))[0] == "ask"
    assert policy.decide(Action("write_file", "edit", False, (ROOT / "a",)))[0] == "refuse"
    assert policy.rule_key(Action("run_command", "execute", False, (ROOT,), "/usr/bin/git status")) == ("run_command", "git")


@pytest.mark.parametrize("command", ["rm -rf /", "sudo rm -rf / --no-preserve-root", "rm -fr ~", "rm -r -f /*", "make && sudo shutdown -h now", "mkfs.ext4 /dev/sda1", ":(){ :|:& };:", "dd if=/dev/zero of=/dev/sda"])
def test_hard_refused_commands(command):
    assert hard_refused(command)
    verdict, reason = _policy("auto", [("run_command", "*", "allow")]).decide(Action("run_command", "execute", False, (ROOT,), command))
    assert verdict == "refuse" and "never run" in reason


@pytest.mark.parametrize("command", ["rm -rf /tmp/build", "rm -rf ./dist", "ls /", "echo shutdownish", "echo shutdown", "git rm -r src"])
def test_ordinary_commands_are_not_hard_refused(command):
    assert hard_refused(command) is None


def test_command_program_skips_env_assignments():
    assert command_program("A=1 B=2 python -m pytest") == "python"
    assert command_program("") == ""
