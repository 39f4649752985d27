"""Unit 05: gated recurrent cells (LSTM, GRU), masked pooling and sequence classifiers.

The cells follow PyTorch's weight layout, so a from-scratch cell given the weights of
``nn.LSTMCell`` / ``nn.GRUCell`` returns the same numbers:

    cell = torch.nn.LSTMCell(input_size, hidden_size)
    h, c = lstm_cell(x, (h, c), cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)

* LSTM rows of ``W_ih (4H, D)`` are the gates in the order input, forget, cell candidate,
  output (``i, f, g, o``); ``c' = f * c + i * g`` and ``h' = o * tanh(c')``.
* GRU rows of ``W_ih (3H, D)`` are reset, update, candidate (``r, z, n``); PyTorch applies the
  reset gate to the projected state *with its bias*: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``,
  and ``h' = z * h + (1 - z) * n``. :func:`gru_cell_textbook` applies ``r`` to ``h`` before the
  projection, ``n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)``: also a GRU, but a different function.

Also here: sequence runners over ``(B, T, D)``, the adding problem (a long-range regression task),
:class:`SequenceClassifier` and the order-blind :class:`BagOfEmbeddings` baseline. The pooling over
padded batches, :func:`masked_pool`, and ``count_parameters`` are defined in ``course_utils.primitives``
and importable from here too (unit 05 introduces them).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .primitives import POOLINGS, count_parameters, lengths_to_mask, masked_pool  # noqa: F401 - re-exported
from .text import PAD_ID

CELLS = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
Tensor = torch.Tensor
Bias = torch.Tensor | None  # a cell's optional bias


# --------------------------------------------------------------------------- argument checks


def _check_cell(
    x: torch.Tensor,
    h: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b_ih: torch.Tensor | None,
    b_hh: torch.Tensor | None,
    gates: int,
    name: str,
) -> int:
    """Validate the shapes of one cell step; return the hidden size H."""
    for label, t in (("x", x), ("h", h), ("W_ih", W_ih), ("W_hh", W_hh)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: {label} must be a torch.Tensor, got {type(t).__name__}")
    if x.dim() != 2:
        raise ValueError(f"{name}: x must be (B, D), got shape {tuple(x.shape)}")
    if W_hh.dim() != 2 or W_hh.shape[0] % gates or W_hh.shape[0] != gates * W_hh.shape[1]:
        raise ValueError(f"{name}: W_hh must be ({gates}H, H), got shape {tuple(W_hh.shape)}")
    hidden = W_hh.shape[1]
    if tuple(W_ih.shape) != (gates * hidden, x.shape[1]):
        raise ValueError(
            f"{name}: W_ih must be ({gates}H, D) = {(gates * hidden, x.shape[1])}, got {tuple(W_ih.shape)}"
        )
    if tuple(h.shape) != (x.shape[0], hidden):
        raise ValueError(f"{name}: h must be (B, H) = {(x.shape[0], hidden)}, got {tuple(h.shape)}")
    for label, b in (("b_ih", b_ih), ("b_hh", b_hh)):
        if b is not None and tuple(b.shape) != (gates * hidden,):
            raise ValueError(f"{name}: {label} must be ({gates}H,) = ({gates * hidden},), got {tuple(b.shape)}")
    return hidden


def _affine(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    out = x @ W.T  # (B, G*H)
    return out if b is None else out + b


# --------------------------------------------------------------------------- cells


def lstm_cell(
    x: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor],
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b_ih: torch.Tensor | None = None,
    b_hh: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step (Hochreiter & Schmidhuber 1997, forget gate of Gers et al. 2000).

    ``x (B, D)``, ``state = (h (B, H), c (B, H))``, ``W_ih (4H, D)``, ``W_hh (4H, H)``,
    ``b_ih, b_hh (4H,)`` or ``None``; gate order ``i, f, g, o`` as in ``nn.LSTMCell``.
    Returns ``(h', c')``, each ``(B, H)``.
    """
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise ValueError("lstm_cell: state must be a pair (h, c)")
    h, c = state
    _check_cell(x, h, W_ih, W_hh, b_ih, b_hh, 4, "lstm_cell")
    if not isinstance(c, torch.Tensor) or c.shape != h.shape:
        raise ValueError(f"lstm_cell: c must have the shape of h {tuple(h.shape)}")
    gates = _affine(x, W_ih, b_ih) + _affine(h, W_hh, b_hh)  # (B, 4H)
    i, f, g, o = gates.chunk(4, dim=1)  # each (B, H)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c_next = f * c + i * g  # (B, H) additive update of the memory cell
    h_next = o * torch.tanh(c_next)  # (B, H)
    return h_next, c_next


def gru_cell(
    x: torch.Tensor,
    h: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b_ih: torch.Tensor | None = None,
    b_hh: torch.Tensor | None = None,
) -> torch.Tensor:
    """One GRU step as ``nn.GRUCell`` computes it (Cho et al. 2014, PyTorch's reset placement).

    ``x (B, D)``, ``h (B, H)``, ``W_ih (3H, D)``, ``W_hh (3H, H)``, biases ``(3H,)`` or ``None``;
    gate order ``r, z, n``. The reset gate multiplies ``W_hn h + b_hn``. Returns ``h' (B, H)``.
    """
    _check_cell(x, h, W_ih, W_hh, b_ih, b_hh, 3, "gru_cell")
    xr, xz, xn = _affine(x, W_ih, b_ih).chunk(3, dim=1)  # each (B, H)
    hr, hz, hn = _affine(h, W_hh, b_hh).chunk(3, dim=1)  # each (B, H)
    r = torch.sigmoid(xr + hr)
    z = torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)  # reset applied after the projection (and its bias)
    return z * h + (1 - z) * n


def gru_cell_textbook(x: Tensor, h: Tensor, W_ih: Tensor, W_hh: Tensor, b_ih: Bias = None, b_hh: Bias = None) -> Tensor:
    """One GRU step with the reset gate applied to ``h`` *before* the projection (Cho et al. 2014).

    Same arguments and weight layout as :func:`gru_cell`:
    ``n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)``. Returns ``h' (B, H)``.
    """
    hidden = _check_cell(x, h, W_ih, W_hh, b_ih, b_hh, 3, "gru_cell_textbook")
    xr, xz, xn = _affine(x, W_ih, b_ih).chunk(3, dim=1)  # each (B, H)
    b_r, b_z, b_n = (None, None, None) if b_hh is None else b_hh.chunk(3)
    W_r, W_z, W_n = W_hh.split(hidden, dim=0)  # each (H, H)
    r = torch.sigmoid(xr + _affine(h, W_r, b_r))
    z = torch.sigmoid(xz + _affine(h, W_z, b_z))
    n = torch.tanh(xn + _affine(r * h, W_n, b_n))  # reset applied to h, then projected
    return z * h + (1 - z) * n


# --------------------------------------------------------------------------- sequence runners


def _check_sequence(x: torch.Tensor, name: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"{name}: x must be a (B, T, D) tensor, got {getattr(x, 'shape', type(x).__name__)}")


def run_lstm(
    x: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b_ih: torch.Tensor | None = None,
    b_hh: torch.Tensor | None = None,
    state: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Run :func:`lstm_cell` over ``x (B, T, D)`` from ``state`` (zeros by default).

    Returns ``outputs (B, T, H)`` (every ``h_t``) and the final ``(h, c)``, like a one-layer,
    batch-first ``nn.LSTM``.
    """
    _check_sequence(x, "run_lstm")
    batch_size, hidden = x.shape[0], W_hh.shape[1]
    if state is None:
        zeros = x.new_zeros(batch_size, hidden)  # (B, H)
        state = (zeros, zeros)
    outputs = []
    for t in range(x.shape[1]):
        state = lstm_cell(x[:, t], state, W_ih, W_hh, b_ih, b_hh)
        outputs.append(state[0])
    return torch.stack(outputs, dim=1), state  # (B, T, H)


def run_gru(
    x: torch.Tensor,
    W_ih: torch.Tensor,
    W_hh: torch.Tensor,
    b_ih: torch.Tensor | None = None,
    b_hh: torch.Tensor | None = None,
    h: torch.Tensor | None = None,
    textbook: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run :func:`gru_cell` (or :func:`gru_cell_textbook`) over ``x (B, T, D)`` from ``h`` (zeros).

    Returns ``outputs (B, T, H)`` and the final ``h (B, H)``.
    """
    _check_sequence(x, "run_gru")
    cell = gru_cell_textbook if textbook else gru_cell
    if h is None:
        h = x.new_zeros(x.shape[0], W_hh.shape[1])  # (B, H)
    outputs = []
    for t in range(x.shape[1]):
        h = cell(x[:, t], h, W_ih, W_hh, b_ih, b_hh)
        outputs.append(h)
    return torch.stack(outputs, dim=1), h  # (B, T, H)


# --------------------------------------------------------------------------- the adding problem


def adding_problem(num_examples: int, seq_len: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The adding problem (Hochreiter & Schmidhuber 1997): ``x (N, T, 2)`` float, ``y (N,)`` float.

    Channel 0 holds uniform numbers in [0, 1); channel 1 marks exactly two steps with 1, one in
    the first half and one in the second half of the sequence. The target is the sum of the two
    marked numbers. Always predicting 1 gives the trivial MSE 1/6 (variance of a sum of two
    uniforms). Deterministic in ``seed``.
    """
    if not isinstance(num_examples, int) or num_examples < 1:
        raise ValueError(f"num_examples must be a positive int, got {num_examples!r}")
    if not isinstance(seq_len, int) or seq_len < 2:
        raise ValueError(f"seq_len must be an int >= 2, got {seq_len!r}")
    gen = torch.Generator().manual_seed(seed)
    values = torch.rand(num_examples, seq_len, generator=gen)  # (N, T)
    half = seq_len // 2
    first = torch.randint(0, half, (num_examples,), generator=gen)  # (N,)
    second = torch.randint(half, seq_len, (num_examples,), generator=gen)  # (N,)
    marks = torch.zeros(num_examples, seq_len)  # (N, T)
    rows = torch.arange(num_examples)
    marks[rows, first] = 1.0
    marks[rows, second] = 1.0
    x = torch.stack([values, marks], dim=-1)  # (N, T, 2)
    y = (values * marks).sum(dim=1)  # (N,)
    return x, y


ADDING_TRIVIAL_MSE = 1.0 / 6.0


class LastStepRegressor(nn.Module):
    """``x (B, T, D)`` -> ``(B,)``: a recurrent layer read at its last step, then a linear head."""

    def __init__(self, cell: str = "lstm", input_size: int = 2, hidden_size: int = 32):
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell must be one of {sorted(CELLS)}, got {cell!r}")
        self.rnn = CELLS[cell](input_size, hidden_size, batch_first=True)
        self.head = nn.Linear(hidden_size, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.rnn(x)  # (B, T, H)
        return self.head(outputs[:, -1]).squeeze(-1)  # (B,)


# --------------------------------------------------------------------------- classifiers


@dataclass
class TextClassifierConfig:
    """What every text classifier of the course shares: token ids ``(B, T)`` -> embeddings of width
    ``d_model`` (``pad_id`` embeds to zeros) -> ``num_layers`` of an encoder -> ``pooling`` over the
    real tokens -> logits ``(B, num_classes)``. Each model extends it with its encoder's fields:
    :class:`SequenceClassifierConfig` here, ``course_utils.transformer.TransformerClassifierConfig``
    in unit 07."""

    vocab_size: int
    num_classes: int = 2
    d_model: int = 32  # embedding width D
    num_layers: int = 1
    pooling: str = "last"  # "last" | "mean" | "max"
    dropout: float = 0.0
    pad_id: int = PAD_ID


@dataclass
class SequenceClassifierConfig(TextClassifierConfig):
    """The recurrent :class:`SequenceClassifier`'s configuration: a (bi)RNN/LSTM/GRU encoder."""

    hidden_size: int = 64  # recurrent state width H
    cell: str = "lstm"  # "rnn" | "lstm" | "gru"
    bidirectional: bool = False


ClassifierConfig = SequenceClassifierConfig  # unit 05's name for it (lecture 05 calls gated.ClassifierConfig)


class SequenceClassifier(nn.Module):
    """Embedding -> (bi)RNN/LSTM/GRU over packed sequences -> masked pooling -> MLP -> logits.

    ``forward(ids (B, T) long, lengths (B,) long) -> logits (B, C)``. Padding never reaches the
    recurrence (``pack_padded_sequence``) nor the pooling (masks). With ``bidirectional`` and
    ``pooling="last"``, the features are the final forward state (at ``length - 1``) and the
    final backward state (at step 0), concatenated.
    """

    def __init__(self, config: SequenceClassifierConfig):
        super().__init__()
        if config.cell not in CELLS:
            raise ValueError(f"cell must be one of {sorted(CELLS)}, got {config.cell!r}")
        if config.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {config.pooling!r}")
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.rnn = CELLS[config.cell](
            config.d_model,
            config.hidden_size,
            num_layers=config.num_layers,
            batch_first=True,
            bidirectional=config.bidirectional,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
        )
        width = config.hidden_size * (2 if config.bidirectional else 1)
        self.head = nn.Sequential(
            nn.Linear(width, width), nn.ReLU(), nn.Dropout(config.dropout), nn.Linear(width, config.num_classes)
        )

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        _check_ids(ids, lengths)
        x = self.embed(ids)  # (B, T, D)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out_packed, state = self.rnn(packed)
        outputs, _ = pad_packed_sequence(out_packed, batch_first=True, total_length=ids.shape[1])  # (B, T, H*dirs)
        if self.config.pooling == "last":
            h_n = state[0] if isinstance(state, tuple) else state  # (layers*dirs, B, H)
            dirs = 2 if self.config.bidirectional else 1
            features = torch.cat(list(h_n[-dirs:]), dim=-1)  # (B, H*dirs) final states of the top layer
        else:
            features = masked_pool(outputs, lengths_to_mask(lengths, ids.shape[1]).to(ids.device), self.config.pooling)
        return self.head(features)  # (B, C)


class BagOfEmbeddings(nn.Module):
    """Order-blind baseline: mean of the token embeddings over the valid steps -> linear -> logits.

    ``forward(ids (B, T) long, lengths (B,) long) -> logits (B, C)``. Permuting the valid
    tokens of a sequence does not change its output.
    """

    def __init__(self, vocab_size: int, num_classes: int = 2, d_model: int = 32, pad_id: int = 0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        _check_ids(ids, lengths)
        mask = lengths_to_mask(lengths, ids.shape[1]).to(ids.device)  # (B, T)
        pooled = masked_pool(self.embed(ids), mask, "mean")  # (B, D)
        return self.head(pooled)  # (B, C)


def _check_ids(ids: torch.Tensor, lengths: torch.Tensor, name: str = "ids") -> None:
    """Validate a batch of ``name`` ``(B, T)`` integer token ids and its lengths ``(B,)``, each in ``[1, T]``."""
    lengths_name = "lengths" if name == "ids" else f"{name}_lengths"
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point():
        raise ValueError(f"{name} must be a (B, T) integer tensor, got {getattr(ids, 'shape', type(ids).__name__)}")
    if not isinstance(lengths, torch.Tensor) or tuple(lengths.shape) != (ids.shape[0],) or lengths.is_floating_point():
        raise ValueError(
            f"{lengths_name} must be a ({ids.shape[0]},) integer tensor, got {getattr(lengths, 'shape', lengths)!r}"
        )
    if (lengths < 1).any() or (lengths > ids.shape[1]).any():
        raise ValueError(
            f"{lengths_name} must lie in [1, T={ids.shape[1]}], got min {int(lengths.min())}, max {int(lengths.max())}"
        )
