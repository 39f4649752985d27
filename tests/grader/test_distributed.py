"""Grading on Dask workers (``grader.pools.DaskPool``): the same grades as the local pool, and none lost.

A Dask scheduler with two worker processes (one thread each) runs on the loopback interface for this
module. The tiny fixture unit (``classroom_course``) is graded through it, sandboxed where a sandbox
can be made: every student gets exactly the scores, review flags and outcome the local thread pool
gives, the work ran on the cluster's workers, and the gradebook holds the expected scores. Then a
worker is killed with SIGKILL while it grades a submission that sleeps in its first cell: the
scheduler runs that task again on a worker that is alive, and every submission of the batch ends up
graded once, with the right scores. A malformed scheduler address is refused in one line.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from classroom_course import ANSWERS, EXPECTED, UNIT, clone, generated_course, gradebook_scores, slow, submit

from grader.autograde import autograde
from grader.cli import main
from grader.pools import check_scheduler
from grader.sandbox import Limits, sandbox_problem

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install -e '.[dev]')")

SANDBOX = sandbox_problem() is None
LIMITS = Limits(cell_timeout=60, timeout=120, memory_mb=4608)
STUDENTS = {"ana": "right", "ben": "half", "cy": "blank"}


@pytest.fixture(scope="module")
def cluster():
    """A scheduler and two single-threaded worker processes on 127.0.0.1, and a client of it."""
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
    )
    client = distributed.Client(cluster, timeout=60)
    try:
        client.wait_for_workers(2, timeout=120)
        yield cluster, client
    finally:
        client.close()
        cluster.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The fixture course with its assignment generated, copied by each test."""
    return generated_course(tmp_path_factory.mktemp("classroom") / "course")


def _graded(results) -> dict[tuple[str, str], tuple]:
    return {(g.student, g.notebook): (g.scores, g.flags, g.run.outcome) for g in results}


def test_dask_workers_grade_as_the_local_pool_does(cluster, template, tmp_path):
    cluster, client = cluster
    courses = {}
    for mode in ("local", "dask"):
        courses[mode] = clone(template, tmp_path / mode)
        for student, kind in STUDENTS.items():
            submit(courses[mode], student, ANSWERS[kind])
    local = autograde(courses["local"], workers=2, limits=LIMITS, sandbox=SANDBOX, log=lambda _: None)
    with distributed.get_task_stream(client) as stream:
        remote = autograde(
            courses["dask"],
            workers=2,
            limits=LIMITS,
            sandbox=SANDBOX,
            scheduler=cluster.scheduler_address,
            log=lambda _: None,
        )
    assert _graded(remote) == _graded(local)
    assert {s: g[0] for (s, _), g in _graded(remote).items()} == {s: EXPECTED[k] for s, k in STUDENTS.items()}
    ran = [t for t in stream.data if str(t["key"]).startswith(f"grade-{UNIT}-")]
    assert len(ran) == len(STUDENTS) and {t["worker"] for t in ran} <= set(client.scheduler_info()["workers"])
    for mode, course in courses.items():
        assert gradebook_scores(f"sqlite:///{course / 'gradebook.db'}") == {
            s: EXPECTED[k] for s, k in STUDENTS.items()
        }, mode


def _executing(dask_worker) -> tuple[list[str], int]:
    """On a worker: the keys of the tasks it is running now, and its process id."""
    return [str(ts.key) for ts in dask_worker.state.executing], os.getpid()


def test_a_worker_killed_mid_batch_loses_no_submission(cluster, template, tmp_path):
    cluster, client = cluster
    course = clone(template, tmp_path / "kill")
    students = {"ana": "right", "cy": "blank"}
    for student, kind in students.items():
        submit(course, student, ANSWERS[kind])
    submit(course, "slowpoke", slow(5))  # right answers, after 5 s of sleep in the first cell
    outcome: dict = {}

    def grade() -> None:
        try:
            outcome["results"] = autograde(
                course, limits=LIMITS, sandbox=SANDBOX, scheduler=cluster.scheduler_address, log=lambda _: None
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            outcome["error"] = exc

    grading = threading.Thread(target=grade, daemon=True)
    grading.start()
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and grading.is_alive():
        for keys, pid in client.run(_executing).values():
            if any(f"-slowpoke-{UNIT}-" in key for key in keys):
                os.kill(pid, signal.SIGKILL)  # mid-task: the sandbox is sleeping in the first cell
                killed = pid
                break
        time.sleep(0.2)
    grading.join(timeout=240)
    assert killed is not None, "the slow submission was never seen running on a worker"
    assert not grading.is_alive(), "grading did not finish within 240 s after the kill"
    assert "error" not in outcome, repr(outcome.get("error"))
    client.wait_for_workers(2, timeout=120)  # the nanny restarts the killed worker
    assert killed not in client.run(os.getpid).values()
    expected = {s: EXPECTED[k] for s, k in students.items()} | {"slowpoke": EXPECTED["right"]}
    graded = [(g.student, g.notebook) for g in outcome["results"]]
    assert sorted(graded) == sorted((s, UNIT) for s in expected), "a submission was lost or graded twice"
    assert {g.student: g.scores for g in outcome["results"]} == expected
    assert gradebook_scores(f"sqlite:///{course / 'gradebook.db'}") == expected


def test_a_notebook_that_cannot_be_graded_does_not_stop_the_others(template, tmp_path, monkeypatch):
    """A task that raises (on Dask: one that killed every worker it ran on) is reported at the end of
    the run, after the other students' grades were saved."""
    import grader.pools as pools

    course = clone(template, tmp_path / "failing")
    for student, kind in STUDENTS.items():
        submit(course, student, ANSWERS[kind])
    real = pools.grade_notebook

    def failing_for_ben(job, *args, **kwargs):
        if job.student == "ben":
            raise OSError("the worker's disk is full")
        return real(job, *args, **kwargs)

    monkeypatch.setattr(pools, "grade_notebook", failing_for_ben)
    lines: list[str] = []
    with pytest.raises(RuntimeError, match="ben: not graded: OSError"):
        autograde(course, workers=2, limits=LIMITS, sandbox=SANDBOX, log=lines.append)
    assert any("ben" in line and "NOT GRADED" in line for line in lines), lines
    saved = gradebook_scores(f"sqlite:///{course / 'gradebook.db'}")
    assert saved == {s: EXPECTED[k] for s, k in STUDENTS.items() if s != "ben"}


@pytest.mark.parametrize(
    "address, says",
    [
        ("8786", "not a Dask scheduler address"),
        ("http://10.0.0.5:8786", "not a Dask scheduler address"),
        ("tcp://10.0.0.5", "not a Dask scheduler address"),
        ("tcp://10.0.0.5:99999", "port 99999 is not between 1 and 65535"),
    ],
)
def test_a_malformed_scheduler_address_is_refused_in_one_line(address, says, capsys, tmp_path):
    with pytest.raises(ValueError, match=says):
        check_scheduler(address)
    assert main(["--course", str(tmp_path), "autograde", "--scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --scheduler") and says in err and "Traceback" not in err
