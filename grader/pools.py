"""Where ``grade_notebook`` runs: threads on this machine (``LocalPool``) or Dask workers (``DaskPool``).

Both pools take a ``grader.grade.Job`` and return a future of its ``Graded``; the caller saves.
``python -m grader autograde --scheduler tcp://HOST:8786`` hands every notebook to the Dask scheduler
at that address; ``--scheduler local`` starts a ``dask.distributed.LocalCluster`` of ``--workers``
processes on this machine, the same code path on one machine. A Dask task is one ``grade_shipped``:
the worker writes the exercise's data files into a folder of its own, grades the notebook in its own
bubblewrap sandbox and returns the result. Only the coordinator (the process that called
``autograde``) writes ``autograded/`` and the gradebook, so a worker needs the course environment
(this package and ``course_utils``) and bubblewrap, but neither the course folder nor the gradebook.
When a worker is lost (killed, its machine gone), the scheduler runs its tasks again on another
worker, so no submission is lost; each result reaches the coordinator once.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import as_completed as _as_completed
from dataclasses import replace
from pathlib import Path

from grader.course import read_files, stage_files
from grader.grade import Graded, Job, grade_notebook
from grader.review import LibraryIndex
from grader.sandbox import sandbox_problem

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


class LocalPool:
    """The default pool: ``workers`` threads on this machine, each driving one sandbox at a time.

    ``library`` is the course library every review compares with (``grader.review.library_index``).
    """

    def __init__(self, workers: int, library: LibraryIndex | None = None) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._library = library

    def submit(self, job: Job, key: str = "grade"):
        """A future of ``grade_notebook(job)`` (``key`` names the task on Dask's pool only)."""
        return self._pool.submit(grade_notebook, job, self._library)

    @staticmethod
    def as_completed(futures):
        """The futures in the order they finish."""
        return _as_completed(futures)

    def close(self) -> None:
        """Wait for the running notebooks, then stop the threads."""
        self._pool.shutdown(wait=True)

    def __enter__(self) -> LocalPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def grade_shipped(job: Job, files: dict[str, bytes]) -> Graded:
    """On a worker: ``grade_notebook(job)`` with the data files shipped as contents ({relative path: bytes}).

    The files are written to a fresh folder readable by the sandbox's unprivileged user and removed
    afterwards; the course library for the review flags is the worker's own (read once per process).
    """
    with tempfile.TemporaryDirectory(prefix="grade-data-") as staging:
        return grade_notebook(replace(job, files_dir=stage_files(files, Path(staging, "files"))))


class DaskPool:
    """The autograder's pool on a Dask cluster: ``submit`` grades one notebook on some worker.

    ``address`` is a scheduler's (``tcp://host:port``) or ``local``, which starts a ``LocalCluster``
    of ``workers`` processes with one thread each, stopped again by ``close``. ``sandbox``,
    ``forbidden`` and ``bwrap`` are what ``check_workers`` checks each worker's sandbox with (the
    jobs' own settings). Use as a context manager.
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
        self._files: dict[str | None, dict[str, bytes]] = {}
        self._sandbox, self._forbidden, self._bwrap = sandbox, list(forbidden), bwrap

    def check_workers(self, timeout: float = 60.0) -> dict[str, str | None]:
        """Wait (up to ``timeout`` s) for a worker; return each worker's sandbox problem (None: fine)."""
        self.client.wait_for_workers(1, timeout=timeout)
        if not self._sandbox:
            return {}
        return self.client.run(sandbox_problem, self._forbidden, self._bwrap)

    def submit(self, job: Job, key: str = "grade"):
        """A Dask future of ``grade_notebook(job)`` on some worker, the data files of ``job.files_dir``
        shipped along (read once per folder); ``key`` starts the task's name."""
        if job.files_dir not in self._files:
            self._files[job.files_dir] = read_files(job.files_dir)
        return self.client.submit(
            grade_shipped,
            replace(job, files_dir=None),
            self._files[job.files_dir],
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
