"""The README and its guides in docs/ say only what the repository does (issue 28).

Checked statically, without a network and without importing torch:

- every relative link in README.md and docs/*.md reaches a file, and its ``#anchor`` a heading of that
  file (GitHub's slugs);
- every docs/*.md is linked from the README, which is the course's landing page;
- every ``make TARGET`` the docs name is a target of the Makefile, and every ``VAR=`` passed to it a
  variable the Makefile reads;
- every ``python -m MODULE`` they name is a module of this repository or of the environment, and every
  ``--option`` given to one of the course's own modules appears in its source;
- every repository path they name (``tests/...``, ``grader/...``, ...) exists, and every dotted name of
  the course's packages (``course_utils.gpt.GPT``, ``grader.review``) is a module, or a name that its
  module defines or imports.

``make test`` runs every target the docs describe as part of the suite; the rest (``make lab``,
``make hub``, ``make autograde``, the benchmarks) are run by tests of their own or by hand, and this file
keeps their spelling true.
"""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]

# Paths that exist only once something ran (a grading run, the hub, `npm ci`): named, never committed.
GENERATED = ("classroom/node_modules", "classroom/state", "autograded/", "submitted/", "feedback/")
# Top-level folders whose paths the docs name; a path with a placeholder (NN, *, <name>) is a pattern.
REPO_DIRS = ("tests", "grader", "course_utils", "benchmarks", "classroom", "lectures", "solutions", "exercises")
PLACEHOLDER = re.compile(r"NN|\*|<|\.\.\.|…")


def _split(text):
    """Split markdown ``text`` into (prose, code): prose without fenced blocks or inline code, and a list
    of the code (each fenced block's body, each inline span with its line breaks made spaces), so that a
    command is found only where it is written as code."""
    prose, code, fence, paragraph = [], [], None, []

    def end_paragraph():
        joined = "\n".join(paragraph)
        code.extend(re.sub(r"\s*\n\s*", " ", span) for span in re.findall(r"`([^`]+)`", joined))
        prose.append(re.sub(r"`[^`]*`", "``", joined))
        paragraph.clear()

    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if fence is None:
                end_paragraph()
                fence = []
            else:
                code.append("\n".join(fence))
                fence = None
            continue
        if fence is not None:
            fence.append(line)
        elif line.strip():
            paragraph.append(line)
        else:
            end_paragraph()
    end_paragraph()
    return "\n\n".join(prose), code


def github_slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped (``_`` and ``-`` kept), each
    space a hyphen. Inline code marks are dropped with the rest of the punctuation."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path):
    """Every heading anchor of the markdown file ``path``, repeats numbered as GitHub numbers them."""
    seen, out = {}, set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = github_slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path):
    """(target, anchor) of every relative markdown link in ``path``; anchor is '' where none is given."""
    prose, _ = _split(path.read_text(encoding="utf-8"))
    found = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        found.append((file, anchor))
    return found


def code_of_docs():
    """(doc, code) for every fenced block and inline code span of every doc."""
    return [(doc, code) for doc in DOCS for code in _split(doc.read_text(encoding="utf-8"))[1]]


def _name(doc):
    return str(doc.relative_to(ROOT))


def test_docs_exist_and_readme_is_short():
    assert README.exists() and len(DOCS) > 1, "README.md and the guides in docs/ must exist"
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= 150, f"README.md has {lines} lines: it is the landing page, the manual belongs in docs/"


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_relative_links_resolve(doc):
    bad = []
    for file, anchor in links(doc):
        target = (doc.parent / file).resolve() if file else doc
        if not target.exists():
            bad.append(f"{file}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            bad.append(f"{file}#{anchor}: no such heading in {target.relative_to(ROOT)}")
    assert not bad, f"{_name(doc)} links to what is not there: {bad}"


def test_every_guide_is_linked_from_the_readme():
    linked = {(ROOT / file).resolve() for file, _ in links(README) if file}
    unlinked = [_name(doc) for doc in DOCS[1:] if doc.resolve() not in linked]
    assert not unlinked, f"guides the README does not link to: {unlinked}"


def makefile_targets_and_variables():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set()
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z][\w.-]*(?:\s+[A-Za-z][\w.-]*)*)\s*:(?!=)", line)
        if m:
            targets.update(m.group(1).split())
    variables = set(re.findall(r"\$\(([A-Z_][A-Z0-9_]*)\)", text))
    variables |= set(re.findall(r"^([A-Z_][A-Z0-9_]*)\s*[?:]?=", text, re.M))
    return targets, variables


def test_make_targets_and_variables_exist():
    targets, variables = makefile_targets_and_variables()
    bad = []
    for doc, code in code_of_docs():
        for m in re.finditer(r"(?<![\w-])make ((?:[a-z][\w-]*)(?: +[A-Z_][A-Z0-9_]*=\S*)*)", code):
            target, *assignments = m.group(1).split()
            if target not in targets:
                bad.append(f"{_name(doc)}: make {target}: no such target")
            for assignment in assignments:
                var = assignment.split("=", 1)[0]
                if var not in variables:
                    bad.append(f"{_name(doc)}: make {target} {var}=: the Makefile reads no {var}")
    assert not bad, bad


def _module_source(dotted):
    """The source file of the course's module ``dotted`` (a package's __init__.py), or None."""
    path = ROOT.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_python_modules_and_their_options_exist():
    sys.path.insert(0, str(ROOT))
    try:
        bad = []
        for doc, code in code_of_docs():
            for line in code.splitlines():
                m = re.search(r"python3?\s+-m\s+([A-Za-z_][\w.]*)(.*)", line)
                if not m:
                    continue
                module, rest = m.group(1), m.group(2)
                own = _module_source(module)
                if own is None and module.split(".")[0] in REPO_DIRS:
                    bad.append(f"{_name(doc)}: python -m {module}: no such module in the repository")
                    continue
                if own is None:
                    if importlib.util.find_spec(module) is None:
                        bad.append(f"{_name(doc)}: python -m {module}: not installed")
                    continue
                package = ROOT.joinpath(*module.split("."))
                sources = [own] + (sorted(package.glob("*.py")) if package.is_dir() else [])
                text = "".join(p.read_text(encoding="utf-8") for p in sources)
                for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", rest):
                    if option != "--help" and f'"{option}"' not in text and f"'{option}'" not in text:
                        bad.append(f"{_name(doc)}: python -m {module} {option}: no such option in its source")
        assert not bad, bad
    finally:
        sys.path.remove(str(ROOT))


def test_repository_paths_exist():
    path = re.compile(r"(?<![\w./-])((?:" + "|".join(REPO_DIRS) + r")/[\w./-]*)")
    bad = []
    for doc, code in code_of_docs():
        for token in path.findall(code):
            token = token.rstrip(".")
            if PLACEHOLDER.search(token) or token.startswith(GENERATED):
                continue
            if not (ROOT / token).exists():
                bad.append(f"{_name(doc)}: {token}")
    assert not bad, f"paths the docs name that do not exist: {bad}"


def test_dotted_names_of_the_course_exist():
    bad = []
    for doc, code in code_of_docs():
        for dotted in re.findall(r"(?<![\w./])((?:course_utils|grader)(?:\.[A-Za-z_]\w*)+)", code):
            parts = dotted.split(".")
            module = parts[0]
            i = 1
            while i < len(parts) and _module_source(f"{module}.{parts[i]}") is not None:
                module = f"{module}.{parts[i]}"
                i += 1
            if i == len(parts):
                continue
            source = _module_source(module).read_text(encoding="utf-8")
            name = parts[i]
            if not re.search(rf"(?:def|class)\s+{name}\b|^\s*{name}\s*[:=]|import[^\n]*\b{name}\b", source, re.M):
                bad.append(f"{_name(doc)}: {dotted}: {module} neither defines nor imports {name}")
    assert not bad, bad


# Options of programs that are not the course's, named by the program they belong to.
OTHER_PROGRAMS_OPTIONS = {
    "--dist": "pytest-xdist",
    "--nbval": "nbval",
    "--nbval-sanitize-with": "nbval",
    "--host": "dask scheduler",
    "--port": "dask scheduler",
    "--nworkers": "dask worker",
    "--nthreads": "dask worker",
    "--prefix": "npm ci",
    "--help": "every command",
}


def test_every_option_named_is_an_option_of_the_course_or_of_a_named_program():
    """An option written as code anywhere in the docs (``--cell-timeout``, ``--isa avx2``) is spelled as
    in the source of the grader or a benchmark, or belongs to a program listed above."""
    sources = "".join(p.read_text(encoding="utf-8") for d in ("grader", "benchmarks") for p in (ROOT / d).glob("*.py"))
    bad = set()
    for doc, code in code_of_docs():
        for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", code):
            if option in OTHER_PROGRAMS_OPTIONS:
                continue
            if f'"{option}"' not in sources and f"'{option}'" not in sources:
                bad.add(f"{_name(doc)}: {option}")
    assert not bad, f"options that no course command defines: {sorted(bad)}"
