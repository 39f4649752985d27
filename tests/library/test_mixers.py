"""Tests of course_utils.mixers: for every mixer, the parallel forward pass gives the same logits as
prompt-then-steps decoding with the carried state; state sizes; generation; training moves the loss."""

import pytest
import torch

from course_utils.mixers import MIXERS, MixerLM, MixerLMConfig, generate, state_bytes


def model_for(mixer: str) -> MixerLM:
    torch.manual_seed(0)
    config = MixerLMConfig(vocab_size=30, seq_len=48, d_model=32, num_heads=4, num_layers=2, mixer=mixer, chunk_size=8)
    model = MixerLM(config).double().eval()
    with torch.no_grad():  # std-0.02 weights give nearly uniform logits: make the model say something
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(10)
    return model


@pytest.mark.parametrize("mixer", MIXERS)
def test_parallel_logits_equal_stepwise_logits(mixer):
    model = model_for(mixer)
    idx = torch.randint(30, (2, 40), generator=torch.Generator().manual_seed(1))
    full = model(idx)  # (2, 40, 30)
    assert full.shape == (2, 40, 30)
    logits, state = model(idx[:, :13], return_state=True)  # a prompt in parallel (not a multiple of the chunk)
    pieces = [logits]
    for t in range(13, 40):
        logits, state = model(idx[:, t : t + 1], state=state, return_state=True)
        pieces.append(logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-9)
    # all steps from the first token on, no parallel pass at all
    state, steps = None, []
    for t in range(40):
        logits, state = model(idx[:, t : t + 1], state=state, return_state=True)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-9)


@pytest.mark.parametrize("mixer", MIXERS)
def test_state_size_constant_for_recurrent_mixers_only(mixer):
    model = model_for(mixer)
    sizes = []
    for length in (4, 16, 32):
        _, state = model(torch.zeros(1, length, dtype=torch.long), return_state=True)
        sizes.append(state_bytes(state))
    if mixer == "softmax":  # the cache: 2 (k, v) * layers * D numbers of 8 bytes per token
        assert sizes == [2 * 2 * 32 * 8 * n for n in (4, 16, 32)]
    else:
        assert sizes[0] == sizes[1] == sizes[2] > 0


@pytest.mark.parametrize("mixer", MIXERS)
def test_generate_greedy_equals_argmax_of_full_forward(mixer):
    model = model_for(mixer)
    prompt = torch.randint(30, (2, 5), generator=torch.Generator().manual_seed(2))
    ids = generate(model, prompt, 20)
    assert ids.shape == (2, 25) and torch.equal(ids[:, :5], prompt)
    logits = model(ids[:, :-1])  # what a model without state predicts at each position
    assert torch.equal(logits[:, 4:].argmax(-1), ids[:, 5:])
    assert len(set(ids[0, 5:].tolist())) > 1
    sampled = generate(model, prompt, 5, temperature=1.0, generator=torch.Generator().manual_seed(0))
    assert sampled.shape == (2, 10)


def test_training_lowers_the_loss_for_each_mixer():
    data = torch.arange(33).remainder(6).repeat(8, 1)  # a periodic sequence: easy to learn
    x, y = data[:, :-1], data[:, 1:]
    for mixer in MIXERS:
        torch.manual_seed(0)
        model = MixerLM(MixerLMConfig(vocab_size=6, seq_len=32, d_model=32, num_heads=2, num_layers=1, mixer=mixer))
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        first = model.loss(x, y).item()
        for _ in range(30):
            loss = model.loss(x, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert loss.item() < 0.5 * first, mixer


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="mixer"):
        MixerLMConfig(vocab_size=10, mixer="lstm")
    with pytest.raises(ValueError, match="divisible"):
        MixerLMConfig(vocab_size=10, d_model=30, num_heads=4)
    assert MixerLMConfig(vocab_size=10, mixer="gated").position == "none"
    model = model_for("softmax")
    with pytest.raises(ValueError, match="seq_len"):
        model(torch.zeros(1, 49, dtype=torch.long))
    with pytest.raises(ValueError, match="long"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="prompt"):
        generate(model, torch.zeros(3, dtype=torch.long), 2)
