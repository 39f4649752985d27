# The course's commands. Each target sets up the virtual environment first when it is
# missing or older than pyproject.toml or constraints.txt, so a fresh clone needs nothing installed by hand
# beyond Python 3.10+ and make.
#   make lab        set up, then open the course in JupyterLab   (students)
#   make test       set up, then run the whole test suite        (CI)
#   make exercises  regenerate exercises/ from solutions/        (instructors)
#   make bench      time every lecture's "Run All"               (authors)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.course-installed
# Tested versions, so lectures re-execute to the same output; `CONSTRAINTS=` resolves freely.
CONSTRAINTS ?= constraints.txt
UNITS  := $(notdir $(wildcard solutions/[0-9][0-9]_*))
# nbgrader runs `alembic` and `jupyter` from PATH, so the environment's bin comes first.
export PATH := $(abspath $(BIN)):$(PATH)
# No test may reach the network: these make every Hugging Face lookup fail fast.
OFFLINE := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1
# Tests run on both cores through pytest-xdist, one process per core: each process (and each
# notebook kernel it starts) uses one thread, since two kernels spinning two OpenMP threads
# each on two cores slow each other down by an order of magnitude. Lectures are executed
# for commit with the same setting, so nbval sees the same numbers.
SUITE_ENV := $(OFFLINE) OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

.PHONY: setup lab test exercises bench clean

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e ".[dev]"
	$(BIN)/jupyter labextension enable @jupyter/nbgrader >/dev/null
	touch $(STAMP)

setup: $(STAMP)

lab: setup
	$(BIN)/jupyter lab --notebook-dir=. $(if $(filter 0,$(shell id -u)),--allow-root) README.md

test: setup
	$(SUITE_ENV) $(BIN)/python -m pytest -n 2 --dist loadscope \
	    --nbval lectures --nbval-sanitize-with tests/sanitize.cfg tests

exercises: setup
	@for unit in $(UNITS); do \
	    echo "generating exercises/$$unit"; \
	    $(BIN)/nbgrader generate_assignment "$$unit" --force --log-level=WARN || exit 1; \
	done

bench: setup
	$(OFFLINE) $(BIN)/python -m benchmarks.notebook_times

clean:
	rm -rf $(VENV) gradebook.db submitted autograded feedback
