"""``[projects.NAME]``: validation names the key; the session's folder picks the host."""

from __future__ import annotations

import importlib.util

import pytest

from core.config import ConfigError, config_path, load_config
from core.host.local import LocalHost
from core.host.select import host_for, project_for


def _load(text: str):
    config_path().write_text(text)
    return load_config(env={})


@pytest.mark.parametrize(
    ("text", "key", "said"),
    [
        ('[projects.app]\nhost = "docker"\npath = "/srv/app"\n', "projects.app.image", "needs image"),
        ('[projects.app]\nhost = "ssh"\npath = "/srv/app"\n', "projects.app.ssh", "needs ssh"),
        ('[projects.app]\npath = "relative/dir"\n', "projects.app.path", "not an absolute path"),
        ('[projects.app]\npath = "/srv/app"\nhost = "podman"\n', "projects.app.host", "'local', 'docker' or 'ssh'"),
        ('[projects.app]\npath = "/srv/app"\nmemory = "lots"\n', "projects.app.memory", "not a size"),
        ('[projects.app]\npath = "/srv/app"\nmounts = ["data:/data"]\n', "projects.app.mounts", "not a mount"),
        ('[projects.app]\npath = "/srv/app"\nimgae = "x"\n', "projects.app.imgae", "image"),
        ("[projects.app]\nhost = 'local'\n", "projects.app.path", "required"),
    ],
)
def test_bad_project_names_the_key(text, key, said):
    with pytest.raises(ConfigError) as info:
        _load(text)
    message = str(info.value)
    assert f"key '{key}'" in message and said in message and str(config_path()) in message


def test_no_project_or_a_local_one_is_this_machine(tmp_path):
    app = tmp_path / "app"
    (app / "src").mkdir(parents=True)
    config = _load(f'[projects.app]\npath = "{app}"\n')
    host = host_for(config, app / "src")
    assert type(host) is LocalHost
    assert type(host_for(config, tmp_path)) is LocalHost
    assert type(host_for(None, tmp_path)) is LocalHost
    assert project_for(config, tmp_path) is None


def test_the_deepest_project_holding_the_folder_wins(tmp_path):
    outer, inner = tmp_path / "mono", tmp_path / "mono" / "svc"
    (inner / "lib").mkdir(parents=True)
    config = _load(f'[projects.mono]\npath = "{outer}"\n[projects.svc]\npath = "{inner}"\nhost = "docker"\nimage = "img"\n')
    found = project_for(config, inner / "lib")
    assert found is not None and found[0] == "svc"
    found = project_for(config, outer)
    assert found is not None and found[0] == "mono"
    assert project_for(config, tmp_path / "monolith") is None  # a sibling sharing the prefix is not inside


def test_a_gateway_project_may_name_a_project_table(tmp_path):
    config = _load(
        f'[gateway]\nprojects = {{ shop = "box", notes = "{tmp_path}" }}\n[projects.box]\npath = "{tmp_path / "box"}"\nhost = "docker"\nimage = "i"\n'
    )
    assert config.gateway.projects == {"shop": str(tmp_path / "box"), "notes": str(tmp_path)}


def test_ssh_project_gets_the_ssh_host_or_a_clear_error(tmp_path):
    config = _load(f'[projects.box]\npath = "{tmp_path}"\nhost = "ssh"\nssh = "me@box:/srv/app"\n')
    if importlib.util.find_spec("core.host.ssh") is None:
        with pytest.raises(ConfigError, match="key 'projects.box.host': the ssh host is not available"):
            host_for(config, tmp_path)
    else:
        assert type(host_for(config, tmp_path)).__name__ == "SshHost"
