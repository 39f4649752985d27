"""The review flags (``grader.review``): suspicious constructs, imports of the course library, near copies.

Most tests read a small stand-in library written to a temporary folder (``library_index(root)``
names its modules ``course_utils.<file>``), so that they do not depend on what the real library
holds today; the last ones run the rules against the real ``course_utils``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.plan import Part
from grader.review import (
    COPY_THRESHOLD,
    MIN_TOKENS,
    library_imports,
    library_index,
    near_copies,
    normalized_tokens,
    review_flags,
    similarity,
    suspicious_constructs,
)

ATTENTION = '''"""A stand-in for course_utils.attention."""
import torch


def _check_mask(mask, scores):
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError("mask must be a bool tensor")


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis of ``scores``; masked keys get weight 0."""
    _check_mask(mask, scores)
    if mask is None:
        return scores.softmax(dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))  # masked keys: -inf
    weights = scores.softmax(dim=-1)
    return weights.nan_to_num(0.0)  # rows with every key masked: 0/0 -> 0


class Scorer(torch.nn.Module):
    """Additive scores."""

    def __init__(self, query_size: int, key_size: int, hidden_size: int):
        super().__init__()
        self.W_q = torch.nn.Linear(query_size, hidden_size, bias=False)
        self.W_k = torch.nn.Linear(key_size, hidden_size, bias=False)
        self.w_v = torch.nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key):
        features = torch.tanh(self.W_q(query)[:, :, None, :] + self.W_k(key)[:, None, :, :])
        return self.w_v(features).squeeze(-1)
'''
CHECKS = '''def check_equal(actual, expected, name):
    """Exact equality, with a message naming the value."""
    if type(actual) is not type(expected) or actual != expected:
        raise AssertionError(f"{name}: got {actual!r}, expected {expected!r} (type {type(expected).__name__})")
'''
# masked_softmax with every name changed, its comments and docstring gone, and another layout
RENAMED = """def my_softmax(s, m=None):
    _check_mask(m, s)
    if m is None:
        return s.softmax(dim = -1)
    s = s.masked_fill(~m, float('-inf'))
    w = s.softmax(dim = -1)
    return w.nan_to_num(0.0)
"""
HONEST = '''def masked_softmax(scores, mask=None):
    """Softmax over the last axis of scores; masked keys get weight 0."""
    if mask is None:
        mask = torch.ones_like(scores, dtype=torch.bool)
    shifted = scores - scores.max(dim=-1, keepdim=True).values.clamp(min=-1e30)
    e = torch.exp(shifted) * mask
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, e / total.clamp(min=1e-30), torch.zeros_like(e))
'''


@pytest.fixture
def index(tmp_path: Path):
    (tmp_path / "__init__.py").write_text('__all__ = ["get_device", "seed_everything"]\n')
    (tmp_path / "attention.py").write_text(ATTENTION)
    (tmp_path / "testing").mkdir()
    (tmp_path / "testing" / "__init__.py").write_text("")
    (tmp_path / "testing" / "checks.py").write_text(CHECKS)
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "__init__.py").write_text("")
    return library_index(str(tmp_path))


def _answer(source: str, grade_id: str = "softmax_answer") -> list[Part]:
    return [
        Part(0, "setup", "setup", "import course_utils.attention as A"),
        Part(1, "answer", grade_id, source),
        Part(2, "test", "softmax_test", "from course_utils.attention import masked_softmax"),
    ]


def _source_of(path: Path, name: str) -> str:
    text = path.read_text(encoding="utf-8")
    node = next(n for n in ast.parse(text).body if getattr(n, "name", None) == name)
    return "".join(text.splitlines(keepends=True)[node.lineno - 1 : node.end_lineno])


@pytest.mark.parametrize(
    "source",
    [
        "import course_utils.attention as A\n",
        "from course_utils import attention\n",
        "from course_utils.attention import masked_softmax\n",
        "from course_utils.attention import (\n    masked_softmax,\n)\n",
        "import course_utils\nweights = course_utils.attention.masked_softmax(x)\n",
        "def f(x):\n    import course_utils.attention\n    return x\n",
        "%time x = 1\nfrom course_utils.attention import masked_softmax\n",  # a magic line: parsed without it
        "def broken(:\n    from course_utils.attention import masked_softmax\n",  # does not parse: regular expression
        "def broken(:\n    return course_utils.attention.masked_softmax(x)\n",
    ],
)
def test_imports_of_a_library_module_are_flagged_by_name(index, source):
    assert library_imports(source, index) == ["course_utils.attention"]
    flags = review_flags(_answer(source), index)
    assert "imports course_utils.attention@softmax_answer" in flags
    assert set(flags) <= {"imports course_utils.attention@softmax_answer", "ipython@softmax_answer"}, flags


@pytest.mark.parametrize(
    "source",
    [
        "from course_utils.testing.checks import check_equal\n",
        "import course_utils.testing.checks as C\n"
        "from course_utils import testing, repro, device, progress, plotting\n",
        "from course_utils import get_device, seed_everything\n",
        "import course_utils.testing.checks\ncourse_utils.testing.checks.check_equal(1, 1, 'x')\n",
        "from course_utils.testing.guard import forbid\nfrom course_utils.plotting import plot_history\n",
        "import torch\n# from course_utils.attention import masked_softmax (a comment)\n",
        "x = 'course_utils.attention'\n",
    ],
)
def test_infrastructure_comments_and_strings_are_not_flagged(index, source):
    assert library_imports(source, index) == []


def test_unknown_names_of_the_package_are_flagged_as_the_package(index):
    assert library_imports("from course_utils import secret_helper\n", index) == ["course_utils"]
    assert library_imports("from course_utils.metrics import thing\n", index) == ["course_utils.metrics"]


def test_tokens_ignore_names_comments_docstrings_annotations_and_layout(index):
    original = ast.parse(ATTENTION).body[3]
    renamed = ast.parse(RENAMED).body[0]
    assert normalized_tokens(original) == normalized_tokens(renamed)
    assert len(normalized_tokens(original)) >= MIN_TOKENS
    tokens = normalized_tokens(original)
    assert {"softmax", "masked_fill", "nan_to_num", "dim=", "'-inf'", "_check_mask", "float"} <= set(tokens)
    assert "scores" not in tokens and "weights" not in tokens and "mask" not in tokens  # local names: placeholders


def test_verbatim_and_disguised_copies_are_flagged_with_what_they_copy(index, tmp_path):
    verbatim = _source_of(tmp_path / "attention.py", "masked_softmax")
    assert near_copies(verbatim, index) == [("course_utils.attention.masked_softmax", 1.0)]
    assert near_copies(RENAMED, index) == [("course_utils.attention.masked_softmax", 1.0)]
    assert review_flags(_answer(RENAMED), index) == [
        "copy of course_utils.attention.masked_softmax (1.00)@softmax_answer"
    ]
    edited = RENAMED.replace("    _check_mask(m, s)\n", "    assert s.dim() >= 1\n")
    found = near_copies(edited, index)
    assert found and found[0][0] == "course_utils.attention.masked_softmax" and COPY_THRESHOLD <= found[0][1] < 1
    whole_class = _source_of(tmp_path / "attention.py", "Scorer").replace("Scorer", "MyScorer")
    assert near_copies(whole_class, index) == [("course_utils.attention.Scorer", 1.0)]


def test_an_honest_answer_short_code_and_infrastructure_are_not_copies(index, tmp_path):
    assert near_copies(HONEST, index) == []
    assert (
        similarity(normalized_tokens(ast.parse(HONEST).body[0]), normalized_tokens(ast.parse(ATTENTION).body[3]))
        < COPY_THRESHOLD
    )
    assert near_copies("def f(x):\n    return x.softmax(dim=-1)\n", index) == []  # under MIN_TOKENS
    assert near_copies(CHECKS, index) == []  # infrastructure is not indexed
    assert near_copies("def broken(:\n" + _source_of(tmp_path / "attention.py", "masked_softmax"), index) == []


def test_only_answer_cells_are_reviewed(index):
    parts = [
        Part(0, "setup", "setup", RENAMED + "import ctypes\nfrom course_utils.attention import masked_softmax"),
        Part(1, "test", "t", RENAMED),
        Part(2, "written", "w", "import ctypes"),
    ]
    assert review_flags(parts, index) == []


def test_suspicious_constructs_name_the_grader():
    assert "grader" in suspicious_constructs("import grader.review\n")
    assert "grader" in suspicious_constructs("print(open('/grader/runner.py').read())\n")
    assert suspicious_constructs("def add(a, b):\n    return a + b  # the grader checks this\n") == []
    stages = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "grader").glob("*.py"))
    for stage in set(stages) - {"__init__", "__main__"}:  # report included: a new stage is named too
        assert "grader" in suspicious_constructs(f"stage = sys.modules['x'].grader.{stage}\n"), stage


def test_the_real_library_is_indexed_once_and_its_copies_are_flagged():
    import course_utils

    index = library_index()
    assert library_index() is index, "the index must be built once per process"
    assert "course_utils.attention" in index.modules and index.exported >= {"get_device", "seed_everything"}
    assert not any(
        d.name.startswith(("course_utils.testing.checks.", "course_utils.testing.guard.")) for d in index.definitions
    )
    path = Path(course_utils.__file__).parent / "attention.py"
    functions = [n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)]
    copied = [name for name in functions if any(d.name == f"course_utils.attention.{name}" for d in index.definitions)]
    assert copied, "course_utils.attention has no function long enough to be compared"
    for name in copied:
        found = near_copies(_source_of(path, name), index)
        assert found and found[0][1] == 1.0, f"a verbatim copy of course_utils.attention.{name} is not flagged: {found}"


def test_global_nonlocal_dict_unpacking_and_keyword_only_arguments_do_not_crash(index):
    source = (
        "def counter(scores, *, mask, dim=-1):\n"
        "    options = {**OPTIONS, 'dim': dim}\n"
        "    global CALLS\n"
        "    CALLS = 1\n"
        "    def inner():\n"
        "        nonlocal mask\n"
        "        mask = scores.softmax(dim=-1)\n"
        "    inner()\n"
        "    return mask\n"
    )
    tokens = normalized_tokens(ast.parse(source).body[0])
    assert "Global" in tokens and "Nonlocal" in tokens and "softmax" in tokens and "Dict" in tokens
    assert "CALLS" not in tokens  # assigned, hence a local placeholder like every bound name
    assert near_copies(source, index) == []


def test_a_rule_that_fails_flags_the_cell_instead_of_stopping_the_grading(index, monkeypatch):
    import grader.review as review

    def broken(source, index, threshold=COPY_THRESHOLD):
        raise AttributeError("a bug of the copy check")

    monkeypatch.setattr(review, "near_copies", broken)
    parts = [*_answer(HONEST), Part(3, "answer", "other_answer", "import ctypes\n")]
    assert review.review_flags(parts, index) == [
        "unreviewed (AttributeError)@softmax_answer",
        "ctypes@other_answer",
        "unreviewed (AttributeError)@other_answer",
    ]


@pytest.mark.parametrize(
    "source",
    [
        "exec(code)\n",
        "x = eval ('1 + 1')\n",
        "f = compile(src, 'f', 'exec')\n",
        "import builtins\nbuiltins.exec(code)\n",
        "getattr(__builtins__, 'x').eval(src)\n",
        "fn = torch.compile(model)\n",
        "__import__('os')\n",
    ],
)
def test_dynamic_code_is_flagged_however_the_builtin_is_reached(source):
    assert "dynamic-code" in suspicious_constructs(source)


@pytest.mark.parametrize(
    "source",
    [
        'CHUNK_RE = re.compile(r" ?\\w+")\n',
        "model.eval()\n",
        "net.eval( )\n",
        "def evaluate(x):\n    return x\n",
        "executor = None\n",
    ],
)
def test_regexes_and_eval_mode_are_not_dynamic_code(source):
    assert "dynamic-code" not in suspicious_constructs(source)


@pytest.mark.parametrize(
    "source, flag",
    [
        ("with torch._C.DisableTorchFunction():\n    y = f(x)\n", "torch-internals"),
        ("from torch import _C\nwith _C.DisableTorchFunctionSubclass():\n    y = f(x)\n", "torch-internals"),
        ("off = getattr(torch, '_C').DisableTorchFunction\n", "torch-internals"),
        ("g = (loss(w + 1e-30j).imag / 1e-30)\n", "complex-numbers"),
        ("w = w.to(torch.complex128)\n", "complex-numbers"),
        ("z = complex(0.0, h)\n", "complex-numbers"),
        ("import course_utils.testing.work as w\nw.watch_work\n", "guard"),
        ("from course_utils.testing import guard\nguard._LAYER.callbacks.clear()\n", "guard"),
        ("from course_utils import testing\ntesting.guard._LAYER.callbacks.clear()\n", "guard"),
        ("try:\n    y = f(x)\nexcept ForbiddenCall:\n    pass\n", "guard"),
    ],
)
def test_switching_torch_layers_off_the_guards_state_and_complex_arithmetic_are_flagged(source, flag):
    assert flag in suspicious_constructs(source)


def test_complex_in_a_comment_is_not_flagged():
    source = "angle = pos / 10000 ** (2 * j / d)  # P[i, 2j] = sin(...); eigenvalues are complex in general\n"
    assert "complex-numbers" not in suspicious_constructs(source)
