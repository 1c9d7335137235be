"""``hermes-editor doctor`` with ssh projects, against a real SSH server on 127.0.0.1
(tests/fakes/ssh_server.py): one line per project saying it connects and its remote directory is
there, or what is wrong (an unknown host key, a refused login, a missing directory, no server)."""

from __future__ import annotations

import socket

import asyncssh

from tests.fakes.ssh_server import SshServer, known_hosts_line
from tests.hermes_cli.test_cli import run


def _line(out: str, project: str) -> str:
    (line,) = [line.strip() for line in out.splitlines() if f"Project {project}:" in line]
    return line


def test_doctor_checks_each_ssh_project(hermes_home, tmp_path):
    server = SshServer(tmp_path / "box")
    (server.box / "srv" / "app").mkdir()
    server.start_in_thread()
    try:
        key = server.write_client_key(tmp_path / "id_box")
        stranger = tmp_path / "id_stranger"
        stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key("openssh"))
        stranger.chmod(0o600)
        known = tmp_path / "known_hosts"
        known.write_text(known_hosts_line(server.port, server.host_key))
        empty = tmp_path / "known_hosts_empty"
        empty.write_text("")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            closed = probe.getsockname()[1]

        def project(name: str, remote: str, identity, known_hosts, port: int = server.port) -> str:
            return (
                f'[projects.{name}]\npath = "{tmp_path / name}"\nhost = "ssh"\nssh = "tester@127.0.0.1:{remote}"\n'
                f'port = {port}\nidentity_file = "{identity}"\nknown_hosts = "{known_hosts}"\n'
            )

        (hermes_home / "config.toml").write_text(
            project("good", "/srv/app", key, known)
            + project("nodir", "/srv/missing", key, known)
            + project("badkey", "/srv/app", stranger, known)
            + project("unknown", "/srv/app", key, empty)
            + project("down", "/srv/app", key, known, port=closed)
        )
        result = run("hermes-editor", "doctor", "--timeout", "10")
        out = result.stdout
        assert _line(out, "good") == f"✓ Project good: tester@127.0.0.1:{server.port} connects and /srv/app is there", out
        assert _line(out, "nodir").startswith("✗") and "/srv/missing does not exist" in _line(out, "nodir"), out
        assert _line(out, "badkey").startswith("✗") and "Authentication" in _line(out, "badkey"), out
        unknown = _line(out, "unknown")
        assert unknown.startswith("✗") and "is not in" in unknown and server.host_key.get_fingerprint() in unknown, out
        assert _line(out, "down").startswith("✗") and "Cannot reach" in _line(out, "down"), out
        assert result.returncode == 1
    finally:
        server.stop_thread()
