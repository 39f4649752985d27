"""Review flags: what in a student's answer cells deserves a human look before grades are released.

A flag is a reason to read the submission, never a verdict: it changes no points. Three rules, each
giving flags of the form ``what@grade_id`` (the answer cell), which reach the autograde summary, the
instructor's ``autograde.log`` and the ``review_flags`` column of ``grades.csv``:

- ``SUSPICIOUS``: constructs an honest answer rarely needs (``ctypes``, frames, tracing, patching, ...),
  found by regular expressions;
- ``imports course_utils.attention``: an answer that imports the course library (whose modules hold
  the reference implementations of the exercises), other than its infrastructure modules;
- ``copy of course_utils.attention.masked_softmax (0.97)``: a function or class whose normalised
  tokens are a near copy of one in the library (see ``normalized_tokens`` and ``similarity``).

The library is read from source, never imported, once per grading run (``library_index``).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path

# Constructs an honest answer rarely needs; a hit is a reason to read the submission, not a verdict.
SUSPICIOUS = {
    "ctypes": r"\bctypes\b",
    "gc": r"\bgc\s*\.",
    "inspect": r"\binspect\b",
    "frames": r"_getframe|\bf_back\b|\bf_globals\b|\bf_locals\b|\bf_code\b|\bco_consts\b|\btb_frame\b|_current_frames",
    "code-objects": r"__code__|__defaults__|__kwdefaults__|__closure__|__globals__|CodeType",
    "builtins": r"__builtins__|\bbuiltins\b",
    "sys.modules": r"sys\s*\.\s*modules",
    "tracing": r"settrace|setprofile|addaudithook",
    "signals-threads": r"\bsignal\b|\bthreading\b|\b_thread\b",
    "processes": r"\bfork\b|subprocess|os\s*\.\s*(system|exec|spawn|kill|popen)|multiprocessing",
    "exit": r"os\s*\.\s*_exit|sys\s*\.\s*exit|\bexit\s*\(|\bquit\s*\(",
    "network": r"\bsocket\b|urllib|requests|http\.client",
    "ipython": r"get_ipython|input_transformers|^\s*[%!]",
    "paths": r"/proc\b|solutions|gradebook|\.\./|/job\b",
    # the built-ins, however reached (``builtins.eval(src)``), but not ``re.compile(...)`` or ``model.eval()``
    "dynamic-code": r"(?<![\w.])(exec|eval|compile)\s*\(|\.(exec|eval)\s*\((?!\s*\))|(?<!\bre)\.compile\s*\("
    r"|__import__|importlib",
    "patching": r"setattr\s*\(|mock\b|\b(torch|np|numpy|math|testing|checks|F|nn|builtins)(\s*\.\s*\w+)+\s*=[^=]",
    "torch-internals": r"FunctionMode|DispatchMode|__torch_function__|__torch_dispatch__"
    r"|torch\s*\.\s*library|torch\s*\.\s*_C\b|\b_C\s*\.|DisableTorch|_disabled_torch|_DisablePython",
    # the tests' own machinery: the call guard's and the work watch's state lives in the student's process
    "guard": r"course_utils\s*\.\s*testing\s*\.\s*(guard|work|layer)\b"
    r"|from\s+course_utils(\s*\.\s*testing)?\s+import[^\n]*\b(guard|work|layer)\b"
    r"|\b_LAYER\b|\b_STATE\b|ForbiddenCall|WrongMethod|function_layer_required|watch_work|check_method",
    # complex arithmetic: the complex-step derivative (Im f(x + ih) / h) in a part that asks for gradients by hand
    "complex-numbers": r"\bcomplex(64|128)\b|\bcomplex\s*\(|\bc(float|double)\b|\.imag\b|\bview_as_complex\b"
    r"|(?<![\w.])\d+(\.\d*)?j\b",
    "grader": r"\b(import|from)\s+grader\b|/grader\b|runner\.py|\bgrader\s*\.\s*(runner|sandbox|session|notebook|redact"
    r"|release|plan|review|course|grade|pools|gradebook|feedback|edition|autograde|report|cli)\b",
}
LIBRARY = "course_utils"
# Modules an answer may import: what test cells and notebooks use around the exercises, no reference code.
INFRASTRUCTURE = frozenset(f"{LIBRARY}.{name}" for name in ("testing", "repro", "device", "progress", "plotting"))
# A definition is compared when its normalised form has at least MIN_TOKENS tokens (shorter ones are
# too generic: ``return x @ w.T`` is everybody's answer; a token is a node of the syntax tree, about
# 0.75 of a lexical token). COPY_THRESHOLD is the similarity from which a definition is reported:
# ``python -m benchmarks.copy_flags`` measures it (docs/autograder.md, "Copy flags", has the numbers).
MIN_TOKENS = 25
MIN_METHOD_TOKENS = 60  # an answer's methods count alone only from here: shorter ones are boilerplate
COPY_THRESHOLD = 0.90
MAX_DEFINITIONS = 200  # per answer cell: a bound on the work a (hostile) megabyte of code can cause
_NAMES = "V"  # every local name (argument, variable, inner function) becomes this token


@dataclass(frozen=True)
class Definition:
    """A function, method or class of the library, as compared: its dotted name and normalised tokens."""

    name: str  # e.g. course_utils.attention.masked_softmax, course_utils.gpt.GPT.forward
    kind: str  # "function" (functions and methods) or "class"
    tokens: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict, compare=False, hash=False)  # token -> occurrences


@dataclass(frozen=True)
class LibraryIndex:
    """What the review rules know of the library: its module names and its definitions, normalised."""

    modules: frozenset[str]  # every module and package of the library, e.g. course_utils.attention
    exported: frozenset[str]  # names the package itself exports (``course_utils.get_device``)
    definitions: tuple[Definition, ...]


def _module_name(root: Path, path: Path) -> str:
    parts = [LIBRARY, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def library_index(root: str | None = None) -> LibraryIndex:
    """The library under ``root`` (default: the installed ``course_utils``), parsed once as long as its
    files are unchanged (the cache is keyed by their sizes and modification times)."""
    if root is None:
        import course_utils  # the package's __init__ only: no torch

        root = str(Path(course_utils.__file__).parent)
    files = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(Path(root).rglob("*.py")))
    return _build_index(root, files)


@lru_cache(maxsize=4)
def _build_index(root: str, files: tuple) -> LibraryIndex:
    base = Path(root)
    modules, exported, found = {LIBRARY}, set(), []
    for path in (Path(f[0]) for f in files):
        name = _module_name(base, path)
        modules.add(name)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        if name == LIBRARY:
            exported |= _all_names(tree)
            continue
        if not _flagged(name):
            continue
        for qualname, node in definitions(tree):
            tokens = normalized_tokens(node)
            if len(tokens) >= MIN_TOKENS:
                found.append(Definition(f"{name}.{qualname}", _kind(node), tuple(tokens), dict(Counter(tokens))))
    return LibraryIndex(frozenset(modules), frozenset(exported), tuple(found))


def _all_names(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                return set()
    return set()


def _kind(node: ast.AST) -> str:
    return "class" if isinstance(node, ast.ClassDef) else "function"


def definitions(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """Top-level functions and classes, and the methods of those classes, with their qualified names."""
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.name, node))
            if isinstance(node, ast.ClassDef):
                found += [
                    (f"{node.name}.{item.name}", item)
                    for item in node.body
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                ]
    return found


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_LEFT_OUT = {"ctx", "decorator_list", "returns", "annotation", "type_comment", "type_ignores"}


def normalized_tokens(node: ast.AST) -> list[str]:
    """The tokens of a function or class: its syntax tree in pre-order (node kinds stand for keywords
    and operators), without docstrings or other bare strings (comments are gone already), annotations
    or decorators, with every local name (argument, assigned name, inner function, import) replaced by
    one placeholder; attribute and keyword-argument names, global names (``torch``, ``math``, ``len``),
    method names and literals are kept. Renaming variables or reformatting leaves it unchanged."""
    out: list = []
    bound: set[str] = set()
    methods: set[int] = set()
    todo: list = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, list):
            todo.extend(reversed(item))
            continue
        kind = type(item)
        if item is None:  # a hole in a list field: ``{**d}``'s key, a keyword-only argument's default
            continue
        if kind is str:  # a name listed by ``global`` or ``nonlocal``
            out.append((item,))
            continue
        if kind is ast.Expr and type(item.value) is ast.Constant and type(item.value.value) is str:
            continue
        if kind is ast.Name:
            if type(item.ctx) is not ast.Load:
                bound.add(item.id)
            out.append((item.id,))  # a name: decided once every binding is known
        elif kind is ast.Constant:
            out.append(repr(item.value))
        elif kind is ast.Attribute:
            out += [".", item.attr]
            todo.append(item.value)
        elif kind is ast.arg:
            bound.add(item.arg)
            out.append((item.arg,))
        elif kind is ast.keyword:
            out.append(f"{item.arg}=")
            todo.append(item.value)
        elif kind is ast.alias:
            bound.add(item.asname or item.name.split(".")[0])
            out += [item.name, (item.asname,) if item.asname else "as-is"]
        elif kind is ast.AnnAssign:
            if item.value is not None:
                out.append("Assign")
                todo += [item.value, item.target]
        else:
            out.append(kind.__name__)
            if kind in _FUNCTIONS or kind is ast.ClassDef:
                if id(item) in methods:
                    out.append(item.name)
                else:
                    bound.add(item.name)
                    out.append((item.name,))
                if kind is ast.ClassDef:
                    methods.update(id(m) for m in item.body if type(m) in _FUNCTIONS)
            elif kind is ast.ExceptHandler and item.name:
                bound.add(item.name)
                out.append((item.name,))
            for name in reversed(item._fields):
                value = getattr(item, name, None)
                if name not in _LEFT_OUT and isinstance(value, (ast.AST, list)):
                    todo.append(value)
    return [t if type(t) is str else (_NAMES if t[0] in bound else t[0]) for t in out]


def similarity(a: tuple[str, ...] | list[str], b: tuple[str, ...] | list[str]) -> float:
    """``difflib.SequenceMatcher`` ratio of two token sequences: 2 * matched tokens / total tokens."""
    return SequenceMatcher(None, a, b, autojunk=False).ratio()


@lru_cache(maxsize=16)  # the rules read the same cell in turn: parse it once (the trees are only read)
def parse_cell(source: str) -> ast.Module | None:
    """The cell's syntax tree; IPython magic and shell lines are blanked first. None if it does not parse."""
    for text in (source, re.sub(r"(?m)^(\s*)[%!].*$", r"\1pass", source)):
        try:
            return ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


_FROM = re.compile(rf"^[ \t]*from[ \t]+({LIBRARY}(?:\.\w+)*)[ \t]+import[ \t]+\(?([\w \t,]*)", re.M)
_DOTTED = re.compile(rf"\b{LIBRARY}(?:[ \t]*\.[ \t]*\w+)+")


def library_imports(source: str, index: LibraryIndex) -> list[str]:
    """The library modules (or package names) an answer cell imports, infrastructure left out.

    Catches ``import course_utils.attention as A``, ``from course_utils import attention``, ``from
    course_utils.attention import masked_softmax`` and ``import course_utils`` followed by
    ``course_utils.attention.…``; a regular expression stands in where the cell does not parse.
    """
    if LIBRARY not in source:
        return []
    tree = parse_cell(source)
    found: list[str] = []
    if tree is None:  # a cell that does not parse fails anyway; any mention of a library module counts
        for match in _FROM.finditer(source):
            found += _from_import(match.group(1), [n.split()[0] for n in match.group(2).split(",") if n.split()], index)
        found += [_longest_module(re.sub(r"\s", "", match.group(0)), index) for match in _DOTTED.finditer(source)]
    else:
        package_aliases = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module
                and (node.module == LIBRARY or node.module.startswith(LIBRARY + "."))
            ):
                found += _from_import(node.module, [a.name for a in node.names], index)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == LIBRARY:
                        package_aliases.add(alias.asname or LIBRARY)
                    elif alias.name.startswith(LIBRARY + "."):
                        found.append(alias.name)
                        if not alias.asname:
                            package_aliases.add(LIBRARY)  # `import course_utils.testing.checks` binds the package
        for node in ast.walk(tree):  # course_utils.<name> reached through the package
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in package_aliases
            ):
                found += _from_import(LIBRARY, [node.attr], index)
    return sorted({m for m in found if _flagged(m)})


def _from_import(module: str, names: list[str], index: LibraryIndex) -> list[str]:
    """Modules that ``from module import names`` reaches: ``module`` itself, or for the package, each
    name that is a submodule (a name it exports, such as ``get_device``, is infrastructure)."""
    if module != LIBRARY:
        return [module]
    known = index.modules | INFRASTRUCTURE
    return [f"{LIBRARY}.{n}" if f"{LIBRARY}.{n}" in known else LIBRARY for n in names if n and n not in index.exported]


def _longest_module(dotted: str, index: LibraryIndex) -> str:
    """The longest prefix of ``course_utils.a.b.c`` that is a library module."""
    parts = dotted.split(".")
    return next(
        (".".join(parts[:n]) for n in range(len(parts), 1, -1) if ".".join(parts[:n]) in index.modules), LIBRARY
    )


def _flagged(module: str) -> bool:
    """Whether ``module`` is reference code rather than infrastructure (``course_utils.testing.checks`` is not)."""
    return not any(module == m or module.startswith(m + ".") for m in INFRASTRUCTURE)


def near_copies(source: str, index: LibraryIndex, threshold: float = COPY_THRESHOLD) -> list[tuple[str, float]]:
    """``(library definition, similarity)`` for each function or class of the cell that is a near copy.

    Functions are compared with the library's functions and methods, classes with its classes; the
    methods of a class that is not a copy as a whole are compared on their own when they are long
    (``MIN_METHOD_TOKENS``: ``__init__`` making three ``nn.Linear`` layers looks the same everywhere).
    Cheap upper bounds (lengths, then token counts) skip most pairs before the full comparison.
    """
    tree = parse_cell(source)
    if tree is None:
        return []
    found: dict[str, float] = {}
    copied_classes: set[str] = set()
    for qualname, node in definitions(tree)[:MAX_DEFINITIONS]:
        if qualname.split(".")[0] in copied_classes:
            continue
        tokens = normalized_tokens(node)
        if len(tokens) < (MIN_METHOD_TOKENS if "." in qualname else MIN_TOKENS):
            continue
        best = _best_match(tokens, _kind(node), index, threshold)
        if best:
            found[best[0]] = max(best[1], found.get(best[0], 0.0))
            if isinstance(node, ast.ClassDef):
                copied_classes.add(node.name)
    return sorted(found.items(), key=lambda item: -item[1])


def _best_match(tokens: list[str], kind: str, index: LibraryIndex, threshold: float) -> tuple[str, float] | None:
    """The library definition most similar to ``tokens`` from ``threshold`` on, with its similarity.

    The ratio is at most ``2 * min(n, m) / (n + m)`` (lengths), and at most twice the tokens the two
    have in common (as multisets) over ``n + m``: pairs that cannot reach ``threshold`` are skipped.
    """
    counts = Counter(tokens)
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(tokens)  # the matcher caches what it learns about the answer's tokens
    best: tuple[str, float] | None = None
    n = len(tokens)
    for definition in index.definitions:
        m = len(definition.tokens)
        if definition.kind != kind or 2 * min(n, m) < threshold * (n + m):
            continue
        other = definition.counts
        common = sum(c if c <= other.get(t, 0) else other.get(t, 0) for t, c in counts.items())
        if 2 * common < threshold * (n + m):
            continue
        matcher.set_seq1(definition.tokens)
        ratio = matcher.ratio()
        if ratio >= threshold and (best is None or ratio > best[1]):
            best = (definition.name, ratio)
    return best


# Rules matched on the code without its comments (formulas in comments, "P[i, 2j]", read as code otherwise).
CODE_ONLY = frozenset({"complex-numbers"})


def _without_comments(source: str) -> str:
    import io
    import tokenize

    try:
        tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type != tokenize.COMMENT]
        return tokenize.untokenize(tokens)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source


def suspicious_constructs(source: str) -> list[str]:
    """Names of the ``SUSPICIOUS`` patterns found in one answer cell's source."""
    code = _without_comments(source)
    return [
        name
        for name, pattern in SUSPICIOUS.items()
        if re.search(pattern, code if name in CODE_ONLY else source, re.MULTILINE)
    ]


def review_flags(parts, index: LibraryIndex | None = None) -> list[str]:
    """Flags (``what@grade_id``) for the student's answer cells among ``parts`` (``grader.plan.Part``).

    ``index`` is the library as ``library_index`` reads it (built on the first call when not given).
    A rule that fails on a cell (a bug of the rules, never the student's fault) does not stop the
    grading: the cell gets the flag ``unreviewed (error type)`` for the instructor to look at.
    """
    index = index or library_index()
    found = []
    for part in parts:
        if part.role != "answer":
            continue
        try:
            found += [f"{name}@{part.grade_id}" for name in suspicious_constructs(part.source)]
            found += [f"imports {module}@{part.grade_id}" for module in library_imports(part.source, index)]
            found += [f"copy of {n} ({ratio:.2f})@{part.grade_id}" for n, ratio in near_copies(part.source, index)]
        except Exception as error:  # noqa: BLE001 - any failure of a rule becomes a flag, not a crash
            found.append(f"unreviewed ({type(error).__name__})@{part.grade_id}")
    return found
