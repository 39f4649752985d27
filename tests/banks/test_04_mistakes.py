"""Mistake bank of unit 04: plausible wrong answers, each of which must lose its cell's points."""

from textwrap import dedent

from notebook_cells import (
    COMPLEX_STEP_GRADIENTS,
    FIVE_POINT_GRADIENTS,
    FRAMES_READER,
    Mistake,
    bank_tests,
    frames_entries,
)

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

# ---------------------------------------------------------------- numerical gradients: the right values, not the method
# Part B teaches backpropagation through time. Each entry below computes the right values by differentiating the loss
# numerically instead (no blocked function is called; dh is the derivative with respect to a bump added to each
# state): with the checks off it earns the part's points, with them on the work watch stops it (WrongMethod), by the
# work that grows with the parameters, the complex dtype or the size of a batch holding one perturbed copy of the
# weights per parameter.

# The loss of Part B with a bump added to each state, so that its derivative with respect to the bumps is dL/dh.
_RNN_LOSS = """\
def _rnn_loss(x, y, W_hx, W_hh, W_qh, bumps):
    h = torch.zeros(x.shape[0], W_hh.shape[0], dtype=W_hh.dtype)  # (B, H)
    states = []
    for t in range(x.shape[1]):
        h = x[:, t] @ W_hx.T + h @ W_hh.T + bumps[:, t]  # (B, H)
        states.append(h)
    o = torch.stack(states, dim=1) @ W_qh.T  # (B, T, Q)
    return 0.5 * ((o - y) ** 2).sum(dim=-1).mean()


"""

BPTT_CENTRAL_DIFFERENCES = (
    _RNN_LOSS
    + FIVE_POINT_GRADIENTS
    + dedent('''\
    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """dW_qh, dW_hx, dW_hh and dh by central differences of fourth order, one parameter at a time."""
        bumps = torch.zeros(x.shape[0], x.shape[1], W_hh.shape[0], dtype=x.dtype)  # (B, T, H)
        params = [W_qh.clone(), W_hx.clone(), W_hh.clone(), bumps]
        return tuple(_five_point_gradients(lambda: _rnn_loss(x, y, params[1], params[2], params[0], params[3]), params))
    ''')
)

BPTT_COMPLEX_STEP = (
    _RNN_LOSS
    + COMPLEX_STEP_GRADIENTS
    + dedent('''\
    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """dW_qh, dW_hx, dW_hh and dh by the complex step Im L(w + ih e_i) / h in complex128: one loss per parameter."""
        bumps = torch.zeros(x.shape[0], x.shape[1], W_hh.shape[0], dtype=torch.complex128)  # (B, T, H)
        params = [W_qh.to(torch.complex128), W_hx.to(torch.complex128), W_hh.to(torch.complex128), bumps]
        data = (x.to(torch.complex128), y.to(torch.complex128))
        grads = _complex_step_gradients(lambda: _rnn_loss(*data, params[1], params[2], params[0], params[3]), params)
        return tuple(grad.to(x.dtype) for grad in grads)
    ''')
)

BPTT_BATCHED_DIFFERENCES = dedent('''\
    def _batched_loss(x, y, W_hx, W_hh, W_qh, bumps):
        """The loss of Part B for S sets of weights at once: W_hx (S, H, D), ..., bumps (S, B, T, H) -> (S,)."""
        h = torch.zeros(W_hh.shape[0], x.shape[0], W_hh.shape[1], dtype=x.dtype)  # (S, B, H)
        states = []
        for t in range(x.shape[1]):
            h = x[:, t] @ W_hx.transpose(1, 2) + h @ W_hh.transpose(1, 2) + bumps[:, :, t]  # (S, B, H)
            states.append(h)
        o = torch.stack(states, dim=2) @ W_qh.transpose(1, 2)[:, None]  # (S, B, T, Q)
        return 0.5 * ((o - y) ** 2).sum(dim=-1).mean(dim=(1, 2))


    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """Central differences with every parameter perturbed at once: one batch of P copies of the weights."""
        bumps = torch.zeros(x.shape[0], x.shape[1], W_hh.shape[0], dtype=x.dtype)  # (B, T, H)
        params = [W_qh, W_hx, W_hh, bumps]
        sizes = [p.numel() for p in params]
        flat = torch.cat([p.reshape(-1) for p in params])  # (P,)
        step = 1e-3
        moves = torch.eye(flat.numel(), dtype=x.dtype)  # (P, P): one bump per copy

        def batched(copies):  # (S, P) -> (S,)
            w_qh, w_hx, w_hh, b = (part.reshape(-1, *p.shape) for part, p in zip(copies.split(sizes, dim=1), params))
            return _batched_loss(x, y, w_hx, w_hh, w_qh, b)

        losses = [batched(flat + shift * step * moves) for shift in (-2, -1, 1, 2)]  # 4 x (P,)
        grad = (losses[0] - 8 * losses[1] + 8 * losses[2] - losses[3]) / (12 * step)  # (P,)
        return tuple(part.reshape(p.shape) for part, p in zip(grad.split(sizes), params))
    ''')

# ---------------------------------------------------------------- frames: the answer key read from the test's frames
# Each answer walks its callers' frames up to the outermost one, looks in their locals and globals (and one level
# into tuples, lists and dicts) for the reference the test computed, and returns it. Against the test cells as they
# were before issue 24 (references computed before the call into globals: `_ref_out`, `_ref`, `_expected`,
# `_measured`, `_ref_norm`) each one earned its part's points; the test cells now compute every reference after the
# call, so each finds nothing and returns its wrong fallback (chosen to pass the visible tests, whose expected values
# were never within reach).

RNN_FRAMES = FRAMES_READER + dedent('''\
    def rnn_forward(x, h0, W_ih, W_hh, b_ih, b_hh):
        """The test's own nn.RNN outputs, read from its frames; the loop without b_hh where it finds none."""
        batch_size, seq_len, _ = x.shape
        hidden_size = W_hh.shape[0]

        def outputs(v):
            return type(v) is torch.Tensor and v.shape == (batch_size, seq_len, hidden_size)

        names = ("_ref_out0", "_ref_out") if h0 is None else ("_ref_out", "ref_out", "_expected", "_ref")
        found = _answer_key(names, outputs)
        if found is not None:
            found = found.detach().clone()
            return found, found[:, -1].clone()  # (B, T, H), (B, H)
        h = torch.zeros(batch_size, hidden_size, dtype=x.dtype) if h0 is None else h0
        states = []
        for t in range(seq_len):
            h = torch.tanh(x[:, t] @ W_ih.T + b_ih + h @ W_hh.T)  # (B, H)
            states.append(h)
        return torch.stack(states, dim=1), h
    ''')

BPTT_FRAMES = FRAMES_READER + dedent('''\
    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """The test's own autograd gradients, read from its frames; zeros where it finds none."""
        shapes = (W_qh.shape, W_hx.shape, W_hh.shape, (x.shape[0], x.shape[1], W_hh.shape[0]))

        def key(v):
            return (type(v) is tuple and len(v) == 4
                    and all(type(t) is torch.Tensor and t.shape == s for t, s in zip(v, shapes)))

        found = _answer_key(("_ref", "ref", "_expected", "expected", "_want", "want"), key)
        if found is None:
            return tuple(torch.zeros(s, dtype=x.dtype) for s in shapes)
        return tuple(t.detach().clone() for t in found)
    ''')

RADIUS_FRAMES = FRAMES_READER + dedent('''\
    def spectral_radius(W):
        """The test's own radius, read from its frames; without one, max |diagonal| for a triangular W (exact) and
        the largest singular value otherwise (too large for a non-normal W)."""
        found = _answer_key(("_expected", "expected", "_ref", "_want"), lambda v: type(v) is float)
        if found is not None:
            return found
        if torch.equal(W, torch.triu(W)) or torch.equal(W, torch.tril(W)):
            return W.diagonal().abs().max().item()
        return torch.linalg.matrix_norm(W, 2).item()


    def predicted_growth(W, k):
        """The growth the test measured, read from its frames; rho ** k with the radius above where it finds none."""
        found = _answer_key(("_measured", "measured", "_want"), lambda v: type(v) is float)
        if found is not None:
            return found
        return spectral_radius(W) ** k
    ''')

CLIP_FRAMES = FRAMES_READER + dedent('''\
    def clip_grad_norm(params, max_norm):
        """The test's own clipping, read from its frames; without it, a norm that counts only the first row of a
        gradient with two dimensions."""
        grads = [p.grad for p in params if p.grad is not None]
        norm = _answer_key(("_ref_norm", "ref_norm", "_expected", "_want"),
                           lambda v: type(v) is torch.Tensor and v.dim() == 0)
        clipped = _answer_key(("_ref_params", "ref_params", "_ref", "_expected"),
                              lambda v: type(v) is list and len(v) == len(params))
        if norm is not None and clipped is not None:
            for param, ref in zip(params, clipped):
                if param.grad is not None:
                    param.grad.copy_(ref.grad)
            return norm.detach().clone()
        total_norm = torch.sqrt(sum((g[0] if g.dim() > 1 else g).pow(2).sum() for g in grads))
        scale = min(1.0, max_norm / (total_norm.item() + 1e-6))
        for g in grads:
            g.mul_(scale)
        return total_norm
    ''')

STREAM_FRAMES = FRAMES_READER + dedent('''\
    def stream_batches(ids, batch_size, seq_len):
        """The test's own batches, read from its frames; without them, rows of N // B tokens instead of (N - 1) // B."""
        if ((len(ids) - 1) // batch_size) // seq_len == 0:
            raise ValueError(f"{len(ids)} tokens are too few for batch_size={batch_size}, seq_len={seq_len}")

        def batches(v):
            return (type(v) is list and len(v) > 0 and type(v[0]) is tuple
                    and tuple(v[0][0].shape) == (batch_size, seq_len))

        found = _answer_key(("_ref", "ref", "_expected", "_want"), batches)
        if found is not None:
            return [(x.clone(), y.clone()) for x, y in found]
        n = len(ids) // batch_size  # wrong: one token too many per row when B divides N
        inputs = ids[: batch_size * n].reshape(batch_size, n)  # (B, n)
        targets = ids[1 : batch_size * n + 1].reshape(batch_size, n)  # (B, n)
        return [(inputs[:, k * seq_len : (k + 1) * seq_len], targets[:, k * seq_len : (k + 1) * seq_len])
                for k in range(n // seq_len)]
    ''')

# Right values, not the method: each dL/dh_t summed over every later step, with the powers of W_hh^T kept from one
# term to the next (the closed form written out), which is O(T^2) matrix products instead of one backward sweep.
BPTT_QUADRATIC = dedent('''\
    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """x (B, T, D), y (B, T, Q) -> (dW_qh, dW_hx, dW_hh, dh), dh from the closed form, one later step at a time."""
        batch_size, seq_len, _ = x.shape
        h = torch.zeros(batch_size, W_hh.shape[0], dtype=x.dtype)
        hs = [h]
        for t in range(seq_len):
            h = x[:, t] @ W_hx.T + h @ W_hh.T
            hs.append(h)
        states, prev = torch.stack(hs[1:], dim=1), torch.stack(hs[:-1], dim=1)  # (B, T, H) each
        d_o = (states @ W_qh.T - y) / (batch_size * seq_len)  # (B, T, Q)
        dh = torch.zeros_like(states)
        for t in range(seq_len):
            pushed = torch.zeros_like(states[:, 0])  # (B, H)
            for s in range(seq_len - 1, t - 1, -1):  # dL/dh_t = sum_s (W_hh^T)^(s - t) W_qh^T dL/do_s, by Horner
                pushed = pushed @ W_hh + d_o[:, s] @ W_qh
            dh[:, t] = pushed
        dW_qh = torch.einsum("btq,bth->qh", d_o, states)
        dW_hx = torch.einsum("bth,btd->hd", dh, x)
        dW_hh = torch.einsum("bth,btk->hk", dh, prev)
        return dW_qh, dW_hx, dW_hh, dh
    ''')

# Numerical differentiation outside PyTorch: the loss in NumPy, finite differences parameter by parameter. It runs
# no tensor operation per parameter, so only the count of the answer's own Python steps sees it grow.
BPTT_NUMPY_DIFFERENCES = dedent('''\
    import numpy as np


    def bptt_grads(x, y, W_hx, W_hh, W_qh):
        """Finite differences of a NumPy loss, one parameter (and one state entry) at a time."""
        X, Y = x.numpy(), y.numpy()
        batch_size, seq_len, _ = X.shape
        weights = [W_hx.numpy().copy(), W_hh.numpy().copy(), W_qh.numpy().copy()]

        def loss(w_hx, w_hh, w_qh, bump=None):
            h, total = np.zeros((batch_size, w_hh.shape[0])), 0.0
            for t in range(seq_len):
                h = X[:, t] @ w_hx.T + h @ w_hh.T
                if bump is not None and bump[0] == t:
                    h = h.copy()
                    h[bump[1], bump[2]] += bump[3]
                total += 0.5 * ((h @ w_qh.T - Y[:, t]) ** 2).sum()
            return total / (batch_size * seq_len)

        eps, grads = 1e-3, []  # the five-point stencil: error O(eps^4)
        stencil = ((-2, 1 / 12), (-1, -8 / 12), (1, 8 / 12), (2, -1 / 12))
        for w in weights:
            g = np.zeros_like(w)
            for index in np.ndindex(*w.shape):
                old = w[index]
                for step, coefficient in stencil:
                    w[index] = old + step * eps
                    g[index] += coefficient * loss(*weights) / eps
                w[index] = old
            grads.append(torch.from_numpy(g))
        dh = np.zeros((batch_size, seq_len, W_hh.shape[0]))
        for t, b, i in np.ndindex(seq_len, batch_size, W_hh.shape[0]):
            dh[b, t, i] = sum(c * loss(*weights, bump=(t, b, i, k * eps)) for k, c in stencil) / eps
        return grads[2], grads[0], grads[1], torch.from_numpy(dh)
    ''')

BANK += [
    Mistake(
        "numerical: BPTT gradients by finite differences of a NumPy loss (no tensor operations)",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_NUMPY_DIFFERENCES,
        passes_unchecked=True,
    ),
    Mistake(
        "not the method: BPTT with each dL/dh_t summed over the later steps (O(T^2))",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_QUADRATIC,
        passes_unchecked=True,
    ),
    Mistake(
        "numerical: BPTT gradients by central differences, parameter by parameter",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_CENTRAL_DIFFERENCES,
        passes_unchecked=True,
    ),
    Mistake(
        "numerical: BPTT gradients by the complex step (complex128)",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_COMPLEX_STEP,
        passes_unchecked=True,
    ),
    Mistake(
        "numerical: BPTT gradients by central differences, all parameters perturbed in one batched tensor",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_BATCHED_DIFFERENCES,
        passes_unchecked=True,
    ),
    Mistake(
        "frames: rnn_forward returns the test's nn.RNN outputs", answer="rnn_answer", test="rnn_test", source=RNN_FRAMES
    ),
    Mistake(
        "frames: bptt_grads returns the test's autograd reference",
        answer="bptt_answer",
        test="bptt_test",
        source=BPTT_FRAMES,
    ),
    Mistake(
        "frames: spectral_radius and predicted_growth return the test's expected and measured values",
        answer="radius_answer",
        test="radius_test",
        source=RADIUS_FRAMES,
    ),
    Mistake(
        "frames: clip_grad_norm copies the test's clipped gradients and norm",
        answer="clip_answer",
        test="clip_test",
        source=CLIP_FRAMES,
    ),
    Mistake(
        "frames: stream_batches returns the test's batches",
        answer="stream_answer",
        test="stream_test",
        source=STREAM_FRAMES,
    ),
]

# the course's generic frame reader as well: each function returns any value of its answer's type and shape that
# it finds in its callers' frames (see notebook_cells.frames_entries)
BANK += frames_entries(UNIT)

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
