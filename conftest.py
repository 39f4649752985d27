"""Repository-wide pytest hooks (this file sits at the root so that it reaches lectures/ too)."""

import json
import os

import pytest

# nbval waits only 5 s for a kernel's outputs after a cell finishes; on a busy 2-core machine
# a training cell's last messages can take longer, which nbval reports as a failure even
# though the cell ran. The cell's own execution timeout (--nbval-cell-timeout) is unaffected.
NBVAL_OUTPUT_TIMEOUT_S = 60


# A lecture whose metadata says {"course": {"requires_data": ["fashion_mnist"]}} was executed on that
# dataset, so its outputs can only be checked where the dataset is installed. Elsewhere its cells
# are skipped with the reason, unless COURSE_REQUIRE_DATA=1 (which `make test` sets where it can
# install the data itself), and then they fail instead.
def _fashion_mnist() -> bool:
    from course_utils.images import fashion_mnist_available

    return fashion_mnist_available()


def _bible_kjv() -> bool:
    from course_utils.data import bible_kjv_available

    return bible_kjv_available()


# name in the metadata -> (is it here?, the Debian package that provides it)
AVAILABLE = {"fashion_mnist": (_fashion_mnist, "dataset-fashion-mnist"), "bible_kjv": (_bible_kjv, "bible-kjv")}


def _missing_data(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        needs = json.load(f).get("metadata", {}).get("course", {}).get("requires_data", [])
    return [name for name in needs if not AVAILABLE[name][0]()]


def pytest_collection_modifyitems(items):
    missing: dict[str, list[str]] = {}
    for item in items:
        if type(item).__name__ == "IPyNbCell":
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT_S
            path = str(item.fspath)
            if path not in missing:
                missing[path] = _missing_data(path)
            if missing[path]:
                reason = (
                    f"{os.path.basename(path)} was executed on {', '.join(missing[path])}, which is not "
                    f"installed here (Debian: apt-get install {' '.join(AVAILABLE[n][1] for n in missing[path])})"
                )
                if os.environ.get("COURSE_REQUIRE_DATA") == "1":
                    raise pytest.UsageError(f"COURSE_REQUIRE_DATA=1 but {reason}")
                item.add_marker(pytest.mark.skip(reason=reason))
