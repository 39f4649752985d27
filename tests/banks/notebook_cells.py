"""Run the cells of a solution notebook exactly as nbgrader would, with one answer swapped.

The mistake banks (``tests/test_NN_mistakes.py``) use this to prove that each plausible
wrong answer loses the points of its test cell. It runs, in order and in one fresh
namespace, the read-only setup cells, every answer cell (the one under test replaced by the
mistake) and then the single test cell that grades it, whose source is the very text
nbgrader's autograder runs (hidden tests included). Other test cells are skipped, which
keeps a bank of dozens of mistakes fast.
"""

from __future__ import annotations

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
    """

    name: str
    answer: str
    test: str
    patches: tuple[tuple[str, str], ...] = field(default=())
    source: str | None = None

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


def run_test_cell(unit: str, test: str, replace: dict[str, str] | None = None) -> None:
    """Execute setup + answers (+ replacements) + test cell ``test``; raise what the test raises.

    An answer cell that itself raises is reported as a ``RuntimeError`` (a bank entry must be
    plausible code that runs, and fail only in the grader's test).
    """
    replace = replace or {}
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
            exec(compile(cell.source, f"<{unit}:{test}>", "exec"), namespace)
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


SHORTCUT = "shortcut"  # the name prefix of bank entries that reach a forbidden function instead of building it


def check_bank(unit: str, bank: list[Mistake], minimum: int = 5) -> None:
    """Every autograded answer cell of ``unit`` has at least ``minimum`` distinct mistakes and a shortcut."""
    names = [m.name for m in bank]
    assert len(names) == len(set(names)), "mistake names must be unique"
    for answer in answer_ids(unit):
        count = sum(m.answer == answer and not m.name.startswith(SHORTCUT) for m in bank)
        assert count >= minimum, f"{unit}: answer cell {answer!r} has {count} mistakes, need {minimum}"
        assert any(m.answer == answer and m.name.startswith(SHORTCUT) for m in bank), (
            f"{unit}: answer cell {answer!r} has no shortcut entry (a forbidden function reached another way)"
        )


def bank_tests(unit: str, bank: list[Mistake]):
    """The three tests every mistake bank runs, for its module to bind to ``test_*`` names:

        test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)

    The solution passes each test cell (so a failure below is the mistake's, not the harness's),
    every answer cell has at least five mistakes and a shortcut, and each mistake loses its test cell's
    points (a shortcut by the call guard's ``ForbiddenCall``, proving it is the guard that catches it).
    """
    import pytest

    def test_bank_covers_every_answer():
        check_bank(unit, bank)

    @pytest.mark.parametrize("answer", answer_ids(unit))
    def test_solution_passes(answer):
        run_test_cell(unit, answer.replace("_answer", "_test"))

    @pytest.mark.parametrize("mistake", bank, ids=lambda m: m.name)
    def test_mistake_loses_points(mistake):
        error = assert_loses_points(unit, mistake)
        if mistake.name.startswith(SHORTCUT):  # caught by the call guard, not by a wrong value
            assert type(error).__name__ == "ForbiddenCall", (
                f"shortcut {mistake.name!r} lost its points for another reason than the guard: {error!r}"
            )

    return test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points
