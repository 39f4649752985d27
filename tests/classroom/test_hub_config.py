"""classroom/jupyterhub_config.py read as JupyterHub reads it (no hub started): clear errors for bad
settings, the roles' Jupyter configuration, and that what it disables for students exists in nbgrader."""

from __future__ import annotations

import importlib
import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest
from classroom_hub import CONFIG, PROXY, ROOT

pytest.importorskip("jupyterhub", reason="jupyterhub is not installed (make setup installs it)")
from traitlets.config.loader import PyFileConfigLoader  # noqa: E402

STUDENT = ROOT / "classroom" / "jupyter" / "student"


def load(monkeypatch, tmp_path: Path, **env: str | None):
    """The hub's configuration under the COURSE_HUB_* settings ``env`` (None: unset), on top of valid ones."""
    for name in [n for n in os.environ if n.startswith("COURSE_HUB_")]:
        monkeypatch.delenv(name)
    settings = {"COURSE_HUB_PASSWORD": "long enough", "COURSE_HUB_STATE": str(tmp_path / "state")} | env
    for name, value in settings.items():
        if value is not None:
            monkeypatch.setenv(name, value)
    return PyFileConfigLoader(CONFIG.name, path=str(CONFIG.parent)).load_config()


@pytest.mark.parametrize(
    "env, message",
    [
        ({"COURSE_HUB_PASSWORD": None}, "set COURSE_HUB_PASSWORD"),
        ({"COURSE_HUB_PASSWORD": "short"}, "8 characters or more"),
        ({"COURSE_HUB_STUDENTS": " , "}, "COURSE_HUB_STUDENTS names no user"),
        ({"COURSE_HUB_STUDENTS": "Alice,bob"}, "['Alice'] are not valid user names"),
        ({"COURSE_HUB_INSTRUCTORS": "bob", "COURSE_HUB_STUDENTS": "bob,carol"}, "both instructor and student"),
        ({"COURSE_HUB_COURSE": "/"}, "is not a course directory"),
        ({"COURSE_HUB_PORT": "80000"}, "COURSE_HUB_PORT='80000' is not a TCP port"),
        ({"COURSE_HUB_API_PORT": "http"}, "COURSE_HUB_API_PORT='http' is not a TCP port"),
    ],
)
def test_bad_settings_are_clear_errors(monkeypatch, tmp_path, env, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load(monkeypatch, tmp_path, **env)


@pytest.mark.skipif(not PROXY.exists(), reason="configurable-http-proxy is not installed (make browser-tools)")
def test_settings_reach_the_hub(monkeypatch, tmp_path):
    config = load(monkeypatch, tmp_path, COURSE_HUB_STUDENTS="ann,ben", COURSE_HUB_PORT="8123")
    assert config.Authenticator.allowed_users == {"instructor", "ann", "ben"}
    assert config.JupyterHub.bind_url == "http://127.0.0.1:8123"
    assert config.SharedPasswordAuthenticator.user_password == "long enough"
    assert Path(config.Spawner.cmd[0]).name == "jupyterhub-singleuser" and Path(config.Spawner.cmd[0]).exists()
    exchange = tmp_path / "state" / "exchange"
    assert stat.S_IMODE(exchange.stat().st_mode) == 0o1777, "every user must be able to write the exchange"


def test_what_students_lose_exists_in_nbgrader():
    """A plugin or server extension renamed by a later nbgrader would silently come back for students."""
    bundle = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    if not bundle.is_dir():
        pytest.skip(f"nbgrader's lab extension is not installed at {bundle}")
    code = "".join(p.read_text(encoding="utf-8", errors="replace") for p in bundle.glob("*.js"))
    disabled = json.loads((STUDENT / "labconfig" / "page_config.json").read_text())["disabledExtensions"]
    assert set(disabled) == {f"@jupyter/nbgrader:{n}" for n in ("formgrader", "create-assignment", "course-list")}
    for plugin in disabled:
        assert f'"{plugin}"' in code, f"nbgrader's lab extension has no plugin {plugin}"
    extensions = json.loads((STUDENT / "jupyter_server_config.json").read_text())["ServerApp"]["jpserver_extensions"]
    assert extensions == {
        "nbgrader.server_extensions.formgrader": False,
        "nbgrader.server_extensions.course_list": False,
    }
    for name in extensions:
        assert hasattr(importlib.import_module(name), "_load_jupyter_server_extension"), name
