"""Mistake bank of unit 09: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import FRAMES_READER, Mistake, answer_source, bank_tests

UNIT = "09_vision_transformer"

PATCH = dict(answer="patches_answer", test="patches_test")
EMB = dict(answer="embedding_answer", test="embedding_test")
VIT = dict(answer="vit_answer", test="vit_test")
ROLL = dict(answer="rollout_answer", test="rollout_test")

BANK = [
    # ---------------------------------------------------------------- Part A: img_to_patch
    Mistake(
        "patches: channels last (features ordered row, column, channel)",
        **PATCH,
        patches=(("x.permute(0, 2, 4, 1, 3, 5)", "x.permute(0, 2, 4, 3, 5, 1)"),),
    ),
    Mistake(
        "patches: column-major patch order",
        **PATCH,
        patches=(("x.permute(0, 2, 4, 1, 3, 5)", "x.permute(0, 4, 2, 1, 3, 5)"),),
    ),
    Mistake(
        "patches: pixels of a patch transposed",
        **PATCH,
        patches=(("x.permute(0, 2, 4, 1, 3, 5)", "x.permute(0, 2, 4, 1, 5, 3)"),),
    ),
    Mistake(
        "patches: reshape without permute",
        **PATCH,
        patches=(
            ("    x = x.permute(0, 2, 4, 1, 3, 5)                                   # (B, gh, gw, C, p, p)\n", ""),
        ),
    ),
    Mistake(
        "patches: axes split as (p, grid) instead of (grid, p)",
        **PATCH,
        patches=(
            (
                "images.reshape(batch_size, channels, grid_h, p, grid_w, p)",
                "images.reshape(batch_size, channels, p, grid_h, p, grid_w)",
            ),
        ),
    ),
    Mistake(
        "patches: square grid assumed (H used for the width)",
        **PATCH,
        patches=(("grid_h, grid_w = height // p, width // p", "grid_h, grid_w = height // p, height // p"),),
    ),
    Mistake(
        "patches: no divisibility check", **PATCH, patches=(("if height % p != 0 or width % p != 0:", "if False:"),)
    ),
    Mistake(
        "patches: only the height checked for divisibility",
        **PATCH,
        patches=(("if height % p != 0 or width % p != 0:", "if height % p != 0:"),),
    ),
    # ---------------------------------------------------------------- Part B: linear_from_conv
    Mistake(
        "embedding: weight reshaped to (in, out) and transposed",
        **EMB,
        patches=(
            ("conv.weight.reshape(d_model, channels * p * p)", "conv.weight.reshape(channels * p * p, d_model).T"),
        ),
    ),
    Mistake(
        "embedding: channels-last weight order",
        **EMB,
        patches=(
            (
                "conv.weight.reshape(d_model, channels * p * p)",
                "conv.weight.permute(0, 2, 3, 1).reshape(d_model, channels * p * p)",
            ),
        ),
    ),
    Mistake(
        "embedding: kernel rows and columns swapped",
        **EMB,
        patches=(
            (
                "conv.weight.reshape(d_model, channels * p * p)",
                "conv.weight.transpose(2, 3).reshape(d_model, channels * p * p)",
            ),
        ),
    ),
    Mistake("embedding: bias not copied", **EMB, patches=(("linear.bias.copy_(conv.bias)", "pass"),)),
    Mistake(
        "embedding: always a bias, even when the conv has none",
        **EMB,
        patches=(("bias=conv.bias is not None,", "bias=True,"),),
    ),
    Mistake(
        "embedding: dtype of the conv ignored",
        **EMB,
        patches=(("device=conv.weight.device, dtype=conv.weight.dtype)", "device=conv.weight.device)"),),
    ),
    Mistake(
        "embedding: shares the conv's weight storage",
        **EMB,
        patches=(
            (
                "linear.weight.copy_(conv.weight.reshape(d_model, channels * p * p))",
                "linear.weight = nn.Parameter(conv.weight.view(d_model, channels * p * p))",
            ),
        ),
    ),
    Mistake(
        "embedding: overlapping convolutions accepted",
        **EMB,
        patches=(("tuple(conv.stride) != tuple(conv.kernel_size) or any(conv.padding)", "any(conv.padding)"),),
    ),
    # ---------------------------------------------------------------- Part C: ViT.forward
    Mistake(
        "vit: CLS token appended instead of prepended",
        **VIT,
        patches=(("torch.cat([cls, tokens], dim=1)", "torch.cat([tokens, cls], dim=1)"),),
    ),
    Mistake(
        "vit: CLS appended and read from the last position",
        **VIT,
        patches=(
            ("torch.cat([cls, tokens], dim=1)", "torch.cat([tokens, cls], dim=1)"),
            ("self.norm(x[:, 0])", "self.norm(x[:, -1])"),
        ),
    ),
    Mistake(
        "vit: position embeddings added before the CLS token (CLS gets none)",
        **VIT,
        patches=(
            (
                "x = torch.cat([cls, tokens], dim=1)                                # (B, N+1, D)\n"
                "        x = x + self.pos_embedding ",
                "x = torch.cat([cls, tokens + self.pos_embedding[:, 1:]], dim=1)\n        x = x ",
            ),
        ),
    ),
    Mistake(
        "vit: no position embeddings",
        **VIT,
        patches=(("        x = x + self.pos_embedding                                         # (B, N+1, D)\n", ""),),
    ),
    Mistake(
        "vit: head on the mean of all tokens", **VIT, patches=(("self.norm(x[:, 0])", "self.norm(x.mean(dim=1))"),)
    ),
    Mistake(
        "vit: head on the mean of the patch tokens",
        **VIT,
        patches=(("self.norm(x[:, 0])", "self.norm(x[:, 1:].mean(dim=1))"),),
    ),
    Mistake("vit: no final LayerNorm", **VIT, patches=(("self.head(self.norm(x[:, 0]))", "self.head(x[:, 0])"),)),
    Mistake(
        "vit: head on the first patch instead of CLS", **VIT, patches=(("self.norm(x[:, 0])", "self.norm(x[:, 1])"),)
    ),
    Mistake("vit: layer outputs discarded", **VIT, patches=(("            x = layer(x) ", "            layer(x) "),)),
    Mistake(
        "vit: only the last layer applied",
        **VIT,
        patches=(
            (
                "for layer in self.layers:\n            x = layer(x)",
                "for layer in self.layers:\n            out = layer(x)\n        x = out",
            ),
        ),
    ),
    Mistake(
        "vit: CLS token detached from the graph",
        **VIT,
        patches=(("self.cls_token.expand(", "self.cls_token.detach().expand("),),
    ),
    # ---------------------------------------------------------------- Part D: attention_rollout
    Mistake("rollout: no residual identity", **ROLL, patches=(("joint = joint + eye ", "joint = joint "),)),
    Mistake(
        "rollout: rows not renormalized",
        **ROLL,
        patches=(
            ("            joint = joint / joint.sum(dim=-1, keepdim=True)               # rows sum to 1 again\n", ""),
        ),
    ),
    Mistake(
        "rollout: columns normalized instead of rows",
        **ROLL,
        patches=(("joint.sum(dim=-1, keepdim=True)", "joint.sum(dim=-2, keepdim=True)"),),
    ),
    Mistake("rollout: layers multiplied in the wrong order", **ROLL, patches=(("joint @ rollout", "rollout @ joint"),)),
    Mistake(
        "rollout: max over heads instead of mean", **ROLL, patches=(("attention.mean(dim=1)", "attention.amax(dim=1)"),)
    ),
    Mistake(
        "rollout: sum over heads instead of mean", **ROLL, patches=(("attention.mean(dim=1)", "attention.sum(dim=1)"),)
    ),
    Mistake("rollout: add_residual flag ignored", **ROLL, patches=(("if add_residual:", "if True:"),)),
    Mistake(
        "rollout: layers added instead of multiplied", **ROLL, patches=(("joint @ rollout", "(joint + rollout) / 2"),)
    ),
    Mistake(
        "rollout: only the last layer",
        **ROLL,
        patches=(("rollout = joint if rollout is None else joint @ rollout", "rollout = joint"),),
    ),
]

# ---------------------------------------------------------------- shortcuts: the library's answer or a built-in
# Whole answer cells a student looking for a shortcut might submit. Each is correct (it passes its test cell
# with the call guard switched off); with the guard on, each must fail with ForbiddenCall.

_PATCH_DOC = '''    """images (B, C, H, W), patch_size p dividing H and W -> patches (B, N, C*p*p), N = (H/p)*(W/p).

    Patches in row-major order; the features of a patch ordered (channel, row, column).
    """
'''
_PATCH_CHECK = """    height, width = images.shape[-2:]
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not divisible by patch_size={patch_size}")
"""


def _patches(body, header=""):
    return f"{header}def img_to_patch(images, patch_size):\n{_PATCH_DOC}{_PATCH_CHECK}    return {body}\n"


PATCH_ALIAS = (
    """\
import course_utils.vit as V

_f = V.img_to_patch


def img_to_patch(images, patch_size):
"""
    + _PATCH_DOC
    + """\
    return _f(images, patch_size)
"""
)

_EMB_DOC = '''    """conv: nn.Conv2d(C, D, kernel_size=p, stride=p, padding=0) -> a new nn.Linear(C*p*p, D) with
    linear(patches (B, N, C*p*p)) == conv(images).flatten(2).transpose(1, 2), both (B, N, D)."""
'''
_EMB_CHECK = """    if tuple(conv.stride) != tuple(conv.kernel_size) or any(conv.padding):
        raise ValueError("a patch embedding needs stride == kernel_size and no padding")
    d_model, channels, p, _ = conv.weight.shape
"""

EMB_ALIAS = (
    """\
import course_utils.vit as V

_Embedding = V.PatchEmbedding


def linear_from_conv(conv):
"""
    + _EMB_DOC
    + _EMB_CHECK
    + """\
    embedding = _Embedding(channels, p, d_model).to(device=conv.weight.device, dtype=conv.weight.dtype)
    linear = embedding.from_conv(conv).proj
    if conv.bias is None:
        linear.bias = None
    return linear
"""
)

EMB_METHOD = (
    """\
import types

import course_utils.vit as V

_from_conv = V.PatchEmbedding.from_conv   # a reference taken before the test


def linear_from_conv(conv):
"""
    + _EMB_DOC
    + _EMB_CHECK
    + """\
    linear = nn.Linear(channels * p * p, d_model, device=conv.weight.device, dtype=conv.weight.dtype)
    _from_conv(types.SimpleNamespace(patch_size=p, proj=linear), conv)
    if conv.bias is None:
        linear.bias = None
    return linear
"""
)

_VIT_SHIMS = """\
class _Block(nn.Module):
    \"\"\"One given encoder layer, returning (x, no weights) as the library's blocks do.\"\"\"

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x, need_weights=False):
        return self.layer(x), None


class _Patches(nn.Module):
    def __init__(self, embed, patch_size):
        super().__init__()
        self.embed, self.patch_size = embed, patch_size

    def forward(self, images):
        return self.embed(img_to_patch(images, self.patch_size))

"""

_VIT_INIT = """\
    def __init__(self, image_size, patch_size, in_channels, num_classes, d_model, num_layers, num_heads, mlp_dim):
        nn.Module.__init__(self)
        num_patches = (image_size // patch_size) ** 2
        self.patch_size = patch_size
        self.patch_embed = nn.Linear(in_channels * patch_size ** 2, d_model)              # E
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, d_model))                  # (1, 1, D)
        self.pos_embedding = nn.Parameter(0.02 * torch.randn(1, num_patches + 1, d_model))  # (1, N+1, D)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model, num_heads, mlp_dim, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)                                                 # final norm
        self.head = nn.Linear(d_model, num_classes)
        # what the library's forward reads: the same modules under its names
        self.config = V.ViTConfig(image_size, patch_size, in_channels, num_classes, d_model, num_layers, num_heads)
        self.dropout = nn.Identity()
        self.patch_embedding = _Patches(self.patch_embed, patch_size)
        self.blocks = nn.ModuleList(_Block(layer) for layer in self.layers)
"""

VIT_SUBCLASS = (
    """\
import course_utils.vit as V


"""
    + _VIT_SHIMS
    + """
class ViT(V.ViT):
    \"\"\"Vision Transformer: forward(images (B, C, H, W)) -> logits (B, num_classes).\"\"\"

"""
    + _VIT_INIT
)

VIT_ALIAS = (
    """\
import course_utils.vit as V

_vit_forward = V.ViT.forward


"""
    + _VIT_SHIMS
    + """
class ViT(nn.Module):
    \"\"\"Vision Transformer: forward(images (B, C, H, W)) -> logits (B, num_classes).\"\"\"

"""
    + _VIT_INIT.replace("nn.Module.__init__(self)", "super().__init__()")
    + """
    def forward(self, images):
        return _vit_forward(self, images)
"""
)

ROLL_ALIAS = """\
import course_utils.vit as V

_f = V.attention_rollout


def attention_rollout(attentions, add_residual=True):
    \"\"\"attentions: list of L tensors (B, H, T, T), first layer first -> rollout (B, T, T), rows sum to 1.\"\"\"
    return _f(attentions, add_residual)
"""

SHORTCUTS = [
    Mistake("shortcut (alias): course_utils.vit.img_to_patch under another name", **PATCH, source=PATCH_ALIAS),
    Mistake(
        "shortcut (path): torch._C._nn.im2col, the operator behind F.unfold",
        **PATCH,
        source=_patches(
            "torch._C._nn.im2col(images, (patch_size, patch_size), (1, 1), (0, 0), "
            "(patch_size, patch_size)).transpose(1, 2)"
        ),
    ),
    Mistake(
        "shortcut (path): torch.ops.aten.im2col",
        **PATCH,
        source=_patches(
            "torch.ops.aten.im2col(images, [patch_size, patch_size], [1, 1], [0, 0], "
            "[patch_size, patch_size]).transpose(1, 2)"
        ),
    ),
    Mistake(
        "shortcut (path): the tensor method unfold, twice",
        **PATCH,
        source=_patches(
            "images.unfold(2, patch_size, patch_size).unfold(3, patch_size, patch_size)"
            ".permute(0, 2, 3, 1, 4, 5).reshape(images.shape[0], -1, "
            "images.shape[1] * patch_size * patch_size)"
        ),
    ),
    Mistake(
        "shortcut (path): torch.nn.modules.fold.Unfold",
        **PATCH,
        source=_patches("torch.nn.modules.fold.Unfold(patch_size, stride=patch_size)(images).transpose(1, 2)"),
    ),
    Mistake(
        "shortcut (path): F.unfold in a functools.partial taken before the test",
        **PATCH,
        source=_patches(
            "_unfold(images, patch_size, stride=patch_size).transpose(1, 2)",
            "import functools\n\n_unfold = functools.partial(F.unfold, padding=0)\n\n\n",
        ),
    ),
    Mistake(
        "shortcut (alias): course_utils.vit.PatchEmbedding under another name, its from_conv", **EMB, source=EMB_ALIAS
    ),
    Mistake(
        "shortcut (alias): PatchEmbedding.from_conv taken before the test, on a stand-in (no built-in does it)",
        **EMB,
        source=EMB_METHOD,
    ),
    Mistake(
        "shortcut (subclass): of course_utils.vit.ViT, the library's forward inherited", **VIT, source=VIT_SUBCLASS
    ),
    Mistake("shortcut (alias): course_utils.vit.ViT.forward under another name", **VIT, source=VIT_ALIAS),
    Mistake(
        "shortcut (alias): course_utils.vit.attention_rollout under another name (no built-in does it)",
        **ROLL,
        source=ROLL_ALIAS,
    ),
]

# Frame reads: a whole answer cell whose code walks its callers' frames (sys._getframe(1) and f_back to the
# top; f_locals and f_globals; one level into tuples, lists and dicts) for the test's own reference, by the
# names the earlier test cells used and by shape, returns it, and falls back to something wrong. They earned
# the points where a test computed its reference before the call; the test cells now compute it after.
_PATCH_FRAMES = (
    FRAMES_READER
    + """
def img_to_patch(images, patch_size):
    B, C, H, W = images.shape
    shape = (B, (H // patch_size) * (W // patch_size), C * patch_size**2)
    found = _answer_key(("_expected", "_want", "_reference"), shape=shape)
    return found.clone() if found is not None else images.reshape(shape)  # no permute: wrong order
"""
)
_EMB_FRAMES = (
    FRAMES_READER
    + """
def linear_from_conv(conv):
    if tuple(conv.stride) != tuple(conv.kernel_size) or any(conv.padding):
        raise ValueError("a patch embedding needs stride == kernel_size and no padding")
    d_model, channels, p, _ = conv.weight.shape
    linear = nn.Linear(channels * p * p, d_model, bias=conv.bias is not None, dtype=conv.weight.dtype)
    plain = linear.forward

    def forward(patches):  # the layer's own forward reads the test's expected output when it is called
        found = _answer_key(("_expected",), shape=(*patches.shape[:-1], d_model))
        return found.clone() if found is not None else plain(patches)

    linear.forward = forward  # an instance attribute: type(linear) is still nn.Linear
    return linear
"""
)
_VIT_FRAMES = (
    FRAMES_READER
    + "\n\n"
    + answer_source(UNIT, "vit_answer").split("    def forward")[0]
    + """\
    def forward(self, images):
        found = _answer_key(("_expected", "_want"), shape=(images.shape[0], self.head.out_features))
        if found is not None:
            return found.clone()
        return self.head.bias.expand(images.shape[0], -1) * 1.0  # the same logits for every image
"""
)
_ROLL_FRAMES = (
    FRAMES_READER
    + """
def attention_rollout(attentions, add_residual=True):
    B, H, T, _ = attentions[0].shape
    found = _answer_key(("_expected", "_want", "_reference"), shape=(B, T, T))
    return found.clone() if found is not None else attentions[-1].mean(dim=1)  # the last layer only
"""
)

BANK += [
    Mistake("frames: the test's expected patches from the callers' frames", **PATCH, source=_PATCH_FRAMES),
    Mistake(
        "frames: a Linear whose forward returns the test's _expected from the callers' frames",
        **EMB,
        source=_EMB_FRAMES,
    ),
    Mistake("frames: the test's _expected logits from the callers' frames", **VIT, source=_VIT_FRAMES),
    Mistake("frames: the test's expected rollout from the callers' frames", **ROLL, source=_ROLL_FRAMES),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK + SHORTCUTS)
