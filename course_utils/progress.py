"""Progress bars that are live while a loop runs and leave one plain line when it ends.

    for batch in progress(loader, desc="epoch 1/3", unit="step"):
        ...

In a Jupyter notebook the bar is an ipywidgets bar while the loop runs; when it closes, the bar is
replaced in place (through a display id) by one line of text such as
``epoch 1/3: 120/120 step in 3.4 s, loss=0.213``. A notebook saved after a run therefore records
that line, not a frozen widget or hundreds of kilobytes of widget state. Outside a notebook (a
terminal, a test, the autograder) it is tqdm's text bar on stderr, cleared when the loop ends.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from tqdm import std


def _notebook_kernel() -> bool:
    """True inside a Jupyter kernel that can show ipywidgets."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None or "IPKernelApp" not in shell.config:
            return False
        import ipywidgets  # noqa: F401  (the widget bar needs it)
    except ImportError:
        return False
    return True


def summary_line(bar: std.tqdm) -> str:
    """One line for a finished ``bar``: ``desc: n/total unit in S s, postfix``."""
    d = bar.format_dict
    count = f"{d['n']}/{d['total']}" if d["total"] else f"{d['n']}"
    line = f"{d['prefix'] or 'done'}: {count} {d['unit']} in {d['elapsed']:.1f} s"
    return line + (f", {d['postfix']}" if d.get("postfix") else "")


def progress(
    iterable: Iterable | None = None,
    *,
    desc: str = "",
    total: int | None = None,
    unit: str = "it",
    disable: bool = False,
    **kwargs: Any,
) -> std.tqdm:
    """A tqdm bar over ``iterable`` (or a manual one with ``total``) that ends as one line of text.

    Takes tqdm's arguments; returns the bar, so ``set_postfix`` and ``update`` work as usual.
    """
    if disable or not _notebook_kernel():
        return std.tqdm(iterable, desc=desc, total=total, unit=unit, disable=disable, leave=False, **kwargs)
    return _notebook_bar_class()(iterable, desc=desc, total=total, unit=unit, **kwargs)


@functools.cache
def _notebook_bar_class() -> type:
    # Imported only inside a kernel: IPython and ipywidgets are not needed elsewhere.
    from IPython.display import display
    from tqdm.notebook import tqdm_notebook

    class NotebookBar(tqdm_notebook):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, display=False, leave=True, **kwargs)
            self._handle = display(self.container, display_id=True)
            self.displayed = True

        def close(self) -> None:
            if self.disable:
                return
            line = summary_line(self)
            super().close()
            # Replacing the widget's output keeps the line in the live notebook and in the saved file.
            self._handle.update({"text/plain": line}, raw=True)
            self.container.close()

    return NotebookBar
