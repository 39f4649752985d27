"""Run the cells of a solution notebook exactly as nbgrader would, with one answer swapped.

The mistake banks (``tests/test_NN_mistakes.py``) use this to prove that each plausible
wrong answer loses the points of its test cell. It runs, in order and in one fresh
namespace, the read-only setup cells, every answer cell (the one under test replaced by the
mistake) and then the single test cell that grades it, whose source is the very text
nbgrader's autograder runs (hidden tests included). Other test cells are skipped, which
keeps a bank of dozens of mistakes fast.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Cell:
    grade_id: str
    kind: str  # "setup" (read-only code), "answer", "test", "written" or "other"
    source: str
    points: float = 0.0


@dataclass(frozen=True)
class Mistake:
    """A plausible wrong answer: the solution cell ``answer`` with text ``patches`` applied.

    Each patch is ``(old, new)``; ``old`` must occur exactly once in the solution cell, so a
    bank entry cannot silently stop applying when the solution is edited. ``test`` is the
    grade id of the test cell that must lose its points. A shortcut replaces the whole cell
    instead: ``source`` is the answer cell a student looking for a shortcut would submit.

    ``passes_unchecked``: the entry computes the right values another way (numerical gradients, a form
    that is not the method, a blocked function reached around the guard); the bank proves that it earns
    the test cell's points with the checks switched off (``run_test_cell(..., checks_off=True)``) and
    loses them, with them on, to a check (``ForbiddenCall`` or ``WrongMethod``), not to a wrong value.
    """

    name: str
    answer: str
    test: str
    patches: tuple[tuple[str, str], ...] = field(default=())
    source: str | None = None
    passes_unchecked: bool = False

    def apply(self, source: str) -> str:
        if self.source is not None:
            if self.patches:
                raise ValueError(f"mistake {self.name!r} has both patches and a whole-cell source")
            return self.source
        if not self.patches:
            raise ValueError(f"mistake {self.name!r} has no patches")
        for old, new in self.patches:
            found = source.count(old)
            if found != 1:
                raise ValueError(
                    f"mistake {self.name!r}: {old!r} occurs {found} times in cell {self.answer!r}, "
                    "expected exactly once"
                )
            source = source.replace(old, new)
        return source


def solution_path(unit: str) -> Path:
    return ROOT / "solutions" / unit / f"{unit}.ipynb"


def load_cells(unit: str) -> list[Cell]:
    """The cells of ``solutions/<unit>/<unit>.ipynb`` classified by their nbgrader metadata."""
    nb = json.loads(solution_path(unit).read_text(encoding="utf-8"))
    cells = []
    for raw in nb["cells"]:
        meta = raw.get("metadata", {}).get("nbgrader", {})
        source = "".join(raw["source"]) if isinstance(raw["source"], list) else raw["source"]
        if raw["cell_type"] == "markdown":
            kind = "written" if meta.get("solution") else "other"
        elif meta.get("solution"):
            kind = "answer"
        elif meta.get("grade"):
            kind = "test"
        elif meta.get("locked"):
            kind = "setup"
        else:
            kind = "other"
        cells.append(Cell(meta.get("grade_id", ""), kind, source, float(meta.get("points", 0) or 0)))
    return cells


def answer_ids(unit: str) -> list[str]:
    """Grade ids of the autograded answer (code) cells of ``unit``."""
    return [c.grade_id for c in load_cells(unit) if c.kind == "answer"]


@contextlib.contextmanager
def _checks_switched_off():
    """The call guard, the work watch and ``check_method`` as no-ops, for test cells run inside."""
    import course_utils.testing.checks as checks

    @contextlib.contextmanager
    def no_guard(*targets, **options):
        yield

    @contextlib.contextmanager
    def no_watch():
        yield checks.Work()

    saved = checks.forbid, checks.watch_work, checks.check_method
    checks.forbid, checks.watch_work = no_guard, no_watch
    checks.check_method = lambda ok, name, problem, hint=None: None
    try:
        yield
    finally:
        checks.forbid, checks.watch_work, checks.check_method = saved


def run_test_cell(
    unit: str, test: str, replace: dict[str, str] | None = None, checks_off: bool = False, watch_reach: bool = False
) -> None:
    """Execute setup + answers (+ replacements) + test cell ``test``; raise what the test raises.

    An answer cell that itself raises is reported as a ``RuntimeError`` (a bank entry must be
    plausible code that runs, and fail only in the grader's test). ``checks_off`` runs the cells with
    the call guard, the work watch and ``check_method`` switched off (test cells import them from
    ``course_utils.testing.checks``): what an answer earns from its values alone. ``watch_reach`` fails the test
    cell if an expected value was within reach of the answer's code while it ran (see ``_Reach``).
    """
    if checks_off:
        with _checks_switched_off():
            return run_test_cell(unit, test, replace)
    replace = replace or {}
    reach = _Reach() if watch_reach else None
    cells = load_cells(unit)
    if not any(c.kind == "test" and c.grade_id == test for c in cells):
        raise KeyError(f"{unit}: no test cell with grade id {test!r}")
    unknown = set(replace) - {c.grade_id for c in cells if c.kind == "answer"}
    if unknown:
        raise KeyError(f"{unit}: no answer cells {sorted(unknown)}")
    namespace: dict = {"__name__": "__main__"}
    for cell in cells:
        if cell.kind in ("setup", "answer"):
            source = replace.get(cell.grade_id, cell.source)
            try:
                exec(compile(source, f"<{unit}:{cell.grade_id}>", "exec"), namespace)
            except Exception as exc:  # noqa: BLE001 - reported with context
                raise RuntimeError(f"{unit}: answer/setup cell {cell.grade_id!r} raised {exc!r}") from exc
        elif cell.kind == "test" and cell.grade_id == test:
            if reach is not None:
                names = [
                    n for c in cells if c.kind == "answer" for n in answer_names(replace.get(c.grade_id, c.source))
                ]
                _wrap_answers(namespace, names, reach)
                _wrap_checks(namespace, reach)
            exec(compile(cell.source, f"<{unit}:{test}>", "exec"), namespace)
            if reach is not None and reach.leaks:
                raise AssertionError(f"{unit}:{test}: " + "; ".join(dict.fromkeys(reach.leaks)))
            return


def answer_source(unit: str, answer: str) -> str:
    for cell in load_cells(unit):
        if cell.kind == "answer" and cell.grade_id == answer:
            return cell.source
    raise KeyError(f"{unit}: no answer cell {answer!r}")


def assert_loses_points(unit: str, mistake: Mistake) -> AssertionError | Exception:
    """Assert that the test cell ``mistake.test`` fails with ``mistake`` in place; return the error."""
    wrong = mistake.apply(answer_source(unit, mistake.answer))
    try:
        run_test_cell(unit, mistake.test, {mistake.answer: wrong})
    except RuntimeError as exc:
        if "answer/setup cell" in str(exc):
            raise AssertionError(f"mistake {mistake.name!r} crashes its own cell instead of the test: {exc}") from exc
        return exc
    except Exception as exc:  # noqa: BLE001 - any error costs the points in nbgrader
        return exc
    raise AssertionError(f"mistake {mistake.name!r} passes test cell {mistake.test!r}: the tests miss it")


# ---------------------------------------------------------------- the answer key out of the student's reach
# A test must not hold its expected value anywhere the student's code can reach while it runs: every frame
# above the student's function (``sys._getframe(1).f_back...``) and every global is reachable, so a reference
# computed before the call can simply be returned. ``run_test_cell(..., watch_reach=True)`` runs a test cell
# with each answer function wrapped: at every call the wrapper collects what the caller's frames (locals and
# globals, and two levels into their tuples, lists and dicts) hold, as a student's code could; each expected
# value that the test then passes to ``check_close``/``check_equal`` must not be among them, by identity or
# by value. Allowed: values equal to an argument of the student's calls or to a parameter's gradient given to
# them (a round trip expects its input back), the very objects the student's earlier calls returned (their
# own), frames of the student's own code, and values too plain to leak anything (constant tensors, short
# strings and lists). Single numbers (floats, one-element tensors) are not followed: derived from the
# student's own outputs in ways this check cannot trace (a scheduler's learning rate is 0.2 times the
# student's factor), they gave false reports; ``tests/test_answer_key.py`` checks those statically.


def _leaf_items(value, depth: int = 2):
    """``value`` and what its tuples, lists and dicts hold, ``depth`` levels down (a list of (x, y) pairs)."""
    yield value
    if depth == 0:
        return
    if isinstance(value, (tuple, list)):
        children = value[:64]
    elif isinstance(value, dict) and "__builtins__" not in value:
        children = list(value.values())[:256]
    else:
        return
    for child in children:
        yield from _leaf_items(child, depth - 1)


def _telling(value) -> bool:
    """Worth hiding: a tensor whose entries are not all equal, or a longer string or list of plain values."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_complex():
            return True
        if value.numel() < 2:  # single numbers are not followed (see the comment above: a known gap)
            return False
        flat = value.detach().reshape(-1)
        return not bool((flat == flat[0]).all())
    if isinstance(value, str):
        return len(value) >= 12
    if isinstance(value, (list, tuple)):
        flat = [w for v in value for w in (v if isinstance(v, (list, tuple)) else (v,))]
        return len(flat) >= 4 and all(isinstance(v, (int, float, str)) for v in flat)
    return False


def _same(a, b) -> bool:
    import torch

    if a is b:
        return True
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.is_complex() != b.is_complex():
            return False
        x, y = a.detach().cpu(), b.detach().cpu()
        if not x.is_complex():
            x, y = x.double(), y.double()
        return bool(torch.allclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True))
    if type(a) is type(b) and isinstance(a, (str, list, tuple)):
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - a container of tensors
            return False
    return False


class _Reach:
    """What the student's calls could reach (collected at each call) and what they were given."""

    def __init__(self) -> None:
        self.reachable: list = []
        self.seen: set[int] = set()
        self.inputs: list = []
        self.outputs: set[int] = set()  # ids of what the student's calls returned
        self.keep: list = []
        self.leaks: list[str] = []

    def collect(self, frame, args) -> None:
        import torch

        for arg in args:
            for item in _leaf_items(arg):
                self.inputs.append(item)
                grad = getattr(item, "grad", None) if isinstance(item, torch.Tensor) else None
                if grad is not None:
                    self.inputs.append(grad)  # a parameter's gradient is given to the call as well
        while frame is not None:
            filename = frame.f_code.co_filename
            if "notebook_cells.py" in filename:
                break  # the harness itself: above the test cell, not there when nbgrader or the grader runs it
            if filename.startswith("<") and filename.endswith("_answer>"):
                frame = frame.f_back  # the student's own code (one answer calling another): its values are its own
                continue
            for scope in (frame.f_locals, frame.f_globals):
                for value in list(scope.values()):
                    for item in _leaf_items(value):
                        if id(item) not in self.seen and id(item) not in self.outputs and _telling(item):
                            self.seen.add(id(item))
                            self.reachable.append(item)
            frame = frame.f_back

    def check(self, expected, name) -> None:
        for item in _leaf_items(expected) if isinstance(expected, tuple) else (expected,):
            if not _telling(item) or any(_same(item, given) for given in self.inputs):
                continue
            if any(_same(item, held) for held in self.reachable):
                self.leaks.append(f"the expected value of {name!r} was within reach of the student's code")


def _wrap_answers(namespace: dict, names: list[str], reach: _Reach) -> None:
    import functools
    import sys

    def wrap(func):
        @functools.wraps(func)
        def watched(*args, **kwargs):
            reach.collect(sys._getframe(1), list(args) + list(kwargs.values()))
            result = func(*args, **kwargs)
            reach.outputs.update(id(item) for item in _leaf_items(result))  # theirs to see at later calls
            reach.keep.append(result)  # (keeps the ids above from being reused)
            return result

        return watched

    for name in names:
        value = namespace.get(name)
        if isinstance(value, type):
            for attr, member in list(vars(value).items()):
                if callable(member) and not attr.startswith("__") or attr in ("__init__", "__call__"):
                    if callable(member):
                        setattr(value, attr, wrap(member))
        elif callable(value):
            namespace[name] = wrap(value)


def _wrap_checks(namespace: dict, reach: _Reach) -> None:
    for check in ("check_close", "check_equal"):
        original = namespace.get(check)
        if original is None:
            continue

        def recorded(actual, expected, name, *args, _original=original, **kwargs):
            reach.check(expected, name)
            return _original(actual, expected, name, *args, **kwargs)

        namespace[check] = recorded


def answer_names(source: str) -> list[str]:
    """The top-level functions and classes an answer cell defines."""
    import ast

    return [n.name for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


# The frame reader of the banks' ``frames:`` entries, prepended to their answer cells: what a student who walks
# the test's frames would write. ``_answer_key(names, accept, shape=..., kind=...)`` returns the first value in
# the locals or globals of a frame above the answer's own code (nearest first; also one level inside the
# tuples, lists and dicts held there) whose name is in ``names`` (any name when None) and that passes the
# filters given, or None.
FRAMES_READER = """
import sys as _frames_sys


def _answer_key(names=None, accept=None, *, shape=None, kind=None):
    own = _frames_sys._getframe(0).f_code.co_filename  # the answer cell: its frames are skipped
    frame = _frames_sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename != own:
            for scope in (frame.f_locals, frame.f_globals):
                named = [scope[n] for n in names if n in scope] if names is not None else list(scope.values())
                for value in named:
                    inner = list(value.values()) if isinstance(value, dict) else []
                    inner += list(value)[:64] if isinstance(value, (tuple, list)) else []
                    for item in [value, *inner]:
                        if kind is not None and not isinstance(item, kind):
                            continue
                        if shape is not None and tuple(getattr(item, "shape", (None,))) != tuple(shape):
                            continue
                        try:
                            if accept is None or accept(item):
                                return item
                        except Exception:  # noqa: BLE001 - a value the filter cannot judge
                            pass
        frame = frame.f_back
    return None
"""


# Numerical differentiation as a student who skips the derivation would write it (the banks' "numerical:"
# entries): the five-point stencil of central differences, one entry of one tensor at a time.
FIVE_POINT_GRADIENTS = """
def _five_point_gradients(loss, params, step=1e-3):
    \"\"\"d loss() / d p for each tensor p of params (changed in place, then put back), entry by entry.\"\"\"
    grads = []
    for param in params:
        flat = param.view(-1)
        grad = torch.zeros_like(flat)
        for i in range(flat.numel()):
            middle = flat[i].item()
            losses = []
            for shift in (-2, -1, 1, 2):
                flat[i] = middle + shift * step
                losses.append(loss().item())
            flat[i] = middle
            grad[i] = (losses[0] - 8 * losses[1] + 8 * losses[2] - losses[3]) / (12 * step)
        grads.append(grad.view_as(param))
    return grads


"""


# ... and the complex step, Im loss(p + ih e_i) / h, for params held as complex tensors.
COMPLEX_STEP_GRADIENTS = """
def _complex_step_gradients(loss, params, step=1e-30):
    \"\"\"d loss() / d p for each complex tensor p of params (changed in place, then put back), as float64.\"\"\"
    grads = []
    for param in params:
        flat = param.view(-1)
        grad = torch.zeros(flat.shape, dtype=torch.float64)
        for i in range(flat.numel()):
            middle = flat[i].item()
            flat[i] = middle + 1j * step
            grad[i] = loss().imag.item() / step
            flat[i] = middle
        grads.append(grad.view(param.shape))
    return grads


"""


def frames_entry(name: str, answer: str, test: str, body: str) -> Mistake:
    """A ``frames:`` entry: ``body`` (the answer cell's functions, reading the key with ``_answer_key``) after
    the frame reader."""
    return Mistake(f"frames: {name}", answer=answer, test=test, source=FRAMES_READER + body)


def honest_renamed(unit: str, answer: str, *names: str) -> str:
    """The solution's answer cell with each function or class in ``names`` renamed ``_honest_<name>``."""
    source = answer_source(unit, answer)
    for name in names:
        for kind in ("def", "class"):
            source = source.replace(f"{kind} {name}(", f"{kind} _honest_{name}(")
    return source


# A frame-reading answer: each function of the solution cell computes its result only to learn the answer's
# type and shape, then returns the nearest value of that type and shape found in its callers' frames or
# globals (not one of its arguments); what it finds is the answer key only if the test
# computed it before the call. When nothing fits, it returns the result spoiled. Units whose tests held
# their references within reach have hand-written entries that read them by name instead.
_FRAMES_TEMPLATE = """

def _frames_fits(value, like):
    if type(value) is not type(like):
        return False
    if hasattr(like, "shape"):
        return tuple(value.shape) == tuple(like.shape) and value.dtype == like.dtype
    if isinstance(like, (tuple, list)):
        return len(value) == len(like) and all(_frames_fits(a, b) for a, b in zip(value, like))
    return True


def _frames_spoiled(like):
    if hasattr(like, "shape"):
        return like + 1
    if isinstance(like, bool):
        return not like
    if isinstance(like, (int, float)):
        return like + 1
    if isinstance(like, str):
        return like + "?"
    if isinstance(like, (tuple, list)):
        return type(like)(reversed(like)) if len(like) > 1 else type(like)(_frames_spoiled(v) for v in like)
    return None
"""
_FRAMES_WRAPPER = """

_frames_solution_{name} = {name}


def {name}(*args, **kwargs):
    like = _frames_solution_{name}(*args, **kwargs)  # only to learn the type and shape of the answer
    given = list(args) + list(kwargs.values())
    found = _answer_key(accept=lambda v: _frames_fits(v, like) and all(v is not g for g in given))
    return found if found is not None else _frames_spoiled(like)
"""


def frames_entries(unit: str) -> list[Mistake]:
    """One ``frames:`` entry per answer cell of ``unit`` whose functions read the answer key from their
    callers' frames and globals (see ``_FRAMES_TEMPLATE``); classes are left as they are."""
    import ast

    entries = []
    for cell in load_cells(unit):
        if cell.kind != "answer":
            continue
        functions = [n.name for n in ast.parse(cell.source).body if isinstance(n, ast.FunctionDef)]
        source = (
            cell.source + FRAMES_READER + _FRAMES_TEMPLATE + "".join(_FRAMES_WRAPPER.format(name=n) for n in functions)
        )
        test = cell.grade_id.replace("_answer", "_test")
        entries.append(
            Mistake(
                f"frames: {', '.join(functions)} returns a value of its shape from its callers",
                answer=cell.grade_id,
                test=test,
                source=source,
            )
        )
    return entries


FRAMES = "frames:"  # the name prefix of bank entries that read the answer key from the test's frames
SHORTCUT = "shortcut"  # the name prefix of bank entries that reach a forbidden function instead of building it


def check_bank(unit: str, bank: list[Mistake], minimum: int = 5) -> None:
    """Every autograded answer cell of ``unit`` has at least ``minimum`` distinct mistakes, a shortcut and a
    ``frames:`` entry."""
    names = [m.name for m in bank]
    assert len(names) == len(set(names)), "mistake names must be unique"
    for answer in answer_ids(unit):
        count = sum(m.answer == answer and not m.name.startswith(SHORTCUT) for m in bank)
        assert count >= minimum, f"{unit}: answer cell {answer!r} has {count} mistakes, need {minimum}"
        assert any(m.answer == answer and m.name.startswith(SHORTCUT) for m in bank), (
            f"{unit}: answer cell {answer!r} has no shortcut entry (a forbidden function reached another way)"
        )
        assert any(m.answer == answer and m.name.startswith(FRAMES) for m in bank), (
            f"{unit}: answer cell {answer!r} has no frames: entry (the answer key read from the callers' frames)"
        )


def bank_tests(unit: str, bank: list[Mistake]):
    """The three tests every mistake bank runs, for its module to bind to ``test_*`` names:

        test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)

    The solution passes each test cell (so a failure below is the mistake's, not the harness's) without an
    expected value in its reach,
    every answer cell has at least five mistakes and a shortcut, and each mistake loses its test cell's
    points (a shortcut by the call guard's ``ForbiddenCall``, proving it is the guard that catches it).
    """
    import pytest

    def test_bank_covers_every_answer():
        check_bank(unit, bank)

    @pytest.mark.parametrize("answer", answer_ids(unit))
    def test_solution_passes(answer):
        # ... with no expected value within reach of the answer's code while it runs (see _Reach)
        run_test_cell(unit, answer.replace("_answer", "_test"), watch_reach=True)

    @pytest.mark.parametrize("mistake", bank, ids=lambda m: m.name)
    def test_mistake_loses_points(mistake):
        error = assert_loses_points(unit, mistake)
        if mistake.name.startswith(SHORTCUT):  # caught by the call guard, not by a wrong value
            assert type(error).__name__ == "ForbiddenCall", (
                f"shortcut {mistake.name!r} lost its points for another reason than the guard: {error!r}"
            )
        if mistake.passes_unchecked:  # right values by another method: a check must be what catches it
            assert type(error).__name__ in ("ForbiddenCall", "WrongMethod"), (
                f"{mistake.name!r} lost its points to a wrong value, not to the check of the method: {error!r}"
            )
            wrong = mistake.apply(answer_source(unit, mistake.answer))
            try:
                run_test_cell(unit, mistake.test, {mistake.answer: wrong}, checks_off=True)
            except Exception as exc:  # noqa: BLE001 - the proof failed
                raise AssertionError(
                    f"{mistake.name!r} is marked passes_unchecked but fails {mistake.test!r} even with the checks "
                    f"off, so the bank does not prove that the checks are what stop it: {exc!r}"
                ) from exc

    return test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points
