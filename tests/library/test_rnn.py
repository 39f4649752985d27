"""Tests of course_utils.rnn against independent references (nn.RNN, autograd, torch's clipping)."""

import math

import pytest
import torch

from course_utils.rnn import (
    CharRNNConfig,
    CharRNNLM,
    bptt_grads,
    clip_grad_norm,
    linear_rnn_forward,
    linear_rnn_loss,
    rnn_forward,
    spectral_radius,
    stream_batches,
    stream_nll,
)

# ---------------------------------------------------------------------- rnn_forward


@pytest.mark.parametrize("seed", range(4))
def test_rnn_forward_equals_nn_rnn(seed):
    g = torch.Generator().manual_seed(seed)
    B, T, D, H = (int(v) for v in torch.randint(1, 7, (4,), generator=g))
    bias = seed % 2 == 0
    rnn = torch.nn.RNN(D, H, batch_first=True, bias=bias).double()
    x = torch.randn(B, T, D, generator=g, dtype=torch.float64)
    h0 = None if seed == 1 else torch.randn(B, H, generator=g, dtype=torch.float64)
    ref_out, ref_h = rnn(x, None if h0 is None else h0[None])
    out, h = rnn_forward(
        x,
        h0,
        rnn.weight_ih_l0,
        rnn.weight_hh_l0,
        rnn.bias_ih_l0 if bias else None,
        rnn.bias_hh_l0 if bias else None,
    )
    assert out.shape == (B, T, H) and h.shape == (B, H)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(h, ref_h[0])
    torch.testing.assert_close(out[:, -1], h)


def test_rnn_forward_backpropagates_like_nn_rnn():
    torch.manual_seed(0)
    rnn = torch.nn.RNN(3, 4, batch_first=True).double()
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    rnn(x)[0].sum().backward()
    ref = rnn.weight_hh_l0.grad.clone()
    rnn.zero_grad()
    rnn_forward(x, None, rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0)[0].sum().backward()
    torch.testing.assert_close(rnn.weight_hh_l0.grad, ref)


def test_rnn_forward_rejects_bad_shapes():
    W_ih, W_hh = torch.zeros(4, 3), torch.zeros(4, 4)
    with pytest.raises(ValueError, match="x must be 3-D"):
        rnn_forward(torch.zeros(5, 3), None, W_ih, W_hh)
    with pytest.raises(ValueError, match="W_hh"):
        rnn_forward(torch.zeros(2, 5, 3), None, W_ih, torch.zeros(4, 3))
    with pytest.raises(ValueError, match="h0"):
        rnn_forward(torch.zeros(2, 5, 3), torch.zeros(1, 2, 4), W_ih, W_hh)
    with pytest.raises(ValueError, match="W_ih"):
        rnn_forward(torch.zeros(2, 5, 2), None, W_ih, W_hh)


# ---------------------------------------------------------------------- linear RNN and BPTT


def _autograd_reference(x, y, W_hx, W_hh, W_qh, h0=None):
    weights = [w.clone().requires_grad_(True) for w in (W_hx, W_hh, W_qh)]
    B, T, _ = x.shape
    h = torch.zeros(B, W_hx.shape[0], dtype=x.dtype) if h0 is None else h0
    states = []
    for t in range(T):  # an independent forward pass, written out again
        h = x[:, t] @ weights[0].T + h @ weights[1].T
        h.retain_grad()
        states.append(h)
    o = torch.stack(states, 1) @ weights[2].T
    loss = ((o - y) ** 2).sum() / (2 * B * T)
    loss.backward()
    return weights[2].grad, weights[0].grad, weights[1].grad, torch.stack([s.grad for s in states], 1)


@pytest.mark.parametrize("seed", range(6))
def test_bptt_grads_equal_autograd(seed):
    g = torch.Generator().manual_seed(100 + seed)
    B, T, D, H, Q = (int(v) for v in torch.randint(1, 8, (5,), generator=g))
    x = torch.randn(B, T, D, generator=g, dtype=torch.float64)
    y = torch.randn(B, T, Q, generator=g, dtype=torch.float64)
    W_hx = torch.randn(H, D, generator=g, dtype=torch.float64) / math.sqrt(D)
    W_hh = torch.randn(H, H, generator=g, dtype=torch.float64) / math.sqrt(H)
    W_qh = torch.randn(Q, H, generator=g, dtype=torch.float64)
    h0 = torch.randn(B, H, generator=g, dtype=torch.float64) if seed % 2 else None
    got = bptt_grads(x, y, W_hx, W_hh, W_qh, h0)
    ref = _autograd_reference(x, y, W_hx, W_hh, W_qh, h0)
    for name, a, b in zip(("W_qh", "W_hx", "W_hh", "h"), got, ref):
        torch.testing.assert_close(a, b, msg=lambda m, name=name: f"{name}: {m}")
    assert got.h.shape == (B, T, H)


def test_bptt_closed_form_with_powers():
    """dL/dh_t = sum_{i=t}^{T} (W_hh^T)^{i-t} W_qh^T dL/do_i (single sequence)."""
    torch.manual_seed(3)
    T, D, H, Q = 6, 2, 3, 2
    x, y = torch.randn(1, T, D, dtype=torch.float64), torch.randn(1, T, Q, dtype=torch.float64)
    W_hx, W_hh, W_qh = (torch.randn(*s, dtype=torch.float64) for s in ((H, D), (H, H), (Q, H)))
    _, o = linear_rnn_forward(x, W_hx, W_hh, W_qh)
    d_o = (o - y)[0] / T
    d_h = bptt_grads(x, y, W_hx, W_hh, W_qh).h[0]
    for t in range(T):
        closed = sum(torch.linalg.matrix_power(W_hh.T, i - t) @ W_qh.T @ d_o[i] for i in range(t, T))
        torch.testing.assert_close(d_h[t], closed)


def test_linear_rnn_loss_value_and_errors():
    o, y = torch.ones(2, 3, 4), torch.zeros(2, 3, 4)
    assert linear_rnn_loss(o, y).item() == pytest.approx(2.0)  # 1/2 * 4 per step
    with pytest.raises(ValueError, match="y must have shape"):
        linear_rnn_loss(o, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="W_qh"):
        linear_rnn_forward(torch.zeros(1, 2, 3), torch.zeros(4, 3), torch.zeros(4, 4), torch.zeros(2, 5))


# ---------------------------------------------------------------------- spectral radius


def test_spectral_radius_matches_numpy_and_is_not_the_norm():
    import numpy as np

    torch.manual_seed(1)
    for _ in range(5):
        W = torch.randn(6, 6)
        assert spectral_radius(W) == pytest.approx(float(np.abs(np.linalg.eigvals(W.double().numpy())).max()))
    rotation = torch.tensor([[0.0, -2.0], [2.0, 0.0]])  # eigenvalues +-2i
    assert spectral_radius(rotation) == pytest.approx(2.0)
    nilpotent = torch.tensor([[0.0, 5.0], [0.0, 0.0]])  # norm 5, radius 0
    assert spectral_radius(nilpotent) == pytest.approx(0.0)
    assert spectral_radius(-3 * torch.eye(3)) == pytest.approx(3.0)
    assert type(spectral_radius(torch.eye(2))) is float
    with pytest.raises(ValueError, match="square"):
        spectral_radius(torch.zeros(2, 3))


# ---------------------------------------------------------------------- clipping


@pytest.mark.parametrize("max_norm", [0.01, 1.0, 1e6])
def test_clip_grad_norm_equals_torch(max_norm):
    torch.manual_seed(2)
    params = [
        torch.randn(3, 4, requires_grad=True),
        torch.randn(5, requires_grad=True),
        torch.randn(2, requires_grad=True),
    ]
    grads = [torch.randn_like(p) * 3 for p in params]
    grads[2] = None  # a parameter without gradient is skipped
    mine = [p.detach().clone().requires_grad_(True) for p in params]
    for p, q, g in zip(params, mine, grads):
        p.grad = None if g is None else g.clone()
        q.grad = None if g is None else g.clone()
    ref_total = torch.nn.utils.clip_grad_norm_(params, max_norm)
    total = clip_grad_norm(mine, max_norm)
    torch.testing.assert_close(total, ref_total)
    for p, q in zip(params, mine):
        if p.grad is None:
            assert q.grad is None
        else:
            torch.testing.assert_close(q.grad, p.grad)
    new_norm = torch.linalg.vector_norm(torch.cat([q.grad.flatten() for q in mine if q.grad is not None]))
    assert new_norm <= max_norm * (1 + 1e-5) or max_norm > ref_total


def test_clip_grad_norm_errors():
    p = torch.zeros(2, requires_grad=True)
    p.grad = torch.ones(2)
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm([p], 0.0)
    assert clip_grad_norm(p, 10.0).item() == pytest.approx(math.sqrt(2))  # a single tensor works


# ---------------------------------------------------------------------- stream batches


@pytest.mark.parametrize("N,B,T", [(101, 4, 5), (1000, 7, 13), (64, 1, 63), (50, 3, 4)])
def test_stream_batches_continue_rows(N, B, T):
    ids = torch.arange(N)
    batches = stream_batches(ids, B, T)
    n = (N - 1) // B
    assert len(batches) == n // T
    for x, y in batches:
        assert x.shape == (B, T) and y.shape == (B, T) and x.dtype == torch.long
        assert torch.equal(y, x + 1)  # targets are the next tokens
    for (_, y0), (x1, _) in zip(batches, batches[1:]):
        assert torch.equal(x1[:, 0], y0[:, -1])  # row b continues row b
    rows = torch.cat([x for x, _ in batches], dim=1)
    for b in range(B):
        assert torch.equal(rows[b], torch.arange(b * n, b * n + rows.shape[1]))  # contiguous segments


def test_stream_batches_errors():
    with pytest.raises(ValueError, match="too short"):
        stream_batches(torch.arange(10), 3, 4)
    with pytest.raises(ValueError, match="integer"):
        stream_batches(torch.zeros(100), 2, 3)
    with pytest.raises(ValueError, match="1-D"):
        stream_batches(torch.zeros(2, 50, dtype=torch.long), 2, 3)
    with pytest.raises(ValueError, match="seq_len"):
        stream_batches(torch.arange(100), 2, 0)


# ---------------------------------------------------------------------- CharRNNLM


def test_char_rnn_lm_shapes_state_and_sampling():
    torch.manual_seed(0)
    model = CharRNNLM(CharRNNConfig(vocab_size=11, d_model=8, hidden_size=16, num_layers=2))
    x = torch.randint(11, (3, 7))
    logits, h = model(x)
    assert logits.shape == (3, 7, 11) and h.shape == (2, 3, 16)
    # carrying the state over two halves equals one pass over the whole sequence
    a, h1 = model(x[:, :4])
    b, _ = model(x[:, 4:], h1)
    torch.testing.assert_close(torch.cat([a, b], 1), logits)
    s1 = model.sample([1, 2], 20, temperature=0.7, generator=torch.Generator().manual_seed(5))
    s2 = model.sample(torch.tensor([1, 2]), 20, temperature=0.7, generator=torch.Generator().manual_seed(5))
    assert s1 == s2 and len(s1) == 20 and all(type(i) is int and 0 <= i < 11 for i in s1)
    with pytest.raises(ValueError, match="temperature"):
        model.sample([1], 3, temperature=0.0)
    with pytest.raises(ValueError, match="int64"):
        model(x.float())


def test_stream_nll_equals_one_long_pass():
    torch.manual_seed(0)
    model = CharRNNLM(CharRNNConfig(vocab_size=5, d_model=4, hidden_size=6))
    ids = torch.randint(5, (1 + 2 * 12,))
    batches = stream_batches(ids, 1, 4)
    logits, _ = model(ids[:-1][None])
    ref = torch.nn.functional.cross_entropy(logits[0], ids[1:]).item()
    assert stream_nll(model, batches) == pytest.approx(ref, rel=1e-5)
    uniform = CharRNNLM(CharRNNConfig(vocab_size=5, d_model=4, hidden_size=6))
    torch.nn.init.zeros_(uniform.head.weight)
    torch.nn.init.zeros_(uniform.head.bias)
    assert stream_nll(uniform, batches) == pytest.approx(math.log(5))  # perplexity |V|
