"""The Vision Transformer (Dosovitskiy et al., "An Image is Worth 16x16 Words"), small enough for a CPU.

An image becomes a sequence: cut it into ``p x p`` patches, flatten each, embed each with one Linear
map, prepend a learned CLS token, add learned position embeddings, run a Pre-LN transformer encoder,
and classify from the CLS token's final state. Unit 09 builds each piece from scratch; this module
is the reusable version, plus the tools to look inside (attention rollout, position similarity)
and the small CNN it is compared with.

    config = ViTConfig(image_size=28, patch_size=4, in_channels=1, num_classes=10)
    model = ViT(config)
    logits = model(images)                                  # (B, 1, 28, 28) -> (B, 10)
    logits, attentions = model(images, return_attention=True)   # list of (B, H, 50, 50)
    rollout = attention_rollout(attentions)                 # (B, 50, 50)
    heat = cls_attention_map(rollout, config.grid)          # (B, 7, 7)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .attention import scaled_dot_product_attention
from .primitives import count_parameters
from .self_attention import FusedSelfAttention
from .transformer import FeedForward


def img_to_patch(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """Cut ``images (B, C, H, W)`` into non-overlapping ``p x p`` patches: ``(B, N, C*p*p)`` with
    ``N = (H/p)(W/p)``. Patches run row by row (left to right, then down); each patch's features
    are ordered (channel, row, column), which is the order of ``F.unfold(images, p, stride=p)``
    and of a ``Conv2d(C, D, p, stride=p)`` weight flattened to ``(D, C*p*p)``."""
    if images.ndim != 4:
        raise ValueError(f"images must be (B, C, H, W), got shape {tuple(images.shape)}")
    B, C, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"image size {H}x{W} is not divisible by patch_size={p}")
    x = images.reshape(B, C, H // p, p, W // p, p)  # (B, C, gh, p, gw, p)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, gh, gw, C, p, p)
    return x.reshape(B, (H // p) * (W // p), C * p * p)  # (B, N, C*p*p)


class PatchEmbedding(nn.Module):
    """A Linear map applied to every flattened patch: ``(B, C, H, W) -> (B, N, D)``. It is the same
    function as ``Conv2d(C, D, kernel_size=p, stride=p)`` followed by flattening the grid."""

    def __init__(self, in_channels: int, patch_size: int, d_model: int):
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Linear(in_channels * patch_size * patch_size, d_model)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(img_to_patch(images, self.patch_size))  # (B, N, D)

    @torch.no_grad()
    def from_conv(self, conv: nn.Conv2d) -> PatchEmbedding:
        """Copy the weights of a stride-p, kernel-p ``conv`` so that both compute the same map."""
        p = self.patch_size
        if (
            conv.kernel_size != (p, p)
            or conv.stride != (p, p)
            or conv.weight.shape[1:] != (self.proj.in_features // (p * p), p, p)
            or conv.out_channels != self.proj.out_features
        ):
            raise ValueError(
                f"need Conv2d({self.proj.in_features // (p * p)}, {self.proj.out_features}, "
                f"kernel_size={p}, stride={p}), got {conv}"
            )
        self.proj.weight.copy_(conv.weight.reshape(conv.out_channels, -1))  # (D, C*p*p)
        if conv.bias is not None:
            self.proj.bias.copy_(conv.bias)
        else:
            self.proj.bias.zero_()
        return self


@dataclass
class ViTConfig:
    image_size: int = 28
    patch_size: int = 4
    in_channels: int = 1
    num_classes: int = 10
    d_model: int = 64
    num_layers: int = 4
    num_heads: int = 4
    mlp_ratio: float = 2.0  # FFN hidden width = mlp_ratio * d_model
    dropout: float = 0.0
    pool: str = "cls"  # classify from the CLS token ("cls") or the mean of the patch tokens ("mean")
    init: str = "vit"  # Linear weights: truncated normal, std 0.02 ("vit") or PyTorch's default ("default")

    def __post_init__(self) -> None:
        if self.pool not in ("cls", "mean"):
            raise ValueError(f"pool must be 'cls' or 'mean', got {self.pool!r}")
        if self.init not in ("vit", "default"):
            raise ValueError(f"init must be 'vit' or 'default', got {self.init!r}")
        if self.image_size % self.patch_size:
            raise ValueError(f"image_size={self.image_size} is not divisible by patch_size={self.patch_size}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")

    @property
    def grid(self) -> tuple[int, int]:
        """Patches per column and per row, ``(gh, gw)``."""
        side = self.image_size // self.patch_size
        return side, side

    @property
    def num_patches(self) -> int:
        return self.grid[0] * self.grid[1]


class Attention(FusedSelfAttention):
    """Multi-head self-attention over all tokens (no mask), with the fused projections the GPT uses too.
    ``forward(x (B, T, D), need_weights)`` -> ``(out (B, T, D), weights (B, H, T, T) or None)``; the
    weights are computed only when asked for (unit 06's attention), otherwise the fused
    ``F.scaled_dot_product_attention`` runs (unit 06 shows the two agree)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0):
        super().__init__(d_model, num_heads, bias=True, dropout=dropout)

    def forward(self, x: torch.Tensor, need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        q, k, v = self.project(x)  # 3 x (B, H, T, d_head)
        p = self.dropout_p()
        if need_weights:  # unit 06's version
            out, weights = scaled_dot_product_attention(q, k, v)  # (B, H, T, d_head), (B, H, T, T)
            if p:
                out = F.dropout(weights, p) @ v  # (B, H, T, d_head)
        else:
            weights, out = None, F.scaled_dot_product_attention(q, k, v, dropout_p=p)  # (B, H, T, d_head)
        return self.merge(out), weights  # (B, T, D)


class EncoderBlock(nn.Module):
    """Pre-LN encoder block: ``x + Attn(LN(x))``, then ``x + MLP(LN(x))`` with unit 07's GELU MLP
    (``course_utils.transformer.FeedForward``) and dropout on its output."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        D, hidden = config.d_model, int(config.mlp_ratio * config.d_model)
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = Attention(D, config.num_heads, config.dropout)
        self.mlp = nn.Sequential(FeedForward(D, hidden, config.dropout, activation="gelu"), nn.Dropout(config.dropout))

    def forward(self, x: torch.Tensor, need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        h, weights = self.attn(self.norm1(x), need_weights)
        x = x + h  # (B, T, D)
        return x + self.mlp(self.norm2(x)), weights  # (B, T, D)


class ViT(nn.Module):
    """Patch embedding -> [CLS] + patches -> + position embeddings -> Pre-LN encoder -> LayerNorm
    -> Linear head on the CLS state (or, with ``pool="mean"``, on the mean of the patch states,
    which Beyer et al., "Better plain ViT baselines for ImageNet-1k", found trains faster).
    ``forward(images (B, C, H, W)) -> logits (B, num_classes)``."""

    def __init__(self, config: ViTConfig):
        super().__init__()
        self.config = config
        D = config.d_model
        self.patch_embedding = PatchEmbedding(config.in_channels, config.patch_size, D)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
        self.pos_embedding = nn.Parameter(torch.zeros(1, config.num_patches + 1, D))
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(EncoderBlock(config) for _ in range(config.num_layers))
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, config.num_classes)
        if config.init == "vit":
            self.apply(self._init_weights)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embedding, std=0.02)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=0.02)
            nn.init.zeros_(module.bias)

    def num_parameters(self) -> int:
        return count_parameters(self)

    def forward(self, images: torch.Tensor, return_attention: bool = False):
        c = self.config
        if images.ndim != 4 or tuple(images.shape[1:]) != (c.in_channels, c.image_size, c.image_size):
            raise ValueError(
                f"images must be (B, {c.in_channels}, {c.image_size}, {c.image_size}), got shape {tuple(images.shape)}"
            )
        x = self.patch_embedding(images)  # (B, N, D)
        cls = self.cls_token.expand(x.shape[0], -1, -1)  # (B, 1, D)
        x = self.dropout(torch.cat([cls, x], dim=1) + self.pos_embedding)  # (B, N+1, D)
        attentions = []
        for block in self.blocks:
            x, weights = block(x, need_weights=return_attention)  # (B, N+1, D)
            attentions.append(weights)
        summary = x[:, 0] if c.pool == "cls" else x[:, 1:].mean(dim=1)  # (B, D)
        logits = self.head(self.norm(summary))  # (B, num_classes)
        return (logits, attentions) if return_attention else logits


# --------------------------------------------------------------------------- looking inside


def attention_rollout(attentions: list[torch.Tensor], add_residual: bool = True) -> torch.Tensor:
    """Attention rollout (Abnar and Zuidema, "Quantifying Attention Flow in Transformers"): how much
    each output token draws on each input token through all layers. Each layer's ``(B, H, T, T)``
    weights are averaged over heads; with ``add_residual`` the identity (the skip connection) is
    added and rows renormalised, ``0.5 A + 0.5 I``; the layers are then multiplied, the last on the
    left. Returns ``(B, T, T)``, rows summing to one."""
    if not attentions:
        raise ValueError("attention_rollout needs the attention weights of at least one layer")
    rollout = None
    for weights in attentions:
        if weights is None or weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
            raise ValueError(
                "each layer's attention must be a (B, H, T, T) tensor; call the model with return_attention=True"
            )
        a = weights.mean(dim=1)  # (B, T, T)
        if add_residual:
            a = a + torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
            a = a / a.sum(dim=-1, keepdim=True)
        rollout = a if rollout is None else a @ rollout  # (B, T, T)
    return rollout


def cls_attention_map(attention: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """The CLS token's attention to every patch, laid out on the patch grid: takes one layer's
    ``(B, H, T, T)`` weights (averaged over heads) or a rollout ``(B, T, T)``, with ``T = 1 + gh*gw``;
    returns ``(B, gh, gw)``."""
    if attention.ndim == 4:
        attention = attention.mean(dim=1)  # (B, T, T)
    gh, gw = grid
    if attention.ndim != 3 or attention.shape[-1] != 1 + gh * gw:
        raise ValueError(
            f"need (B, H, T, T) or (B, T, T) attention with T = 1 + {gh}*{gw}, got shape {tuple(attention.shape)}"
        )
    return attention[:, 0, 1:].reshape(-1, gh, gw)  # (B, gh, gw)


def position_similarity(pos_embedding: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Cosine similarity between the learned position embeddings of every pair of patches:
    ``pos_embedding (1, T, D)`` or ``(T, D)``, with T = gh*gw or 1 + gh*gw (the CLS row is dropped);
    returns ``(gh, gw, gh, gw)``: entry ``[i, j]`` is patch (i, j)'s similarity to every patch."""
    gh, gw = grid
    pos = pos_embedding.detach().reshape(-1, pos_embedding.shape[-1])  # (T, D)
    if pos.shape[0] == 1 + gh * gw:
        pos = pos[1:]  # (N, D)
    if pos.shape[0] != gh * gw:
        raise ValueError(f"position embeddings {tuple(pos_embedding.shape)} do not fit a {gh}x{gw} grid")
    unit = F.normalize(pos, dim=-1)
    return (unit @ unit.T).reshape(gh, gw, gh, gw)  # (gh, gw, gh, gw)


class SmallCNN(nn.Module):
    """The baseline with the inductive biases a ViT lacks (locality, translation equivariance):
    two blocks of 3x3 conv -> BatchNorm -> ReLU -> 2x2 max-pool, global average pooling, Linear.
    ``(B, C, H, W) -> (B, num_classes)``."""

    def __init__(self, in_channels: int = 1, num_classes: int = 10, width: int = 32):
        super().__init__()

        def block(c_in: int, c_out: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2)
            )

        self.features = nn.Sequential(block(in_channels, width), block(width, 2 * width))
        self.head = nn.Linear(2 * width, num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.features(images)  # (B, 2w, H/4, W/4)
        return self.head(x.mean(dim=(2, 3)))  # (B, num_classes)
