"""The student edition: what students clone or download when the instructor grades with this repository.

``python -m grader.edition DEST`` (``make student-edition DEST=folder``) writes into DEST the lectures,
the exercises (byte for byte), ``course_utils`` (the data helpers included), ``constraints.txt``, a
``pyproject.toml`` and ``environment.yml`` that install ``course_utils`` alone, the students' guide, and
from ``classroom/edition/`` a student README, Makefile (``make lab``) and ``nbgrader_config.py`` (Validate
only). It holds no ``solutions/``, no hidden tests, no mistake banks and no grader.

Before anything reaches DEST the edition is built in a folder beside it and searched: a file that holds
a line of an answer or of a hidden test that the course does not publish anyway (in the released
exercise, a lecture or ``course_utils``) stops the build, naming the file and the line.

DEST must be empty, missing, or an edition this command wrote before whose files are all as it wrote
them (its ``.student-edition.json`` lists them with their SHA-256). Anything else is refused, naming the
files that are in the way: nothing a user saved is overwritten. Files the edition never listed that tools
make (``.venv/``, ``.ipynb_checkpoints/``, ``__pycache__/``, ``*.egg-info/``) are left where they are.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from grader.redact import hidden_lines, solution_lines

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "classroom" / "edition"
MARKER = ".student-edition.json"
# What students get as it is in the repository (folders copied whole, without caches).
COPIED = [
    "lectures",
    "exercises",
    "course_utils",
    "constraints.txt",
    "docs/students.md",
    "classroom/jupyter/lab/overrides.json",
]
TOOL_MADE = (".venv", ".ipynb_checkpoints", "__pycache__")
CACHES = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


def _replace(text: str, old: str, new: str, name: str) -> str:
    """``text`` with ``old`` replaced by ``new``; ValueError naming file ``name`` when ``old`` is not there."""
    if old not in text:
        raise ValueError(f"{name} no longer holds {old!r}: update grader/edition.py to the file's new form")
    return text.replace(old, new)


def student_files(root: Path = ROOT) -> dict[str, str]:
    """The edition's files that are written rather than copied: path in the edition -> text."""
    readme = (root / "README.md").read_text(encoding="utf-8")
    units = readme[readme.index("## Units") : readme.index("## Guides")].rstrip()
    licence = readme[readme.index("## Licence and sources") :].rstrip()
    pyproject = _replace(
        (root / "pyproject.toml").read_text(encoding="utf-8"),
        'include = ["course_utils*", "grader*"]',
        'include = ["course_utils*"]',
        "pyproject.toml",
    )
    environment = _replace(
        (root / "environment.yml").read_text(encoding="utf-8"), "-e .[dev]", "-e .", "environment.yml"
    )
    template = (TEMPLATES / "README.md").read_text(encoding="utf-8")
    return {
        "README.md": _replace(template, "{units}", f"{units}\n\n{licence}", "classroom/edition/README.md") + "\n",
        "Makefile": (TEMPLATES / "Makefile").read_text(encoding="utf-8"),
        "nbgrader_config.py": (TEMPLATES / "nbgrader_config.py").read_text(encoding="utf-8"),
        "pyproject.toml": pyproject,
        "environment.yml": environment,
    }


def _strings(value) -> list[str]:
    """Every string inside the JSON ``value`` (a notebook's sources, outputs and metadata)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for item in value for s in _strings(item)] if isinstance(value, list) else []


def file_lines(path: Path) -> set[str]:
    """The distinct stripped lines of the file at ``path``: of every string of a notebook's JSON, of the
    text of any other file (undecodable bytes replaced)."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix == ".ipynb":
        try:
            text = "\n".join(_strings(json.loads(text)))
        except ValueError:
            pass
    return {line.strip() for line in text.splitlines()}


def secret_lines(root: Path = ROOT) -> set[str]:
    """Lines of the answers and hidden tests in ``root/solutions`` that the course does not publish
    anyway: in no released exercise, lecture or ``course_utils`` file (lectures and the library teach
    some answers on purpose). Returns a set of stripped lines."""
    public: set[str] = set()
    for folder in ("lectures", "course_utils", "exercises"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and path.suffix in (".ipynb", ".py"):
                public |= file_lines(path)
    found = set()
    for source_path in sorted((root / "solutions").glob("*/*.ipynb")):
        release_path = root / "exercises" / source_path.relative_to(root / "solutions")
        if not release_path.is_file():
            raise ValueError(f"{source_path} has no release {release_path}: run `make exercises`")
        source, release = (json.loads(p.read_text(encoding="utf-8")) for p in (source_path, release_path))
        found.update(solution_lines(source, release) + hidden_lines(source, release))
    return found - public


def leaks(folder: Path, secrets: set[str]) -> list[str]:
    """``"file: line"`` for every line of ``secrets`` that a file under ``folder`` holds as a line."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        found += [f"{path.relative_to(folder)}: {line}" for line in sorted(file_lines(path) & secrets)]
    return found


def digest(path: Path) -> str:
    """The SHA-256 of the file at ``path``, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def in_the_way(dest: Path) -> list[str]:
    """The files of ``dest`` that a new edition may not replace: every file when ``dest`` is not an edition,
    else those changed or added since it was written (tool-made caches left out). Empty when it is free."""
    if not dest.exists():
        return []
    if not dest.is_dir():
        return [str(dest)]
    files = sorted(
        str(p.relative_to(dest))
        for p in dest.rglob("*")
        if (p.is_file() or p.is_symlink())
        and not any(part in TOOL_MADE or part.endswith(".egg-info") for part in p.relative_to(dest).parts)
    )
    marker = dest / MARKER
    if not marker.is_file():
        return files
    try:
        written = json.loads(marker.read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError):
        return files
    return [f for f in files if f != MARKER and written.get(f) != digest(dest / f)]


def build(dest: Path, root: Path = ROOT) -> list[str]:
    """Write the student edition of the course at ``root`` into ``dest``; return its files (relative paths).

    Raises ValueError naming the files in the way when ``dest`` holds anything but an unchanged edition,
    and RuntimeError naming file and line when the edition would hold an answer or a hidden test."""
    dest = dest.resolve()
    blocking = in_the_way(dest)
    if blocking:
        raise ValueError(
            f"{dest} is not empty and not an unchanged student edition; refusing to overwrite "
            f"{len(blocking)} file(s), e.g. {blocking[:5]}. Choose an empty folder or move them away."
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".edition-") as staging:
        stage = Path(staging)
        for name in COPIED:
            source, target = root / name, stage / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, ignore=CACHES)
            else:
                shutil.copy2(source, target)
        for name, text in student_files(root).items():
            (stage / name).write_text(text, encoding="utf-8")
        found = leaks(stage, secret_lines(root))
        if found:
            raise RuntimeError(f"the edition would show {len(found)} answer or hidden-test line(s): {found[:5]}")
        files = sorted(str(p.relative_to(stage)) for p in stage.rglob("*") if p.is_file())
        (stage / MARKER).write_text(
            json.dumps({"files": {f: digest(stage / f) for f in files}}, indent=1) + "\n", encoding="utf-8"
        )
        old = dest / MARKER
        if old.is_file():  # an unchanged edition (checked above): its files give way to the new ones
            for name in json.loads(old.read_text(encoding="utf-8"))["files"]:
                (dest / name).unlink(missing_ok=True)
            old.unlink()
        for path in sorted(stage.rglob("*"), key=lambda p: len(p.parts)):
            target = dest / path.relative_to(stage)
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                shutil.copy2(path, target)
    return files


def main(argv: list[str] | None = None) -> int:
    """``python -m grader.edition DEST``: build the edition, print what it holds, return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m grader.edition", description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="the folder to write (empty, missing, or an earlier edition)")
    args = parser.parse_args(argv)
    try:
        files = build(args.dest)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the student edition into {args.dest.resolve()}: {len(files)} files, no answers, no hidden tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
