"""course_utils.convert: the course GPT as transformers' GPT2LMHeadModel and back, weight for weight."""

import pytest
import torch
from tiny_hf import tiny_gpt2_config

from course_utils.convert import gpt2_config, gpt_to_hf, hf_to_gpt, weight_map
from course_utils.gpt import GPT, GPTConfig, generate

transformers = pytest.importorskip("transformers")

SMALL = dict(vocab_size=37, block_size=16, num_layers=2, num_heads=4, d_model=32)


def _random_gpt(dtype=torch.float64, seed=0, **options) -> GPT:
    torch.manual_seed(seed)
    model = GPT(GPTConfig(**{**SMALL, **options})).to(dtype).eval()
    with torch.no_grad():  # weights far from the init, so a swapped or untransposed tensor shows
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
@pytest.mark.parametrize("options", [dict(bias=True), dict(bias=False), dict(bias=True, gelu="tanh", ffn_hidden=48)])
def test_course_to_hf_logits_equal(dtype, tol, options):
    model = _random_gpt(dtype, **options)
    hf = gpt_to_hf(model)
    idx = torch.randint(0, SMALL["vocab_size"], (3, 16))
    with torch.no_grad():
        ours, theirs = model(idx), hf(idx).logits
    assert theirs.dtype == dtype and theirs.shape == (3, 16, SMALL["vocab_size"])
    assert (ours - theirs).abs().max().item() < tol
    # the head is tied in the copy, and the copy shares no storage with the course model
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()
    assert hf.transformer.wte.weight.data_ptr() != model.tok_emb.weight.data_ptr()


def test_a_transposed_weight_would_be_caught():
    model = _random_gpt(bias=True)
    hf = gpt_to_hf(model)
    with torch.no_grad():
        w = hf.transformer.h[0].attn.c_proj.weight
        w.copy_(w.T.clone())  # square, so the wrong orientation still loads
    idx = torch.randint(0, SMALL["vocab_size"], (2, 10))
    with torch.no_grad():
        assert (model(idx) - hf(idx).logits).abs().max().item() > 1e-3


def test_greedy_generation_equal():
    model = _random_gpt(torch.float32, bias=True)
    hf = gpt_to_hf(model)
    prompt = torch.randint(0, SMALL["vocab_size"], (2, 4))
    ours = generate(model, prompt, 10, temperature=0)
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=10, do_sample=False)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_round_trip_back_to_course(dtype, tol):
    model = _random_gpt(dtype, bias=True)
    back = hf_to_gpt(gpt_to_hf(model))
    for name, tensor in model.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor), name
    idx = torch.randint(0, SMALL["vocab_size"], (2, 16))
    with torch.no_grad():
        assert (back(idx) - model(idx)).abs().max().item() < tol


@pytest.mark.parametrize("activation, gelu", [("gelu_new", "tanh"), ("gelu", "exact")])
def test_random_hf_gpt2_to_course(activation, gelu):
    torch.manual_seed(1)
    config = tiny_gpt2_config(
        vocab_size=41, n_positions=12, n_embd=24, n_layer=3, n_head=3, activation_function=activation
    )
    hf = transformers.GPT2LMHeadModel(config).double().eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0.0, 0.3)
    model = hf_to_gpt(hf)
    assert model.config.gelu == gelu and model.config.ffn_hidden == 96 and model.config.bias
    idx = torch.randint(0, 41, (2, 12))
    with torch.no_grad():
        assert (model(idx) - hf(idx).logits).abs().max().item() < 1e-10


def test_config_and_map():
    config = GPTConfig(**SMALL, bias=True)
    hc = gpt2_config(config)
    assert (hc.n_embd, hc.n_layer, hc.n_head, hc.n_positions, hc.n_inner) == (32, 2, 4, 16, 128)
    assert hc.activation_function == "gelu" and hc.layer_norm_epsilon == 1e-5
    rows = weight_map(config)
    model_names = set(GPT(config).state_dict()) - {"head.weight"}
    assert {r[0] for r in rows} == model_names  # every course tensor mapped exactly once
    hf_names = set(transformers.GPT2LMHeadModel(hc).state_dict()) - {"lm_head.weight"}
    assert {r[1] for r in rows} == hf_names
    assert sum(t for *_, t in rows) == 4 * 2  # four Conv1D weights per block


@pytest.mark.parametrize(
    "options, field",
    [
        (dict(position="rope"), "position"),
        (dict(position="alibi"), "position"),
        (dict(norm="rms"), "norm"),
        (dict(ffn="swiglu"), "ffn"),
        (dict(residual="rezero"), "residual"),
        (dict(norm_first=False), "norm_first"),
        (dict(tie_weights=False), "tie_weights"),
    ],
)
def test_inexpressible_configs_raise(options, field):
    model = GPT(GPTConfig(**SMALL, **options))
    with pytest.raises(ValueError, match=field):
        gpt_to_hf(model)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="GPT"):
        gpt_to_hf(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="GPT2LMHeadModel"):
        hf_to_gpt(_random_gpt())
    hc = tiny_gpt2_config(vocab_size=11, n_embd=8, activation_function="relu")
    with pytest.raises(ValueError, match="activation_function"):
        hf_to_gpt(transformers.GPT2LMHeadModel(hc))
