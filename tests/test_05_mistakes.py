"""Mistake bank of unit 05: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import Mistake, bank_tests

UNIT = "05_attention"

_SOFTMAX = 'weights = torch.softmax(scores, dim=-1)'
_FILL = 'scores = scores.masked_fill(~mask, float("-inf"))  # (..., T_q, T_k)'
_NAN = 'return torch.nan_to_num(weights, nan=0.0)'
_SCORES = "scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)"
_WEIGHTS = "weights = masked_softmax(scores, mask)  # (..., T_q, T_k)"
_SPLIT_VIEW = "x = x.reshape(batch_size, seq_len, num_heads, d_head)  # (B, T, H, d_head)"
_SPLIT_RET = "return x.transpose(1, 2)  # (B, H, T, d_head)"
_MERGE_T = "x = x.transpose(1, 2)  # (B, T, H, d_head)"
_MERGE_RET = "return x.reshape(batch_size, seq_len, num_heads * d_head)  # (B, T, D)"
_FEATURES = "features = torch.tanh(q[:, :, None, :] + k[:, None, :, :])  # (B, T_q, T_k, h)"

BANK = [
    # ---------------------------------------------------------------- Part A: masked_softmax
    Mistake("softmax: over the query axis", answer="softmax_answer", test="softmax_test",
            patches=((_SOFTMAX, "weights = torch.softmax(scores, dim=-2)"),)),
    Mistake("softmax: mask applied after the softmax", answer="softmax_answer", test="softmax_test",
            patches=((_FILL, "pass"), (_NAN, "return weights * mask"))),
    Mistake("softmax: mask polarity flipped", answer="softmax_answer", test="softmax_test",
            patches=(("masked_fill(~mask,", "masked_fill(mask,"),)),
    Mistake("softmax: -1e9 instead of -inf (all-masked rows uniform)", answer="softmax_answer",
            test="softmax_test", patches=(('float("-inf")', "-1e9"),)),
    Mistake("softmax: -inf without NaN handling (all-masked rows NaN)", answer="softmax_answer",
            test="softmax_test", patches=((_NAN, "return weights"),)),
    Mistake("softmax: masked scores set to 0", answer="softmax_answer", test="softmax_test",
            patches=(('float("-inf")', "0.0"),)),
    Mistake("softmax: scores multiplied by the mask", answer="softmax_answer", test="softmax_test",
            patches=(('scores.masked_fill(~mask, float("-inf"))', "scores * mask"),)),
    Mistake("softmax: naive exp overflows", answer="softmax_answer", test="softmax_test",
            patches=((_SOFTMAX, "weights = scores.exp() / scores.exp().sum(dim=-1, keepdim=True)"),)),
    Mistake("softmax: mask ignored", answer="softmax_answer", test="softmax_test",
            patches=(("if mask is None:", "if True:"),)),
    Mistake("softmax: renormalized after masking (0/0 on all-masked rows)", answer="softmax_answer",
            test="softmax_test",
            patches=((_FILL, "pass"),
                     (_NAN, "weights = weights * mask\n    return weights / weights.sum(dim=-1, keepdim=True)"))),
    Mistake("softmax: modifies scores in place", answer="softmax_answer", test="softmax_test",
            patches=(("scores = scores.masked_fill(~mask,", "scores = scores.masked_fill_(~mask,"),)),
    # ---------------------------------------------------------------- Part B: scaled_dot_product_attention
    Mistake("sdpa: missing 1/sqrt(d_k)", answer="sdpa_answer", test="sdpa_test",
            patches=((" / math.sqrt(d_k)", ""),)),
    Mistake("sdpa: divides by d_k", answer="sdpa_answer", test="sdpa_test",
            patches=(("/ math.sqrt(d_k)", "/ d_k"),)),
    Mistake("sdpa: sqrt(d_v) instead of sqrt(d_k)", answer="sdpa_answer", test="sdpa_test",
            patches=(("d_k = query.shape[-1]", "d_k = value.shape[-1]"),)),
    Mistake("sdpa: scaling after the softmax", answer="sdpa_answer", test="sdpa_test",
            patches=((" / math.sqrt(d_k)", ""),
                     (_WEIGHTS, "weights = masked_softmax(scores, mask) / math.sqrt(d_k)"))),
    Mistake("sdpa: softmax over the query axis", answer="sdpa_answer", test="sdpa_test",
            patches=((_WEIGHTS, "weights = torch.softmax(scores, dim=-2)"),)),
    Mistake("sdpa: mask applied after the softmax", answer="sdpa_answer", test="sdpa_test",
            patches=((_WEIGHTS, "weights = masked_softmax(scores) * (1 if mask is None else mask)"),)),
    Mistake("sdpa: mask ignored", answer="sdpa_answer", test="sdpa_test",
            patches=((_WEIGHTS, "weights = masked_softmax(scores)"),)),
    Mistake("sdpa: key.T on a batched tensor", answer="sdpa_answer", test="sdpa_test",
            patches=(("key.transpose(-2, -1)", "key.T"),)),
    Mistake("sdpa: returns (weights, output)", answer="sdpa_answer", test="sdpa_test",
            patches=(("return output, weights", "return weights, output"),)),
    Mistake("sdpa: attends over the keys as values", answer="sdpa_answer", test="sdpa_test",
            patches=(("output = weights @ value", "output = weights @ key"),)),
    # ---------------------------------------------------------------- Part C: split_heads
    Mistake("split: view straight to (B, H, T, d_head)", answer="split_answer", test="split_test",
            patches=((_SPLIT_VIEW, "x = x.reshape(batch_size, num_heads, seq_len, d_head)"),
                     (_SPLIT_RET, "return x"))),
    Mistake("split: no transpose", answer="split_answer", test="split_test",
            patches=((_SPLIT_RET, "return x"),)),
    Mistake("split: heads interleaved", answer="split_answer", test="split_test",
            patches=((_SPLIT_VIEW, "x = x.reshape(batch_size, seq_len, d_head, num_heads).transpose(-1, -2)"),)),
    Mistake("split: H and d_head swapped", answer="split_answer", test="split_test",
            patches=((_SPLIT_VIEW, "x = x.reshape(batch_size, seq_len, d_head, num_heads)"),)),
    Mistake("split: no divisibility check", answer="split_answer", test="split_test",
            patches=(("    if d_model % num_heads != 0:\n", ""),
                     ('        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")\n', ""))),
    Mistake("split: transposes T and d_head", answer="split_answer", test="split_test",
            patches=((_SPLIT_RET, "return x.permute(0, 2, 3, 1)"),)),
    # ---------------------------------------------------------------- Part D: merge_heads
    Mistake("merge: no transpose", answer="merge_answer", test="merge_test",
            patches=((_MERGE_T, "pass"),)),
    Mistake("merge: view on a non-contiguous tensor", answer="merge_answer", test="merge_test",
            patches=((_MERGE_RET, "return x.view(batch_size, seq_len, num_heads * d_head)"),)),
    Mistake("merge: heads interleaved", answer="merge_answer", test="merge_test",
            patches=((_MERGE_T, "x = x.permute(0, 2, 3, 1)"),)),
    Mistake("merge: sums the heads", answer="merge_answer", test="merge_test",
            patches=((_MERGE_RET, "return x.sum(dim=2)"),)),
    Mistake("merge: averages the heads", answer="merge_answer", test="merge_test",
            patches=((_MERGE_RET, "return x.mean(dim=2)"),)),
    Mistake("merge: keeps the head axis", answer="merge_answer", test="merge_test",
            patches=((_MERGE_RET, "return x"),)),
    # ---------------------------------------------------------------- Part E: additive_scores
    Mistake("additive: no tanh", answer="additive_answer", test="additive_test",
            patches=((_FEATURES, "features = q[:, :, None, :] + k[:, None, :, :]"),)),
    Mistake("additive: tanh after the projection", answer="additive_answer", test="additive_test",
            patches=((_FEATURES, "features = q[:, :, None, :] + k[:, None, :, :]"),
                     ("return features @ w_v", "return torch.tanh(features @ w_v)"))),
    Mistake("additive: queries and keys broadcast on the wrong axes", answer="additive_answer",
            test="additive_test",
            patches=(("q[:, :, None, :] + k[:, None, :, :]", "q[:, None, :, :] + k[:, :, None, :]"),)),
    Mistake("additive: sum instead of w_v", answer="additive_answer", test="additive_test",
            patches=(("return features @ w_v", "return features.sum(dim=-1)"),)),
    Mistake("additive: W_q used for the keys", answer="additive_answer", test="additive_test",
            patches=(("k = key @ W_k.T", "k = key @ W_q.T"),)),
    Mistake("additive: relu instead of tanh", answer="additive_answer", test="additive_test",
            patches=(("torch.tanh(", "torch.relu("),)),
    Mistake("additive: returns softmax weights", answer="additive_answer", test="additive_test",
            patches=(("return features @ w_v", "return (features @ w_v).softmax(dim=-1)"),)),
    Mistake("additive: weights not transposed", answer="additive_answer", test="additive_test",
            patches=(("q = query @ W_q.T", "q = query @ W_q"), ("k = key @ W_k.T", "k = key @ W_k"))),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
