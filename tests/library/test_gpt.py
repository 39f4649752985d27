"""The configurable GPT of course_utils.gpt and the character-LM benchmark built on it."""

import math

import pytest
import torch

from course_utils.gpt import GPT, GPTConfig, apply_rope, generate, rope_tables

VARIANTS = [
    dict(),
    dict(norm_first=False),
    dict(norm="rms", ffn="swiglu", position="rope"),
    dict(bias=True, tie_weights=False),
    dict(ffn="geglu", position="alibi"),
    dict(residual="rezero", init="default"),
]


@pytest.mark.parametrize("options", VARIANTS, ids=str)
def test_shapes_and_causality(options):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=16, num_layers=2, num_heads=2, d_model=16, **options)).eval()
    idx = torch.randint(0, 11, (3, 10))
    logits = model(idx)
    assert logits.shape == (3, 10, 11)
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 11  # alter the future of position 5
    assert torch.allclose(model(changed)[:, :6], logits[:, :6], atol=1e-6)
    assert not torch.allclose(model(changed)[:, 6:], logits[:, 6:])


def test_loss_of_an_untrained_model_is_near_log_vocab():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=8, num_layers=1, num_heads=2, d_model=16))
    idx = torch.randint(0, 50, (4, 8))
    assert abs(model.loss(idx, idx.roll(-1, 1)).item() - math.log(50)) < 0.1


def test_init_scales_residual_projections_and_ties_weights():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, block_size=8, num_layers=8, num_heads=4, d_model=256))
    assert model.head.weight is model.tok_emb.weight
    assert abs(model.blocks[0].attn.qkv.weight.std().item() - 0.02) < 2e-3
    assert abs(model.blocks[0].attn.proj.weight.std().item() - 0.02 / math.sqrt(16)) < 1e-3


def test_swiglu_has_about_the_parameters_of_the_gelu_ffn():
    gelu = GPT(GPTConfig(vocab_size=10, d_model=96, num_layers=2)).num_parameters()
    swiglu = GPT(GPTConfig(vocab_size=10, d_model=96, num_layers=2, ffn="swiglu")).num_parameters()
    assert abs(swiglu - gelu) / gelu < 0.02


def test_unit07_switches_geglu_alibi_rezero_and_default_init():
    from course_utils.taming import alibi_bias

    small = dict(vocab_size=10, d_model=96, num_layers=2)
    assert (
        GPT(GPTConfig(ffn="geglu", **small)).num_parameters() == GPT(GPTConfig(ffn="swiglu", **small)).num_parameters()
    )
    alibi = GPT(GPTConfig(vocab_size=10, block_size=12, num_heads=4, d_model=16, position="alibi"))
    assert alibi.pos_emb is None and torch.equal(alibi.alibi, alibi_bias(4, 12))
    torch.manual_seed(0)
    rezero = GPT(
        GPTConfig(vocab_size=10, block_size=8, num_layers=3, num_heads=2, d_model=16, residual="rezero")
    ).eval()
    idx = torch.randint(0, 10, (2, 8))
    embedded = rezero.tok_emb(idx) + rezero.pos_emb(torch.arange(8))
    assert torch.allclose(rezero(idx), rezero.head(rezero.norm_f(embedded)), atol=1e-6)  # blocks start as identity
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in rezero.blocks.modules())
    torch.manual_seed(0)
    default = GPT(GPTConfig(vocab_size=64, block_size=8, num_layers=2, num_heads=4, d_model=256, init="default"))
    assert abs(default.tok_emb.weight.std().item() - 1.0) < 0.05  # nn.Embedding's N(0, 1)
    bound = 1 / math.sqrt(256)  # nn.Linear's U(-1/sqrt(fan_in), ..)
    assert default.blocks[0].attn.proj.weight.abs().max().item() <= bound
    assert default.blocks[0].attn.proj.weight.std().item() > 0.5 * bound / math.sqrt(3)
    with pytest.raises(ValueError, match="residual"):
        GPTConfig(vocab_size=5, residual="highway")
    with pytest.raises(ValueError, match="init"):
        GPTConfig(vocab_size=5, init="xavier")


def test_blocks_are_built_from_the_units_layers():
    from course_utils.taming import GLUFeedForward, ReZero
    from course_utils.transformer import FeedForward

    small = dict(vocab_size=10, block_size=8, num_layers=1, num_heads=2, d_model=16)
    block = GPT(GPTConfig(**small)).blocks[0]
    assert isinstance(block.ffn, FeedForward) and block.ffn.linear1.bias is None and block.ffn.linear2.residual
    block = GPT(GPTConfig(**small, ffn="geglu", bias=True)).blocks[0]
    assert isinstance(block.ffn, GLUFeedForward) and block.ffn.activation == "geglu" and block.ffn.gate.bias is not None
    block = GPT(GPTConfig(**small, residual="rezero", dropout=0.1)).blocks[0]
    assert isinstance(block.attn, ReZero) and isinstance(block.ffn, ReZero) and block.ffn.dropout.p == 0.1
    assert block.ffn.sublayer.linear2.residual


def test_rope_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    cos, sin = rope_tables(32, 8)
    q, k = torch.randn(8), torch.randn(8)

    def score(m, n):
        qm = apply_rope(q.expand(32, 8), cos, sin)[m]
        kn = apply_rope(k.expand(32, 8), cos, sin)[n]
        return (qm @ kn).item()

    assert score(5, 2) == pytest.approx(score(20, 17), abs=1e-5)
    assert score(5, 2) != pytest.approx(score(5, 3), abs=1e-3)
    rotated = apply_rope(q.expand(32, 8), cos, sin)
    assert torch.allclose(rotated.norm(dim=-1), q.norm().expand(32), atol=1e-5)  # rotations keep length


def test_generate_is_greedy_at_temperature_zero_and_crops_context():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=7, block_size=4, num_layers=1, num_heads=1, d_model=8))
    out = generate(model, torch.zeros(2, 1, dtype=torch.long), 6, temperature=0)
    assert out.shape == (2, 7)
    expected = model(out[:, 2:6])[:, -1].argmax(-1)
    assert torch.equal(out[:, 6], expected)
    sampled = generate(
        model, torch.zeros(1, 1, dtype=torch.long), 5, top_k=1, generator=torch.Generator().manual_seed(0)
    )
    assert torch.equal(sampled, generate(model, torch.zeros(1, 1, dtype=torch.long), 5, temperature=0))


@pytest.mark.parametrize("options", VARIANTS, ids=str)
def test_cache_is_an_option_of_the_one_forward_pass(options):
    """Tokens fed in pieces through ``model(idx, cache)`` give the logits of one full pass, and
    ``generate(..., use_cache=True)`` writes the tokens that ``generate`` writes without it."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=16, num_layers=2, num_heads=2, d_model=16, **options)).eval()
    if options.get("residual") == "rezero":  # alpha starts at 0: let the blocks act
        for block in model.blocks:
            block.attn.alpha.data.fill_(0.5)
            block.ffn.alpha.data.fill_(0.5)
    idx = torch.randint(0, 11, (3, 12), generator=torch.Generator().manual_seed(1))
    cache = model.new_cache(batch_size=3, max_len=12)
    with torch.no_grad():
        pieces = [model(idx[:, :5], cache)] + [model(idx[:, t : t + 1], cache) for t in range(5, 12)]
    assert cache.length == 12 and cache.nbytes == 2 * 2 * 3 * 2 * 12 * 8 * 4
    torch.testing.assert_close(torch.cat(pieces, dim=1), model(idx), rtol=1e-5, atol=1e-5)
    prompt = idx[:2, :3]
    assert torch.equal(generate(model, prompt, 10, temperature=0, use_cache=True), generate(model, prompt, 10, 0))
    sampled = [
        generate(model, prompt, 8, top_k=5, generator=torch.Generator().manual_seed(2), use_cache=cached)
        for cached in (True, False)
    ]
    assert torch.equal(*sampled)


def test_cache_errors_name_the_block_size():
    from course_utils.gpt import check_fits

    model = GPT(GPTConfig(vocab_size=5, block_size=6, num_layers=1, num_heads=1, d_model=8))
    cache = model.new_cache(batch_size=1, max_len=6)
    model(torch.zeros(1, 4, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="4 cached \\+ 3 new tokens exceed block_size=6"):
        model(torch.zeros(1, 3, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="block_size=6"):  # a cache does not crop: the sequence must fit
        generate(model, torch.zeros(1, 4, dtype=torch.long), 3, use_cache=True)
    assert generate(model, torch.zeros(1, 4, dtype=torch.long), 3).shape == (1, 7)  # without one it crops
    with pytest.raises(ValueError, match="long"):
        check_fits(model, torch.zeros(1, 2), 1)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(vocab_size=5, d_model=10, num_heads=3)
    with pytest.raises(ValueError, match="norm"):
        GPTConfig(vocab_size=5, norm="batch")
    model = GPT(GPTConfig(vocab_size=5, block_size=4, num_layers=1, num_heads=1, d_model=8))
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match="long"):
        model(torch.zeros(1, 3))


def test_char_lm_benchmark_runs_on_any_text_file(tmp_path, capsys):
    from benchmarks import char_lm

    path = tmp_path / "tiny.txt"
    path.write_text("the quick brown fox jumps over the lazy dog. " * 300, encoding="utf-8")
    char_lm.main(["--text", str(path), "--steps", "3"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    course, baseline = (float(part.split("=")[1]) for part in last.split())
    assert last.startswith("course=") and " baseline=" in last
    assert 0 < course < 5 and 0 < baseline < 5
    with pytest.raises(SystemExit):
        char_lm.main(["--text", str(tmp_path / "missing.txt"), "--steps", "1"])


def test_lr_schedule_warms_up_then_decays_to_min():
    from benchmarks.char_lm import Recipe, lr_at

    recipe = Recipe(lr=1e-3, min_lr=1e-4, warmup_steps=100)
    assert lr_at(recipe, 0, 0.0) == pytest.approx(1e-5)
    assert lr_at(recipe, 99, 0.01) == pytest.approx(1e-3)
    assert lr_at(recipe, 500, 0.5) == pytest.approx(5.5e-4)
    assert lr_at(recipe, 900, 1.0) == pytest.approx(1e-4)
