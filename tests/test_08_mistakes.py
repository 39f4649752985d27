"""Mistake bank of unit 08: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import Mistake, bank_tests

UNIT = "08_vision_transformer"

PATCH = dict(answer="patches_answer", test="patches_test")
EMB = dict(answer="embedding_answer", test="embedding_test")
VIT = dict(answer="vit_answer", test="vit_test")
ROLL = dict(answer="rollout_answer", test="rollout_test")

BANK = [
    # ---------------------------------------------------------------- Part A: img_to_patch
    Mistake("patches: channels last (features ordered row, column, channel)", **PATCH,
            patches=(("x.permute(0, 2, 4, 1, 3, 5)", "x.permute(0, 2, 4, 3, 5, 1)"),)),
    Mistake("patches: column-major patch order", **PATCH,
            patches=(("x.permute(0, 2, 4, 1, 3, 5)", "x.permute(0, 4, 2, 1, 3, 5)"),)),
    Mistake("patches: pixels of a patch transposed", **PATCH,
            patches=(("x.permute(0, 2, 4, 1, 3, 5)", "x.permute(0, 2, 4, 1, 5, 3)"),)),
    Mistake("patches: reshape without permute", **PATCH,
            patches=(("    x = x.permute(0, 2, 4, 1, 3, 5)                                   # (B, gh, gw, C, p, p)\n", ""),)),
    Mistake("patches: axes split as (p, grid) instead of (grid, p)", **PATCH,
            patches=(("images.reshape(batch_size, channels, grid_h, p, grid_w, p)",
                      "images.reshape(batch_size, channels, p, grid_h, p, grid_w)"),)),
    Mistake("patches: square grid assumed (H used for the width)", **PATCH,
            patches=(("grid_h, grid_w = height // p, width // p", "grid_h, grid_w = height // p, height // p"),)),
    Mistake("patches: no divisibility check", **PATCH,
            patches=(("if height % p != 0 or width % p != 0:", "if False:"),)),
    Mistake("patches: only the height checked for divisibility", **PATCH,
            patches=(("if height % p != 0 or width % p != 0:", "if height % p != 0:"),)),
    # ---------------------------------------------------------------- Part B: linear_from_conv
    Mistake("embedding: weight reshaped to (in, out) and transposed", **EMB,
            patches=(("conv.weight.reshape(d_model, channels * p * p)", "conv.weight.reshape(channels * p * p, d_model).T"),)),
    Mistake("embedding: channels-last weight order", **EMB,
            patches=(("conv.weight.reshape(d_model, channels * p * p)",
                      "conv.weight.permute(0, 2, 3, 1).reshape(d_model, channels * p * p)"),)),
    Mistake("embedding: kernel rows and columns swapped", **EMB,
            patches=(("conv.weight.reshape(d_model, channels * p * p)",
                      "conv.weight.transpose(2, 3).reshape(d_model, channels * p * p)"),)),
    Mistake("embedding: bias not copied", **EMB,
            patches=(("linear.bias.copy_(conv.bias)", "pass"),)),
    Mistake("embedding: always a bias, even when the conv has none", **EMB,
            patches=(("bias=conv.bias is not None,", "bias=True,"),)),
    Mistake("embedding: dtype of the conv ignored", **EMB,
            patches=(("device=conv.weight.device, dtype=conv.weight.dtype)", "device=conv.weight.device)"),)),
    Mistake("embedding: shares the conv's weight storage", **EMB,
            patches=(("linear.weight.copy_(conv.weight.reshape(d_model, channels * p * p))",
                      "linear.weight = nn.Parameter(conv.weight.view(d_model, channels * p * p))"),)),
    Mistake("embedding: overlapping convolutions accepted", **EMB,
            patches=(("tuple(conv.stride) != tuple(conv.kernel_size) or any(conv.padding)", "any(conv.padding)"),)),
    # ---------------------------------------------------------------- Part C: ViT.forward
    Mistake("vit: CLS token appended instead of prepended", **VIT,
            patches=(("torch.cat([cls, tokens], dim=1)", "torch.cat([tokens, cls], dim=1)"),)),
    Mistake("vit: CLS appended and read from the last position", **VIT,
            patches=(("torch.cat([cls, tokens], dim=1)", "torch.cat([tokens, cls], dim=1)"),
                     ("self.norm(x[:, 0])", "self.norm(x[:, -1])"))),
    Mistake("vit: position embeddings added before the CLS token (CLS gets none)", **VIT,
            patches=(("x = torch.cat([cls, tokens], dim=1)                                # (B, N+1, D)\n"
                      "        x = x + self.pos_embedding ",
                      "x = torch.cat([cls, tokens + self.pos_embedding[:, 1:]], dim=1)\n"
                      "        x = x "),)),
    Mistake("vit: no position embeddings", **VIT,
            patches=(("        x = x + self.pos_embedding                                         # (B, N+1, D)\n", ""),)),
    Mistake("vit: head on the mean of all tokens", **VIT,
            patches=(("self.norm(x[:, 0])", "self.norm(x.mean(dim=1))"),)),
    Mistake("vit: head on the mean of the patch tokens", **VIT,
            patches=(("self.norm(x[:, 0])", "self.norm(x[:, 1:].mean(dim=1))"),)),
    Mistake("vit: no final LayerNorm", **VIT,
            patches=(("self.head(self.norm(x[:, 0]))", "self.head(x[:, 0])"),)),
    Mistake("vit: head on the first patch instead of CLS", **VIT,
            patches=(("self.norm(x[:, 0])", "self.norm(x[:, 1])"),)),
    Mistake("vit: layer outputs discarded", **VIT,
            patches=(("            x = layer(x) ", "            layer(x) "),)),
    Mistake("vit: only the last layer applied", **VIT,
            patches=(("for layer in self.layers:\n            x = layer(x)",
                      "for layer in self.layers:\n            out = layer(x)\n        x = out"),)),
    Mistake("vit: CLS token detached from the graph", **VIT,
            patches=(("self.cls_token.expand(", "self.cls_token.detach().expand("),)),
    # ---------------------------------------------------------------- Part D: attention_rollout
    Mistake("rollout: no residual identity", **ROLL,
            patches=(("joint = joint + eye ", "joint = joint "),)),
    Mistake("rollout: rows not renormalized", **ROLL,
            patches=(("            joint = joint / joint.sum(dim=-1, keepdim=True)               # rows sum to 1 again\n", ""),)),
    Mistake("rollout: columns normalized instead of rows", **ROLL,
            patches=(("joint.sum(dim=-1, keepdim=True)", "joint.sum(dim=-2, keepdim=True)"),)),
    Mistake("rollout: layers multiplied in the wrong order", **ROLL,
            patches=(("joint @ rollout", "rollout @ joint"),)),
    Mistake("rollout: max over heads instead of mean", **ROLL,
            patches=(("attention.mean(dim=1)", "attention.amax(dim=1)"),)),
    Mistake("rollout: sum over heads instead of mean", **ROLL,
            patches=(("attention.mean(dim=1)", "attention.sum(dim=1)"),)),
    Mistake("rollout: add_residual flag ignored", **ROLL,
            patches=(("if add_residual:", "if True:"),)),
    Mistake("rollout: layers added instead of multiplied", **ROLL,
            patches=(("joint @ rollout", "(joint + rollout) / 2"),)),
    Mistake("rollout: only the last layer", **ROLL,
            patches=(("rollout = joint if rollout is None else joint @ rollout", "rollout = joint"),)),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
