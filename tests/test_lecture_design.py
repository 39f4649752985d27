"""The lectures' validation design, checked statically (the README's "How lectures are validated").

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
