"""Repository-wide pytest hooks (this file sits at the root so that it reaches lectures/ too)."""

# nbval waits only 5 s for a kernel's outputs after a cell finishes; on a busy 2-core machine
# a training cell's last messages can take longer, which nbval reports as a failure even
# though the cell ran. The cell's own execution timeout (--nbval-cell-timeout) is unaffected.
NBVAL_OUTPUT_TIMEOUT_S = 60


def pytest_collection_modifyitems(items):
    for item in items:
        if type(item).__name__ == "IPyNbCell":
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT_S
