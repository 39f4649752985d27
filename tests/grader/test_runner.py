"""The runner's own rules, without a sandbox, and the sandbox command that exposes only the runner.

The audit hook cannot be removed once added, so its tests run in a fresh Python process that loads
``grader/runner.py`` as the sandbox does (a file, not the ``grader`` package), installs the hook as
``serve`` does, and reports what each attempt to set a trace or profile function gave.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import grader
from grader import sandbox
from grader.sandbox import RUNNER, Limits, SandboxUnavailable, build_command

PROBE = textwrap.dedent("""
    import functools, importlib.util, json, math, sys, threading
    spec = importlib.util.spec_from_file_location("runner_under_test", sys.argv[1])
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    import course_utils.testing.guard as guard  # before the hook, as the runner pre-imports it
    sys.addaudithook(runner._auditor(runner._trusted_tracers()))
    results = {}

    def attempt(name, action):
        try:
            action()
            results[name] = "allowed"
        except BaseException as exc:
            results[name] = type(exc).__name__

    def student_clears_profile():
        sys.setprofile(None)

    def student_clears_through_partial():
        functools.partial(sys.setprofile, None)()

    attempt("sys.setprofile from student code", student_clears_profile)
    attempt("functools.partial(sys.setprofile)", student_clears_through_partial)
    attempt("sys.settrace from student code", lambda: sys.settrace(lambda *a: None))
    attempt("threading.setprofile(None)", lambda: threading.setprofile(None))  # no audit event
    spoof = compile("import sys\\nsys.setprofile(None)", guard.__file__, "exec")  # guard.py's name, not its code
    attempt("code compiled under guard.py's name", lambda: exec(spoof, {}))
    attempt("the same in guard's globals", lambda: exec(spoof, vars(guard)))
    attempt("the runner's restore", lambda: runner.Guard().restore())

    def forbidden_call():
        with guard.forbid(math.factorial):
            math.factorial(3)
    attempt("a forbidden call inside forbid", forbidden_call)
    block = guard.forbid(math.factorial)
    attempt("forbid around an honest call", block.__enter__)
    seen = []

    def in_thread():
        try:
            math.factorial(3)
            seen.append("not watched")
        except BaseException as exc:
            seen.append(type(exc).__name__)

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    attempt("the end of that block", lambda: block.__exit__(None, None, None))
    results["a thread started inside forbid"] = seen
    print(json.dumps(results))
""")


@pytest.fixture(scope="module")
def audit_results(tmp_path_factory) -> dict:
    script = tmp_path_factory.mktemp("runner") / "probe.py"
    script.write_text(PROBE)
    done = subprocess.run(
        [sys.executable, "-I", "-B", str(script), RUNNER],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_student_code_cannot_set_or_clear_trace_and_profile_functions(audit_results):
    for attempt in (
        "sys.setprofile from student code",
        "functools.partial(sys.setprofile)",
        "sys.settrace from student code",
        "code compiled under guard.py's name",
        "the same in guard's globals",
    ):
        assert audit_results[attempt] == "PermissionError", (attempt, audit_results)


def test_the_guard_and_the_runner_still_can(audit_results):
    assert audit_results["the runner's restore"] == "allowed"
    assert audit_results["forbid around an honest call"] == "allowed"
    # the new thread copied the guard's hook (threading.Thread._bootstrap_inner may), and it caught the call
    assert audit_results["a thread started inside forbid"] in (["ForbiddenCall"], ["PermissionError"])
    assert audit_results["the end of that block"] == "ForbiddenCall"  # the thread's call counts
    assert audit_results["threading.setprofile(None)"] == "allowed"  # no audit event; the runner resets it


def test_a_forbidden_call_still_fails_with_the_guards_message(audit_results):
    """The guard raises from its profile hook; CPython then tries to unset the hook (an audit event
    from the student's frame), which the runner refuses: the hook stays, and the block still ends
    with the guard's ForbiddenCall, which names the call."""
    assert audit_results["a forbidden call inside forbid"] == "ForbiddenCall"


def test_the_runner_is_standalone():
    source = Path(RUNNER).read_text(encoding="utf-8")
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports and not any("grader" in line or "course_utils" in line for line in imports), imports


def _command(monkeypatch, runner: str | None = None) -> list[str]:
    if runner:
        monkeypatch.setattr(sandbox, "RUNNER", runner)
    try:
        return build_command(Limits(), None, [])
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox here: {exc}")


def test_the_sandbox_binds_the_runner_file_and_no_other_grader_file(monkeypatch):
    argv = _command(monkeypatch)
    assert argv[-4:] == [sys.executable, "-I", "-B", "/grader/runner.py"]
    package = os.path.dirname(os.path.realpath(grader.__file__))
    binds = [argv[i + 1] for i, a in enumerate(argv) if a in ("--ro-bind", "--ro-bind-try", "--bind")]
    assert os.path.realpath(RUNNER) in binds
    exposed = [
        p
        for p in binds
        if p != os.path.realpath(RUNNER)
        and (package == p or package.startswith(p + os.sep) or p.startswith(package + os.sep))
    ]
    assert not exposed, f"the sandbox exposes grader/ through {exposed}"


def test_a_grader_installed_in_the_environment_is_hidden(monkeypatch):
    """With a non-editable install the package lies inside the (bound) environment: it is covered."""
    inside = os.path.join(os.path.realpath(sys.prefix), "lib", "site-packages", "grader", "runner.py")
    argv = _command(monkeypatch, inside)
    package = os.path.dirname(inside)
    pairs = list(zip(argv, argv[1:]))
    assert ("--tmpfs", package) in pairs and ("--remount-ro", package) in pairs, "the installed package is visible"
    assert pairs.index(("--tmpfs", package)) > max(i for i, (a, _) in enumerate(pairs) if a == "--ro-bind-try")
