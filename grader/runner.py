"""Execute one submission's cells inside the grading sandbox (``python -I -B /grader/runner.py``).

The only grader code that runs next to student code, and the only grader file the sandbox shows:
a standalone script (standard library only, nothing from ``grader``). ``grader.session`` sends
the cells one at a time over stdin (so later tests are not in this process while earlier student
code runs) and reads back one record per cell, whose verdict ``seq|index|status|value`` is signed
with a per-run key; it alone decides the points (no verified ``pass`` record for a test: 0 points).

No IPython: cells run with ``exec``, so input transformers, ``get_ipython`` and magics do not
exist (magic lines in answer cells are blanked). Before each of its own steps and before each test
the runner restores the functions, classes and submodules of guarded modules (``builtins``,
``math``, ``torch``, ``torch.nn``, ``torch.testing``, ``numpy.testing``, ``course_utils``, the ones
it uses itself), ``sys.modules``, the names setup and test cells bound, and clears trace functions,
signal handlers, itimers and ``gc.callbacks``; after a test it checks the same, and that no thread
or torch function/dispatch mode is active: a test run with tampered guards scores 0. An audit hook
blocks new audit hooks, writes to tested functions' ``__code__``/``__defaults__``, and setting a
trace or profile function from any code but this file's and ``course_utils/testing/guard.py``'s. All of it
is in-process: it defeats ``tests/grader/test_sandbox_attacks.py``, not a student who
reverse-engineers this file (see the threat model in docs/autograder.md).
"""

from __future__ import annotations

import ast
import builtins
import gc
import io
import json
import os
import re
import resource
import signal
import sys
import threading
import time
import traceback
import types
from _hashlib import hmac_digest as _hmac_digest

_MISSING = object()
_GUARDED_EXACT = {
    "builtins",
    "math",
    "cmath",
    "operator",
    "numbers",
    "torch",
    "numpy",
    "os",
    "posix",
    "json",
    "json.encoder",
    "json.decoder",
    "json.scanner",
    "signal",
    "gc",
    "threading",
    "traceback",
    "time",
    "io",
    "types",
    "ast",
    "resource",
    "re",
    "_hashlib",
    "torch._C",
    "torch._C._nn",
    "torch._VF",
    "torch.nested",
    "sacrebleu",
    __name__,
}
_GUARDED_PREFIXES = (
    "torch.nn.",
    "torch.testing.",
    "torch.autograd.",
    "torch.functional",
    "torch._tensor",
    "torch.linalg",
    "torch.random",
    "numpy.testing.",
    "numpy.core.",
    "numpy._core.",
    "numpy.linalg",
    "course_utils.",
    "torch.optim.",
    "sacrebleu.",
)
# Classes whose dictionaries are snapshotted. torch.optim is left out: an optimizer class wraps its
# own ``step`` the first time it is instantiated, which is legitimate and would look like tampering.
_CLASS_ROOTS = ("torch", "numpy", "course_utils", "builtins", "json", "sacrebleu", "__main__")
_CLASS_SKIP = ("torch.optim",)
_PREIMPORT = (
    "math",
    "torch",
    "torch.testing",
    "numpy",
    "numpy.testing",
    "course_utils.testing.checks",
    "course_utils.testing.guard",
    "tqdm",
)
_NOT_GUARDED_KEYS = {
    "__warningregistry__",
    "__doc__",
    "__file__",
    "__cached__",
    "__loader__",
    "__spec__",
    "__package__",
    "__path__",
    "__name__",
    "__annotations__",
}
_MAGIC = re.compile(r"^(\s*)(%|!)")
_OUTPUT_LIMIT = 20_000


class CellTimeout(BaseException):
    """Raised by SIGALRM when a cell exceeds its time (a BaseException: ``except Exception`` misses it)."""


_GUARDED_FUNCTIONS: set[int] = set()  # ids of the functions the snapshot holds (so the ids stay valid)
_TRACE_EVENTS = frozenset({"sys.settrace", "sys.setprofile", "sys._settraceallthreads", "sys._setprofileallthreads"})


def _auditor(tracers):
    """The audit hook; ``tracers`` (read-only, bound here, named nowhere else) maps ``id(code)`` to
    ``(code, its module's globals)`` for the only callers that may set trace and profile functions."""

    def audit(
        event,
        args,
        _guarded=_GUARDED_FUNCTIONS,
        _tracing=_TRACE_EVENTS,
        _tracers=tracers,
        _frame=sys._getframe,
        _id=id,
        _error=PermissionError,
    ):
        # Defaults bind what the hook needs: writes to __defaults__ are among what it blocks.
        if event == "sys.addaudithook":
            raise _error("the grader does not allow audit hooks")
        if event in _tracing:  # frame 0 is this hook; sys.setprofile and functools.partial are C: no frame
            caller = _frame(1)
            trusted = _tracers.get(_id(caller.f_code))
            if trusted is None or trusted[1] is not caller.f_globals:
                raise _error(
                    "the grader does not allow " + event + " here: only course_utils.testing.guard may set one"
                )
        if (
            (event == "object.__setattr__" or event == "object.__delattr__")
            and _id(args[0]) in _guarded
            and args[1] in ("__code__", "__defaults__", "__kwdefaults__")
        ):
            raise _error("the grader does not allow changing the " + args[1] + " of a function the tests use")

    _GUARDED_FUNCTIONS.add(id(audit))  # kept alive by the interpreter's list of hooks
    return audit


def _guarded_module(name: str) -> bool:
    return name in _GUARDED_EXACT or name.startswith(_GUARDED_PREFIXES) or name.rstrip(".") + "." in _GUARDED_PREFIXES


def _guarded_class(value) -> bool:
    module = str(value.__dict__.get("__module__", ""))
    return module.split(".")[0] in _CLASS_ROOTS and not module.startswith(_CLASS_SKIP)


def _code_like(value) -> bool:
    return callable(value) or isinstance(value, types.ModuleType)


_TRUSTED_DIRS = tuple(os.path.realpath(p) + os.sep for p in {sys.prefix, sys.base_prefix})


def _library_wrapper(new, old) -> bool:
    """A library's own wrapper of the original (torch._dynamo wraps ``torch.manual_seed`` on import)."""
    code = getattr(new, "__code__", None)
    return (
        getattr(new, "__wrapped__", None) is old
        and isinstance(code, types.CodeType)
        and os.path.realpath(code.co_filename).startswith(_TRUSTED_DIRS)
    )


def _code_from(namespace: dict, real_file: str) -> list[types.CodeType]:
    """The code objects compiled from ``real_file`` that the functions and classes of ``namespace`` hold."""
    found, todo, seen, real = [], list(namespace.values()), set(), {}
    while todo:
        obj = todo.pop()
        if id(obj) in seen or obj is None:
            continue
        seen.add(id(obj))
        if isinstance(obj, types.CodeType):
            if real.setdefault(obj.co_filename, os.path.realpath(obj.co_filename)) == real_file:
                found.append(obj)
                todo += [c for c in obj.co_consts if isinstance(c, types.CodeType)]
        elif isinstance(obj, types.FunctionType):  # and what a decorator wrapped (contextlib.contextmanager)
            todo += [obj.__code__, getattr(obj, "__wrapped__", None)]
        elif isinstance(obj, (staticmethod, classmethod)):
            todo.append(obj.__func__)
        elif isinstance(obj, property):
            todo += [obj.fget, obj.fset, obj.fdel]
        elif isinstance(obj, type) and obj.__dict__.get("__module__") == namespace.get("__name__"):
            todo += list(vars(obj).values())
    return found


def _trusted_tracers() -> types.MappingProxyType:
    """The code that may set trace and profile functions: this file's and ``course_utils/testing/guard.py``'s only
    (real paths resolved now, before any student code; each code object in its own module's globals), and
    ``threading``'s where a new thread copies the one set by ``threading.setprofile``/``settrace``."""
    tracers: dict[int, tuple] = {}
    sources = [(globals(), os.path.realpath(__file__))]
    package = sys.modules.get("course_utils")
    guard = sys.modules.get("course_utils.testing.guard")
    if package is not None and guard is not None and getattr(package, "__file__", None):
        real = os.path.realpath(os.path.join(os.path.dirname(package.__file__), "testing", "guard.py"))
        if os.path.realpath(getattr(guard, "__file__", "") or "") == real:
            sources.append((vars(guard), real))
    for namespace, real in sources:
        tracers.update((id(code), (code, namespace)) for code in _code_from(namespace, real))
    bootstrap = threading.Thread._bootstrap_inner.__code__
    tracers[id(bootstrap)] = (bootstrap, vars(threading))
    return types.MappingProxyType(tracers)


class Guard:
    """Snapshot of the state the tests rely on: ``restore`` resets it, ``problems`` lists changes."""

    def __init__(self) -> None:
        self.modules: dict[str, tuple[types.ModuleType, dict]] = {}
        self.classes: dict[type, dict] = {}
        self.protected: dict[str, object] = {}
        self.handlers = {
            s: signal.getsignal(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)
        }
        self.builtins_dict, self.builtins_saved = vars(builtins), dict(vars(builtins))
        self.extend()

    def extend(self) -> None:
        """Add guarded modules imported since the last call (known ones are never re-snapshotted)."""
        for name, module in list(sys.modules.items()):
            if name not in self.modules and isinstance(module, types.ModuleType) and _guarded_module(name):
                self.modules[name] = (module, dict(vars(module)))
                for value in list(vars(module).values()):
                    if isinstance(value, type) and value not in self.classes and _guarded_class(value):
                        self.classes[value] = dict(value.__dict__)
                        self.hold(self.classes[value].values())
                self.hold(self.modules[name][1].values())

    def hold(self, values) -> None:
        """Protect these functions' code and defaults (the snapshot keeps them alive)."""
        _GUARDED_FUNCTIONS.update(id(v) for v in values if isinstance(v, types.FunctionType))

    def _modules(self, fix: bool) -> list[str]:
        bad = []
        for name, (module, saved) in self.modules.items():
            if sys.modules.get(name, module) is not module:
                bad.append(f"sys.modules[{name!r}]")
                if fix:
                    sys.modules[name] = module
            current = vars(module)
            for key, value in saved.items():
                new = current.get(key, _MISSING)
                if (
                    key not in _NOT_GUARDED_KEYS
                    and new is not value
                    and (_code_like(value) or key == "__builtins__")
                    and (fix or not _library_wrapper(new, value))
                ):
                    bad.append(f"{name}.{key}")
                    if fix:
                        current[key] = value
            for key in [k for k in current if k not in saved and k not in _NOT_GUARDED_KEYS]:
                value = current[key]
                if not (isinstance(value, types.ModuleType) and value.__name__ == f"{name}.{key}"):
                    bad.append(f"{name}.{key} (added)")
                    if fix:
                        del current[key]
        return bad

    def _classes(self, fix: bool) -> list[str]:
        bad = []
        for cls, saved in self.classes.items():
            current = cls.__dict__
            if len(current) == len(saved) and all(current.get(k, _MISSING) is v for k, v in saved.items()):
                continue
            bad.append(f"class {cls.__module__}.{cls.__qualname__}")
            if fix:
                try:
                    for key in [k for k in current if k not in saved]:
                        delattr(cls, key)
                    for key, value in saved.items():
                        if current.get(key, _MISSING) is not value:
                            setattr(cls, key, value)
                except (TypeError, AttributeError):
                    pass
        return bad

    def _runtime(self) -> list[str]:
        torch = sys.modules.get("torch")
        checks = {
            "a trace or profile function": sys.gettrace() is not None or sys.getprofile() is not None,
            "background threads": len(sys._current_frames()) > 1,
            "gc callbacks": bool(gc.callbacks),
            "an active torch function or dispatch mode": torch is not None
            and bool(torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack()),
        }
        return [name for name, bad in checks.items() if bad] + [
            f"handler of {signal.Signals(s).name}" for s, h in self.handlers.items() if signal.getsignal(s) != h
        ]

    def restore(self) -> None:
        """Reset everything guarded to its snapshot (builtins first, with dict operations only)."""
        current, saved = self.builtins_dict, self.builtins_saved
        for key, value in saved.items():
            current[key] = value
        for key in [k for k in current if k not in saved]:
            del current[key]
        self._modules(fix=True)
        for reset in (sys.settrace, sys.setprofile, threading.settrace, threading.setprofile):
            reset(None)
        for timer in (signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
            signal.setitimer(timer, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig, handler in self.handlers.items():
            if signal.getsignal(sig) != handler:
                signal.signal(sig, handler)
        gc.callbacks.clear()
        self._classes(fix=True)

    def problems(self) -> list[str]:
        """What differs from the snapshot now, plus runtime state a test must not run under."""
        extra = [k for k in self.builtins_dict if k not in self.builtins_saved]
        changed = [k for k, v in self.builtins_saved.items() if self.builtins_dict.get(k, _MISSING) is not v]
        return (
            [f"builtins.{k}" for k in changed + extra] + self._modules(False) + self._classes(False) + self._runtime()
        )

    def test_namespace(self, namespace: dict) -> dict:
        """The namespace a test cell runs in: the shared one, with trusted names put back."""
        test_ns = dict(namespace)
        test_ns.update(self.protected)
        test_ns["__builtins__"] = builtins
        return test_ns


class _Capture(io.StringIO):
    """A size-capped text sink standing in for sys.stdout / sys.stderr during a cell."""

    def write(self, text) -> int:
        """Keep up to the limit; count (and drop) the rest."""
        text = str(text)
        return super().write(text[: max(0, _OUTPUT_LIMIT - self.tell())]) if self.tell() < _OUTPUT_LIMIT else len(text)

    def value(self) -> str:
        """What was kept, marked when output was dropped."""
        return self.getvalue() + ("\n[output truncated]" if self.tell() >= _OUTPUT_LIMIT else "")


def compile_cell(source: str, filename: str, strip_magics: bool):
    """Compile a cell IPython-style: its statements, then its last expression (for partial credit)."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError:
        if not strip_magics:
            raise
        source = "\n".join(_MAGIC.sub(r"\1pass  # ", line) for line in source.splitlines())
        tree = ast.parse(source, filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), filename, "eval")
    return compile(tree, filename, "exec"), last


def _alarm(signum, frame):
    raise CellTimeout()


def _safe(get) -> str:
    try:
        return str(get())
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not take the runner down
        return "<unprintable>"


def _display(*objects, **kwargs) -> None:
    """Stand-in for IPython's ``display``: prints the repr of each object."""
    for obj in objects:
        print(_safe(lambda obj=obj: repr(obj))[:2000])


def _read_exact(fd: int, size: int, _read=os.read) -> bytes:
    data = b""
    while len(data) < size:
        chunk = _read(fd, min(size - len(data), 1 << 20))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _read_frame(fd: int) -> bytes:
    return _read_exact(fd, int(_read_exact(fd, 11)))  # 10 digits and a newline, then the payload


def execute(cell: list, guard: Guard, namespace: dict, cell_timeout: float, pid: int) -> dict:
    """Run one cell ``[role, index, grade_id, source]``; return its record (status, outputs, error).

    The source is popped from ``cell`` and dropped once compiled, so that student code called by
    a test finds no copy of the test's text in this process (only its code object).
    """
    role, index, grade_id = cell[0], int(cell[1]), cell[2]
    source = cell.pop()
    record = {"index": index, "grade_id": grade_id, "role": role, "status": "ok"}
    out, err = _Capture(), _Capture()
    saved_streams = sys.stdout, sys.stderr
    ns = guard.test_namespace(namespace) if role == "test" else namespace
    before = dict(ns)
    started = time.monotonic()
    try:
        sys.stdout, sys.stderr = out, err
        code, last = compile_cell(source, f"<{role} {grade_id or index}>", role == "answer")
        del source
        if role == "test":
            gc.collect()
            left = guard.problems()
            if left:
                raise _Tampered(left)
        signal.setitimer(signal.ITIMER_REAL, cell_timeout)
        try:
            exec(code, ns)
            value = eval(last, ns) if last is not None else None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if role == "test":
            problems = guard.problems()
            if problems:
                raise _Tampered(problems)
            if type(value) in (int, float):
                record["value"] = value
        elif value is not None:
            _display(value)
    except _Tampered as exc:
        record.update(
            status="tampered", ename="GraderError", evalue="tampering detected: " + ", ".join(exc.args[0][:6])
        )
    except CellTimeout:
        record.update(status="timeout", ename="TimeoutError", evalue=f"the cell ran longer than {cell_timeout:g} s")
    except BaseException as exc:  # noqa: BLE001 - a failing cell is recorded, never fatal
        record.update(
            status="error",
            ename=_safe(lambda e=exc: type(e).__name__),
            evalue=_safe(lambda e=exc: e)[:4000],
            traceback=_safe(lambda e=exc: "".join(traceback.format_exception(e)))[-8000:],
        )
    finally:
        if os.getpid() != pid:  # a forked child of student code ends here, before any runner work
            os._exit(0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr = saved_streams
    if role == "test" and record["status"] == "ok":
        record["status"] = "pass"
    bound = {k: v for k, v in ns.items() if k != "__builtins__" and before.get(k, _MISSING) is not v}
    if role in ("setup", "test"):  # names bound by trusted cells are put back before every test
        guard.protected.update(bound)
        guard.hold(bound.values())
    if ns is not namespace:
        namespace.update(bound)
    record.update(stdout=out.value(), stderr=err.value(), seconds=round(time.monotonic() - started, 3))
    return record


class _Tampered(Exception):
    """A test ran (or would run) with guarded state changed."""


def _sender(key: bytes, outbox: int, pid: int):
    """The function that reports records; the key lives only in its closure."""

    def send(verdict: str, body: dict) -> None:
        if os.getpid() != pid:  # a forked child of student code must not speak for the runner
            os._exit(0)
        line = f"{verdict}\t{_hmac_digest(key, verdict.encode(), 'sha256').hex()}\t{json.dumps(body)}\n".encode()
        while line:
            line = line[os.write(outbox, line) :]

    return send


def _start(inbox: int) -> tuple:
    """Read the init message and prepare the process; return (key, cell timeout, kill_strays)."""
    init = json.loads(_read_frame(inbox))  # no student code has run yet
    for name, value in init.get("rlimits", {}).items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError, AttributeError):
            pass
    workdir = init.get("workdir") or os.getcwd()
    os.makedirs(workdir, exist_ok=True)
    for rel in init.get("files", []):  # the exercise's data files, copied in as stock autograde does
        os.makedirs(os.path.dirname(os.path.join(workdir, rel)) or ".", exist_ok=True)
        with open(os.path.join(init["files_root"], rel), "rb") as fin, open(os.path.join(workdir, rel), "wb") as fout:
            fout.write(fin.read())
    os.chdir(workdir)
    sys.path.append(workdir)  # after site-packages: a file the student writes cannot shadow a library
    signal.signal(signal.SIGALRM, _alarm)
    for module in _PREIMPORT:
        try:
            __import__(module)
        except Exception:  # noqa: BLE001 - a course without numpy still grades
            pass
    if "tqdm" in sys.modules:
        sys.modules["tqdm"].tqdm.monitor_interval = 0  # no monitor thread: background threads fail a test
    return bytes.fromhex(init["key"]), float(init.get("cell_timeout", 600)), bool(init.get("kill_strays"))


def serve(inbox: int, outbox: int) -> None:
    """The runner's loop: read the init message, then execute cells until told to stop."""
    key, cell_timeout, kill_strays = _start(inbox)
    pid = os.getpid()
    send = _sender(key, outbox, pid)
    del key
    sys.addaudithook(_auditor(_trusted_tracers()))
    guard = Guard()
    restore = guard.restore  # bound now: a later patch of the class does not reach this loop
    namespace = {"__name__": "__main__", "__builtins__": builtins, "display": _display}
    seq = 0
    send(f"{seq}|ready", {})
    while True:
        seq += 1
        restore()
        payload = _read_frame(inbox)
        if not payload:
            break
        cell = payload.decode().split("\x00", 3)
        del payload
        role, index = cell[0], int(cell[1])
        record = execute(cell, guard, namespace, cell_timeout, pid)
        if os.getpid() != pid:
            os._exit(0)
        if kill_strays:  # inside the sandbox's own pid namespace: end whatever the cell left running
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        restore()
        if role == "setup":
            guard.extend()
        value = record.get("value", "")
        send(f"{seq}|{index}|{record['status']}|{value!r}", record)
    send(f"{seq}|done", {})


def main() -> None:
    """Take private copies of stdin/stdout for the protocol and serve; C-level output goes to stderr."""
    inbox, outbox = os.dup(0), os.dup(1)  # dup() makes them non-inheritable: exec'd programs lose them
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)

    def forked() -> None:  # a forked child of student code loses the protocol channels
        for fd in (inbox, outbox):
            try:
                os.close(fd)
            except OSError:
                pass

    os.register_at_fork(after_in_child=forked)
    try:
        serve(inbox, outbox)
    except EOFError:
        pass
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
