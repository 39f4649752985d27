"""Validate shows each failure message whole: nbgrader's ``Validator`` without its line cutting.

nbgrader's ``Validator._indent`` cuts every line it prints at ``Validator.width - 3`` characters (87 by
default) and appends "...", so ``nbgrader validate`` in a terminal loses the end of every hint longer than
that ("... do not forget the 2" is exactly the part cut). The JupyterLab Validate button receives the
whole message already (``Validator.validate`` returns it uncut); only the printed form cuts. ``width`` also
sets the separator lines and the wrapping of nbgrader's own warnings, so raising it is no fix.

``keep_whole_lines()`` replaces ``_indent`` by one that indents without cutting. The course's nbgrader
configuration files call it (``nbgrader_config.py`` at the root and
``classroom/jupyter/common/nbgrader_config.py``), so every ``nbgrader validate`` and every Validate
button of a server that reads them shows each line whole. nbgrader builds its ``Validator`` by name in
both places (``nbgrader.apps.validateapp`` and the validate server extension), so a subclass cannot be
configured in; changing the one method of the class is the narrowest change that reaches both.
"""

from __future__ import annotations


def indent_whole(validator, text: str) -> str:
    """``text`` with every line prefixed by ``validator.indent`` and ANSI colour codes removed, no line
    cut (nbgrader's ``_indent`` without its ``width`` limit). Returns a string of as many lines as ``text``."""
    from nbconvert.filters import strip_ansi

    return "\n".join(validator.indent + strip_ansi(line) for line in text.split("\n"))


def keep_whole_lines() -> None:
    """Make nbgrader's ``Validator`` print every line of a failure whole (idempotent; called from the
    nbgrader configuration files, which nbgrader runs before each validation)."""
    from nbgrader.validator import Validator

    Validator._indent = indent_whole
