"""Build the sandbox untrusted notebook cells run in: bubblewrap command, limits, a trial run (trusted side).

``grader.session.run_cells`` starts the runner inside the bubblewrap command built here, as a script
(``python -I -B /grader/runner.py``: ``grader/runner.py`` bound read-only to a private path), and
streams it the cells one by one. The sandbox sees a read-only ``/usr``, the Python installation,
the virtual environment, the ``course_utils`` package (what notebooks import) and that one runner
file, a private ``/proc``, ``/dev``, ``/tmp`` and a size-limited writable home (``/home/student``),
and nothing else: not the rest of ``grader`` (review-flag rules, the plan, this module; hidden even
when it is installed inside the environment), not the course directory (``solutions/``,
``gradebook.db``, other students), not ``$HOME``, no network (a fresh network namespace), no other
process (a fresh pid namespace; the runner kills whatever a cell leaves running). When started as
root it runs as a random unprivileged uid (``setpriv``), so that the process limit applies: the
kernel does not count root's processes. Limits: address space, processes/threads, CPU seconds,
file size, open files (``prlimit`` and ``setrlimit``), a wall-clock limit per cell and per
submission (enforced here, by killing the sandbox).

Where the sandbox cannot be created (no ``bwrap``, not Linux, user namespaces disabled),
``sandbox_problem()`` says why; ``run_cells(..., sandbox=False)`` runs the same runner
without it, with limits and timeouts but with the caller's rights (``--unsafe-no-sandbox``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

UNSAFE_FLAG = "--unsafe-no-sandbox"
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts", "alternatives", "mime.types")
_HOME = "/home/student"
RUNNER = str(Path(__file__).resolve().with_name("runner.py"))  # standalone: imports nothing from grader
_RUNNER_INSIDE = "/grader/runner.py"  # where the sandbox sees it (and nothing else of grader/)


class SandboxUnavailable(RuntimeError):
    """The grading sandbox cannot be created on this machine (the message says why)."""


@dataclass
class Limits:
    """Resource limits for one submission (seconds, MiB, counts)."""

    cell_timeout: float = 600.0  # wall time of one cell
    timeout: float = 1800.0  # wall time of the whole submission
    memory_mb: int = 8192  # address space of each process (torch alone maps about 3 GiB)
    processes: int = 64  # processes and threads of the sandbox user
    cpu_seconds: int | None = None  # CPU time of each process; default: ``timeout``
    file_mb: int = 64  # largest file a submission may write
    tmpfs_mb: int = 512  # size of its writable home and of its /tmp
    open_files: int = 256


def _python() -> str:
    return sys.executable


def _ro_paths() -> list[str]:
    """Host paths the sandbox needs, read-only: system, Python, venv, course_utils."""
    import course_utils

    paths = ["/usr", sys.base_prefix, sys.prefix, str(Path(course_utils.__file__).parent)]
    out: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if os.path.exists(p)}, key=len):
        if not any(path == p or path.startswith(p + os.sep) for p in out):
            out.append(path)
    return out


def _user_tasks(uid: int) -> int:
    """Processes and threads that ``uid`` runs now (what RLIMIT_NPROC counts)."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            total += int(fields.get("Threads", "1"))
    return total


def rlimits(limits: Limits, sandboxed: bool) -> dict[str, int]:
    """The ``resource`` limits (name -> value) the runner sets on itself before any student code."""
    mib = 2**20
    nproc = limits.processes if (sandboxed and os.geteuid() == 0) else _user_tasks(os.getuid()) + limits.processes
    return {
        "RLIMIT_AS": limits.memory_mb * mib,
        "RLIMIT_NPROC": nproc,
        "RLIMIT_CPU": int(limits.cpu_seconds or limits.timeout),
        "RLIMIT_FSIZE": limits.file_mb * mib,
        "RLIMIT_NOFILE": limits.open_files,
        "RLIMIT_CORE": 0,
    }


def build_command(limits: Limits, files_dir: str | None, forbidden: list[str], bwrap: str | None = None) -> list[str]:
    """The argv that starts the runner in bubblewrap under ``prlimit`` (see the module docstring).

    ``forbidden`` are host paths the sandbox must not see (the course directory); a needed
    read-only path that contains one of them is refused.
    """
    bwrap = bwrap or shutil.which("bwrap")
    if not bwrap or not os.access(bwrap, os.X_OK) or not sys.platform.startswith("linux"):
        raise SandboxUnavailable(
            "bubblewrap (`bwrap`) is not installed"
            if sys.platform.startswith("linux")
            else f"the sandbox needs Linux namespaces; this is {sys.platform}"
        )
    ro = _ro_paths()
    for bad in forbidden:
        bad = os.path.realpath(bad)
        for path in ro:
            if bad == path or bad.startswith(path + os.sep):
                raise SandboxUnavailable(f"the sandbox would have to expose {path}, which contains {bad}")
    args = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "grader",
    ]
    as_root = os.geteuid() == 0
    setpriv = shutil.which("setpriv") if as_root else None
    if as_root and setpriv:
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    elif not as_root:
        args += ["--unshare-user"]
    # The private /tmp and home come first: read-only binds made after them stay visible even when
    # they live below /tmp (a course cloned into /tmp keeps its .venv there).
    size = str(limits.tmpfs_mb * 2**20)
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--perms",
        "0755",
        "--dir",
        "/home",
        "--perms",
        "0777",
        "--size",
        size,
        "--tmpfs",
        _HOME,
    ]
    made: set[str] = {"/tmp", "/home"}
    for path in ro + [f"/etc/{name}" for name in _ETC]:
        for parent in reversed(Path(path).parents[:-1]):
            if str(parent) not in made and not os.path.islink(parent):
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        args += ["--ro-bind-try", path, path]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = f"/{name}"
        if os.path.islink(host):
            args += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            args += ["--ro-bind", host, host]
    package = os.path.dirname(os.path.realpath(RUNNER))
    if any(package == p or package.startswith(p + os.sep) for p in ro):  # installed inside the environment
        args += ["--perms", "0555", "--size", "4096", "--tmpfs", package, "--remount-ro", package]
    args += ["--perms", "0755", "--dir", os.path.dirname(_RUNNER_INSIDE), "--ro-bind", RUNNER, _RUNNER_INSIDE]
    if files_dir:
        args += ["--perms", "0755", "--dir", "/job", "--ro-bind", files_dir, "/job/files"]
    args += ["--chdir", _HOME, "--remount-ro", "/", "--"]
    if as_root and setpriv:
        uid = str(200_000 + secrets.randbelow(60_000))  # one fresh user per run: its own process count
        args += [
            setpriv,
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    return _prlimit(limits, sandboxed=True) + args + [_python(), "-I", "-B", _RUNNER_INSIDE]


def _prlimit(limits: Limits, sandboxed: bool) -> list[str]:
    tool = shutil.which("prlimit")
    if not tool:
        return []  # the runner applies the same limits with setrlimit before any student code
    names = {
        "RLIMIT_AS": "as",
        "RLIMIT_NPROC": "nproc",
        "RLIMIT_CPU": "cpu",
        "RLIMIT_FSIZE": "fsize",
        "RLIMIT_NOFILE": "nofile",
        "RLIMIT_CORE": "core",
    }
    return [tool] + [f"--{names[k]}={v}" for k, v in rlimits(limits, sandboxed).items()] + ["--"]


def unsandboxed_command(limits: Limits) -> list[str]:
    """The command that runs the runner without bubblewrap (``--unsafe-no-sandbox``): limits only."""
    return _prlimit(limits, sandboxed=False) + [_python(), "-I", "-B", RUNNER]


WORKDIR_INSIDE = f"{_HOME}/work"  # the runner's working folder inside the sandbox


def sandbox_env() -> dict[str, str]:
    """The whole environment of the runner: nothing of the grader's own environment leaks in."""
    return {
        "PATH": f"{Path(_python()).parent}:/usr/bin:/bin",
        "HOME": _HOME,
        "USER": "student",
        "LOGNAME": "student",
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_EVALUATE_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": "/tmp/huggingface",
        "XDG_CACHE_HOME": "/tmp/cache",
        "CUDA_VISIBLE_DEVICES": "",
        "NBGRADER_EXECUTION": "autograde",
    }


_CHECKED: dict[tuple, str | None] = {}


_PROBE = f"""import importlib.util, os
def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False
print("no course_utils" if not found("course_utils") else "no runner" if not os.path.isfile({_RUNNER_INSIDE!r})
      else "grader exposed" if found("grader.review") else "sandbox-ok")"""


def sandbox_problem(forbidden: list[str] = (), bwrap: str | None = None) -> str | None:
    """None when a trial sandbox starts Python, finds ``course_utils`` and the runner, and cannot import
    the rest of ``grader``; otherwise the reason it does not."""
    cache_key = (tuple(forbidden), bwrap)
    if cache_key not in _CHECKED:
        try:
            argv = build_command(Limits(), None, list(forbidden), bwrap)
            argv = argv[:-1] + ["-c", _PROBE]  # the runner's view, without importing torch
            done = subprocess.run(argv, env=sandbox_env(), capture_output=True, text=True, timeout=120)
            ok = done.returncode == 0 and "sandbox-ok" in done.stdout
            _CHECKED[cache_key] = (
                None if ok else f"a trial sandbox failed: {(done.stderr or done.stdout).strip()[-500:]}"
            )
        except SandboxUnavailable as exc:
            _CHECKED[cache_key] = str(exc)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _CHECKED[cache_key] = f"a trial sandbox failed: {exc}"
    return _CHECKED[cache_key]
