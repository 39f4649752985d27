"""The student's side (issue 31): the student edition (``make student-edition``) holds no answer and no
hidden test and works on its own, and JupyterLab opens quietly (no news pop-up, notebooks not modified
on open).

Cost on the course's 2-core machine: building the edition about 1 s, its wheel about 5 s, `make lab`
from it about 10 s, one `nbgrader validate` of unit 01 from it about 15 s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from grader.edition import MARKER, build
from grader.redact import hidden_lines, solution_lines
from grader.release import KERNEL_METADATA

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
UNIT = "01_tokenization"


def notebook_lines(path: Path) -> set[str]:
    """Stripped lines of a file; a notebook's are those of every string in its JSON (its cells' sources)."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        nb = json.loads(text)
        text = "\n".join("".join(c["source"]) for c in nb["cells"]) + "\n" + text
    return {line.strip() for line in text.splitlines()}


def secrets() -> set[str]:
    """Every answer line and hidden-test line of solutions/ (13 characters or more) that no published file
    (a released exercise, a lecture, a course_utils module) holds anyway."""
    public = set()
    for path in [*ROOT.glob("exercises/*/*.ipynb"), *ROOT.glob("lectures/*.ipynb"), *ROOT.glob("course_utils/**/*.py")]:
        public |= notebook_lines(path)
    found = set()
    for source_path in ROOT.glob("solutions/*/*.ipynb"):
        source = json.loads(source_path.read_text(encoding="utf-8"))
        release = json.loads((ROOT / "exercises" / source_path.parent.name / source_path.name).read_text("utf-8"))
        found |= set(solution_lines(source, release)) | set(hidden_lines(source, release))
    return found - public


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("edition") / "seqmodels"
    build(dest)
    return dest


def test_the_edition_holds_no_answer_and_no_hidden_test(edition):
    hidden = secrets()
    assert len(hidden) > 1000, f"only {len(hidden)} secret lines found: the search would prove little"
    leaked = [
        f"{path.relative_to(edition)}: {line}"
        for path in edition.rglob("*")
        if path.is_file()
        for line in sorted(notebook_lines(path) & hidden)
    ]
    assert not leaked, leaked[:5]
    # The same search finds them where they are: in the solutions.
    source = ROOT / "solutions" / UNIT / f"{UNIT}.ipynb"
    assert notebook_lines(source) & hidden, "the search finds no secret line in the solutions themselves"


def test_the_edition_holds_what_students_need_and_nothing_of_grading(edition):
    names = {str(p.relative_to(edition)) for p in edition.rglob("*")}
    for needed in (
        "README.md",
        "Makefile",
        "environment.yml",
        "pyproject.toml",
        "constraints.txt",
        "nbgrader_config.py",
        "course_utils/data.py",
        "docs/students.md",
    ):
        assert needed in names, f"the edition lacks {needed}"
    assert {p.name for p in (edition / "lectures").glob("*.ipynb")} == {
        p.name for p in (ROOT / "lectures").glob("*.ipynb")
    }
    for banned in ("solutions", "tests", "grader", "benchmarks", "gradebook.db"):
        assert not [n for n in names if n == banned or n.startswith(f"{banned}/")], f"the edition holds {banned}"
    assert "grader*" not in (edition / "pyproject.toml").read_text(encoding="utf-8")
    assert "[dev]" not in (edition / "environment.yml").read_text(encoding="utf-8")


def test_the_exercises_are_byte_identical(edition):
    ours = sorted(p.relative_to(ROOT / "exercises") for p in (ROOT / "exercises").rglob("*") if p.is_file())
    theirs = sorted(p.relative_to(edition / "exercises") for p in (edition / "exercises").rglob("*") if p.is_file())
    assert ours == theirs and len(ours) >= 11
    for name in ours:
        assert (edition / "exercises" / name).read_bytes() == (ROOT / "exercises" / name).read_bytes(), name


def test_a_folder_holding_other_files_is_refused_untouched(tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes", encoding="utf-8")
    with pytest.raises(ValueError, match="notes.txt"):
        build(tmp_path)
    assert mine.read_text(encoding="utf-8") == "my notes" and sorted(tmp_path.iterdir()) == [mine]


def test_an_edition_is_rebuilt_unless_a_file_of_it_was_changed(tmp_path):
    dest = tmp_path / "edition"
    build(dest)
    (dest / ".venv").mkdir()  # made by `make lab`: neither refused nor removed
    build(dest)
    assert (dest / MARKER).is_file() and (dest / ".venv").is_dir()
    work = dest / "exercises" / UNIT / f"{UNIT}.ipynb"
    work.write_text(work.read_text(encoding="utf-8") + " ", encoding="utf-8")  # a student's work
    with pytest.raises(ValueError, match=UNIT):
        build(dest)
    assert work.read_text(encoding="utf-8").endswith(" ")


def test_the_package_builds_from_the_edition_without_the_grader(edition, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=edition,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "course_utils/data.py" in names and "course_utils/metrics/course_bleu/course_bleu.py" in names
    assert not [n for n in names if n.startswith("grader/")], "the edition's package ships the grader"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_runs_from_the_edition_with_the_news_off(edition):
    """The edition's `make lab` starts JupyterLab (on this environment: -o keeps make from installing the
    edition into it), and the server's settings say no news: the course's override is read."""
    port, token = free_port(), "edition-test"
    stamp, settings = (
        BIN.parent / ".course-installed",
        BIN.parent / "share/jupyter/lab/settings/overrides.d/seqmodels.json",
    )
    assert stamp.exists() and settings.exists(), "make setup has not run in this environment"
    lab = subprocess.Popen(
        [
            "make",
            "-o",
            str(stamp),
            "-o",
            str(settings),
            "lab",
            f"VENV={BIN.parent}",
            f"LAB_FLAGS=--no-browser --port={port} --ServerApp.port_retries=0",
        ],
        cwd=edition,
        env={**os.environ, "JUPYTER_TOKEN": token},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}"
        deadline = time.monotonic() + 120
        while True:
            assert lab.poll() is None, lab.stdout.read().decode(errors="replace")
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    settings_seen = json.loads(answer.read())
                break
            except OSError:
                assert time.monotonic() < deadline, "JupyterLab did not answer within 120 s"
                time.sleep(1)
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=30)
    defaults = {k: v.get("default") for k, v in settings_seen["schema"]["properties"].items()}
    assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False, defaults


def test_validate_runs_from_the_edition_offline(edition, tmp_path):
    """`nbgrader validate` in a copy of the edition, on unit 01 answered from solutions/ with one wrong part,
    reports that part's visible test alone, with course_utils imported from the edition."""
    copy = tmp_path / "edition"
    shutil.copytree(edition, copy)
    path = copy / "exercises" / UNIT / f"{UNIT}.ipynb"
    answers = {
        c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
        for c in json.loads((ROOT / "solutions" / UNIT / f"{UNIT}.ipynb").read_text(encoding="utf-8"))["cells"]
        if c["cell_type"] == "code" and c["metadata"].get("nbgrader", {}).get("solution")
    }
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if cell["cell_type"] == "code" and grade_id in answers:
            cell["source"] = re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", answers[grade_id], flags=re.M)
            if grade_id == "ngrams_answer":  # char_ngrams returns nothing: its visible test must fail
                cell["source"] += "\n\n\ndef char_ngrams(word, n_min=3, n_max=None):\n    return []\n"
        elif cell["cell_type"] == "markdown" and cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = "Characters never meet an unknown word; words are short; subwords balance both."
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(copy),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }
    where = subprocess.run(
        [sys.executable, "-c", "import course_utils; print(course_utils.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert where.stdout.strip() == str(copy / "course_utils" / "__init__.py"), where.stdout + where.stderr
    done = subprocess.run(
        [str(BIN / "nbgrader"), "validate", str(path.relative_to(copy))],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "VALIDATION FAILED ON 1 CELL(S)" in done.stdout, done.stdout + done.stderr
    assert "Visible tests for char_ngrams" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "path", sorted([*ROOT.glob("lectures/*.ipynb"), *ROOT.glob("exercises/*/*.ipynb")]), ids=lambda p: p.name
)
def test_a_notebook_opens_unmodified(path):
    """JupyterLab writes the kernel's kernelspec and language_info into a notebook it opens; where they
    differ from the file's, the notebook opens marked modified (seen in the browser: "Python 3" against
    ipykernel's "Python 3 (ipykernel)", and exercises' bare language_info)."""
    metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
    for key, value in KERNEL_METADATA.items():
        assert metadata.get(key) == value, (
            f"{path.relative_to(ROOT)}: metadata {key} is {metadata.get(key)}, not grader/release.py's KERNEL_METADATA "
            "(lectures executed under another Python: update KERNEL_METADATA to theirs, then run `make exercises`)"
        )


def test_make_student_edition_writes_it_and_refuses_a_folder_in_use(tmp_path):
    """The documented command: `make student-edition DEST=folder` (-o: the environment is not rebuilt)."""
    stamp = BIN.parent / ".course-installed"
    settings = BIN.parent / "share/jupyter/lab/settings/overrides.d/seqmodels.json"

    def make(*args: str) -> subprocess.CompletedProcess:
        command = ["make", "-o", str(stamp), "-o", str(settings), "student-edition", f"VENV={BIN.parent}", *args]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)

    assert make().returncode != 0, "make student-edition without DEST must say how to call it"
    done = make(f"DEST={tmp_path / 'edition'}")
    assert done.returncode == 0 and (tmp_path / "edition" / MARKER).is_file(), done.stdout + done.stderr
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("mine", encoding="utf-8")
    refused = make(f"DEST={tmp_path / 'mine'}")
    assert refused.returncode != 0 and "thesis.tex" in refused.stderr, refused.stdout + refused.stderr
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["thesis.tex"]
