"""Entry point of ``python -m grader`` (see ``grader.cli``)."""

import sys

from grader.cli import main

if __name__ == "__main__":  # not when a Dask worker process started by `--scheduler local` imports it
    sys.exit(main())
