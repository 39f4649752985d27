"""The call guard (course_utils.testing.guard.forbid): a forbidden function fails however it is reached."""

import functools
import sys
import threading

import pytest
import sacrebleu
import torch
import torch.nn as nn
import torch.nn.functional as F

import course_utils.attention as attention
from course_utils.testing.checks import forbid as checks_forbid
from course_utils.testing.guard import ForbiddenCall, forbid

# The thread shortcut fails inside its thread, which pytest reports as a warning besides the failure.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")

_masked_softmax = attention.masked_softmax  # a reference taken before any test starts
_cross_entropy = F.cross_entropy


def _wrapped(scores, mask=None):
    return _masked_softmax(scores, mask)


def _honest(scores, mask=None):
    return torch.softmax(scores, dim=-1)


class _SubRNN(nn.RNN):
    pass


class _SubMHA(attention.MultiHeadAttention):
    def forward(self, *args, **kwargs):
        return super().forward(*args, **kwargs)


S = torch.randn(2, 3)
Q = torch.randn(1, 2, 3, 4)
X, HC = torch.randn(1, 2), (torch.randn(1, 3), torch.randn(1, 3))
W_IH, W_HH = torch.randn(12, 2), torch.randn(12, 3)


def _params_with_grads():
    p = nn.Parameter(torch.randn(3))
    p.grad = torch.randn(3)
    return [p]


def _thread_call():
    worker = threading.Thread(target=lambda: _wrapped(S))
    worker.start()
    worker.join()


def _caught():
    try:
        _wrapped(S)
    except AssertionError:
        pass
    return _honest(S)


SHORTCUTS = {
    "alias taken earlier": (lambda: _wrapped(S), [attention.masked_softmax], "masked_softmax"),
    "exception caught by the student": (_caught, [attention.masked_softmax], "masked_softmax"),
    "built-in from C (functools.partial)": (
        lambda: functools.partial(F.scaled_dot_product_attention, Q, Q)(Q),
        [F.scaled_dot_product_attention],
        "scaled_dot_product_attention",
    ),
    "built-in by another path (torch._C._nn)": (
        lambda: torch._C._nn.scaled_dot_product_attention(Q, Q, Q),
        [F.scaled_dot_product_attention],
        "scaled_dot_product_attention",
    ),
    "operator through torch.ops.aten": (
        lambda: torch.ops.aten.scaled_dot_product_attention(Q, Q, Q),
        [F.scaled_dot_product_attention],
        "scaled_dot_product_attention",
    ),
    "torch._VF.lstm_cell": (lambda: torch._VF.lstm_cell(X, HC, W_IH, W_HH), [torch.lstm_cell], "lstm_cell"),
    "lstm_cell through map": (
        lambda: list(map(torch._VF.lstm_cell, [X], [HC], [W_IH], [W_HH])),
        [torch.lstm_cell],
        "lstm_cell",
    ),
    "class by its module path": (lambda: torch.nn.modules.rnn.RNN(2, 3), [nn.RNN], "RNN"),
    "subclass of a forbidden class": (lambda: _SubRNN(2, 3), [nn.RNN], "RNN"),
    "subclass calling super().forward": (
        lambda: _SubMHA(8, 2).forward(torch.randn(1, 3, 8)),
        [attention.MultiHeadAttention],
        "MultiHeadAttention",
    ),
    "bound method": (lambda: nn.LSTMCell(2, 3).forward(X), [nn.LSTMCell.forward], "LSTMCell.forward"),
    "sacrebleu.metrics.bleu.BLEU": (
        lambda: sacrebleu.metrics.bleu.BLEU().corpus_score(["a b"], [["a b"]]),
        [sacrebleu.BLEU],
        "BLEU",
    ),
    "sacrebleu.corpus_bleu uses BLEU": (lambda: sacrebleu.corpus_bleu(["a b"], [["a b"]]), [sacrebleu.BLEU], "BLEU"),
    "decorated function by another path": (
        lambda: torch.nn.utils.clip_grad_norm_(_params_with_grads(), 1.0),
        [torch.nn.utils.get_total_norm],
        "get_total_norm",
    ),
    "F.cross_entropy taken earlier": (
        lambda: _cross_entropy(torch.randn(2, 3), torch.tensor([0, 1])),
        [F.cross_entropy],
        "cross_entropy",
    ),
    "guard switched off with sys.setprofile": (
        lambda: (sys.setprofile(None), _wrapped(S)),
        [attention.masked_softmax],
        "setprofile",
    ),
    "guard switched off from C": (
        lambda: (functools.partial(sys.setprofile, None)(), _wrapped(S)),
        [attention.masked_softmax],
        "switched off",
    ),
    "forbidden call in a thread": (_thread_call, [attention.masked_softmax], "masked_softmax"),
}


@pytest.mark.parametrize("name", list(SHORTCUTS))
def test_shortcut_fails_naming_what_ran(name):
    call, targets, named = SHORTCUTS[name]
    with pytest.raises(ForbiddenCall, match=named):
        with forbid(*targets):
            call()
    assert sys.getprofile() is None and threading.getprofile() is None
    assert torch._C._len_torch_function_stack() == 0


def test_honest_code_passes_and_leaves_no_hook():
    with forbid(attention.masked_softmax, F.scaled_dot_product_attention, nn.RNN):
        out = _honest(S)
        nn.LSTM(2, 3)(torch.randn(1, 4, 2))
    assert torch.equal(out, torch.softmax(S, dim=-1))
    assert sys.getprofile() is None and torch._C._len_torch_function_stack() == 0


def test_nested_blocks_merge_and_unwind():
    with pytest.raises(ForbiddenCall, match="masked_softmax"):
        with forbid(attention.masked_softmax):
            with forbid(F.softmax):
                _wrapped(S)
    with forbid(attention.masked_softmax):
        with forbid(F.softmax):
            _honest(S)
    # A forbidden call caught inside an inner block still fails the outer one.
    with pytest.raises(ForbiddenCall, match="masked_softmax"):
        with forbid(attention.masked_softmax):
            try:
                with forbid(F.gelu):
                    _wrapped(S)
            except ForbiddenCall:
                pass


def test_a_previous_profile_function_is_kept():
    seen = []
    sys.setprofile(lambda frame, event, arg: seen.append(event))
    try:
        with forbid(attention.masked_softmax):
            _honest(S)
        assert sys.getprofile() is not None and seen
    finally:
        sys.setprofile(None)


def test_checks_gives_test_cells_the_guard_with_their_own_functions_refused():
    assert checks_forbid.func is forbid and checks_forbid.keywords == {"own_cell": True}


def _reference_softmax(scores):  # a test's own reference, defined next to the block
    return torch.softmax(scores, dim=-1)


def _student_calling_the_reference(scores):
    return sys.modules[__name__]._reference_softmax(scores)  # as if found through the callers' frames


def test_own_cell_refuses_the_functions_defined_next_to_the_block_but_not_those_running_or_allowed():
    with forbid(attention.masked_softmax):  # off by default: a test module's helpers stay usable
        _student_calling_the_reference(S)
    with pytest.raises(ForbiddenCall, match="the test's own _reference_softmax, a function of the test cell"):
        with checks_forbid(attention.masked_softmax, allow=(_student_calling_the_reference,)):
            _student_calling_the_reference(S)
    with checks_forbid(attention.masked_softmax, allow=(_reference_softmax, _student_calling_the_reference)):
        _student_calling_the_reference(S)

    def running_helper():
        with checks_forbid(attention.masked_softmax, allow=(_student_calling_the_reference,)):
            return _honest(S)  # _honest is defined in this file too, but the block only refuses calls

    with pytest.raises(ForbiddenCall, match="_honest"):
        running_helper()


@pytest.mark.parametrize("bad", [None, 3, "softmax"])
def test_unwatchable_target_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="forbid"):
        with forbid(bad):
            pass


def test_no_targets_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one"):
        with forbid():
            pass


def test_state_planted_between_blocks_is_discarded():
    from course_utils.testing import guard

    guard._STATE.stack.append((guard._Targets(), lambda frame, event, arg: None))
    guard._STATE.called = []
    with pytest.raises(ForbiddenCall, match="masked_softmax"):
        with forbid(attention.masked_softmax):
            _wrapped(S)
    assert guard._STATE.stack == [] and sys.getprofile() is None


@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.unfold(0, 2, 2),
        lambda x: torch.Tensor.unfold(x, 0, 2, 2),
        lambda x: functools.partial(torch.Tensor.unfold, x)(0, 2, 2),
    ],
    ids=["bound", "unbound", "partial"],
)
def test_tensor_method_is_caught_however_called(call):
    x = torch.arange(6.0)
    with pytest.raises(ForbiddenCall, match="unfold"):
        with forbid(torch.Tensor.unfold):
            call(x)
    with forbid(torch.Tensor.unfold):
        x.reshape(3, 2)


def test_torch_ops_operator_is_caught_by_any_overload():
    logp, target = torch.randn(2, 3).log_softmax(-1), torch.tensor([0, 1])
    with pytest.raises(ForbiddenCall, match=r"torch\.ops\.aten\.nll_loss_forward"):
        with forbid(torch.ops.aten.nll_loss_forward):
            torch.ops.aten.nll_loss_forward.default(logp, target, None, 1, -100)
    with forbid(torch.ops.aten.nll_loss_forward):
        torch.softmax(logp, dim=-1)


def test_class_without_python_methods_is_a_clear_error():
    with pytest.raises(ValueError, match="defines no Python methods"):
        with forbid(torch.Size):
            pass


# ------------------------------------------------------------ compiled or traced copies of a forbidden function
# Each runs only primitive operators, so the guard refuses the machinery itself inside any block.
M = torch.tensor([[True, False, True], [True, True, True]])


def _own_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)


def _compiled():
    return torch.compile(_wrapped, backend="eager")  # compiled lazily, at its first call


def _compiled_warm():
    compiled = torch.compile(_wrapped, backend="eager")
    compiled(S, M)  # compiled outside the block: inside only the cached code runs
    return compiled


def _fx_traced():
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(_wrapped)(S, M)  # course_utils.attention.masked_softmax checks its mask: symbolic_trace cannot


def _fx_symbolic():
    return torch.fx.symbolic_trace(_own_softmax)


def _fx_interpreter():
    traced = _fx_traced()
    return lambda scores, mask: torch.fx.Interpreter(traced).run(scores, mask)


def _jit_traced():
    return torch.jit.trace(_wrapped, (S, M))


def _jit_scripted():
    return torch.jit.script(_own_softmax)


def _jit_module():
    class Softmax(nn.Module):
        def forward(self, scores, mask):
            return _own_softmax(scores, mask)

    return torch.jit.script(Softmax())


def _jit_forked():
    scripted = _jit_traced()
    return lambda scores, mask: torch.jit.wait(torch.jit.fork(scripted, scores, mask))


def _jit_original_entry_point():
    scripted = _jit_traced()
    original = type(scripted).__call__.__guard_original__  # the C function behind the guard's wrapper
    return lambda scores, mask: original(scripted, scores, mask)


def _exported():
    class Softmax(nn.Module):
        def forward(self, scores, mask):
            return _wrapped(scores, mask)

    return torch.export.export(Softmax(), (S, M)).module()


HIDING = {
    "torch.compile, compiled inside the block": (_compiled, "torch.compile"),
    "torch.compile, compiled before the block": (_compiled_warm, "torch.compile"),
    "torch.fx make_fx": (_fx_traced, "FX-generated code"),
    "torch.fx.symbolic_trace": (_fx_symbolic, "FX-generated code"),
    "torch.fx.Interpreter": (_fx_interpreter, r"torch\.fx\.Interpreter"),
    "torch.jit.trace": (_jit_traced, "ScriptFunction"),
    "torch.jit.script": (_jit_scripted, "ScriptFunction"),
    "torch.jit.script of a module": (_jit_module, "ScriptMethod"),
    "torch.jit.fork": (_jit_forked, "ScriptFunction"),
    "TorchScript's original C entry point": (_jit_original_entry_point, "ScriptFunction.__call__"),
    "torch.export": (_exported, "FX-generated code"),
}


@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")
@pytest.mark.parametrize("name", list(HIDING))
def test_compiled_or_traced_code_is_refused_inside_a_block_only(name):
    from torch._C._dynamo.eval_frame import get_eval_frame_callback

    build, named = HIDING[name]
    hidden = build()  # built outside the block, as an answer cell's top level would
    with pytest.raises(ForbiddenCall, match=named) as refused:
        with forbid(attention.masked_softmax):
            hidden(S, M)
    assert "hides what runs from this test" in str(refused.value)
    assert sys.getprofile() is None and get_eval_frame_callback() is None
    assert torch._C._len_torch_function_stack() == 0
    assert torch.allclose(hidden(S, M), attention.masked_softmax(S, M))  # and it still runs outside a block


def test_dynamo_switched_on_from_c_is_refused():
    from torch._C._dynamo.eval_frame import get_eval_frame_callback, set_eval_frame

    callback = torch._dynamo.optimize("eager").callback  # what torch.compile installs

    with pytest.raises(ForbiddenCall, match="torch.compile"):
        with forbid(attention.masked_softmax):
            functools.partial(set_eval_frame, callback)()  # no c_call event: the next frame is refused
            _honest(S)
    assert get_eval_frame_callback() is None and sys.getprofile() is None


def test_honest_torch_internals_pass_inside_a_block():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    params = [*model.parameters(), *mha.parameters()]
    optimizer = torch.optim.Adam(params, lr=1e-3)
    x = torch.randn(2, 3, 4)
    with forbid(attention.masked_softmax, attention.MultiHeadAttention, torch.Tensor.unfold):
        for _ in range(2):
            optimizer.zero_grad()
            out, _weights = mha(model(x), x, x)
            loss = F.scaled_dot_product_attention(out, x, x).pow(2).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
        torch.optim.SGD(params, lr=0.1).step()
        torch._dynamo.disable(_honest)(S)  # switches dynamo's frame evaluation off, as torch's own internals do
    assert torch.isfinite(loss)
    assert sys.getprofile() is None and torch._C._len_torch_function_stack() == 0
