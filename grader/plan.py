"""The notebook that runs for a submission, built on the trusted side (pure functions, no student code).

``plan`` reads the nbgrader source (``solutions/``) and the release: setup and test cells (hidden
tests included), points and grade ids, with the release stubs in the answer slots; ``splice`` puts
in the student's answer and written cells, matched by grade id (then cell id); ``score`` turns a
verified record of ``grader.session`` into points; ``autograded_notebook`` writes what nbgrader's
formgrader and feedback read, with hidden-test code redacted from the outputs (``grader.redact``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from grader.notebook import cell_text, cells, nbgrader_meta
from grader.redact import redact


@dataclass
class Part:
    """One cell of the notebook that runs, as the source defines it."""

    index: int
    role: str  # setup | answer | test | written | markdown
    grade_id: str
    source: str  # from solutions/ (the student's, for answer and written cells, once spliced)
    points: float = 0.0


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
        ename, evalue = (
            ("GraderError", run.detail)
            if part.index == run.stopped_at
            else ("NotRun", "not run: the notebook stopped at an earlier cell")
        )
        outputs.append({"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [f"{ename}: {evalue}"]})
    elif record.get("status") in ("error", "timeout", "tampered"):
        ename, evalue = record.get("ename") or "Error", redact(record.get("evalue") or "", hidden)
        trace = redact(record.get("traceback") or f"{ename}: {evalue}", hidden).splitlines()
        outputs.append({"output_type": "error", "ename": ename, "evalue": evalue, "traceback": trace})
    elif record.get("value") is not None and part.role == "test":
        outputs.append(
            {
                "output_type": "execute_result",
                "execution_count": count,
                "metadata": {},
                "data": {"text/plain": repr(record["value"])},
            }
        )
    return outputs


def autograded_notebook(parts: list[Part], run, release_nb: dict, hidden: list[str]) -> dict:
    """The release notebook with the graded sources, the outputs of ``run`` (a ``RunResult``) and the
    source's test cells (hidden tests included, for the instructor: feedback removes them)."""
    from nbformat import from_dict
    from nbgrader.utils import compute_checksum

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
