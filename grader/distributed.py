"""Grade on Dask workers: each worker runs the sandbox for the submissions it is handed (trusted side).

``python -m grader autograde --scheduler tcp://HOST:8786`` hands every notebook to the Dask scheduler
at that address; ``--scheduler local`` starts a ``dask.distributed.LocalCluster`` of ``--workers``
processes on this machine, the same code path on one machine. A task is one call of
``grader.autograde.grade_notebook``, which is pure (its inputs in, a ``Graded`` out): the worker
writes the exercise's data files into a folder of its own, grades the notebook in its own bubblewrap
sandbox and returns the result. Only the coordinator (the process that called ``autograde``) writes
``autograded/`` and the gradebook, so a worker needs the course environment (this package and
``course_utils``) and bubblewrap, but neither the course folder nor the gradebook. When a worker is
lost (killed, its machine gone), the scheduler runs its tasks again on another worker, so no
submission is lost; each result reaches the coordinator once.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from pathlib import Path

LOCAL = "local"
_ADDRESS = re.compile(r"^(tcp|tls)://(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$")


def check_scheduler(address: str) -> str:
    """``address`` when it names a scheduler (``tcp://host:port``, ``tls://host:port`` or ``local``);
    otherwise a ``ValueError`` saying what is wrong with it."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError("--scheduler needs an address such as tcp://10.0.0.5:8786, or 'local'")
    address = address.strip()
    if address == LOCAL:
        return address
    match = _ADDRESS.match(address)
    if not match:
        raise ValueError(
            f"--scheduler {address!r} is not a Dask scheduler address: expected tcp://HOST:PORT "
            f"(what `dask scheduler` prints, e.g. tcp://10.0.0.5:8786), tls://HOST:PORT or 'local'"
        )
    if not 0 < int(match.group(3)) < 65536:
        raise ValueError(f"--scheduler {address!r}: port {match.group(3)} is not between 1 and 65535")
    return address


def read_files(folder: str | None) -> dict[str, bytes]:
    """The files under ``folder`` (an exercise's staged data files), by relative path; {} for None."""
    if not folder:
        return {}
    root = Path(folder)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def worker_sandbox_problem(forbidden: list[str], bwrap: str | None) -> str | None:
    """On a worker: why no grading sandbox can be created there (None when one can)."""
    from grader.sandbox import sandbox_problem

    return sandbox_problem(forbidden, bwrap)


def grade_shipped(
    student: str,
    name: str,
    parts: list,
    release_nb: dict,
    submitted: dict | None,
    limits,
    files: dict[str, bytes],
    sandbox: bool,
    forbidden: list[str],
    bwrap: str | None,
):
    """On a worker: ``grade_notebook`` with the data files shipped as contents rather than as a folder.

    The files are written to a fresh folder readable by the sandbox's unprivileged user and removed
    afterwards; the course library for the review flags is the worker's own (read once per process).
    """
    from grader.autograde import grade_notebook

    with tempfile.TemporaryDirectory(prefix="grade-data-") as staging:
        files_dir = None
        if files:
            files_dir = os.path.join(staging, "files")
            for rel, data in files.items():
                path = Path(files_dir, rel)
                if ".." in Path(rel).parts or Path(rel).is_absolute():
                    raise ValueError(f"data file {rel!r} is outside the exercise folder")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            for path in [Path(staging), *Path(staging).rglob("*")]:
                path.chmod(0o755 if path.is_dir() else 0o644)  # readable by the sandbox's user
        return grade_notebook(student, name, parts, release_nb, submitted, limits, files_dir, sandbox, forbidden, bwrap)


class DaskPool:
    """The autograder's pool on a Dask cluster: ``submit`` grades one notebook on some worker.

    ``address`` is a scheduler's (``tcp://host:port``) or ``local``, which starts a ``LocalCluster``
    of ``workers`` processes with one thread each, stopped again by ``close``. Use as a context manager.
    """

    def __init__(self, address: str, workers: int = 1, *, sandbox: bool = True, forbidden=(), bwrap=None) -> None:
        from distributed import Client, LocalCluster

        address = check_scheduler(address)
        self.cluster = None
        if address == LOCAL:
            self.cluster = LocalCluster(
                n_workers=max(1, workers),
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",  # loopback only: nothing outside this machine can reach it
                scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
            )
            address = self.cluster.scheduler_address
        try:
            self.client = Client(address, timeout=30)
        except OSError as exc:
            self._stop_cluster()
            raise ConnectionError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc
        self._files: dict[str, dict[str, bytes]] = {}
        self._sandbox, self._forbidden, self._bwrap = sandbox, list(forbidden), bwrap

    def check_workers(self, timeout: float = 60.0) -> dict[str, str | None]:
        """Wait (up to ``timeout`` s) for a worker; return each worker's sandbox problem (None: fine)."""
        self.client.wait_for_workers(1, timeout=timeout)
        if not self._sandbox:
            return {}
        return self.client.run(worker_sandbox_problem, self._forbidden, self._bwrap)

    def submit(
        self,
        student: str,
        name: str,
        parts: list,
        release_nb: dict,
        submitted: dict | None,
        limits,
        files_dir: str | None,
        key: str = "grade",
    ):
        """A Dask future of ``grade_notebook`` for this notebook, the data files in ``files_dir`` shipped along."""
        if files_dir not in self._files:
            self._files[files_dir] = read_files(files_dir)
        return self.client.submit(
            grade_shipped,
            student,
            name,
            parts,
            release_nb,
            submitted,
            limits,
            self._files[files_dir],
            self._sandbox,
            self._forbidden,
            self._bwrap,
            key=f"{key}-{uuid.uuid4().hex[:12]}",
            pure=False,
        )

    @staticmethod
    def as_completed(futures):
        """The futures in the order they finish."""
        from distributed import as_completed

        return as_completed(list(futures))

    def _stop_cluster(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
            self.cluster = None

    def close(self) -> None:
        """Disconnect from the scheduler; stop the local cluster if this pool started it."""
        self.client.close()
        self._stop_cluster()

    def __enter__(self) -> DaskPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
