"""Mistake bank of unit 04: plausible wrong answers, each of which must lose its cell's points."""

from textwrap import dedent

from notebook_cells import Mistake, bank_tests

UNIT = "04_rnn_bptt"

TANH_LINE = "h = torch.tanh(x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh)  # (B, H)"
LIN_LINE = "h = x[:, t] @ W_hx.T + h @ W_hh.T  # (B, H)"
RECURSION = "d_next = d_next @ W_hh + d_o[:, t] @ W_qh  # (B, H)"

BANK = [
    # ---------------------------------------------------------------- Part A: rnn_forward
    Mistake(
        "rnn: no tanh",
        answer="rnn_answer",
        test="rnn_test",
        patches=((TANH_LINE, "h = x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh  # (B, H)"),),
    ),
    Mistake(
        "rnn: relu instead of tanh",
        answer="rnn_answer",
        test="rnn_test",
        patches=(("h = torch.tanh(", "h = torch.relu("),),
    ),
    Mistake(
        "rnn: forgets b_hh", answer="rnn_answer", test="rnn_test", patches=((" + b_hh)  # (B, H)", ")  # (B, H)"),)
    ),
    Mistake(
        "rnn: recurs on h0 instead of h_{t-1}",
        answer="rnn_answer",
        test="rnn_test",
        patches=(("+ h @ W_hh.T", "+ h0 @ W_hh.T"),),
    ),
    Mistake(
        "rnn: W_hh not transposed", answer="rnn_answer", test="rnn_test", patches=(("+ h @ W_hh.T", "+ h @ W_hh"),)
    ),
    Mistake(
        "rnn: outputs hold the previous state",
        answer="rnn_answer",
        test="rnn_test",
        patches=(
            ("        outputs.append(h)\n", ""),
            ("        h = torch.tanh(", "        outputs.append(h)\n        h = torch.tanh("),
        ),
    ),
    Mistake(
        "rnn: time-major outputs",
        answer="rnn_answer",
        test="rnn_test",
        patches=(("torch.stack(outputs, dim=1)", "torch.stack(outputs, dim=0)"),),
    ),
    Mistake(
        "rnn: returns the first state as h_T",
        answer="rnn_answer",
        test="rnn_test",
        patches=(("dim=1), h  # (B, T, H)", "dim=1), outputs[0]  # (B, T, H)"),),
    ),
    Mistake(
        "rnn: float32 zero state",
        answer="rnn_answer",
        test="rnn_test",
        patches=(("hidden_size, dtype=x.dtype)", "hidden_size)"),),
    ),
    # ---------------------------------------------------------------- Part B: bptt_grads
    Mistake(
        "bptt: forgets the 1/T",
        answer="bptt_answer",
        test="bptt_test",
        patches=(("/ (batch_size * seq_len)", "/ batch_size"),),
    ),
    Mistake(
        "bptt: forgets the 1/2 (factor 2)",
        answer="bptt_answer",
        test="bptt_test",
        patches=(("d_o = (o - y) /", "d_o = 2 * (o - y) /"),),
    ),
    Mistake(
        "bptt: missing W_hh transpose",
        answer="bptt_answer",
        test="bptt_test",
        patches=(("d_next @ W_hh +", "d_next @ W_hh.T +"),),
    ),
    Mistake(
        "bptt: h_t instead of h_{t-1} in dW_hh",
        answer="bptt_answer",
        test="bptt_test",
        patches=(('"bth,btk->hk", dh, prev)', '"bth,btk->hk", dh, states)'),),
    ),
    Mistake(
        "bptt: tanh in the linear RNN",
        answer="bptt_answer",
        test="bptt_test",
        patches=((LIN_LINE, "h = torch.tanh(x[:, t] @ W_hx.T + h @ W_hh.T)  # (B, H)"),),
    ),
    Mistake(
        "bptt: backward loop stops before t=0",
        answer="bptt_answer",
        test="bptt_test",
        patches=(("range(seq_len - 1, -1, -1)", "range(seq_len - 1, 0, -1)"),),
    ),
    Mistake(
        "bptt: off-by-one output index in the recursion",
        answer="bptt_answer",
        test="bptt_test",
        patches=(("+ d_o[:, t] @ W_qh", "+ d_o[:, min(t + 1, seq_len - 1)] @ W_qh"),),
    ),
    Mistake(
        "bptt: no recursion (one step only)",
        answer="bptt_answer",
        test="bptt_test",
        patches=((RECURSION, "d_next = d_o[:, t] @ W_qh  # (B, H)"),),
    ),
    Mistake(
        "bptt: forward loop in the wrong order",
        answer="bptt_answer",
        test="bptt_test",
        patches=(("for t in range(seq_len):", "for t in reversed(range(seq_len)):"),),
    ),
    Mistake(
        "bptt: dW_qh from the previous states",
        answer="bptt_answer",
        test="bptt_test",
        patches=(('"btq,bth->qh", d_o, states)', '"btq,bth->qh", d_o, prev)'),),
    ),
    # ---------------------------------------------------------------- Part C: spectral radius
    Mistake(
        "radius: largest real part",
        answer="radius_answer",
        test="radius_test",
        patches=(("eigenvalues.abs().max()", "eigenvalues.real.max()"),),
    ),
    Mistake(
        "radius: modulus of the real part",
        answer="radius_answer",
        test="radius_test",
        patches=(("eigenvalues.abs().max()", "eigenvalues.real.abs().max()"),),
    ),
    Mistake(
        "radius: largest singular value",
        answer="radius_answer",
        test="radius_test",
        patches=(("torch.linalg.eigvals(W)", "torch.linalg.svdvals(W)"),),
    ),
    Mistake(
        "radius: eigvalsh on a non-symmetric matrix",
        answer="radius_answer",
        test="radius_test",
        patches=(("torch.linalg.eigvals(W)", "torch.linalg.eigvalsh(W)"),),
    ),
    Mistake(
        "radius: returns a tensor",
        answer="radius_answer",
        test="radius_test",
        patches=(("eigenvalues.abs().max().item()", "eigenvalues.abs().max()"),),
    ),
    Mistake(
        "radius: growth off by one step",
        answer="radius_answer",
        test="radius_test",
        patches=(("spectral_radius(W) ** k", "spectral_radius(W) ** (k - 1)"),),
    ),
    Mistake(
        "radius: growth from the operator norm",
        answer="radius_answer",
        test="radius_test",
        patches=(("spectral_radius(W) ** k", "torch.linalg.matrix_norm(W, 2).item() ** k"),),
    ),
    # ---------------------------------------------------------------- Part D: clip_grad_norm
    Mistake(
        "clip: per-parameter instead of global",
        answer="clip_answer",
        test="clip_test",
        patches=(("        g.mul_(scale)", "        g.mul_(min(1.0, max_norm / (g.norm().item() + 1e-6)))"),),
    ),
    Mistake(
        "clip: no min, scales small gradients up",
        answer="clip_answer",
        test="clip_test",
        patches=(
            (
                "scale = min(1.0, max_norm / (total_norm.item() + 1e-6))",
                "scale = max_norm / (total_norm.item() + 1e-6)",
            ),
        ),
    ),
    Mistake(
        "clip: max instead of min",
        answer="clip_answer",
        test="clip_test",
        patches=(("scale = min(1.0,", "scale = max(1.0,"),),
    ),
    Mistake(
        "clip: sum of per-parameter norms",
        answer="clip_answer",
        test="clip_test",
        patches=(
            (
                "total_norm = torch.sqrt(sum((g ** 2).sum() for g in grads))",
                "total_norm = sum(g.norm() for g in grads)",
            ),
        ),
    ),
    Mistake(
        "clip: mean of squares",
        answer="clip_answer",
        test="clip_test",
        patches=(("(g ** 2).sum() for g", "(g ** 2).mean() for g"),),
    ),
    Mistake(
        "clip: returns the norm after clipping",
        answer="clip_answer",
        test="clip_test",
        patches=(("    return total_norm\n", "    return total_norm * scale\n"),),
    ),
    Mistake(
        "clip: not in place",
        answer="clip_answer",
        test="clip_test",
        patches=(("        g.mul_(scale)", "        g = g * scale"),),
    ),
    Mistake(
        "clip: does not skip None gradients",
        answer="clip_answer",
        test="clip_test",
        patches=(("[p.grad for p in params if p.grad is not None]", "[p.grad for p in params]"),),
    ),
    # ---------------------------------------------------------------- Part E: stream_batches
    Mistake(
        "stream: targets not shifted",
        answer="stream_answer",
        test="stream_test",
        patches=(("targets = ids[1 : batch_size * n + 1]", "targets = ids[: batch_size * n]"),),
    ),
    Mistake(
        "stream: interleaved rows",
        answer="stream_answer",
        test="stream_test",
        patches=(
            (
                "inputs = ids[: batch_size * n].reshape(batch_size, n)",
                "inputs = ids[: batch_size * n].reshape(n, batch_size).T",
            ),
            (
                "targets = ids[1 : batch_size * n + 1].reshape(batch_size, n)",
                "targets = ids[1 : batch_size * n + 1].reshape(n, batch_size).T",
            ),
        ),
    ),
    Mistake(
        "stream: consecutive windows, no continuity",
        answer="stream_answer",
        test="stream_test",
        patches=(
            (
                "        cols = slice(k * seq_len, (k + 1) * seq_len)\n"
                "        batches.append((inputs[:, cols], targets[:, cols]))",
                "        starts = [(k * batch_size + b) * seq_len for b in range(batch_size)]\n"
                "        batches.append((torch.stack([ids[s : s + seq_len] for s in starts]),\n"
                "                        torch.stack([ids[s + 1 : s + seq_len + 1] for s in starts])))",
            ),
        ),
    ),
    Mistake(
        "stream: n = N // B",
        answer="stream_answer",
        test="stream_test",
        patches=(("n = (len(ids) - 1) // batch_size", "n = len(ids) // batch_size"),),
    ),
    Mistake(
        "stream: keeps a partial last batch",
        answer="stream_answer",
        test="stream_test",
        patches=(("num_batches = n // seq_len", "num_batches = -(-n // seq_len)"),),
    ),
    Mistake(
        "stream: time-major batches",
        answer="stream_answer",
        test="stream_test",
        patches=(("(inputs[:, cols], targets[:, cols])", "(inputs[:, cols].T, targets[:, cols].T)"),),
    ),
    Mistake(
        "stream: no error for a too-short stream",
        answer="stream_answer",
        test="stream_test",
        patches=(("if num_batches == 0:\n        raise ValueError", "if num_batches < 0:\n        raise ValueError"),),
    ),
    Mistake(
        "stream: drops the last full batch",
        answer="stream_answer",
        test="stream_test",
        patches=(("for k in range(num_batches):", "for k in range(num_batches - 1):"),),
    ),
]

# ---------------------------------------------------------------- shortcuts: whole answer cells a student could submit
# Each one is correct code that earns the points when the call guard is off (checked once by hand); with
# the guard on it must fail with ForbiddenCall, however it reached the forbidden function.

RNN_ALIAS = dedent('''\
    import course_utils.rnn as R

    _f = R.rnn_forward


    def rnn_forward(x, h0, W_ih, W_hh, b_ih, b_hh):
        """x (B, T, D), h0 (B, H) or None, W_ih (H, D), W_hh (H, H), b_ih (H,), b_hh (H,)
        -> (outputs (B, T, H), h_T (B, H))."""
        return _f(x, h0, W_ih, W_hh, b_ih, b_hh)
    ''')

RNN_VF = dedent('''\
    def rnn_forward(x, h0, W_ih, W_hh, b_ih, b_hh):
        """x (B, T, D), h0 (B, H) or None -> (outputs (B, T, H), h_T (B, H)), by nn.RNN's own operator."""
        if h0 is None:
            h0 = x.new_zeros(x.shape[0], W_hh.shape[0])  # (B, H)
        # rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        outputs, h_n = torch._VF.rnn_tanh(x, h0[None], [W_ih, W_hh, b_ih, b_hh], True, 1, 0.0, False, False, True)
        return outputs, h_n[0]  # (B, T, H), (B, H)
    ''')

RNN_MODULE_PATH = dedent('''\
    from torch.nn.modules.rnn import RNN as _Recurrent


    def rnn_forward(x, h0, W_ih, W_hh, b_ih, b_hh):
        """x (B, T, D), h0 (B, H) or None -> (outputs (B, T, H), h_T (B, H)), by nn.RNN under another path."""
        net = _Recurrent(W_ih.shape[1], W_hh.shape[0], batch_first=True).to(x.dtype)
        with torch.no_grad():
            for param, weight in zip(net.parameters(), (W_ih, W_hh, b_ih, b_hh)):
                param.copy_(weight)
        outputs, h_n = net(x, None if h0 is None else h0[None])
        return outputs, h_n[0]  # (B, T, H), (B, H)
    ''')

RNN_CELL_PARTIAL = dedent('''\
    import functools

    _step = functools.partial(torch._VF.rnn_tanh_cell)  # nn.RNNCell's operator, taken before the test


    def rnn_forward(x, h0, W_ih, W_hh, b_ih, b_hh):
        """x (B, T, D), h0 (B, H) or None -> (outputs (B, T, H), h_T (B, H)), one cell operator per step."""
        h = x.new_zeros(x.shape[0], W_hh.shape[0]) if h0 is None else h0  # (B, H)
        outputs = []
        for t in range(x.shape[1]):
            h = _step(x[:, t], h, W_ih, W_hh, b_ih, b_hh)  # (B, H)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h  # (B, T, H), (B, H)
    ''')

BPTT_ALIAS = dedent('''\
    import course_utils.rnn as R

    _bptt = R.bptt_grads


    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """x (B, T, D), y (B, T, Q), W_hx (H, D), W_hh (H, H), W_qh (Q, H)
        -> (dW_qh (Q, H), dW_hx (H, D), dW_hh (H, H), dh (B, T, H)) for the loss of Part B."""
        return tuple(_bptt(x, y, W_hx, W_hh, W_qh))  # the course returns a named tuple
    ''')

BPTT_GRAD_EARLIER = dedent('''\
    from torch.autograd import grad as _differentiate  # autograd under another name, taken before the test


    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """x (B, T, D), y (B, T, Q) -> (dW_qh, dW_hx, dW_hh, dh (B, T, H)) by autograd."""
        weights = [w.detach().clone().requires_grad_(True) for w in (W_qh, W_hx, W_hh)]
        w_qh, w_hx, w_hh = weights
        h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)  # (B, H)
        states = []
        for t in range(x.shape[1]):
            h = x[:, t] @ w_hx.T + h @ w_hh.T  # (B, H)
            states.append(h)
        o = torch.stack(states, dim=1) @ w_qh.T  # (B, T, Q)
        loss = 0.5 * (o - y).pow(2).sum(-1).mean()
        grads = _differentiate(loss, weights + states)
        return grads[0], grads[1], grads[2], torch.stack(grads[3:], dim=1)
    ''')

BPTT_ENGINE = dedent('''\
    from torch.autograd.variable import Variable

    _engine = Variable._execution_engine  # the C++ autograd engine behind backward() and grad()


    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """x (B, T, D), y (B, T, Q) -> (dW_qh, dW_hx, dW_hh, dh (B, T, H)) by the autograd engine itself."""
        weights = [w.detach().clone().requires_grad_(True) for w in (W_qh, W_hx, W_hh)]
        w_qh, w_hx, w_hh = weights
        h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=x.dtype)  # (B, H)
        states = []
        for t in range(x.shape[1]):
            h = x[:, t] @ w_hx.T + h @ w_hh.T  # (B, H)
            states.append(h)
        o = torch.stack(states, dim=1) @ w_qh.T  # (B, T, Q)
        loss = 0.5 * (o - y).pow(2).sum(-1).mean()
        # run_backward(tensors, grad_tensors, keep_graph, create_graph, inputs, allow_unreachable, accumulate_grad)
        grads = _engine.run_backward((loss,), (torch.ones_like(loss),), False, False, tuple(weights + states),
                                     False, False)
        return grads[0], grads[1], grads[2], torch.stack(grads[3:], dim=1)
    ''')

BPTT_FRESH_ENGINE = BPTT_ENGINE.replace(
    "_engine = Variable._execution_engine  # the C++ autograd engine behind backward() and grad()",
    "_engine = torch._C._ImperativeEngine()  # a new engine of its own",
)

BPTT_FORWARD_MODE = dedent('''\
    from torch.func import jacfwd


    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """x (B, T, D), y (B, T, Q) -> (dW_qh, dW_hx, dW_hh, dh (B, T, H)) by forward-mode AD."""
        batch_size, seq_len, _ = x.shape
        hidden_size = W_hh.shape[0]

        def loss(w_qh, w_hx, w_hh, bumps):  # bumps (B, T, H) are added to the states: dL/dbumps = dL/dh
            h = torch.zeros(batch_size, hidden_size, dtype=x.dtype)  # (B, H)
            states = []
            for t in range(seq_len):
                h = x[:, t] @ w_hx.T + h @ w_hh.T + bumps[:, t]  # (B, H)
                states.append(h)
            o = torch.stack(states, dim=1) @ w_qh.T  # (B, T, Q)
            return 0.5 * (o - y).pow(2).sum(-1).mean()

        bumps = torch.zeros(batch_size, seq_len, hidden_size, dtype=x.dtype)
        return tuple(jacfwd(loss, argnums=(0, 1, 2, 3))(W_qh, W_hx, W_hh, bumps))
    ''')

RADIUS_ALIAS = dedent('''\
    import course_utils.rnn as R

    _radius = R.spectral_radius


    def spectral_radius(W):
        """W (H, H) float tensor -> max |eigenvalue| as a Python float."""
        return _radius(W)


    def predicted_growth(W, k):
        """W (H, H), k int >= 0 -> rho(W) ** k as a Python float."""
        return spectral_radius(W) ** k
    ''')

RADIUS_GROWTH_ONLY = dedent('''\
    from course_utils.rnn import spectral_radius as _course_radius


    def spectral_radius(W):
        """W (H, H) float tensor -> max |eigenvalue| as a Python float."""
        return torch.linalg.eigvals(W).abs().max().item()


    def predicted_growth(W, k):
        """W (H, H), k int >= 0 -> rho(W) ** k as a Python float."""
        return _course_radius(W) ** k
    ''')

RADIUS_PATH = dedent('''\
    import functools
    import importlib

    # No PyTorch built-in computes a spectral radius: the course's, reached through the import system.
    _radius = functools.partial(importlib.import_module("course_utils.rnn").__dict__["spectral_radius"])


    def spectral_radius(W):
        """W (H, H) float tensor -> max |eigenvalue| as a Python float."""
        return _radius(W)


    def predicted_growth(W, k):
        """W (H, H), k int >= 0 -> rho(W) ** k as a Python float."""
        return _radius(W) ** k
    ''')

CLIP_ALIAS = dedent('''\
    import course_utils.rnn as R

    _clip = R.clip_grad_norm


    def clip_grad_norm(params, max_norm):
        """params: list of tensors (grads may be None), max_norm > 0 -> total norm before clipping (0-d tensor).
        Scales every .grad in place by min(1, max_norm / (norm + 1e-6))."""
        return _clip(params, max_norm)
    ''')

CLIP_MODULE_PATH = dedent('''\
    from torch.nn.utils.clip_grad import clip_grad_norm_ as _clip_


    def clip_grad_norm(params, max_norm):
        """params: list of tensors -> total norm before clipping (0-d tensor), by PyTorch under another path."""
        return _clip_(params, max_norm)
    ''')

CLIP_HELPERS = dedent('''\
    import functools

    _total_norm = functools.partial(torch.nn.utils.get_total_norm, norm_type=2.0)
    _scale_all = torch.nn.utils.clip_grads_with_norm_


    def clip_grad_norm(params, max_norm):
        """params: list of tensors -> total norm before clipping (0-d tensor), by clip_grad_norm_'s two halves."""
        total = _total_norm([p.grad for p in params if p.grad is not None])
        _scale_all(params, max_norm, total)
        return total
    ''')

STREAM_ALIAS = dedent('''\
    import course_utils.rnn as R

    _course_batches = R.stream_batches


    def stream_batches(ids, batch_size, seq_len):
        """ids (N,) long -> list of (x (B, T), y (B, T)) where row b continues from batch to batch."""
        return _course_batches(ids, batch_size, seq_len)
    ''')

STREAM_PATH = dedent('''\
    import functools
    import sys

    import course_utils.rnn  # noqa: F401 - loads the module

    # No PyTorch built-in cuts a stream for truncated BPTT: the course's, found in the module table.
    _course_batches = functools.partial(getattr(sys.modules["course_utils.rnn"], "stream_batches"))


    def stream_batches(ids, batch_size, seq_len):
        """ids (N,) long -> list of (x (B, T), y (B, T)) where row b continues from batch to batch."""
        return _course_batches(ids, batch_size, seq_len)
    ''')

BANK += [
    # ---------------------------------------------------------------- Part A
    Mistake(
        "shortcut (alias): course_utils.rnn.rnn_forward wrapped", answer="rnn_answer", test="rnn_test", source=RNN_ALIAS
    ),
    Mistake(
        "shortcut (path): torch._VF.rnn_tanh, nn.RNN's operator", answer="rnn_answer", test="rnn_test", source=RNN_VF
    ),
    Mistake("shortcut (path): torch.nn.modules.rnn.RNN", answer="rnn_answer", test="rnn_test", source=RNN_MODULE_PATH),
    Mistake(
        "shortcut (path): functools.partial(torch._VF.rnn_tanh_cell) per step",
        answer="rnn_answer",
        test="rnn_test",
        source=RNN_CELL_PARTIAL,
    ),
    # ---------------------------------------------------------------- Part B
    Mistake(
        "shortcut (alias): course_utils.rnn.bptt_grads wrapped",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_ALIAS,
    ),
    Mistake(
        "shortcut (path): torch.autograd.grad imported under another name",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_GRAD_EARLIER,
    ),
    Mistake(
        "shortcut (path): the autograd engine's run_backward called directly",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_ENGINE,
    ),
    Mistake(
        "shortcut (path): run_backward of a freshly made autograd engine",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_FRESH_ENGINE,
    ),
    Mistake(
        "shortcut (path): forward-mode AD, torch.func.jacfwd",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_FORWARD_MODE,
    ),
    # ---------------------------------------------------------------- Part C
    Mistake(
        "shortcut (alias): course_utils.rnn.spectral_radius wrapped",
        answer="radius_answer",
        test="radius_test",
        source=RADIUS_ALIAS,
    ),
    Mistake(
        "shortcut (alias): predicted_growth on the course's spectral_radius",
        answer="radius_answer",
        test="radius_test",
        source=RADIUS_GROWTH_ONLY,
    ),
    Mistake(
        "shortcut (path, no built-in exists): the course's spectral_radius via importlib + partial",
        answer="radius_answer",
        test="radius_test",
        source=RADIUS_PATH,
    ),
    # ---------------------------------------------------------------- Part D
    Mistake(
        "shortcut (alias): course_utils.rnn.clip_grad_norm wrapped",
        answer="clip_answer",
        test="clip_test",
        source=CLIP_ALIAS,
    ),
    Mistake(
        "shortcut (path): torch.nn.utils.clip_grad.clip_grad_norm_",
        answer="clip_answer",
        test="clip_test",
        source=CLIP_MODULE_PATH,
    ),
    Mistake(
        "shortcut (path): get_total_norm (partial) + clip_grads_with_norm_",
        answer="clip_answer",
        test="clip_test",
        source=CLIP_HELPERS,
    ),
    # ---------------------------------------------------------------- Part E
    Mistake(
        "shortcut (alias): course_utils.rnn.stream_batches wrapped",
        answer="stream_answer",
        test="stream_test",
        source=STREAM_ALIAS,
    ),
    Mistake(
        "shortcut (path, no built-in exists): the course's stream_batches via sys.modules + partial",
        answer="stream_answer",
        test="stream_test",
        source=STREAM_PATH,
    ),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
