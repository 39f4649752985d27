"""The lectures' validation design, checked statically (docs/validation.md, "How lectures are validated").

Lectures are executed once and validated by nbval on whatever machine runs `make test`: another CPU
generation, ARM, a CUDA GPU, and (a second pass) this CPU under emulated other-ISA arithmetic. So:

- outputs that are exact by construction stay compared as text;
- a cell whose output depends on floating-point hardware or on a training run carries the cell tag
  ``nbval-ignore-output`` (or nbval's comment ``# NBVAL_IGNORE_OUTPUT``), and checks what the prose
  says about it with ``assert`` (a margin that holds on other hardware and seeds) — or, when it only
  shows something without claiming anything about it (sampled text, a timing), says so in a comment
  line beginning ``# Not checked:``;
- progress bars come from ``course_utils.progress`` and the saved notebook holds no widget state.

The second nbval pass is what proves the first rule on real arithmetic; these checks make a new
lecture follow the design before it ever runs.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LECTURES = sorted((ROOT / "lectures").glob("*.ipynb"))
IGNORE = "nbval-ignore-output"
ALLOWED_TAGS = {IGNORE, "raises-exception"}
WIDGET = "application/vnd.jupyter.widget-view+json"
# Calls whose printed results come from a training run, a timing or a random sample: a cell that
# makes them and prints something is float- or hardware-dependent.
VARYING = re.compile(r"(?<![.\w])fit\(|\.step\(\)|\bperf_counter\(|\btime\.time\(|\btimeit\b")


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def ignored(cell: dict) -> bool:
    # nbval's two spellings of "do not compare this cell's output": the cell tag or a comment.
    return IGNORE in cell.get("metadata", {}).get("tags", []) or "# NBVAL_IGNORE_OUTPUT" in source(cell)


def printed_text(cell: dict) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append("".join(o["text"]))
        elif "data" in o and "text/plain" in o["data"] and "image/png" not in o["data"]:
            out.append("".join(o["data"]["text/plain"]))
    return "".join(out)


def has_assert(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:  # IPython magics: fall back to text
        return re.search(r"^\s*assert\b", code, re.M) is not None
    return any(isinstance(node, ast.Assert) for node in ast.walk(tree))


@pytest.fixture(params=LECTURES, ids=[p.name for p in LECTURES])
def lecture(request) -> Path:
    return request.param


def test_no_widget_state(lecture):
    nb = json.loads(lecture.read_text(encoding="utf-8"))
    assert "widgets" not in nb.get("metadata", {}), f"{lecture.name}: saved with widget state (use `make lectures`)"
    frozen = [i for i, c in enumerate(nb["cells"]) for o in c.get("outputs", []) if WIDGET in o.get("data", {})]
    assert not frozen, f"{lecture.name}: frozen progress-bar widgets in cells {frozen} (use course_utils.progress)"


def test_progress_bars_from_course_utils(lecture):
    bad = [
        i
        for i, c in enumerate(cells(lecture))
        if c["cell_type"] == "code" and re.search(r"^\s*(from|import)\s+tqdm\b", source(c), re.M)
    ]
    assert not bad, f"{lecture.name}: cells {bad} import tqdm; use `from course_utils.progress import progress`"


def test_no_skipped_or_lax_cells(lecture):
    # Every cell runs on every machine: skipping one would hide a failing claim.
    for i, c in enumerate(cells(lecture)):
        if c["cell_type"] != "code":
            continue
        code = source(c)
        assert not re.search(r"# NBVAL_(SKIP|CHECK_OUTPUT)", code), (
            f"{lecture.name} cell {i}: the course validates in strict mode; no cell is skipped or compared laxly"
        )
        unknown = set(c.get("metadata", {}).get("tags", [])) - ALLOWED_TAGS
        assert not unknown, f"{lecture.name} cell {i}: unknown validation tags {sorted(unknown)}"


def test_varying_cells_are_ignored_and_checked(lecture):
    for i, c in enumerate(cells(lecture)):
        if c["cell_type"] != "code":
            continue
        code, text = source(c), printed_text(c)
        if VARYING.search(code) and re.search(r"\d\.\d", text):
            assert ignored(c), (
                f"{lecture.name} cell {i}: prints numbers from training, timing or sampling "
                f"but is compared as text; tag it {IGNORE!r} and assert its claims"
            )
        if ignored(c):
            assert has_assert(code) or re.search(r"^\s*# Not checked:", code, re.M), (
                f"{lecture.name} cell {i}: its output is not compared, so it must check the prose's claims "
                f"with `assert` (with a margin), or say in a '# Not checked:' comment why nothing is claimed"
            )


# An output line that reports an equality, a match or a closeness as False. Where the prose says the two agree,
# nbval would lock the contradiction in; where the False is the lesson (a bug, a variant that differs), the cell
# asserts it, so the difference is checked rather than printed.
FALSE_EQUALITY = re.compile(r"\b(equal|equals|same|match|matches|identical|close|agree|agrees)\b[^\n]*\bFalse\b", re.I)


def false_equalities(nb: list[dict], name: str) -> list[str]:
    """Code cells of ``nb`` that print an equality as False without asserting anything (empty: none)."""
    problems = []
    for i, c in enumerate(nb):
        bad = (
            [ln for ln in printed_text(c).splitlines() if FALSE_EQUALITY.search(ln)] if c["cell_type"] == "code" else []
        )
        if bad and not has_assert(source(c)):
            problems.append(
                f"{name} cell {i} prints an equality as False and asserts nothing: {bad[0]!r}. If the prose says "
                f"they agree, fix the computation (dtype, tolerance); if the difference is the point, assert it"
            )
    return problems


def test_no_printed_equality_is_false(lecture):
    problems = false_equalities(cells(lecture), lecture.name)
    assert not problems, "\n".join(problems)


# The audit each lecture ends with: every sentence that states a measured result, where it is said, and the
# check that backs it. A row reads
#   | "quoted claim, verbatim from the markdown cell" | c12 | c13 | `assert gap > 0.05` |
# and its check is either code quoted verbatim from that code cell (an assert, or what the assert calls) or the
# word `compared`: the cell's output is exact by construction and nbval compares it as text.
AUDIT_HEADING = "## Notes: what each claim rests on"
ROW = re.compile(
    r"^\|\s*[\"“](?P<claim>.+?)[\"”]\s*\|\s*c(?P<said>\d+)\s*\|\s*c(?P<cell>\d+)\s*\|\s*(?P<check>.+?)\s*\|\s*$"
)
# A number the prose gives as a bound ("more than 0.05", "at least 90%", "below 2", "within 10%"): an assert
# that backs it must use that number, or it tests a weaker claim than the one the reader is told.
BOUND = re.compile(
    r"(?:more than|less than|fewer than|at least|at most|above|below|under|over|within|exceeds?|beyond|"
    r"by more than|by at least|[<>≤≥])\s*~?\s*\$?\s*(?P<num>\d+(?:[.,]\d+)?(?:[eE][-+]?\d+)?)\s*(?P<pct>%|\\%)?",
    re.I,
)


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def audit_problems(nb: list[dict], name: str) -> list[str]:
    """What is wrong with the audit that ends the notebook whose cells are ``nb`` (empty: nothing)."""
    last = nb[-1] if nb else {}
    if last.get("cell_type") != "markdown" or not source(last).lstrip().startswith(AUDIT_HEADING):
        return [f"{name}: the last cell must be the audit, a markdown cell headed {AUDIT_HEADING!r}"]
    rows = [m for ln in source(last).splitlines() if (m := ROW.match(ln.strip()))]
    if not rows:
        return [f'{name}: the audit lists no claim (rows: | "claim" | cN | cM | `check` |)']
    problems = []
    for m in rows:
        claim, said, at, check = m["claim"], int(m["said"]), int(m["cell"]), m["check"]
        if said >= len(nb) or nb[said]["cell_type"] != "markdown":
            problems.append(f"{name}: c{said} is not a markdown cell")
        elif squash(claim) not in squash(source(nb[said])):
            problems.append(f"{name}: the audit quotes {claim!r}, which markdown cell c{said} does not say (verbatim)")
        if at >= len(nb) or nb[at]["cell_type"] != "code":
            problems.append(f"{name}: c{at} is not a code cell")
            continue
        cell = nb[at]
        if check == "`compared`":
            if ignored(cell) or not printed_text(cell).strip():
                problems.append(
                    f"{name}: c{at} is audited as compared as text, but nbval ignores it or it prints nothing"
                )
            continue
        code = re.fullmatch(r"`(.+)`", check)
        if not code:
            problems.append(f"{name}: the check for {claim!r} must be `code` quoted from c{at}, or `compared`")
        elif squash(code[1]) not in squash(source(cell)):
            problems.append(f"{name}: the audit's check {code[1]!r} is not in code cell c{at}")
        elif not has_assert(source(cell)):
            problems.append(f"{name}: c{at}, audited as the check of {claim!r}, asserts nothing")
        used = numbers_in(source(cell))
        for b in BOUND.finditer(claim):
            value = float(b["num"].replace(",", ""))
            if not any(math.isclose(n, v) for n in used for v in ([value, value / 100] if b["pct"] else [value])):
                problems.append(
                    f"{name}: {claim!r} gives the bound {b[0].strip()!r}, but c{at} never uses {b['num']}: "
                    f"its assert tests a different claim than the one the reader is told"
                )
    return problems


def numbers_in(code: str) -> set[float]:
    """The numeric literals of ``code`` as floats (0.90, 0.9 and 9e-1 are one number; 1_000 is 1000)."""
    literals = re.findall(r"(?<![\w.])\d[\d_]*(?:\.\d*)?(?:[eE][-+]?\d+)?", code)
    return {float(x.replace("_", "")) for x in literals}


def test_audit_rows_point_at_the_claim_and_its_check(lecture):
    problems = audit_problems(cells(lecture), lecture.name)
    assert not problems, "\n".join(problems)


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "source": text, "metadata": {}}


def _code(text: str, out: str = "", tags: tuple = ()) -> dict:
    outputs = [{"output_type": "stream", "name": "stdout", "text": out}] if out else []
    return {"cell_type": "code", "source": text, "metadata": {"tags": list(tags)}, "outputs": outputs}


def test_the_audit_check_catches_each_kind_of_wrong_row():
    claim = _md("The gated model is lower in every seed by more than 0.05 nats.")
    check = _code("gaps = [0.1, 0.2]\nassert min(gaps) > 0.05", "0.1 0.2", tags=(IGNORE,))
    loose = _code("gaps = [0.1, 0.2]\nassert sum(gaps) / 2 > 0", "0.1 0.2", tags=(IGNORE,))
    exact = _code("print(2 + 2)", "4")
    audit = AUDIT_HEADING + "\n\n| claim | said in | checked in | check |\n|---|---|---|---|\n"
    good = '| "lower in every seed by more than 0.05" | c0 | c1 | `assert min(gaps) > 0.05` |\n'
    assert audit_problems([claim, check, _md(audit + good)], "ok") == []
    assert audit_problems([claim, exact, _md(audit + '| "lower in every seed" | c0 | c1 | `compared` |')], "ok") == []
    wrong = {
        "no audit": [claim, check],
        "misquoted claim": [claim, check, _md(audit + good.replace("every seed", "all seeds"))],
        "check not in the cell": [claim, check, _md(audit + good.replace("min(gaps)", "max(gaps)"))],
        "bound not in the assert": [claim, loose, _md(audit + good.replace("`assert min(gaps) > 0.05`", "`assert`"))],
        "ignored cell called compared": [
            claim,
            check,
            _md(audit + good.replace("`assert min(gaps) > 0.05`", "`compared`")),
        ],
        "claim cell is code": [check, claim, _md(audit + good.replace("c0 | c1", "c0 | c0"))],
    }
    for what, nb in wrong.items():
        assert audit_problems(nb, what), f"the audit check accepts a notebook with {what}"


def test_a_printed_false_equality_needs_an_assert():
    printed = "masked cross-entropy equals the mean NLL: False\n"
    assert false_equalities([_code("print(ok)", printed)], "unasserted"), "a printed False equality passes unchecked"
    assert false_equalities([_code("print(ok)", printed.replace("False", "True"))], "true") == []
    assert false_equalities([_code("assert gap > 1e-2\nprint(ok)", printed)], "asserted") == []


def test_numbers_in_reads_each_spelling_of_a_bound():
    assert numbers_in("assert acc > 0.90 and gap < 5e-2 and n >= 1_000 and x.shape[1] == 3") == {
        0.9,
        0.05,
        1000.0,
        1.0,
        3.0,
    }


def test_a_bound_in_scientific_notation_is_read_whole():
    # "within 1e-12" states the bound 1e-12, not 1: the checking cell must use 1e-12
    assert [float(b["num"]) for b in BOUND.finditer("agree within 1e-12, and within 2.5E-6")] == [1e-12, 2.5e-6]
