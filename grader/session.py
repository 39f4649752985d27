"""Drive one runner in its sandbox: send the cells one by one, keep only the records it signed (trusted side).

``run_cells(cells, limits)`` starts ``grader/runner.py`` inside the sandbox that ``grader.sandbox`` builds,
frames each cell to it over a pipe, verifies every record against a per-run key and enforces the
wall-clock limits by killing the sandbox. What it returns, a ``RunResult``, is all the grader trusts.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import select
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader.sandbox import WORKDIR_INSIDE, Limits, build_command, rlimits, sandbox_env, unsandboxed_command


@dataclass
class RunResult:
    """What came back from one run: verified records by cell index and how the run ended."""

    records: dict[int, dict] = field(default_factory=dict)
    outcome: str = "completed"  # completed | timeout | crashed | exited | error
    detail: str = ""
    stopped_at: int | None = None  # index of the cell that was running when the run ended early
    forged: int = 0  # report lines that failed verification (a forgery attempt or a broken runner)
    stderr: str = ""  # tail of the runner's stderr, for the instructor
    seconds: float = 0.0


def _frame(payload: bytes) -> bytes:
    return b"%010d\n" % len(payload) + payload


def _write(fd: int, data: bytes, deadline: float) -> bool:
    while data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            return False
        try:
            data = data[os.write(fd, data[: 1 << 16]) :]
        except (BrokenPipeError, BlockingIOError, OSError):
            return False
    return True


class _Reader:
    """Line reader over the runner's report pipe, with deadlines and a size cap."""

    def __init__(self, fd: int, cap: int = 32 * 2**20) -> None:
        self.fd, self.buffer, self.cap, self.closed = fd, b"", cap, False

    def line(self, deadline: float) -> bytes | None:
        """The next line, or None at the deadline, at the end of the pipe or past the size cap."""
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if self.closed or left <= 0 or len(self.buffer) > self.cap:
                return None
            if select.select([self.fd], [], [], left)[0]:
                chunk = os.read(self.fd, 1 << 16)
                self.closed = not chunk
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


def _verify(line: bytes, key: bytes) -> tuple[list[str], dict] | None:
    """(verdict fields, details) of a genuine record, or None."""
    parts = line.split(b"\t", 2)
    if len(parts) != 3:
        return None
    expected = hmac.new(key, parts[0], hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(expected, parts[1]):
        return None
    try:
        details = json.loads(parts[2])
    except ValueError:
        details = {}
    return parts[0].decode().split("|", 3), details if isinstance(details, dict) else {}


def run_cells(
    cells: list[tuple[str, int, str, str]],
    limits: Limits,
    *,
    files_dir: str | None = None,
    sandbox: bool = True,
    forbidden: list[str] = (),
    bwrap: str | None = None,
) -> RunResult:
    """Run ``cells`` (role, index, grade_id, source) in one fresh sandbox; return what was verified.

    ``role`` is ``setup`` (trusted code), ``answer`` (student code) or ``test``. ``files_dir``
    holds the exercise's data files, copied into the working folder before any cell runs; it must
    be readable by an unprivileged user (the sandbox's).
    """
    started = time.monotonic()
    result = RunResult()
    key = secrets.token_bytes(32)
    files = [str(p.relative_to(files_dir)) for p in Path(files_dir).rglob("*") if p.is_file()] if files_dir else []
    with tempfile.TemporaryDirectory(prefix="grade-") as scratch:
        if sandbox:
            argv, cwd = build_command(limits, files_dir, list(forbidden), bwrap), None
            init = {"workdir": WORKDIR_INSIDE, "files_root": "/job/files", "kill_strays": True}
        else:
            argv = unsandboxed_command(limits)
            cwd = scratch
            init = {"workdir": os.path.join(scratch, "work"), "files_root": files_dir, "kill_strays": False}
        init.update(key=key.hex(), cell_timeout=limits.cell_timeout, files=files, rlimits=rlimits(limits, sandbox))
        errlog = open(os.path.join(scratch, "stderr"), "w+b")
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            cwd=cwd,
            env=sandbox_env() if sandbox else dict(sandbox_env(), HOME=scratch),
            start_new_session=True,
            close_fds=True,
        )
        os.set_blocking(proc.stdin.fileno(), False)
        reader, total = _Reader(proc.stdout.fileno()), started + limits.timeout
        seq = 0

        def expect(what: str, deadline: float) -> tuple[list[str], dict] | None:
            while True:
                line = reader.line(min(deadline, total))
                if line is None:
                    return None
                verified = _verify(line, key)
                if verified is None or verified[0][0] != str(seq) or verified[0][1] != what:
                    result.forged += 1  # not from the runner, or out of order: ignored
                    continue
                return verified

        ready = False
        try:
            ok = _write(proc.stdin.fileno(), _frame(json.dumps(init).encode()), total)
            ready = bool(ok and expect("ready", time.monotonic() + 300))
            if ready:
                for role, index, grade_id, source in cells:
                    seq += 1
                    result.stopped_at = index
                    payload = "\x00".join((role, str(index), grade_id or "", source)).encode()
                    deadline = time.monotonic() + limits.cell_timeout + min(15.0, 2.0 + limits.cell_timeout / 4)
                    got = _write(proc.stdin.fileno(), _frame(payload), min(deadline, total)) and expect(
                        str(index), deadline
                    )
                    if not got:
                        break
                    (_, _, status, value), details = got
                    record = {
                        k: details.get(k)
                        for k in ("stdout", "stderr", "ename", "evalue", "traceback", "seconds")
                        if details.get(k) is not None and details.get("index") == index
                    }
                    record.update(status=status, index=index, grade_id=grade_id, role=role)
                    try:
                        record["value"] = float(value) if value not in ("''", "") else None
                    except ValueError:
                        record["value"] = None
                    result.records[index] = record
                else:
                    seq += 1
                    result.stopped_at = None
                    _write(proc.stdin.fileno(), _frame(b""), total)
                    expect("done", time.monotonic() + 30)
        finally:
            if reader.closed:  # the runner's end of the pipe closed: let it finish dying, to learn how
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            timed_out = result.stopped_at is not None and not reader.closed
            _kill(proc)
            errlog.seek(max(0, errlog.seek(0, 2) - 8000))
            result.stderr = errlog.read().decode(errors="replace")
            errlog.close()
        result.seconds = time.monotonic() - started
        if not ready:  # the runner itself failed (a broken installation, not the student's doing)
            result.outcome, result.detail = (
                "error",
                "the grader could not start this notebook (see the instructor's log)",
            )
            result.stopped_at = cells[0][1] if cells else None
        elif result.stopped_at is not None:
            result.outcome, result.detail = _ending(proc.returncode, timed_out, limits)
    return result


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (proc.stdin, proc.stdout):
        try:
            stream.close()
        except OSError:
            pass
    proc.wait()


def _ending(code: int | None, timed_out: bool, limits: Limits) -> tuple[str, str]:
    """Outcome and a one-line, student-safe explanation of why a run ended early."""
    if timed_out:
        return (
            "timeout",
            f"the notebook was stopped after exceeding its time limit ({limits.cell_timeout:g} s per cell, "
            f"{limits.timeout:g} s in all)",
        )
    signum = -code if code is not None and code < 0 else (code - 128 if code is not None and code > 128 else None)
    if signum:
        name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
        hint = {
            "SIGSEGV": "a segmentation fault",
            "SIGKILL": "killed (memory or CPU limit?)",
            "SIGXCPU": "the CPU time limit",
            "SIGXFSZ": "the file size limit",
            "SIGABRT": "an abort",
        }.get(name, name)
        return "crashed", f"the Python process running the notebook died ({hint})"
    return "exited", f"the Python process running the notebook exited (status {code}) before finishing"
