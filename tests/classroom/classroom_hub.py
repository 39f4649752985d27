"""A JupyterHub of the course for tests, and the headless Chromium that drives it (tests/classroom/).

``Hub`` starts ``classroom/jupyterhub_config.py`` on free loopback ports with its state in a temporary
folder, and stops it, the proxy and every single-user server (each in a session of its own) when the
test ends. ``browser_problem`` says why no browser test can run here, or None. ``saved_changes`` says what
JupyterLab changed in a notebook it shows as modified.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "classroom" / "jupyterhub_config.py"
PROXY = ROOT / "classroom" / "node_modules" / ".bin" / "configurable-http-proxy"
BIN = Path(sys.executable).parent
# Chromium as these machines run it headless, as root and offline (/work/.library notes, COURSE_GUIDE.md §6):
# no sandbox (root), no GPU, and none of its background calls to Google's services.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str | None:
    """The path of Debian's Chromium (or another Chromium on PATH), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def browser_problem() -> str | None:
    """Why the classroom's browser tests cannot run here (one line), or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (make setup installs it)"
    if not chromium():
        return "no Chromium on PATH (make browser-tools installs Debian's chromium as root)"
    if not (BIN / "jupyterhub").exists() or not (BIN / "jupyterhub-singleuser").exists():
        return f"jupyterhub is not installed in {BIN.parent} (make setup installs it)"
    if not PROXY.exists() or not shutil.which("node"):
        return "configurable-http-proxy is not installed (make browser-tools runs npm ci --prefix classroom)"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout: float, what: str, interval: float = 0.2):
    """Poll ``condition()`` until it returns something true (returned) or ``timeout`` seconds pass
    (TimeoutError naming ``what``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Hub:
    """The course's JupyterHub on 127.0.0.1, started by ``start`` and stopped (everything) by ``stop``."""

    def __init__(self, state: Path, course: Path, instructors: list[str], students: list[str], password: str):
        self.state, self.course = state, course
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", os.defpath)]),
            "COURSE_HUB_PASSWORD": password,
            "COURSE_HUB_INSTRUCTORS": ",".join(instructors),
            "COURSE_HUB_STUDENTS": ",".join(students),
            "COURSE_HUB_COURSE": str(course),
            "COURSE_HUB_STATE": str(state),
            "COURSE_HUB_PORT": str(self.port),
            "COURSE_HUB_API_PORT": str(free_port()),
            "COURSE_HUB_PROXY_API_PORT": str(free_port()),
        }
        self.log = state / "jupyterhub.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> None:
        """Start the hub in a session of its own; return once its API answers (TimeoutError otherwise)."""
        self.state.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(BIN / "jupyterhub"), "-f", str(CONFIG)],
                cwd=self.state,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(self._up, timeout, f"JupyterHub at {self.url} (log: {self.log})")

    def _up(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"JupyterHub exited with {self.process.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/hub/api/", timeout=2) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the hub's log (the proxy's and the single-user servers' logs go there too)."""
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def instructor_env(self) -> dict[str, str]:
        """The environment an instructor's server has, for nbgrader commands run beside it."""
        return {
            **self.env,
            "JUPYTER_CONFIG_PATH": os.pathsep.join(
                str(ROOT / "classroom" / "jupyter" / d) for d in ("instructor", "common")
            ),
            "COURSE_EXCHANGE": str(self.state / "exchange"),
        }

    def stop(self) -> None:
        """Stop the hub (it stops the proxy and the servers), then kill whatever of them is left."""
        if self.process is None:
            return
        import psutil

        try:
            family = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            family = []
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for pid in [self.process.pid] + [p.pid for p in family]:
            try:
                os.killpg(pid, signal.SIGKILL)  # each server and the proxy lead a session of their own
            except (ProcessLookupError, PermissionError):
                pass
        self.process.wait(timeout=10)
        for proc in family:
            try:
                proc.wait(timeout=10)
            except psutil.Error:
                pass


def changes(before: dict, after: dict) -> str:
    """What differs between two notebook dicts: top-level keys, metadata keys, then each changed cell's keys."""
    found = [
        f"{k}: {before.get(k)!r} -> {after.get(k)!r}"
        for k in ("nbformat", "nbformat_minor")
        if before.get(k) != after.get(k)
    ]
    meta = (before.get("metadata", {}), after.get("metadata", {}))
    found += [
        f"metadata.{k}: {meta[0].get(k)!r} -> {meta[1].get(k)!r}"
        for k in sorted({*meta[0], *meta[1]})
        if meta[0].get(k) != meta[1].get(k)
    ]
    for i, (a, b) in enumerate(zip(before.get("cells", []), after.get("cells", []))):
        keys = sorted(
            k
            for k in {*a, *b}
            if (k == "source" and "".join(a.get(k, "")) != "".join(b.get(k, "")))
            or (k != "source" and a.get(k) != b.get(k))
        )
        if keys:
            found.append(f"cell {i}: {keys} e.g. {keys[0]}: {a.get(keys[0])!r:.200} -> {b.get(keys[0])!r:.200}")
    return "; ".join(found[:8]) or "nothing"


def saved_changes(page, panel, path: Path, notebook: dict) -> str:
    """Save the open notebook with its toolbar button; what the save changed in ``notebook`` (for a failure
    message: it never raises)."""
    try:
        before = path.stat().st_mtime_ns
        panel.locator(".jp-Toolbar-item[data-jp-item-name='save'] button").click()
        wait_for(lambda: path.stat().st_mtime_ns != before, 30, "the save")
        return changes(notebook, json.loads(path.read_text(encoding="utf-8")))
    except Exception as exc:
        return f"(could not save to see: {exc})"
