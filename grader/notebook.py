"""Read notebook JSON that may be malformed: its cells, their text, their nbgrader metadata (pure functions).

A submission is untrusted JSON: a notebook dict whose ``cells`` may be missing, whose cells may not
be dicts, and whose sources may be lists, oversized or not text at all. These helpers never raise on
such input; they return what can be used and leave the rest out.
"""

from __future__ import annotations

MAX_SOURCE = 2**20  # characters: a longer cell source is treated as unusable


def cells(nb: dict) -> list[dict]:
    """The cell dicts of notebook ``nb`` (a list, maybe empty); entries that are not dicts are left out."""
    found = nb.get("cells") if isinstance(nb, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def cell_text(cell: dict) -> str | None:
    """A cell's source as one string, or None when it is malformed or longer than ``MAX_SOURCE``."""
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(s, str) for s in source):
        source = "".join(source)
    return source if isinstance(source, str) and len(source) <= MAX_SOURCE else None


def nbgrader_meta(cell: dict) -> dict:
    """A cell's ``metadata.nbgrader`` dict ({} when absent or malformed)."""
    meta = cell.get("metadata", {})
    meta = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return meta if isinstance(meta, dict) else {}


def notebook_text(nb: dict, solution_only: bool = False) -> str:
    """The sources of ``nb``'s cells joined by newlines (only its answer cells when ``solution_only``)."""
    return "\n".join(cell_text(c) or "" for c in cells(nb) if not solution_only or nbgrader_meta(c).get("solution"))
