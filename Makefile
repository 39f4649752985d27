# The course's commands. Each target sets up the virtual environment first when it is
# missing or older than pyproject.toml or constraints.txt, so a fresh clone needs nothing installed by hand
# beyond Python 3.10+ and make.
#   make lab        set up, then open the course in JupyterLab   (students)
#   make hub HUB_PASSWORD=...  the course on JupyterHub at http://127.0.0.1:8000 (docs/classroom.md)
#   make test       set up, then run the whole test suite        (CI)
#   make exercises  regenerate exercises/ from solutions/        (instructors)
#   make import SUBMISSIONS=folder UNIT=NN_name   folder/<student_id>.ipynb -> submitted/ (instructors)
#   make autograde [UNIT=NN_name] [WORKERS=n]     grade submissions in the sandbox        (instructors)
#        [SCHEDULER=tcp://host:8786|local]           ... on Dask workers (docs/distributed.md)
#        [DB_URL=postgresql://user@host/db]          ... into a shared PostgreSQL gradebook (also for feedback, grades)
#   make feedback [UNIT=NN_name]                  feedback/ without hidden tests          (instructors)
#   make grades                                   grades.csv with review flags, grades_parts.csv per cell (instructors)
#   make report [UNIT=NN_name]                    reports/: the class report, regenerated (instructors)
#   make lectures [LECTURES=lectures/NN_x.ipynb]  execute lectures in place for commit (authors)
#   make bench [ISA=avx2|default|other]  time every lecture's "Run All"  (authors)
#   make bench-grading  stock vs sandboxed autograding, seconds per submission   (authors)
#   make bench-grading-distributed  submissions per second on 1, 2, 4 Dask workers vs the local pool (authors)
#   make bench-long-context  time and memory of attention and its replacements against sequence length (authors)
#   make student-edition DEST=folder  lectures, exercises and course_utils without answers (instructors)
#   make format     format and lint-fix the Python files with ruff (pyproject.toml)   (authors)

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

AUTOGRADE := $(OFFLINE) $(BIN)/python -m grader $(if $(DB_URL),--db-url '$(DB_URL)')

.PHONY: setup sandbox-tools postgres-tools datasets-tools browser-tools classroom-proxy hub lab test lectures exercises import autograde feedback grades report bench bench-grading bench-grading-distributed bench-long-context student-edition format lint clean

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e ".[dev]"
	$(BIN)/jupyter labextension enable @jupyter/nbgrader >/dev/null
	touch $(STAMP)

# JupyterLab opens quietly: no "get notified about official Jupyter news?" pop-up. The course's settings
# override goes into the environment's overrides.d (read by `make lab` and by every server of `make hub`),
# beside any overrides.json of the user's own.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.d/seqmodels.json
$(LAB_SETTINGS): classroom/jupyter/lab/overrides.json $(STAMP)
	mkdir -p $(dir $@)
	cp $< $@

setup: $(STAMP) $(LAB_SETTINGS)

# The autograder's sandbox needs bubblewrap (Linux). Installed when we are root and apt is there;
# elsewhere, or offline, only a note: sandboxed grading then refuses to run and its tests skip.
# Debian packages the course uses when it can get them. As root with apt (CI) they are installed;
# elsewhere a note says what is missing. Each apt call waits up to 5 min for a lock another apt holds
# (a fresh machine often runs its own update at boot). $(call apt_need,CHECK,PACKAGE,WHAT IT IS FOR)
define apt_need
	@$(1) || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing $(2) ($(3))"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -o DPkg::Lock::Timeout=300 -y -qq $(2) >/dev/null 2>&1 \
	      || { apt-get update -o DPkg::Lock::Timeout=300 -qq >/dev/null 2>&1 && apt-get install -o DPkg::Lock::Timeout=300 -y -qq $(2) >/dev/null 2>&1; } \
	      || echo "warning: could not install $(2) ($(3))"; \
	  else \
	    echo "note: Debian package $(2) is not installed ($(3))"; \
	  fi; }
endef

sandbox-tools:
	$(call apt_need,command -v bwrap >/dev/null 2>&1,bubblewrap,the autograder's sandbox: without it grading refuses to run)

# tests/grader/test_postgres_gradebook.py starts a throwaway PostgreSQL server (initdb, pg_ctl) for the
# shared-gradebook tests; without it they skip. The grader itself needs no local server.
postgres-tools:
	$(call apt_need,ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1,postgresql,the PostgreSQL gradebook tests: without it they skip)

# Unit 03 reads the King James Bible through the `bible` program of bible-kjv; without it, Python's documentation.
# Unit 09 and benchmarks/vit_fashion read Fashion-MNIST from here; without it they fall back to scikit-learn's digits.
datasets-tools:
	$(call apt_need,command -v bible >/dev/null 2>&1,bible-kjv,the King James text for unit 03: without it unit 03 uses the Python documentation)
	$(call apt_need,test -d /usr/share/datasets/fashion-mnist,dataset-fashion-mnist,Fashion-MNIST for unit 09: without it unit 09 uses the 8x8 digits)

# JupyterHub's proxy (configurable-http-proxy, a Node.js program) goes into classroom/node_modules/ at the
# versions of classroom/package-lock.json. Without npm only a note: the hub cannot start, its tests skip.
PROXY := classroom/node_modules/.bin/configurable-http-proxy
$(PROXY): classroom/package.json classroom/package-lock.json
	$(call apt_need,command -v npm >/dev/null 2>&1,npm,Node.js and npm for JupyterHub's proxy)
	@if command -v npm >/dev/null 2>&1; then \
	    npm ci --prefix classroom --no-audit --no-fund --loglevel=error && touch $(PROXY) \
	        || echo "warning: npm ci failed: no configurable-http-proxy, so no JupyterHub and no browser tests"; \
	else \
	    echo "note: npm is missing: no configurable-http-proxy, so no JupyterHub (make hub) and no browser tests"; \
	fi

classroom-proxy: $(PROXY)

# The browser of the classroom's round trip (tests/classroom/): Debian's Chromium, driven by Playwright.
browser-tools: classroom-proxy
	$(call apt_need,command -v chromium >/dev/null 2>&1,chromium,the browser that tests/classroom/ drives)

# The course on JupyterHub, on 127.0.0.1 only; every user logs in with HUB_PASSWORD. Users, ports and
# folders come from COURSE_HUB_* variables (classroom/jupyterhub_config.py).
hub: setup classroom-proxy
	@test -n "$(HUB_PASSWORD)" || { echo "usage: make hub HUB_PASSWORD=password  (8 characters or more)"; exit 2; }
	@COURSE_HUB_PASSWORD='$(HUB_PASSWORD)' $(BIN)/jupyterhub -f classroom/jupyterhub_config.py

lab: setup
	$(BIN)/jupyter lab --notebook-dir=. $(if $(filter 0,$(shell id -u)),--allow-root) README.md

# Where sandbox-tools, postgres-tools, datasets-tools and browser-tools can install what they need (Linux,
# as root: CI), the attack catalog, the PostgreSQL gradebook tests, the lectures executed on their data and
# the classroom's browser round trip must run, not skip.
REQUIRE := $(if $(and $(filter Linux,$(shell uname -s)),$(filter 0,$(shell id -u))),COURSE_REQUIRE_SANDBOX=1 COURSE_REQUIRE_DATA=1 COURSE_REQUIRE_POSTGRES=1 COURSE_REQUIRE_BROWSER=1)

NBVAL := --nbval --nbval-sanitize-with tests/sanitize.cfg

# Two passes. First everything: library tests, grading, mistake banks and nbval on every lecture.
# Then nbval on the lectures once more under another ISA's arithmetic (tests/isa_env.py other: an
# AVX-512 CPU computes as an AVX2 one, an AVX2 CPU with ATen's baseline kernels, oneDNN at SSE4.1
# and MKL in compatible mode), so an output that depends on the bits of the floating-point
# hardware fails here, on the machine that made it, instead of on a student's laptop or a GPU.
# ruff's formatter and linter (settings in pyproject.toml) over every Python file; `make test` runs it first.
lint: setup
	$(BIN)/ruff format --check --quiet . || { echo "run 'make format' to format the Python files"; exit 1; }
	$(BIN)/ruff check --quiet .

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: setup sandbox-tools postgres-tools datasets-tools browser-tools lint
	$(SUITE_ENV) $(REQUIRE) $(BIN)/python -m pytest -n 2 --dist loadscope $(NBVAL) lectures tests
	@isa=$$($(BIN)/python tests/isa_env.py other); rc=$$?; \
	if [ $$rc = 3 ]; then \
	    echo "note: no other ISA can be emulated on this CPU; the lectures were validated natively only"; \
	elif [ $$rc != 0 ]; then \
	    exit $$rc; \
	else \
	    echo "validating the lectures again under $$isa"; \
	    env $$isa $(SUITE_ENV) $(REQUIRE) $(BIN)/python -m pytest -n 2 --dist loadscope $(NBVAL) lectures; \
	fi

# Lectures are executed for commit with the suite's settings, without widget state: progress bars
# (course_utils.progress) leave one line of text in the saved notebook.
LECTURES ?= $(wildcard lectures/*.ipynb)
lectures: setup
	@for nb in $(LECTURES); do \
	    echo "executing $$nb"; \
	    $(SUITE_ENV) $(BIN)/jupyter nbconvert --to notebook --execute --inplace --log-level=WARN \
	        --ExecutePreprocessor.timeout=900 --ExecutePreprocessor.store_widget_state=False \
	        --ExecutePreprocessor.record_timing=False \
	        --ClearMetadataPreprocessor.enabled=True --ClearMetadataPreprocessor.preserve_cell_metadata_mask='["tags"]' \
	        --ClearMetadataPreprocessor.preserve_nb_metadata_mask='["kernelspec","language_info","course"]' \
	        "$$nb" || exit 1; \
	done

exercises: setup
	@for unit in $(UNITS); do \
	    echo "generating exercises/$$unit"; \
	    $(BIN)/nbgrader generate_assignment "$$unit" --force --log-level=WARN || exit 1; \
	done

import: setup
	@test -n "$(SUBMISSIONS)" -a -n "$(UNIT)" || { echo "usage: make import SUBMISSIONS=folder UNIT=NN_name"; exit 2; }
	$(AUTOGRADE) import $(UNIT) $(SUBMISSIONS)

# AUTOGRADE_FLAGS passes more options, e.g. "--cell-timeout 300" or "--unsafe-no-sandbox".
autograde: setup sandbox-tools
	$(AUTOGRADE) autograde $(UNIT) $(if $(WORKERS),--workers $(WORKERS)) $(if $(SCHEDULER),--scheduler $(SCHEDULER)) $(AUTOGRADE_FLAGS)

feedback: setup
	$(AUTOGRADE) feedback $(or $(UNIT),$(UNITS))

grades: setup
	$(AUTOGRADE) export --to grades.csv

# reports/UNIT.html and UNIT_parts.csv (without UNIT: every graded unit and reports/course.html), overwritten each run
report: setup
	$(AUTOGRADE) report $(if $(UNIT),--unit $(UNIT))

bench: setup
	$(OFFLINE) $(BIN)/python -m benchmarks.notebook_times $(if $(ISA),--isa $(ISA))

bench-grading: setup sandbox-tools
	$(OFFLINE) $(BIN)/python -m benchmarks.grading

bench-grading-distributed: setup sandbox-tools
	$(OFFLINE) $(BIN)/python -m benchmarks.grading_distributed

bench-long-context: setup
	$(OFFLINE) $(BIN)/python -m benchmarks.long_context

# What students get when the instructor grades: no solutions/, hidden tests, banks or grader (docs/instructors.md).
student-edition: setup
	@test -n "$(DEST)" || { echo "usage: make student-edition DEST=folder"; exit 2; }
	$(BIN)/python -m grader.edition '$(DEST)'

clean:
	rm -rf $(VENV) gradebook.db submitted autograded feedback grades.csv grades_parts.csv reports classroom/node_modules classroom/state
