"""Mistake bank of unit 04: plausible wrong answers, each of which must lose its cell's points."""

import pytest
from notebook_cells import Mistake, answer_ids, assert_loses_points, check_bank, run_test_cell

UNIT = "04_lstm_gru"

BANK = [
    # ---------------------------------------------------------------- Part A: lstm_cell
    Mistake("lstm: forget gate applied to the candidate", answer="lstm_answer", test="lstm_test",
            patches=(("c_next = f * c + i * g", "c_next = i * c + f * g"),)),
    Mistake("lstm: gate order i, f, o, g", answer="lstm_answer", test="lstm_test",
            patches=(("i, f, g, o = gates.chunk(4, dim=1)", "i, f, o, g = gates.chunk(4, dim=1)"),)),
    Mistake("lstm: gate order f, i, g, o", answer="lstm_answer", test="lstm_test",
            patches=(("i, f, g, o = gates.chunk(4, dim=1)", "f, i, g, o = gates.chunk(4, dim=1)"),)),
    Mistake("lstm: tanh on the output gate", answer="lstm_answer", test="lstm_test",
            patches=(("o = torch.sigmoid(o)", "o = torch.tanh(o)"),)),
    Mistake("lstm: sigmoid candidate", answer="lstm_answer", test="lstm_test",
            patches=(("g = torch.tanh(g)", "g = torch.sigmoid(g)"),)),
    Mistake("lstm: H = O * C without tanh", answer="lstm_answer", test="lstm_test",
            patches=(("h_next = o * torch.tanh(c_next)", "h_next = o * c_next"),)),
    Mistake("lstm: hidden state from the old cell", answer="lstm_answer", test="lstm_test",
            patches=(("h_next = o * torch.tanh(c_next)", "h_next = o * torch.tanh(c)"),)),
    Mistake("lstm: no forget gate", answer="lstm_answer", test="lstm_test",
            patches=(("c_next = f * c + i * g", "c_next = c + i * g"),)),
    Mistake("lstm: b_hh ignored", answer="lstm_answer", test="lstm_test",
            patches=((" + h @ W_hh.T + b_hh", " + h @ W_hh.T"),)),
    Mistake("lstm: returns (c, h)", answer="lstm_answer", test="lstm_test",
            patches=(("return h_next, c_next", "return c_next, h_next"),)),
    # ---------------------------------------------------------------- Part B: gru_cell
    Mistake("gru: Z and 1 - Z swapped", answer="gru_answer", test="gru_test",
            patches=(("return z * h + (1 - z) * n", "return (1 - z) * h + z * n"),)),
    Mistake("gru: reset gate applied textbook-style", answer="gru_answer", test="gru_test",
            patches=(("n = torch.tanh(xn + r * hn)",
                      "H = h.shape[1]\n    n = torch.tanh(xn + (r * h) @ W_hh[2 * H:].T + b_hh[2 * H:])"),)),
    Mistake("gru: b_hn outside the reset product", answer="gru_answer", test="gru_test",
            patches=(("n = torch.tanh(xn + r * hn)",
                      "H = h.shape[1]\n    n = torch.tanh(xn + r * (hn - b_hh[2 * H:]) + b_hh[2 * H:])"),)),
    Mistake("gru: candidate bias outside the tanh", answer="gru_answer", test="gru_test",
            patches=(("n = torch.tanh(xn + r * hn)",
                      "H = h.shape[1]\n    n = torch.tanh(xn - b_ih[2 * H:] + r * hn) + b_ih[2 * H:]"),)),
    Mistake("gru: gate order z, r, n", answer="gru_answer", test="gru_test",
            patches=(("xr, xz, xn = gi.chunk(3, dim=1)", "xz, xr, xn = gi.chunk(3, dim=1)"),
                     ("hr, hz, hn = gh.chunk(3, dim=1)", "hz, hr, hn = gh.chunk(3, dim=1)"))),
    Mistake("gru: no reset gate", answer="gru_answer", test="gru_test",
            patches=(("n = torch.tanh(xn + r * hn)", "n = torch.tanh(xn + hn)"),)),
    Mistake("gru: sigmoid candidate", answer="gru_answer", test="gru_test",
            patches=(("n = torch.tanh(xn + r * hn)", "n = torch.sigmoid(xn + r * hn)"),)),
    Mistake("gru: reset gate uses the update pre-activation", answer="gru_answer", test="gru_test",
            patches=(("r = torch.sigmoid(xr + hr)", "r = torch.sigmoid(xz + hz)"),)),
    # ---------------------------------------------------------------- Part C: masked_pool
    Mistake("pool: last takes index T - 1", answer="pool_answer", test="pool_test",
            patches=(("idx = lengths - 1", "idx = torch.full_like(lengths, outputs.shape[1] - 1)"),)),
    Mistake("pool: last takes index length (clamped)", answer="pool_answer", test="pool_test",
            patches=(("idx = lengths - 1", "idx = lengths.clamp(max=outputs.shape[1] - 1)"),)),
    Mistake("pool: mean divides by T", answer="pool_answer", test="pool_test",
            patches=(("/ lengths.unsqueeze(-1).to(outputs.dtype)", "/ outputs.shape[1]"),)),
    Mistake("pool: mean includes padding", answer="pool_answer", test="pool_test",
            patches=(("return (outputs * m).sum(dim=1) / lengths", "return outputs.sum(dim=1) / lengths"),)),
    Mistake("pool: max over padded zeros", answer="pool_answer", test="pool_test",
            patches=(("return outputs.masked_fill(~mask.unsqueeze(-1), float(\"-inf\")).amax(dim=1)",
                      "return (outputs * m).amax(dim=1)"),)),
    Mistake("pool: max includes padding", answer="pool_answer", test="pool_test",
            patches=(("return outputs.masked_fill(~mask.unsqueeze(-1), float(\"-inf\")).amax(dim=1)",
                      "return outputs.amax(dim=1)"),)),
    Mistake("pool: max returns (values, indices)", answer="pool_answer", test="pool_test",
            patches=(("float(\"-inf\")).amax(dim=1)", "float(\"-inf\")).max(dim=1)"),)),
    Mistake("pool: unknown how returns None", answer="pool_answer", test="pool_test",
            patches=(("    raise ValueError(f\"how must be 'last', 'mean' or 'max', got {how!r}\")\n", "    return None\n"),)),
    # ---------------------------------------------------------------- Part D: AddingModel
    Mistake("adding: plain RNN", answer="adding_answer", test="adding_test",
            patches=(("self.rnn = nn.LSTM(", "self.rnn = nn.RNN("),)),
    Mistake("adding: no recurrence, last step only", answer="adding_answer", test="adding_test",
            patches=(("self.rnn = nn.LSTM(input_size=2, hidden_size=32, batch_first=True)",
                      "self.rnn = nn.Linear(2, 32)"),
                     ("outputs, _ = self.rnn(x)  # (B, T, H)", "outputs = torch.tanh(self.rnn(x))  # (B, T, H)"))),
    Mistake("adding: output of size (B, 1)", answer="adding_answer", test="adding_test",
            patches=(("return self.head(outputs[:, -1]).squeeze(-1)", "return self.head(outputs[:, -1])"),)),
    Mistake("adding: reads the first step", answer="adding_answer", test="adding_test",
            patches=(("self.head(outputs[:, -1])", "self.head(outputs[:, 0])"),)),
    Mistake("adding: batch_first forgotten", answer="adding_answer", test="adding_test",
            patches=((", batch_first=True)", ")"),)),
    Mistake("adding: sigmoid on the output", answer="adding_answer", test="adding_test",
            patches=(("return self.head(outputs[:, -1]).squeeze(-1)",
                      "return torch.sigmoid(self.head(outputs[:, -1])).squeeze(-1)"),)),
]


def test_bank_covers_every_answer():
    check_bank(UNIT, BANK)


@pytest.mark.parametrize("answer", answer_ids(UNIT))
def test_solution_passes(answer):
    run_test_cell(UNIT, answer.replace("_answer", "_test"))


@pytest.mark.parametrize("mistake", BANK, ids=lambda m: m.name)
def test_mistake_loses_points(mistake):
    assert_loses_points(UNIT, mistake)
