"""Notebooks that open clean in JupyterLab: the kernel metadata JupyterLab would otherwise rewrite on load.

When JupyterLab connects a notebook to its kernel it writes the kernel's ``kernelspec`` (display name
"Python 3 (ipykernel)", ipykernel's) and ``language_info`` (codemirror mode, file extension, mime type,
lexer, Python version) into the notebook's metadata. Any difference from what the file holds marks the
notebook modified before the student has typed anything: the solutions carried ``"Python 3"`` and a
``language_info`` of ``{"name": "python"}`` only, so every exercise opened modified.

``KERNEL_METADATA`` is what the kernel reports for the Python the lectures were executed with (3.11, as
environment.yml installs); ``OpenClean`` writes it into every exercise ``nbgrader generate_assignment``
makes (``nbgrader_config.py`` appends it to nbgrader's preprocessors). Under another Python version
JupyterLab still updates ``language_info.version``, and the notebook opens modified there.
"""

from __future__ import annotations

import copy

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

KERNEL_METADATA = {
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.11.7",
    },
}


class OpenClean(Preprocessor):
    """Give a notebook the kernel metadata JupyterLab writes on load (``KERNEL_METADATA``)."""

    enabled = Bool(True, help="nbconvert skips a preprocessor that is not enabled").tag(config=True)

    def preprocess(self, nb, resources):
        """Return ``nb`` with ``KERNEL_METADATA``'s entries in its metadata, and ``resources`` unchanged."""
        for key, value in KERNEL_METADATA.items():
            nb.metadata[key] = copy.deepcopy(value)
        return nb, resources
