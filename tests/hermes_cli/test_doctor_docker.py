"""``hermes-editor doctor`` with docker projects: the daemon reached, each image there or not, and
an unreachable daemon named with the fix."""

from __future__ import annotations

from tests.docker_support import busybox_image
from tests.hermes_cli.test_cli import run


def _lines(out: str, word: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if word in line]


def test_doctor_checks_the_daemon_and_each_image(hermes_home, tmp_path):
    image = busybox_image()
    (hermes_home / "config.toml").write_text(
        f'[projects.here]\npath = "{tmp_path}"\nhost = "docker"\nimage = "{image}"\n'
        f'[projects.gone]\npath = "{tmp_path}/b"\nhost = "docker"\nimage = "hermes-editor-no-such-image:0"\n'
        f'[projects.plain]\npath = "{tmp_path}/c"\n'
    )
    out = run("hermes-editor", "doctor", "--timeout", "1").stdout
    assert _lines(out, "Docker daemon:")[0].startswith("✓")
    assert _lines(out, "Project here:") == [f"✓ Project here: image {image} is present"]
    (gone,) = _lines(out, "Project gone:")
    assert gone.startswith("✗") and "not on the Docker daemon" in gone
    assert "docker build -t hermes-editor-no-such-image:0 ." in out
    assert _lines(out, "Project plain") == []


def test_doctor_names_an_unreachable_daemon(hermes_home, tmp_path):
    (hermes_home / "config.toml").write_text(f'[projects.box]\npath = "{tmp_path}"\nhost = "docker"\nimage = "x:1"\n')
    result = run("hermes-editor", "doctor", "--timeout", "1", env={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    (line,) = _lines(result.stdout, "Docker projects")
    assert line.startswith("✗") and "(box)" in line and f"not reachable at unix://{tmp_path}/none.sock" in line and "dockerd" in line
    assert result.returncode == 1


def test_doctor_without_docker_projects_says_nothing_of_docker(hermes_home):
    out = run("hermes-editor", "doctor", "--timeout", "1").stdout
    assert "Docker" not in out
