"""The seq2seq plumbing shared by units 06 and 07, and the date-translation corpus."""

import pytest
import torch

from course_utils.data import date_pairs
from course_utils.seq2seq import Seq2SeqData, greedy_decode, seq2seq_loss
from course_utils.text import BOS_ID, EOS_ID, PAD_ID


def test_date_pairs_are_real_dates_and_deterministic():
    pairs = date_pairs(200, seed=3)
    assert pairs == date_pairs(200, seed=3) and pairs != date_pairs(200, seed=4)
    import datetime

    for written, iso in pairs:
        day = datetime.date.fromisoformat(iso)
        assert str(day.year) in written
    assert len({w for w, _ in pairs}) > 150


def test_date_pairs_formats_one_known_date():
    import datetime

    from babel.dates import format_date

    assert format_date(datetime.date(2026, 11, 21), "full", locale="fr") == "samedi 21 novembre 2026"
    with pytest.raises(ValueError):
        date_pairs(0)


def test_batches_are_teacher_forced_and_padded():
    pairs = [("ab", "x"), ("abc", "xyz")]
    data = Seq2SeqData.build(pairs)
    ((src, src_lengths, tgt_in, tgt_out),) = data.batches(pairs, batch_size=2)
    assert src.shape == (2, 3) and src_lengths.tolist() == [2, 3] and src[0, 2] == PAD_ID
    assert tgt_in[:, 0].tolist() == [BOS_ID, BOS_ID]
    assert tgt_out[0].tolist()[:2] == [data.tgt_vocab.token_to_id("x"), EOS_ID] and tgt_out[0, 2] == PAD_ID
    assert torch.equal(tgt_in[1, 1:], tgt_out[1, :-1])


class Copier(torch.nn.Module):
    """A 'model' that outputs, at step t, the target token given in ``answer`` (B, T)."""

    def __init__(self, answer, vocab_size):
        super().__init__()
        self.answer, self.vocab_size = answer, vocab_size
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, src, src_lengths, tgt_in):
        steps = tgt_in.shape[1]
        return F_one_hot(self.answer[:, :steps], self.vocab_size) + 0 * self.dummy


def F_one_hot(ids, vocab_size):
    return torch.nn.functional.one_hot(ids, vocab_size).float()


def test_greedy_decode_stops_at_eos_and_pads_after():
    data = Seq2SeqData.build([("a", "xy")])
    x, y = data.tgt_vocab.token_to_id("x"), data.tgt_vocab.token_to_id("y")
    answer = torch.tensor([[x, EOS_ID, y, y], [x, y, y, EOS_ID]])
    src, lengths = data.encode_sources(["a", "a"])
    ids = greedy_decode(Copier(answer, len(data.tgt_vocab)), src, lengths, max_len=4)
    assert ids.tolist() == [[x, EOS_ID, PAD_ID, PAD_ID], [x, y, y, EOS_ID]]
    model = Copier(answer, len(data.tgt_vocab))
    assert data.translate(model, ["a", "a"], max_len=4) == ["x", "xyy"]
    six = torch.tensor([[x, y, y, y, y, y, EOS_ID]] * 2)
    scores = data.evaluate(Copier(six, len(data.tgt_vocab)), [("a", "xyyyyy"), ("a", "xyyyyx")], max_len=8)
    assert scores["exact_match"] == 0.5 and 50 < scores["bleu"] < 100


def test_loss_ignores_padding_and_checks_shapes():
    pairs = [("ab", "x"), ("abc", "xyz")]
    data = Seq2SeqData.build(pairs)
    batch = data.batches(pairs, batch_size=2)[0]
    tgt_out = batch[3]
    perfect = Copier(tgt_out, len(data.tgt_vocab))
    perfect.forward = lambda s, lengths, t: 50 * F_one_hot(tgt_out.clamp(min=0), len(data.tgt_vocab))
    assert seq2seq_loss(perfect, batch).item() < 1e-6
    wrong = Copier(tgt_out, len(data.tgt_vocab))
    wrong.forward = lambda s, lengths, t: torch.zeros(2, 7, len(data.tgt_vocab))
    with pytest.raises(ValueError, match="logits of shape"):
        seq2seq_loss(wrong, batch)


def test_bad_pairs_get_a_clear_error():
    with pytest.raises(ValueError, match="pair 1"):
        Seq2SeqData.build([("a", "b"), ("a",)])
    with pytest.raises(ValueError, match="non-empty"):
        Seq2SeqData.build([])
