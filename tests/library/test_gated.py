"""Tests of course_utils.gated against PyTorch's own cells, layers and brute force."""

import pytest
import torch
import torch.nn as nn

from course_utils.gated import (
    ADDING_TRIVIAL_MSE,
    BagOfEmbeddings,
    LastStepRegressor,
    SequenceClassifier,
    SequenceClassifierConfig,
    adding_problem,
    count_parameters,
    gru_cell,
    gru_cell_textbook,
    lengths_to_mask,
    lstm_cell,
    masked_pool,
    run_gru,
    run_lstm,
)


def _weights(cell):
    return cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh


@pytest.mark.parametrize("batch_size, input_size, hidden", [(1, 1, 1), (3, 5, 4), (7, 2, 9)])
def test_lstm_cell_matches_torch(batch_size, input_size, hidden):
    torch.manual_seed(0)
    cell = nn.LSTMCell(input_size, hidden).double()
    x = torch.randn(batch_size, input_size, dtype=torch.float64)
    h, c = torch.randn(2, batch_size, hidden, dtype=torch.float64)
    h_ref, c_ref = cell(x, (h, c))
    h_got, c_got = lstm_cell(x, (h, c), *_weights(cell))
    torch.testing.assert_close(h_got, h_ref)
    torch.testing.assert_close(c_got, c_ref)


@pytest.mark.parametrize("batch_size, input_size, hidden", [(1, 1, 1), (3, 5, 4), (7, 2, 9)])
def test_gru_cell_matches_torch(batch_size, input_size, hidden):
    torch.manual_seed(1)
    cell = nn.GRUCell(input_size, hidden).double()
    x = torch.randn(batch_size, input_size, dtype=torch.float64)
    h = torch.randn(batch_size, hidden, dtype=torch.float64)
    torch.testing.assert_close(gru_cell(x, h, *_weights(cell)), cell(x, h))


def test_cells_without_bias_match_torch():
    torch.manual_seed(2)
    lstm, gru = nn.LSTMCell(3, 4, bias=False).double(), nn.GRUCell(3, 4, bias=False).double()
    x, h, c = torch.randn(2, 3).double(), torch.randn(2, 4).double(), torch.randn(2, 4).double()
    torch.testing.assert_close(lstm_cell(x, (h, c), lstm.weight_ih, lstm.weight_hh)[0], lstm(x, (h, c))[0])
    torch.testing.assert_close(gru_cell(x, h, gru.weight_ih, gru.weight_hh), gru(x, h))


def test_gru_textbook_differs_but_agrees_with_hand_formula():
    torch.manual_seed(3)
    cell = nn.GRUCell(3, 5).double()
    x, h = torch.randn(4, 3).double(), torch.randn(4, 5).double()
    W_ih, W_hh, b_ih, b_hh = _weights(cell)
    got = gru_cell_textbook(x, h, W_ih, W_hh, b_ih, b_hh)
    assert (got - cell(x, h)).abs().max() > 1e-3  # a different function
    # hand-written textbook GRU, one gate at a time
    Wr, Wz, Wn = W_ih.chunk(3)
    Ur, Uz, Un = W_hh.chunk(3)
    br, bz, bn = b_ih.chunk(3)
    cr, cz, cn = b_hh.chunk(3)
    r = torch.sigmoid(x @ Wr.T + br + h @ Ur.T + cr)
    z = torch.sigmoid(x @ Wz.T + bz + h @ Uz.T + cz)
    n = torch.tanh(x @ Wn.T + bn + (r * h) @ Un.T + cn)
    torch.testing.assert_close(got, z * h + (1 - z) * n)
    # with h = 0 the two placements agree except for r * b_hn vs b_hn
    zero = torch.zeros(4, 5, dtype=torch.float64)
    with torch.no_grad():
        cell.bias_hh[10:].zero_()
    torch.testing.assert_close(gru_cell_textbook(x, zero, *_weights(cell)), cell(x, zero))


def test_runners_match_torch_layers():
    torch.manual_seed(4)
    x = torch.randn(3, 6, 2, dtype=torch.float64)
    lstm = nn.LSTM(2, 4, batch_first=True).double()
    out_ref, (h_ref, c_ref) = lstm(x)
    out, (h, c) = run_lstm(x, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)
    torch.testing.assert_close(out, out_ref)
    torch.testing.assert_close(h, h_ref[0])
    torch.testing.assert_close(c, c_ref[0])
    gru = nn.GRU(2, 4, batch_first=True).double()
    h0 = torch.randn(1, 3, 4, dtype=torch.float64)
    out_ref, h_ref = gru(x, h0)
    out, h = run_gru(x, gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0, h=h0[0])
    torch.testing.assert_close(out, out_ref)
    torch.testing.assert_close(h, h_ref[0])


def test_cell_shape_errors():
    cell = nn.LSTMCell(3, 4)
    x, h = torch.randn(2, 3), torch.randn(2, 4)
    with pytest.raises(ValueError, match="W_ih"):
        lstm_cell(x, (h, h), cell.weight_ih[:, :2], cell.weight_hh)
    with pytest.raises(ValueError, match="x must be"):
        lstm_cell(x[0], (h, h), *_weights(cell))
    with pytest.raises(ValueError, match="h must be"):
        lstm_cell(x, (h[:1], h[:1]), *_weights(cell))
    with pytest.raises(ValueError, match="W_hh"):
        gru_cell(x, h, cell.weight_ih[:12], cell.weight_hh)  # 4H rows for a GRU
    with pytest.raises(ValueError, match="b_ih"):
        gru_cell(x, h, cell.weight_ih[:12], cell.weight_hh[:12], cell.bias_ih, None)
    with pytest.raises(ValueError, match="B, T, D"):
        run_lstm(x, *_weights(cell))


def _brute_pool(outputs, lengths, how):
    rows = []
    for b, n in enumerate(lengths.tolist()):
        valid = outputs[b, :n]
        rows.append({"last": valid[-1], "mean": valid.mean(0), "max": valid.max(0).values}[how])
    return torch.stack(rows)


@pytest.mark.parametrize("how", ["last", "mean", "max"])
def test_masked_pool_matches_brute_force(how):
    torch.manual_seed(5)
    outputs = torch.randn(6, 7, 3) - 5.0  # all negative: max over padded zeros would be wrong
    lengths = torch.tensor([1, 7, 3, 5, 2, 7])
    mask = lengths_to_mask(lengths, 7)
    outputs_padded = outputs.masked_fill(~mask[..., None], 0.0)
    torch.testing.assert_close(masked_pool(outputs_padded, mask, how), _brute_pool(outputs, lengths, how))


def test_masked_pool_errors():
    out = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="how"):
        masked_pool(out, torch.ones(2, 3, dtype=torch.bool), "sum")
    with pytest.raises(ValueError, match="bool"):
        masked_pool(out, torch.ones(2, 3), "mean")
    with pytest.raises(ValueError, match="at least one"):
        masked_pool(out, torch.tensor([[True, False, False], [False, False, False]]), "mean")


def test_adding_problem():
    x, y = adding_problem(500, 40, seed=3)
    assert x.shape == (500, 40, 2) and y.shape == (500,)
    assert torch.equal(x[:, :, 1].sum(1), torch.full((500,), 2.0))
    assert (x[:, :20, 1].sum(1) == 1).all() and (x[:, 20:, 1].sum(1) == 1).all()
    torch.testing.assert_close(y, (x[..., 0] * x[..., 1]).sum(1))
    assert torch.equal(adding_problem(5, 10, seed=3)[0], adding_problem(5, 10, seed=3)[0])
    assert not torch.equal(adding_problem(5, 10, seed=3)[0], adding_problem(5, 10, seed=4)[0])
    trivial = ((y - 1.0) ** 2).mean().item()
    assert abs(trivial - ADDING_TRIVIAL_MSE) < 0.03
    with pytest.raises(ValueError):
        adding_problem(5, 1)


def test_lstm_learns_the_adding_problem_quickly():
    torch.manual_seed(0)
    model = LastStepRegressor("lstm", hidden_size=32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = adding_problem(64 * 500, 30, seed=1)
    for step in range(500):
        loss = ((model(x[step * 64 : (step + 1) * 64]) - y[step * 64 : (step + 1) * 64]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    xt, yt = adding_problem(500, 30, seed=99)
    with torch.no_grad():
        assert ((model(xt) - yt) ** 2).mean().item() < 0.3 * ADDING_TRIVIAL_MSE


def test_parameter_counts():
    D, H = 5, 7
    rnn = count_parameters(nn.RNN(D, H))
    assert rnn == H * (D + H) + 2 * H
    assert count_parameters(nn.LSTM(D, H)) == 4 * rnn
    assert count_parameters(nn.GRU(D, H)) == 3 * rnn


@pytest.mark.parametrize(
    "cell, bidirectional, pooling, layers",
    [("lstm", False, "last", 1), ("gru", True, "last", 2), ("rnn", True, "max", 1), ("lstm", True, "mean", 2)],
)
def test_classifier_ignores_padding(cell, bidirectional, pooling, layers):
    torch.manual_seed(6)
    cfg = SequenceClassifierConfig(
        vocab_size=20,
        cell=cell,
        bidirectional=bidirectional,
        pooling=pooling,
        num_layers=layers,
        d_model=8,
        hidden_size=6,
    )
    model = SequenceClassifier(cfg).eval()
    seq = torch.randint(1, 20, (1, 5))
    alone = model(seq, torch.tensor([5]))
    padded = torch.cat([seq, torch.randint(1, 20, (1, 4))], dim=1)  # garbage after the length
    batch = torch.cat([padded, torch.randint(1, 20, (1, 9))])
    both = model(batch, torch.tensor([5, 9]))
    assert both.shape == (2, 2)
    torch.testing.assert_close(both[:1], alone)


def test_classifier_last_is_final_state():
    torch.manual_seed(7)
    model = SequenceClassifier(SequenceClassifierConfig(vocab_size=10, d_model=4, hidden_size=3)).eval()
    ids, lengths = torch.tensor([[1, 2, 3, 0], [4, 5, 6, 7]]), torch.tensor([3, 4])
    outputs, _ = model.rnn(model.embed(ids))
    expected = model.head(masked_pool(outputs, lengths_to_mask(lengths), "last"))
    # row 0: the unpacked LSTM reads the pad after step 3, but "last" stops at length - 1
    torch.testing.assert_close(model(ids, lengths), expected)


def test_bag_of_embeddings_is_order_blind():
    torch.manual_seed(8)
    bag = BagOfEmbeddings(vocab_size=12, d_model=5)
    ids = torch.tensor([[3, 4, 5, 0], [6, 7, 8, 9]])
    perm = torch.tensor([[5, 3, 4, 0], [9, 8, 6, 7]])
    lengths = torch.tensor([3, 4])
    torch.testing.assert_close(bag(ids, lengths), bag(perm, lengths))
    with pytest.raises(ValueError, match="lengths"):
        bag(ids, torch.tensor([0, 4]))
    with pytest.raises(ValueError, match="ids"):
        bag(ids.float(), lengths)
