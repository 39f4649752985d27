"""Writes lectures/10_beyond_attention.ipynb (unexecuted) from the cells below.

    python notes/build_lecture10.py          # the notebook, then execute it with the Makefile's `lectures` settings
    python notes/build_lecture10.py --py F   # the code cells as one script F, for a quick run outside Jupyter

The cells live in notes/lecture10_cells.py as a list of (kind, source, tags).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lecture10_cells import CELLS  # noqa: E402


def lines(text: str) -> list[str]:
    text = text.strip("\n")
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def notebook() -> dict:
    cells = []
    for kind, text, tags in CELLS:
        cell = {"cell_type": kind, "metadata": {"tags": list(tags)} if tags else {}, "source": lines(text)}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        cells.append(cell)
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def main(argv: list[str]) -> int:
    if len(argv) > 2 and argv[1] == "--py":
        code = "\n\n".join(text.strip("\n") for kind, text, _ in CELLS if kind == "code")
        Path(argv[2]).write_text(code + "\n", encoding="utf-8")
        return 0
    nb = notebook()
    for i, cell in enumerate(nb["cells"]):
        cell["id"] = f"c{i:03d}"
    path = ROOT / "lectures" / "10_beyond_attention.ipynb"
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print("wrote", path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
