"""Mistake bank of unit 05: plausible wrong answers, each of which must lose its cell's points."""

from textwrap import dedent

from notebook_cells import Mistake, bank_tests, frames_entry

UNIT = "05_lstm_gru"

BANK = [
    # ---------------------------------------------------------------- Part A: lstm_cell
    Mistake(
        "lstm: forget gate applied to the candidate",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("c_next = f * c + i * g", "c_next = i * c + f * g"),),
    ),
    Mistake(
        "lstm: gate order i, f, o, g",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("i, f, g, o = gates.chunk(4, dim=1)", "i, f, o, g = gates.chunk(4, dim=1)"),),
    ),
    Mistake(
        "lstm: gate order f, i, g, o",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("i, f, g, o = gates.chunk(4, dim=1)", "f, i, g, o = gates.chunk(4, dim=1)"),),
    ),
    Mistake(
        "lstm: tanh on the output gate",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("o = torch.sigmoid(o)", "o = torch.tanh(o)"),),
    ),
    Mistake(
        "lstm: sigmoid candidate",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("g = torch.tanh(g)", "g = torch.sigmoid(g)"),),
    ),
    Mistake(
        "lstm: H = O * C without tanh",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("h_next = o * torch.tanh(c_next)", "h_next = o * c_next"),),
    ),
    Mistake(
        "lstm: hidden state from the old cell",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("h_next = o * torch.tanh(c_next)", "h_next = o * torch.tanh(c)"),),
    ),
    Mistake(
        "lstm: no forget gate",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("c_next = f * c + i * g", "c_next = c + i * g"),),
    ),
    Mistake(
        "lstm: b_hh ignored",
        answer="lstm_answer",
        test="lstm_test",
        patches=((" + h @ W_hh.T + b_hh", " + h @ W_hh.T"),),
    ),
    Mistake(
        "lstm: returns (c, h)",
        answer="lstm_answer",
        test="lstm_test",
        patches=(("return h_next, c_next", "return c_next, h_next"),),
    ),
    # ---------------------------------------------------------------- Part B: gru_cell
    Mistake(
        "gru: Z and 1 - Z swapped",
        answer="gru_answer",
        test="gru_test",
        patches=(("return z * h + (1 - z) * n", "return (1 - z) * h + z * n"),),
    ),
    Mistake(
        "gru: reset gate applied textbook-style",
        answer="gru_answer",
        test="gru_test",
        patches=(
            (
                "n = torch.tanh(xn + r * hn)",
                "H = h.shape[1]\n    n = torch.tanh(xn + (r * h) @ W_hh[2 * H:].T + b_hh[2 * H:])",
            ),
        ),
    ),
    Mistake(
        "gru: b_hn outside the reset product",
        answer="gru_answer",
        test="gru_test",
        patches=(
            (
                "n = torch.tanh(xn + r * hn)",
                "H = h.shape[1]\n    n = torch.tanh(xn + r * (hn - b_hh[2 * H:]) + b_hh[2 * H:])",
            ),
        ),
    ),
    Mistake(
        "gru: candidate bias outside the tanh",
        answer="gru_answer",
        test="gru_test",
        patches=(
            (
                "n = torch.tanh(xn + r * hn)",
                "H = h.shape[1]\n    n = torch.tanh(xn - b_ih[2 * H:] + r * hn) + b_ih[2 * H:]",
            ),
        ),
    ),
    Mistake(
        "gru: gate order z, r, n",
        answer="gru_answer",
        test="gru_test",
        patches=(
            ("xr, xz, xn = gi.chunk(3, dim=1)", "xz, xr, xn = gi.chunk(3, dim=1)"),
            ("hr, hz, hn = gh.chunk(3, dim=1)", "hz, hr, hn = gh.chunk(3, dim=1)"),
        ),
    ),
    Mistake(
        "gru: no reset gate",
        answer="gru_answer",
        test="gru_test",
        patches=(("n = torch.tanh(xn + r * hn)", "n = torch.tanh(xn + hn)"),),
    ),
    Mistake(
        "gru: sigmoid candidate",
        answer="gru_answer",
        test="gru_test",
        patches=(("n = torch.tanh(xn + r * hn)", "n = torch.sigmoid(xn + r * hn)"),),
    ),
    Mistake(
        "gru: reset gate uses the update pre-activation",
        answer="gru_answer",
        test="gru_test",
        patches=(("r = torch.sigmoid(xr + hr)", "r = torch.sigmoid(xz + hz)"),),
    ),
    # ---------------------------------------------------------------- Part C: masked_pool
    Mistake(
        "pool: last takes index T - 1",
        answer="pool_answer",
        test="pool_test",
        patches=(("idx = lengths - 1", "idx = torch.full_like(lengths, outputs.shape[1] - 1)"),),
    ),
    Mistake(
        "pool: last takes index length (clamped)",
        answer="pool_answer",
        test="pool_test",
        patches=(("idx = lengths - 1", "idx = lengths.clamp(max=outputs.shape[1] - 1)"),),
    ),
    Mistake(
        "pool: mean divides by T",
        answer="pool_answer",
        test="pool_test",
        patches=(("/ lengths.unsqueeze(-1).to(outputs.dtype)", "/ outputs.shape[1]"),),
    ),
    Mistake(
        "pool: mean includes padding",
        answer="pool_answer",
        test="pool_test",
        patches=(("return (outputs * m).sum(dim=1) / lengths", "return outputs.sum(dim=1) / lengths"),),
    ),
    Mistake(
        "pool: max over padded zeros",
        answer="pool_answer",
        test="pool_test",
        patches=(
            (
                'return outputs.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1)',
                "return (outputs * m).amax(dim=1)",
            ),
        ),
    ),
    Mistake(
        "pool: max includes padding",
        answer="pool_answer",
        test="pool_test",
        patches=(
            (
                'return outputs.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1)',
                "return outputs.amax(dim=1)",
            ),
        ),
    ),
    Mistake(
        "pool: max returns (values, indices)",
        answer="pool_answer",
        test="pool_test",
        patches=(('float("-inf")).amax(dim=1)', 'float("-inf")).max(dim=1)'),),
    ),
    Mistake(
        "pool: unknown how returns None",
        answer="pool_answer",
        test="pool_test",
        patches=(
            ("    raise ValueError(f\"how must be 'last', 'mean' or 'max', got {how!r}\")\n", "    return None\n"),
        ),
    ),
    # ---------------------------------------------------------------- Part D: bigru_layer
    Mistake(
        "bigru: backward direction starts at T - 1 and reads the padding first",
        answer="bigru_answer",
        test="bigru_test",
        patches=(
            (
                "h = torch.where(real[:, t], gru_cell(x[:, t], h, *bwd), h)  # (B, H)",
                "h = gru_cell(x[:, t], h, *bwd)  # (B, H)",
            ),
        ),
    ),
    Mistake(
        "bigru: padded outputs not zeroed",
        answer="bigru_answer",
        test="bigru_test",
        patches=(("    output = output * real  # zeros at padded steps\n", ""),),
    ),
    Mistake(
        "bigru: output concatenated as [backward, forward]",
        answer="bigru_answer",
        test="bigru_test",
        patches=(
            (
                "torch.cat([torch.stack(outs_f, dim=1), torch.stack(outs_b, dim=1)], dim=-1)",
                "torch.cat([torch.stack(outs_b, dim=1), torch.stack(outs_f, dim=1)], dim=-1)",
            ),
        ),
    ),
    Mistake(
        "bigru: forward state runs on through the padding, h_n[0] at T - 1",
        answer="bigru_answer",
        test="bigru_test",
        patches=(
            (
                "h = torch.where(real[:, t], gru_cell(x[:, t], h, *fwd), h)  # (B, H)",
                "h = gru_cell(x[:, t], h, *fwd)  # (B, H)",
            ),
        ),
    ),
    Mistake(
        "bigru: h_n[0] read from output[:, T - 1] as for an unpadded batch",
        answer="bigru_answer",
        test="bigru_test",
        patches=(
            ("h_n = torch.stack([h_fwd, h], dim=0)", "h_n = torch.stack([output[:, -1, : h.shape[1]], h], dim=0)"),
        ),
    ),
    Mistake(
        "bigru: backward outputs left in reverse time order",
        answer="bigru_answer",
        test="bigru_test",
        patches=(
            ("    outs_b = outs_b[::-1]  # back in time order: outs_b[t] is the state just after reading step t\n", ""),
        ),
    ),
    Mistake(
        "bigru: forward weights used for the backward direction",
        answer="bigru_answer",
        test="bigru_test",
        patches=(
            (
                "bwd = (gru.weight_ih_l0_reverse, gru.weight_hh_l0_reverse, gru.bias_ih_l0_reverse, gru.bias_hh_l0_reverse)",
                "bwd = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)",
            ),
        ),
    ),
    Mistake(
        "bigru: h_n stacked as [backward, forward]",
        answer="bigru_answer",
        test="bigru_test",
        patches=(("h_n = torch.stack([h_fwd, h], dim=0)", "h_n = torch.stack([h, h_fwd], dim=0)"),),
    ),
    Mistake(
        "bigru: h_n[1] taken at the last real step instead of step 0",
        answer="bigru_answer",
        test="bigru_test",
        patches=(
            (
                "h_n = torch.stack([h_fwd, h], dim=0)",
                "h_n = torch.stack([h_fwd, output[torch.arange(batch_size), lengths - 1, h.shape[1] :]], dim=0)",
            ),
        ),
    ),
    Mistake(
        "bigru: backward direction starts from the forward final state",
        answer="bigru_answer",
        test="bigru_test",
        patches=(("    h = torch.zeros_like(h_fwd)  # (B, H)\n", ""),),
    ),
    Mistake(
        "bigru: off by one, step length counted as real",
        answer="bigru_answer",
        test="bigru_test",
        patches=(
            (
                "torch.arange(seq_len, device=x.device)[None, :] < lengths.to(x.device)[:, None]",
                "torch.arange(seq_len, device=x.device)[None, :] <= lengths.to(x.device)[:, None]",
            ),
        ),
    ),
    # ---------------------------------------------------------------- Part E: AddingModel
    Mistake(
        "adding: plain RNN",
        answer="adding_answer",
        test="adding_test",
        patches=(("self.rnn = nn.LSTM(", "self.rnn = nn.RNN("),),
    ),
    Mistake(
        "adding: no recurrence, last step only",
        answer="adding_answer",
        test="adding_test",
        patches=(
            ("self.rnn = nn.LSTM(input_size=2, hidden_size=32, batch_first=True)", "self.rnn = nn.Linear(2, 32)"),
            ("outputs, _ = self.rnn(x)  # (B, T, H)", "outputs = torch.tanh(self.rnn(x))  # (B, T, H)"),
        ),
    ),
    Mistake(
        "adding: output of size (B, 1)",
        answer="adding_answer",
        test="adding_test",
        patches=(("return self.head(outputs[:, -1]).squeeze(-1)", "return self.head(outputs[:, -1])"),),
    ),
    Mistake(
        "adding: reads the first step",
        answer="adding_answer",
        test="adding_test",
        patches=(("self.head(outputs[:, -1])", "self.head(outputs[:, 0])"),),
    ),
    Mistake(
        "adding: batch_first forgotten",
        answer="adding_answer",
        test="adding_test",
        patches=((", batch_first=True)", ")"),),
    ),
    Mistake(
        "adding: sigmoid on the output",
        answer="adding_answer",
        test="adding_test",
        patches=(
            (
                "return self.head(outputs[:, -1]).squeeze(-1)",
                "return torch.sigmoid(self.head(outputs[:, -1])).squeeze(-1)",
            ),
        ),
    ),
]

# ---------------------------------------------------------------- shortcuts: whole answer cells a student could submit
# Each one is correct code that earns the points when the call guard is off (checked once by hand); with
# the guard on it must fail with ForbiddenCall, however it reached the forbidden function.

LSTM_ALIAS = dedent("""\
    import course_utils.gated as G

    _course_cell = G.lstm_cell


    def lstm_cell(x, state, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); state = (h (B, H), c (B, H)); W_ih (4H, D); W_hh (4H, H); b_ih, b_hh (4H,)
        # returns (h_next (B, H), c_next (B, H))
        return _course_cell(x, state, W_ih, W_hh, b_ih, b_hh)
    """)

LSTM_VF = dedent("""\
    def lstm_cell(x, state, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); state = (h (B, H), c (B, H)) -> (h_next (B, H), c_next (B, H)), by nn.LSTMCell's operator
        return torch._VF.lstm_cell(x, state, W_ih, W_hh, b_ih, b_hh)
    """)

LSTM_MODULE_PATH = dedent("""\
    from torch.func import functional_call
    from torch.nn.modules.rnn import LSTMCell as _Cell


    def lstm_cell(x, state, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); state = (h (B, H), c (B, H)) -> (h_next (B, H), c_next (B, H)), by nn.LSTMCell by another path
        cell = _Cell(W_ih.shape[1], W_hh.shape[1])
        weights = {"weight_ih": W_ih, "weight_hh": W_hh, "bias_ih": b_ih, "bias_hh": b_hh}
        return functional_call(cell, weights, (x, state))
    """)

LSTM_QUANTIZABLE = dedent("""\
    from torch.nn.quantizable.modules.rnn import LSTMCell as _FloatCell  # a pure-Python LSTM cell in PyTorch


    def lstm_cell(x, state, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); state = (h (B, H), c (B, H)) -> (h_next (B, H), c_next (B, H))
        return _FloatCell.from_params(W_ih, W_hh, b_ih, b_hh)(x, state)
    """)

LSTM_SUBCLASS = dedent('''\
    class _Cell(nn.LSTMCell):
        """Not nn.LSTMCell by name."""


    def lstm_cell(x, state, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); state = (h (B, H), c (B, H)) -> (h_next (B, H), c_next (B, H))
        cell = _Cell(W_ih.shape[1], W_hh.shape[1]).to(x.dtype)
        with torch.no_grad():
            for param, weight in zip(cell.parameters(), (W_ih, W_hh, b_ih, b_hh)):
                param.copy_(weight)
        return cell(x, state)
    ''')

GRU_ALIAS = dedent("""\
    import course_utils.gated as G

    _course_cell = G.gru_cell


    def gru_cell(x, h, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); h (B, H); W_ih (3H, D); W_hh (3H, H); b_ih, b_hh (3H,) -> h_next (B, H)
        return _course_cell(x, h, W_ih, W_hh, b_ih, b_hh)
    """)

GRU_RUNNER = dedent("""\
    from course_utils.gated import run_gru as _run


    def gru_cell(x, h, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); h (B, H) -> h_next (B, H): the course's GRU runner on a sequence of one step
        _, h_next = _run(x[:, None], W_ih, W_hh, b_ih, b_hh, h)
        return h_next
    """)

GRU_VF = dedent("""\
    import functools

    _step = functools.partial(torch._VF.gru_cell)  # nn.GRUCell's operator, taken before the test


    def gru_cell(x, h, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); h (B, H) -> h_next (B, H)
        return _step(x, h, W_ih, W_hh, b_ih, b_hh)
    """)

GRU_MODULE_PATH = dedent("""\
    from torch.func import functional_call
    from torch.nn.modules.rnn import GRUCell as _Cell


    def gru_cell(x, h, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); h (B, H) -> h_next (B, H), by nn.GRUCell by another path
        cell = _Cell(W_ih.shape[1], W_hh.shape[1])
        weights = {"weight_ih": W_ih, "weight_hh": W_hh, "bias_ih": b_ih, "bias_hh": b_hh}
        return functional_call(cell, weights, (x, h))
    """)

POOL_ALIAS = dedent("""\
    import course_utils.gated as G

    _pool = G.masked_pool


    def masked_pool(outputs, mask, how="last"):
        # outputs (B, T, H) float; mask (B, T) bool, a prefix of True per row -> (B, H)
        return _pool(outputs, mask, how)
    """)

POOL_OTHER_MODULE = dedent("""\
    from course_utils.gated import SequenceClassifier

    _pool = SequenceClassifier.forward.__globals__["masked_pool"]  # the course's pooling, found by its user


    def masked_pool(outputs, mask, how="last"):
        # outputs (B, T, H) float; mask (B, T) bool, a prefix of True per row -> (B, H)
        return _pool(outputs, mask, how)
    """)

POOL_TORCH_MASKED = dedent("""\
    from torch.masked import _ops as _masked_ops  # torch.masked.mean / amax by another path


    def masked_pool(outputs, mask, how="last"):
        # outputs (B, T, H) float; mask (B, T) bool, a prefix of True per row -> (B, H)
        lengths = mask.sum(dim=1)  # (B,)
        if how == "last":
            return outputs[torch.arange(outputs.shape[0]), lengths - 1]  # (B, H)
        full = mask.unsqueeze(-1).expand_as(outputs)  # (B, T, H)
        if how == "mean":
            return _masked_ops.mean(outputs, 1, mask=full)  # (B, H)
        if how == "max":
            return _masked_ops.amax(outputs, 1, mask=full)  # (B, H)
        raise ValueError(f"how must be 'last', 'mean' or 'max', got {how!r}")
    """)

POOL_MASKED_TENSOR = dedent("""\
    import warnings

    from torch.masked import masked_tensor


    def masked_pool(outputs, mask, how="last"):
        # outputs (B, T, H) float; mask (B, T) bool, a prefix of True per row -> (B, H)
        lengths = mask.sum(dim=1)  # (B,)
        if how == "last":
            return outputs[torch.arange(outputs.shape[0]), lengths - 1]  # (B, H)
        if how not in ("mean", "max"):
            raise ValueError(f"how must be 'last', 'mean' or 'max', got {how!r}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MaskedTensor is a prototype
            masked = masked_tensor(outputs, mask.unsqueeze(-1).expand_as(outputs))  # (B, T, H)
            pooled = masked.mean(1) if how == "mean" else masked.amax(1)  # (B, H)
            return pooled.get_data()
    """)

ADDING_WRAPPED = dedent("""\
    from course_utils.gated import LastStepRegressor as _Ready


    class AddingModel(nn.Module):
        # forward: x (B, T, 2) float -> predictions (B,)
        def __init__(self):
            super().__init__()
            self.inner = _Ready("lstm", input_size=2, hidden_size=32)

        def forward(self, x):
            return self.inner(x)
    """)

ADDING_SUBCLASS = dedent("""\
    import course_utils.gated as G


    class AddingModel(G.LastStepRegressor):
        # forward: x (B, T, 2) float -> predictions (B,)
        def __init__(self):
            super().__init__("lstm", input_size=2, hidden_size=32)
    """)

ADDING_BUILT_EARLIER = dedent("""\
    import copy
    import importlib

    _template = importlib.import_module("course_utils.gated").LastStepRegressor()  # built before the test


    class AddingModel(nn.Module):
        # forward: x (B, T, 2) float -> predictions (B,)
        def __init__(self):
            super().__init__()
            self.inner = copy.deepcopy(_template)
            self.inner.rnn.reset_parameters()  # a fresh draw from the grader's seed
            self.inner.head.reset_parameters()

        def forward(self, x):
            return self.inner(x)
    """)

BIGRU_CALLS_GRU = dedent("""\
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


    def bigru_layer(x, lengths, gru):
        # x (B, T, D); lengths (B,) -> output (B, T, 2H), h_n (2, B, H): the given module on the packed batch
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        output, h_n = gru(packed)
        output, _ = pad_packed_sequence(output, batch_first=True, total_length=x.shape[1])  # (B, T, 2H)
        return output, h_n
    """)

BIGRU_CALLS_GRU_ROWS = dedent("""\
    def bigru_layer(x, lengths, gru):
        # x (B, T, D); lengths (B,) -> output (B, T, 2H), h_n (2, B, H): the given module on each unpadded row
        batch_size, seq_len, _ = x.shape
        output = x.new_zeros(batch_size, seq_len, 2 * gru.hidden_size)  # (B, T, 2H)
        h_n = x.new_zeros(2, batch_size, gru.hidden_size)  # (2, B, H)
        for b, n in enumerate(lengths.tolist()):
            out_b, h_b = gru(x[b : b + 1, :n])  # (1, n, 2H), (2, 1, H): no padding in it
            output[b, :n] = out_b[0]
            h_n[:, b] = h_b[:, 0]
        return output, h_n
    """)

BIGRU_SUBCLASS = dedent('''\
    class _BiGRU(nn.GRU):
        """Not nn.GRU by name."""


    def bigru_layer(x, lengths, gru):
        # x (B, T, D); lengths (B,) -> output (B, T, 2H), h_n (2, B, H): a subclass of nn.GRU, row by row
        layer = _BiGRU(gru.input_size, gru.hidden_size, batch_first=True, bidirectional=True).to(x.dtype)
        layer.load_state_dict(gru.state_dict())
        batch_size, seq_len, _ = x.shape
        output = x.new_zeros(batch_size, seq_len, 2 * gru.hidden_size)  # (B, T, 2H)
        h_n = x.new_zeros(2, batch_size, gru.hidden_size)  # (2, B, H)
        for b, n in enumerate(lengths.tolist()):
            out_b, h_b = layer(x[b : b + 1, :n])  # (1, n, 2H), (2, 1, H): no padding in it
            output[b, :n] = out_b[0]
            h_n[:, b] = h_b[:, 0]
        return output, h_n
    ''')

BIGRU_VF = dedent("""\
    def bigru_layer(x, lengths, gru):
        # x (B, T, D); lengths (B,) -> output (B, T, 2H), h_n (2, B, H): nn.GRU's operator, row by row
        params = [gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0,
                  gru.weight_ih_l0_reverse, gru.weight_hh_l0_reverse, gru.bias_ih_l0_reverse, gru.bias_hh_l0_reverse]
        batch_size, seq_len, _ = x.shape
        hidden = gru.hidden_size
        output = x.new_zeros(batch_size, seq_len, 2 * hidden)  # (B, T, 2H)
        h_n = x.new_zeros(2, batch_size, hidden)  # (2, B, H)
        for b, n in enumerate(lengths.tolist()):
            h0 = x.new_zeros(2, 1, hidden)  # (2, 1, H)
            out_b, h_b = torch._VF.gru(x[b : b + 1, :n], h0, params, True, 1, 0.0, False, True, True)
            output[b, :n] = out_b[0]
            h_n[:, b] = h_b[:, 0]
        return output, h_n
    """)

BIGRU_RUN_GRU = dedent("""\
    import course_utils.gated as G


    def bigru_layer(x, lengths, gru):
        # x (B, T, D); lengths (B,) -> output (B, T, 2H), h_n (2, B, H): the course's runner per row and direction
        fwd = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
        bwd = (gru.weight_ih_l0_reverse, gru.weight_hh_l0_reverse, gru.bias_ih_l0_reverse, gru.bias_hh_l0_reverse)
        batch_size, seq_len, _ = x.shape
        hidden = gru.hidden_size
        output = x.new_zeros(batch_size, seq_len, 2 * hidden)  # (B, T, 2H)
        h_n = x.new_zeros(2, batch_size, hidden)  # (2, B, H)
        for b, n in enumerate(lengths.tolist()):
            row = x[b : b + 1, :n]  # (1, n, D)
            out_f, h_f = G.run_gru(row, *fwd)  # (1, n, H), (1, H)
            out_b, h_b = G.run_gru(row.flip(1), *bwd)  # (1, n, H), (1, H): reversed row
            output[b, :n] = torch.cat([out_f[0], out_b[0].flip(0)], dim=-1)
            h_n[0, b], h_n[1, b] = h_f[0], h_b[0]
        return output, h_n
    """)

BIGRU_VF_CELL = dedent("""\
    import functools

    _step = functools.partial(torch._VF.gru_cell)  # nn.GRUCell's operator, taken before the test


    def bigru_layer(x, lengths, gru):
        # x (B, T, D); lengths (B,) -> output (B, T, 2H), h_n (2, B, H): the masked loop with nn.GRUCell's operator
        fwd = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
        bwd = (gru.weight_ih_l0_reverse, gru.weight_hh_l0_reverse, gru.bias_ih_l0_reverse, gru.bias_hh_l0_reverse)
        batch_size, seq_len, _ = x.shape
        real = (torch.arange(seq_len)[None, :] < lengths[:, None]).unsqueeze(-1)  # (B, T, 1)
        h_f = h_b = x.new_zeros(batch_size, gru.hidden_size)  # (B, H)
        outs_f, outs_b = [], [None] * seq_len
        for t in range(seq_len):
            h_f = torch.where(real[:, t], _step(x[:, t], h_f, *fwd), h_f)  # (B, H)
            outs_f.append(h_f)
        for t in reversed(range(seq_len)):
            h_b = torch.where(real[:, t], _step(x[:, t], h_b, *bwd), h_b)  # (B, H)
            outs_b[t] = h_b
        output = torch.cat([torch.stack(outs_f, dim=1), torch.stack(outs_b, dim=1)], dim=-1) * real  # (B, T, 2H)
        return output, torch.stack([h_f, h_b])
    """)

BIGRU_PAD_HELPERS = dedent("""\
    from torch.nn.utils.rnn import pad_sequence, unpad_sequence


    def _reverse_rows(x, lengths):
        # x (B, T, D) -> each row's real steps reversed, padded again to T (the helpers do the index work)
        rows = unpad_sequence(x, lengths, batch_first=True)  # B tensors (length, D)
        out = pad_sequence([r.flip(0) for r in rows], batch_first=True)  # (B, max length, D)
        return torch.cat([out, out.new_zeros(x.shape[0], x.shape[1] - out.shape[1], x.shape[2])], dim=1)


    def _run(x, real, weights):
        # your gru_cell over all steps of x (B, T, D); padded steps keep the state -> (B, T, H), final (B, H)
        h = x.new_zeros(x.shape[0], weights[1].shape[1])  # (B, H)
        outs = []
        for t in range(x.shape[1]):
            h = torch.where(real[:, t], gru_cell(x[:, t], h, *weights), h)  # (B, H)
            outs.append(h)
        return torch.stack(outs, dim=1), h  # (B, T, H), (B, H)


    def bigru_layer(x, lengths, gru):
        # x (B, T, D); lengths (B,) -> output (B, T, 2H), h_n (2, B, H)
        fwd = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
        bwd = (gru.weight_ih_l0_reverse, gru.weight_hh_l0_reverse, gru.bias_ih_l0_reverse, gru.bias_hh_l0_reverse)
        real = (torch.arange(x.shape[1])[None, :] < lengths[:, None]).unsqueeze(-1)  # (B, T, 1)
        out_f, h_f = _run(x, real, fwd)
        out_b, h_b = _run(_reverse_rows(x, lengths), real, bwd)  # in reversed time
        out_b = _reverse_rows(out_b, lengths)  # (B, T, H) back in time order
        return torch.cat([out_f, out_b], dim=-1) * real, torch.stack([h_f, h_b])  # (B, T, 2H), (2, B, H)
    """)

# The torch-function layer switched off: the forbidden operator called from C code (map over a partial)
# while torch._C.DisableTorchFunction is on, where neither the guard's profile hook nor its torch-function
# mode sees it. The guard's dispatch-level watch refuses the operations that run beneath it.
LSTM_LAYER_OFF = dedent("""\
    import functools

    _off = torch._C.DisableTorchFunction
    _lstm_op = functools.partial(torch.lstm_cell)


    def lstm_cell(x, state, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); state = (h (B, H), c (B, H)) -> (h_next (B, H), c_next (B, H))
        with _off():
            return list(map(_lstm_op, [x], [state], [W_ih], [W_hh], [b_ih], [b_hh]))[0]
    """)

GRU_LAYER_OFF = dedent("""\
    import functools

    _off = torch._C.DisableTorchFunction
    _gru_op = functools.partial(torch.gru_cell)


    def gru_cell(x, h, W_ih, W_hh, b_ih, b_hh):
        # x (B, D); h (B, H) -> h_next (B, H)
        with _off():
            return list(map(_gru_op, [x], [h], [W_ih], [W_hh], [b_ih], [b_hh]))[0]
    """)

BANK += [
    Mistake(
        "shortcut (layer off): torch.lstm_cell from C under DisableTorchFunction",
        answer="lstm_answer",
        test="lstm_test",
        source=LSTM_LAYER_OFF,
        passes_unchecked=True,
    ),
    Mistake(
        "shortcut (layer off): torch.gru_cell from C under DisableTorchFunction",
        answer="gru_answer",
        test="gru_test",
        source=GRU_LAYER_OFF,
        passes_unchecked=True,
    ),
    # ---------------------------------------------------------------- Part A
    Mistake(
        "shortcut (alias): course_utils.gated.lstm_cell wrapped",
        answer="lstm_answer",
        test="lstm_test",
        source=LSTM_ALIAS,
    ),
    Mistake("shortcut (path): torch._VF.lstm_cell", answer="lstm_answer", test="lstm_test", source=LSTM_VF),
    Mistake(
        "shortcut (path): torch.nn.modules.rnn.LSTMCell by functional_call",
        answer="lstm_answer",
        test="lstm_test",
        source=LSTM_MODULE_PATH,
    ),
    Mistake(
        "shortcut (path): torch.nn.quantizable's float LSTMCell.from_params",
        answer="lstm_answer",
        test="lstm_test",
        source=LSTM_QUANTIZABLE,
    ),
    Mistake(
        "shortcut (subclass): a subclass of nn.LSTMCell", answer="lstm_answer", test="lstm_test", source=LSTM_SUBCLASS
    ),
    # ---------------------------------------------------------------- Part B
    Mistake(
        "shortcut (alias): course_utils.gated.gru_cell wrapped", answer="gru_answer", test="gru_test", source=GRU_ALIAS
    ),
    Mistake(
        "shortcut (alias): course_utils.gated.run_gru on one step",
        answer="gru_answer",
        test="gru_test",
        source=GRU_RUNNER,
    ),
    Mistake(
        "shortcut (path): functools.partial(torch._VF.gru_cell)", answer="gru_answer", test="gru_test", source=GRU_VF
    ),
    Mistake(
        "shortcut (path): torch.nn.modules.rnn.GRUCell by functional_call",
        answer="gru_answer",
        test="gru_test",
        source=GRU_MODULE_PATH,
    ),
    # ---------------------------------------------------------------- Part C
    Mistake(
        "shortcut (alias): course_utils.gated.masked_pool wrapped",
        answer="pool_answer",
        test="pool_test",
        source=POOL_ALIAS,
    ),
    Mistake(
        "shortcut (path): the course's masked_pool through SequenceClassifier.forward.__globals__",
        answer="pool_answer",
        test="pool_test",
        source=POOL_OTHER_MODULE,
    ),
    Mistake(
        "shortcut (path): torch.masked._ops.mean / amax for mean and max",
        answer="pool_answer",
        test="pool_test",
        source=POOL_TORCH_MASKED,
    ),
    Mistake(
        "shortcut (path): MaskedTensor reductions for mean and max",
        answer="pool_answer",
        test="pool_test",
        source=POOL_MASKED_TENSOR,
    ),
    # ---------------------------------------------------------------- Part D
    Mistake(
        "shortcut (path): the given gru module called on pack_padded_sequence",
        answer="bigru_answer",
        test="bigru_test",
        source=BIGRU_CALLS_GRU,
    ),
    Mistake(
        "shortcut (path): the given gru module called on each unpadded row",
        answer="bigru_answer",
        test="bigru_test",
        source=BIGRU_CALLS_GRU_ROWS,
    ),
    Mistake(
        "shortcut (subclass): a subclass of nn.GRU run on each unpadded row",
        answer="bigru_answer",
        test="bigru_test",
        source=BIGRU_SUBCLASS,
    ),
    Mistake(
        "shortcut (path): torch._VF.gru on each unpadded row",
        answer="bigru_answer",
        test="bigru_test",
        source=BIGRU_VF,
    ),
    Mistake(
        "shortcut (alias): course_utils.gated.run_gru per row and direction",
        answer="bigru_answer",
        test="bigru_test",
        source=BIGRU_RUN_GRU,
    ),
    Mistake(
        "shortcut (path): functools.partial(torch._VF.gru_cell) for the steps",
        answer="bigru_answer",
        test="bigru_test",
        source=BIGRU_VF_CELL,
    ),
    Mistake(
        "shortcut (path): unpad_sequence / pad_sequence to reverse each row",
        answer="bigru_answer",
        test="bigru_test",
        source=BIGRU_PAD_HELPERS,
    ),
    # ---------------------------------------------------------------- Part E (nn.LSTM is allowed: it is the answer)
    Mistake(
        "shortcut (alias): course_utils.gated.LastStepRegressor wrapped",
        answer="adding_answer",
        test="adding_test",
        source=ADDING_WRAPPED,
    ),
    Mistake(
        "shortcut (subclass): a subclass of LastStepRegressor",
        answer="adding_answer",
        test="adding_test",
        source=ADDING_SUBCLASS,
    ),
    Mistake(
        "shortcut (path): a LastStepRegressor built before the test, copied",
        answer="adding_answer",
        test="adding_test",
        source=ADDING_BUILT_EARLIER,
    ),
]


# ---------------------------------------------------------------- frames: the test's reference read from its frames
# Each entry is a whole answer cell whose function walks its callers' frames (``sys._getframe`` and ``f_back`` to the
# top; ``f_locals`` and ``f_globals``; one level into tuples, lists and dicts) for the reference the OLD test cell
# computed before calling it, returns it when found, and something wrong (often: honest only on the visible
# test's inputs) when not. The test cells now compute every reference after the call, so each loses its points.


BANK += [
    frames_entry(
        "h_ref, c_ref (_h_ref, _c_ref)",
        "lstm_answer",
        "lstm_test",
        """
def lstm_cell(x, state, W_ih, W_hh, b_ih, b_hh):
    h, c = _answer_key(("h_ref", "_h_ref",)), _answer_key(("c_ref", "_c_ref",))
    if isinstance(h, torch.Tensor) and isinstance(c, torch.Tensor) and h.shape == state[0].shape:
        return h.clone(), c.clone()
    return state[0].clone(), state[1].clone()
""",
    ),
    frames_entry(
        "h_ref (_ref)",
        "gru_answer",
        "gru_test",
        """
def gru_cell(x, h, W_ih, W_hh, b_ih, b_hh):
    found = _answer_key(("h_ref", "_ref",))
    if isinstance(found, torch.Tensor) and found.shape == h.shape:
        return found.clone()
    return h.clone()
""",
    ),
    frames_entry(
        "a (B, H) tensor held by the test",
        "pool_answer",
        "pool_test",
        """
def masked_pool(outputs, mask, how="last"):
    if how not in ("last", "mean", "max"):
        raise ValueError(how)
    B, _, H = outputs.shape
    found = _answer_key(accept=lambda v: isinstance(v, torch.Tensor) and v.shape == (B, H) and v.dtype == outputs.dtype)
    return found.clone() if found is not None else outputs.new_zeros(B, H)
""",
    ),
    frames_entry(
        "out_ref, h_ref",
        "bigru_answer",
        "bigru_test",
        """
def bigru_layer(x, lengths, gru):
    B, T, _ = x.shape
    H = gru.hidden_size
    out, h_n = _answer_key(("out_ref",)), _answer_key(("h_ref",))
    if isinstance(out, torch.Tensor) and isinstance(h_n, torch.Tensor) and out.shape == (B, T, 2 * H) \\
            and h_n.shape == (2, B, H):
        return out.clone(), h_n.clone()
    return x.new_zeros(B, T, 2 * H), x.new_zeros(2, B, H)
""",
    ),
    frames_entry(
        "yb, y_test (the adding problem's targets)",
        "adding_answer",
        "adding_test",
        """
class AddingModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(2, 1)

    def forward(self, x):  # (B, T, 2) -> (B,)
        found = _answer_key(("y_test", "yb",))
        zero = 0.0 * sum(p.sum() for p in self.parameters())  # a graph to the parameters, for backward()
        if isinstance(found, torch.Tensor) and found.shape == x.shape[:1]:
            return found.detach().clone() + zero
        return x.new_zeros(x.shape[0]) + zero
""",
    ),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
