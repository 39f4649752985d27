"""course_utils.vit: patches, patch embedding, the ViT, rollout and position similarity, each
against an independent reference (F.unfold, Conv2d, brute force)."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.vit import (
    PatchEmbedding,
    SmallCNN,
    ViT,
    ViTConfig,
    attention_rollout,
    cls_attention_map,
    img_to_patch,
    position_similarity,
)


@pytest.mark.parametrize("shape,p", [((2, 1, 28, 28), 4), ((3, 3, 32, 32), 8), ((1, 2, 6, 6), 3)])
def test_img_to_patch_equals_unfold(shape, p):
    images = torch.randn(*shape)
    expected = F.unfold(images, kernel_size=p, stride=p).transpose(1, 2)  # (B, N, C*p*p)
    torch.testing.assert_close(img_to_patch(images, p), expected, rtol=0, atol=0)


def test_img_to_patch_row_major_order():
    images = torch.arange(16.0).view(1, 1, 4, 4)
    patches = img_to_patch(images, 2)
    assert patches[0, 1].tolist() == [2.0, 3.0, 6.0, 7.0]  # second patch: top row, right half
    assert patches[0, 2].tolist() == [8.0, 9.0, 12.0, 13.0]  # third patch: bottom row, left half


def test_img_to_patch_rejects_bad_input():
    with pytest.raises(ValueError, match="not divisible"):
        img_to_patch(torch.zeros(1, 1, 28, 28), 5)
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        img_to_patch(torch.zeros(28, 28), 4)


def test_patch_embedding_equals_conv2d():
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 16, kernel_size=4, stride=4)
    embed = PatchEmbedding(3, 4, 16).from_conv(conv)
    images = torch.randn(2, 3, 16, 16)
    expected = conv(images).flatten(2).transpose(1, 2)  # (B, N, D)
    torch.testing.assert_close(embed(images), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="Conv2d"):
        embed.from_conv(nn.Conv2d(3, 16, kernel_size=4, stride=2))


def test_vit_shapes_attention_and_errors():
    torch.manual_seed(0)
    config = ViTConfig(image_size=28, patch_size=7, num_layers=2, d_model=32, num_heads=4, num_classes=5)
    model = ViT(config).eval()
    images = torch.randn(3, 1, 28, 28)
    logits, attentions = model(images, return_attention=True)
    assert logits.shape == (3, 5) and len(attentions) == 2
    assert attentions[0].shape == (3, 4, 17, 17)
    torch.testing.assert_close(attentions[0].sum(-1), torch.ones(3, 4, 17))
    # the fused attention path gives the same logits as the explicit one
    torch.testing.assert_close(model(images), logits, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"\(B, 1, 28, 28\)"):
        model(torch.randn(3, 3, 28, 28))
    with pytest.raises(ValueError, match="divisible"):
        ViTConfig(image_size=28, patch_size=5)


def test_vit_prediction_is_from_cls_token_only():
    """Changing the head's input to anything but the CLS state must change nothing else: the logits
    equal head(norm(CLS state)) computed by hand from the blocks."""
    torch.manual_seed(1)
    model = ViT(ViTConfig(image_size=8, patch_size=4, num_layers=1, d_model=16, num_heads=2)).eval()
    images = torch.randn(2, 1, 8, 8)
    x = torch.cat([model.cls_token.expand(2, -1, -1), model.patch_embedding(images)], 1) + model.pos_embedding
    for block in model.blocks:
        x, _ = block(x)
    torch.testing.assert_close(model(images), model.head(model.norm(x[:, 0])))


def test_vit_learns_a_tiny_task():
    """Bright-left vs bright-right 8x8 images: a tiny ViT separates them within 60 steps."""
    torch.manual_seed(0)
    images = torch.rand(256, 1, 8, 8) * 0.2
    labels = torch.randint(0, 2, (256,))
    images[labels == 0, :, :, :4] += 1.0
    images[labels == 1, :, :, 4:] += 1.0
    model = ViT(ViTConfig(image_size=8, patch_size=4, num_layers=1, d_model=16, num_heads=2, num_classes=2))
    opt = torch.optim.AdamW(model.parameters(), 3e-3)
    for _ in range(60):
        loss = F.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert (model(images).argmax(-1) == labels).float().mean() > 0.95


def _brute_rollout(attentions, residual):
    result = None
    for a in attentions:
        a = a.mean(1)
        if residual:
            a = 0.5 * a + 0.5 * torch.eye(a.shape[-1])
        result = a if result is None else torch.einsum("bij,bjk->bik", a, result)
    return result


def test_attention_rollout_matches_definition():
    torch.manual_seed(0)
    attentions = [torch.softmax(torch.randn(2, 3, 5, 5), -1) for _ in range(3)]
    for residual in (True, False):
        rollout = attention_rollout(attentions, add_residual=residual)
        torch.testing.assert_close(rollout, _brute_rollout(attentions, residual))
        torch.testing.assert_close(rollout.sum(-1), torch.ones(2, 5))
    # order matters: the last layer multiplies from the left
    assert not torch.allclose(attention_rollout(attentions), attention_rollout(attentions[::-1]))
    with pytest.raises(ValueError, match="return_attention"):
        attention_rollout([None])


def test_cls_attention_map_and_position_similarity():
    attention = torch.softmax(torch.randn(2, 4, 10, 10), -1)
    heat = cls_attention_map(attention, (3, 3))
    torch.testing.assert_close(heat, attention.mean(1)[:, 0, 1:].view(2, 3, 3))
    with pytest.raises(ValueError, match="T = 1 \\+ 4\\*4"):
        cls_attention_map(attention, (4, 4))
    pos = torch.randn(1, 10, 8)
    sim = position_similarity(pos, (3, 3))
    assert sim.shape == (3, 3, 3, 3)
    torch.testing.assert_close(sim[1, 2, 0, 1], F.cosine_similarity(pos[0, 1 + 5], pos[0, 1 + 1], dim=0))
    torch.testing.assert_close(torch.diagonal(sim.view(9, 9)), torch.ones(9))


def test_small_cnn_shapes():
    model = SmallCNN(in_channels=3, num_classes=7, width=8)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 7)
    assert model(torch.randn(2, 3, 8, 8)).shape == (2, 7)


def test_config_switches_pool_and_init():
    torch.manual_seed(0)
    images = torch.randn(2, 1, 8, 8)
    model = ViT(ViTConfig(image_size=8, patch_size=4, num_layers=1, d_model=16, num_heads=2, pool="mean")).eval()
    x = torch.cat([model.cls_token.expand(2, -1, -1), model.patch_embedding(images)], 1) + model.pos_embedding
    x, _ = model.blocks[0](x)
    torch.testing.assert_close(model(images), model.head(model.norm(x[:, 1:].mean(1))))
    vit_init = ViT(ViTConfig(d_model=64, num_layers=1)).blocks[0].attn.qkv.weight
    torch_init = ViT(ViTConfig(d_model=64, num_layers=1, init="default")).blocks[0].attn.qkv.weight
    assert abs(vit_init.std().item() - 0.02) < 0.002  # truncated normal, std 0.02
    assert abs(torch_init.std().item() - 64**-0.5 / 3**0.5) < 0.005  # kaiming-uniform bound 1/sqrt(fan_in)
    for bad in (dict(pool="max"), dict(init="xavier")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ViTConfig(**bad)


def test_vit_and_gpt_share_the_fused_attention_projections():
    """One fused q/k/v projection for both models (course_utils.self_attention); the parameter names that
    checkpoints and unit 11's conversion rely on stay ``attn.qkv`` and ``attn.proj``."""
    from course_utils.gpt import GPT, GPTConfig
    from course_utils.self_attention import FusedSelfAttention

    vit = ViT(ViTConfig(image_size=8, patch_size=4, num_layers=1, d_model=8, num_heads=2))
    gpt = GPT(GPTConfig(vocab_size=5, block_size=4, num_layers=1, num_heads=2, d_model=8))
    assert isinstance(vit.blocks[0].attn, FusedSelfAttention) and isinstance(gpt.blocks[0].attn, FusedSelfAttention)
    assert {k for k in vit.state_dict() if ".attn." in k} == {
        "blocks.0.attn.qkv.weight",
        "blocks.0.attn.qkv.bias",
        "blocks.0.attn.proj.weight",
        "blocks.0.attn.proj.bias",
    }
    attn = vit.blocks[0].attn
    x = torch.randn(2, 5, 8)
    q, k, v = attn.project(x)  # (B, H, T, d_head) each: head h owns features h*d_head .. of q, of k, of v
    fused = attn.qkv(x)  # (2, 5, 24)
    torch.testing.assert_close(q[:, 1], fused[..., 4:8])
    torch.testing.assert_close(v[:, 0], fused[..., 16:20])
    out = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(attn(x)[0], attn.merge(out))
    with pytest.raises(ValueError, match=r"\(B, T, 8\)"):
        attn.project(torch.randn(2, 5, 6))
