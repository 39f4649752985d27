"""nbgrader add-ons for the instructor side of the course.

``HideTestCode`` is an nbgrader/nbconvert preprocessor used when generating feedback (wired
up in ``nbgrader_config.py``). Feedback keeps, for each graded or answer cell that failed,
one line: the exception type and the start of its message (which our tests write to name the
mistake), with any line of hidden-test code cut out. Everything else the grading run printed
is dropped: tracebacks (their context lines would quote hidden tests), streams, displays and
results, since student code that ran next to the tests could print what it saw there.

The second half builds and scores the notebook that ``course_utils.autograde`` runs for a
submission (trusted side, pure functions): ``plan`` reads the source and release notebooks,
``splice`` puts in the student's answer cells, ``score`` turns a verified record into points,
``autograded_notebook`` writes what nbgrader's formgrader and feedback read, ``review_flags`` names
suspicious constructs in the student's code.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Int

HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
REDACTED = "[hidden test code removed]"


def hidden_test_lines(source: str, min_length: int = 13, visible: str = "") -> list[str]:
    """The stripped lines between BEGIN/END HIDDEN TESTS markers that are long enough to matter.

    Lines that also occur in ``visible`` (what students are shown anyway) are left out.
    """
    lines, inside = [], False
    for line in source.splitlines():
        if HIDDEN_BEGIN in line or HIDDEN_END in line:
            inside = HIDDEN_BEGIN in line
        elif inside and len(line.strip()) >= min_length and line.strip() not in visible:
            lines.append(line.strip())
    return lines


def redact(text: str, hidden: list[str]) -> str:
    """``text`` with every occurrence of a hidden-test line (and the markers) replaced."""
    for line in sorted(set(hidden) | {HIDDEN_BEGIN, HIDDEN_END}, key=len, reverse=True):
        if line in text:
            text = text.replace(line, REDACTED)
    return text


def summarize_error(ename: str, evalue: str, hidden: list[str], limit: int = 600) -> str:
    """``ExceptionName: message`` for students: at most 8 lines and ``limit`` characters, redacted."""
    text = redact(f"{ename}: {evalue}".strip(), hidden)
    lines = text.splitlines() or [""]
    short = "\n".join(lines[:8])
    if len(short) > limit:
        short = short[: limit - 3] + "..."
    elif len(lines) > 8:
        short += "\n..."
    return redact(short, hidden)


class HideTestCode(Preprocessor):
    """Reduce every code cell's outputs to one ``ExceptionName: message`` line per failure.

    Applies to feedback only. Errors of graded and answer cells are kept as one line (without
    hidden-test code, found in the gradebook's copy of the source cells when available); all
    other outputs are removed.
    """

    enabled = Bool(True).tag(config=True)  # nbconvert preprocessors are off unless enabled
    max_message = Int(600, help="Characters of a failure message shown to the student").tag(config=True)

    def preprocess(self, nb, resources):
        visible = "\n".join(cell.source for cell in nb.cells)  # hidden tests are already cleared here
        self._hidden = self._hidden_lines(resources, visible)
        return super().preprocess(nb, resources)

    @staticmethod
    def _hidden_lines(resources, visible: str) -> list[str]:
        info = (resources or {}).get("nbgrader") or {}
        if not info.get("db_url"):
            return []
        try:
            from nbgrader.api import Gradebook

            with Gradebook(info["db_url"]) as gb:
                notebook = gb.find_notebook(info["notebook"], info["assignment"])
                return [line for cell in notebook.source_cells
                        for line in hidden_test_lines(cell.source or "", visible=visible)]
        except Exception:  # noqa: BLE001 - feedback without the gradebook still hides tracebacks
            return []

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        meta = cell.metadata.get("nbgrader", {})
        graded = meta.get("grade") or meta.get("solution")
        kept = []
        for output in cell.get("outputs", []):
            if graded and output.get("output_type") == "error":
                line = summarize_error(output.get("ename", "Error"), output.get("evalue", ""),
                                       getattr(self, "_hidden", []), self.max_message)
                ename, _, evalue = line.partition(": ")
                output["ename"], output["evalue"], output["traceback"] = ename, evalue, [line]
                kept.append(output)
        cell["outputs"] = kept
        return cell, resources


# ---- The notebook that runs for a submission (used by course_utils.autograde) ----

MAX_SOURCE = 2**20
# Constructs an honest answer rarely needs; a hit is a reason to read the submission, not a verdict.
SUSPICIOUS = {
    "ctypes": r"\bctypes\b", "gc": r"\bgc\s*\.", "inspect": r"\binspect\b",
    "frames": r"_getframe|\bf_back\b|\bf_globals\b|\bf_locals\b|\bf_code\b|\bco_consts\b|\btb_frame\b|_current_frames",
    "code-objects": r"__code__|__defaults__|__kwdefaults__|__closure__|__globals__|CodeType",
    "builtins": r"__builtins__|\bbuiltins\b", "sys.modules": r"sys\s*\.\s*modules",
    "tracing": r"settrace|setprofile|addaudithook", "signals-threads": r"\bsignal\b|\bthreading\b|\b_thread\b",
    "processes": r"\bfork\b|subprocess|os\s*\.\s*(system|exec|spawn|kill|popen)|multiprocessing",
    "exit": r"os\s*\.\s*_exit|sys\s*\.\s*exit|\bexit\s*\(|\bquit\s*\(", "network": r"\bsocket\b|urllib|requests|http\.client",
    "ipython": r"get_ipython|input_transformers|^\s*[%!]", "paths": r"/proc\b|solutions|gradebook|\.\./|/job\b",
    "dynamic-code": r"\bexec\s*\(|\beval\s*\(|\bcompile\s*\(|__import__|importlib",
    "patching": r"setattr\s*\(|mock\b|\b(torch|np|numpy|math|testing|checks|F|nn|builtins)(\s*\.\s*\w+)+\s*=[^=]",
    "torch-internals": r"FunctionMode|DispatchMode|__torch_function__|__torch_dispatch__|torch\s*\.\s*library|torch\s*\.\s*_C",
    "grader": r"sandbox_runner|course_utils\s*\.\s*(sandbox|autograde|grading)",
}


@dataclass
class Part:
    """One cell of the notebook that runs, as the source defines it."""

    index: int
    role: str  # setup | answer | test | written | markdown
    grade_id: str
    source: str  # from solutions/ (the student's, for answer and written cells, once spliced)
    points: float = 0.0


def cells(nb: dict) -> list[dict]:
    """The cells of a notebook dict; tolerant of malformed (untrusted) JSON."""
    found = nb.get("cells") if isinstance(nb, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def cell_text(cell: dict) -> str | None:
    """A cell's source as one string, or None when it is malformed or larger than MAX_SOURCE."""
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        source = "".join(source)
    return source if isinstance(source, str) and len(source) <= MAX_SOURCE else None


def nbgrader_meta(cell: dict) -> dict:
    """A cell's ``metadata.nbgrader`` dict ({} when absent or malformed)."""
    meta = cell.get("metadata", {})
    meta = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return meta if isinstance(meta, dict) else {}


def plan(source_nb: dict, release_nb: dict) -> list[Part]:
    """The parts of the notebook that runs, from the source; answer slots hold the release stubs."""
    source, release = cells(source_nb), cells(release_nb)
    ids = [(c["cell_type"], nbgrader_meta(c).get("grade_id")) for c in source]
    if ids != [(c["cell_type"], nbgrader_meta(c).get("grade_id")) for c in release]:
        raise ValueError("the release differs from solutions/ in its cells: run `make exercises`")
    parts = []
    for index, (src, rel) in enumerate(zip(source, release)):
        meta, code = nbgrader_meta(src), src["cell_type"] == "code"
        if meta.get("solution"):
            role, text = ("answer" if code else "written"), cell_text(rel)
        else:
            role = ("test" if meta.get("grade") else "setup") if code else "markdown"
            text = cell_text(src)
        parts.append(Part(index, role, meta.get("grade_id", ""), text or "", float(meta.get("points", 0) or 0)))
    return parts


def splice(parts: list[Part], release_nb: dict, submitted: dict | None) -> tuple[list[Part], list[str]]:
    """Put the student's answer and written cells (matched by grade id, then cell id) into the plan."""
    by_grade: dict[tuple, dict] = {}
    by_id: dict[tuple, dict] = {}
    notes = [] if submitted is not None else ["unreadable notebook"]
    for cell in cells(submitted or {}):
        kind, grade_id = cell.get("cell_type"), nbgrader_meta(cell).get("grade_id")
        if isinstance(grade_id, str):
            if (kind, grade_id) in by_grade:
                notes.append(f"duplicate grade id {grade_id}")
            by_grade.setdefault((kind, grade_id), cell)
        if isinstance(cell.get("id"), str):
            by_id.setdefault((kind, cell["id"]), cell)
    release = cells(release_nb)
    spliced = []
    for part in parts:
        if part.role in ("answer", "written"):
            kind = "code" if part.role == "answer" else "markdown"
            cell = by_grade.get((kind, part.grade_id)) or by_id.get((kind, release[part.index].get("id")))
            text = cell_text(cell) if cell else None
            if text is None:
                notes.append(f"no usable cell {part.grade_id}: the stub was graded")
            part = Part(part.index, part.role, part.grade_id, part.source if text is None else text, part.points)
        spliced.append(part)
    return spliced, notes


def review_flags(parts: list[Part]) -> list[str]:
    """Names of the SUSPICIOUS constructs found in the student's answer cells (``name@grade_id``)."""
    found = []
    for part in parts:
        if part.role == "answer":
            found += [f"{name}@{part.grade_id}" for name, pattern in SUSPICIOUS.items()
                      if re.search(pattern, part.source, re.MULTILINE)]
    return found


def score(part: Part, record: dict | None) -> float:
    """Points of a test cell: all of them only for a verified pass of this very cell, else 0."""
    if not record or record.get("status") != "pass" or record.get("index") != part.index:
        return 0.0
    value = record.get("value")
    return part.points if value is None else min(max(float(value), 0.0), part.points)


def _outputs(part: Part, record: dict | None, run, hidden: list[str], count: int) -> list[dict]:
    outputs = []
    for name in ("stdout", "stderr"):
        if record and record.get(name):
            outputs.append({"output_type": "stream", "name": name, "text": redact(record[name], hidden)})
    if record is None:
        ename, evalue = ("GraderError", run.detail) if part.index == run.stopped_at else \
            ("NotRun", "not run: the notebook stopped at an earlier cell")
        outputs.append({"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [f"{ename}: {evalue}"]})
    elif record.get("status") in ("error", "timeout", "tampered"):
        ename, evalue = record.get("ename") or "Error", redact(record.get("evalue") or "", hidden)
        trace = redact(record.get("traceback") or f"{ename}: {evalue}", hidden).splitlines()
        outputs.append({"output_type": "error", "ename": ename, "evalue": evalue, "traceback": trace})
    elif record.get("value") is not None and part.role == "test":
        outputs.append({"output_type": "execute_result", "execution_count": count, "metadata": {},
                        "data": {"text/plain": repr(record["value"])}})
    return outputs


def autograded_notebook(parts: list[Part], run, release_nb: dict, hidden: list[str]) -> dict:
    """The release notebook with the graded sources, the outputs of ``run`` (a ``RunResult``) and the
    source's test cells (hidden tests included, for the instructor: feedback removes them)."""
    from nbgrader.utils import compute_checksum
    from nbformat import from_dict

    nb = copy.deepcopy(release_nb)
    records = run.records
    for part, cell in zip(parts, nb["cells"]):
        if part.role in ("answer", "written", "test"):
            cell["source"] = part.source
        if part.role == "test":
            cell["metadata"]["nbgrader"]["checksum"] = compute_checksum(from_dict(cell))
        if cell["cell_type"] == "code":
            cell["execution_count"] = part.index + 1
            cell["outputs"] = _outputs(part, records.get(part.index), run, hidden, part.index + 1)
    return nb


def hidden_lines(source_nb: dict, release_nb: dict) -> list[str]:
    """Hidden-test lines of a source notebook that its release does not show anyway."""
    visible = "\n".join(cell_text(c) or "" for c in cells(release_nb))
    return [line for c in cells(source_nb) for line in hidden_test_lines(cell_text(c) or "", visible=visible)]
