"""Mistake bank of unit 06: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import Mistake, bank_tests

UNIT = "06_transformers"

POS = dict(answer="positions_answer", test="positions_test")
CAUSAL = dict(answer="causal_answer", test="causal_test")
ENC = dict(answer="encoder_answer", test="encoder_test")
BEAM = dict(answer="beam_answer", test="beam_test")

BANK = [
    # ---------------------------------------------------------------- Part A: sinusoidal_positions
    Mistake("positions: base 100 instead of 10000", **POS,
            patches=(("position / 10000 **", "position / 100 **"),)),
    Mistake("positions: sin and cos swapped", **POS,
            patches=(("P[:, 0::2] = torch.sin(angle)", "P[:, 0::2] = torch.cos(angle)"),
                     ("P[:, 1::2] = torch.cos(angle)", "P[:, 1::2] = torch.sin(angle)"))),
    Mistake("positions: sines then cosines, not interleaved", **POS,
            patches=(("P[:, 0::2] = torch.sin(angle)\n    P[:, 1::2] = torch.cos(angle)",
                      "P = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)"),)),
    Mistake("positions: exponent j/D instead of 2j/D", **POS,
            patches=(("two_j = torch.arange(0, d_model, 2, dtype=torch.float64)",
                      "two_j = torch.arange(d_model // 2, dtype=torch.float64)"),)),
    Mistake("positions: exponent 2i/D with i the feature index", **POS,
            patches=(("two_j = torch.arange(0, d_model, 2, dtype=torch.float64)",
                      "two_j = 2 * torch.arange(0, d_model, 2, dtype=torch.float64)"),)),
    Mistake("positions: positions start at 1", **POS,
            patches=(("torch.arange(seq_len, dtype=torch.float64)", "torch.arange(1, seq_len + 1, dtype=torch.float64)"),)),
    Mistake("positions: multiplies by the frequency denominator", **POS,
            patches=(("position / 10000 **", "position * 10000 **"),)),
    Mistake("positions: transposed (D, T)", **POS,
            patches=(("return P.float()", "return P.float().T"),)),
    Mistake("positions: returns float64", **POS,
            patches=(("return P.float()", "return P"),)),
    # ---------------------------------------------------------------- Part B: causal_attention
    Mistake("causal: triu instead of tril (attends to the future)", **CAUSAL,
            patches=((".tril()", ".triu()"),)),
    Mistake("causal: diagonal excluded", **CAUSAL,
            patches=((".tril()", ".tril(-1)"),)),
    Mistake("causal: masked scores set to 0 instead of -inf", **CAUSAL,
            patches=(('scores.masked_fill(~mask, float("-inf"))', "scores.masked_fill(~mask, 0.0)"),)),
    Mistake("causal: mask applied after the softmax", **CAUSAL,
            patches=(('    scores = scores.masked_fill(~mask, float("-inf"))\n', ""),
                     ("weights = scores.softmax(dim=-1)", "weights = scores.softmax(dim=-1).masked_fill(~mask, 0.0)"))),
    Mistake("causal: mask inverted (True = blocked)", **CAUSAL,
            patches=(("scores.masked_fill(~mask,", "scores.masked_fill(mask,"),)),
    Mistake("causal: no 1/sqrt(d_k)", **CAUSAL,
            patches=((" / math.sqrt(q.shape[-1])", ""),)),
    Mistake("causal: softmax over the queries", **CAUSAL,
            patches=(("scores.softmax(dim=-1)", "scores.softmax(dim=-2)"),)),
    # ---------------------------------------------------------------- Part C: EncoderLayer
    Mistake("encoder: Post-LN (norm after the residual)", **ENC,
            patches=(("h = self.norm1(x)                                 # (B, T, D)\n"
                      "        x = x + self.self_attn(h, h, h, mask)[0]          # residual around attention\n"
                      "        z = F.relu(self.linear1(self.norm2(x)))           # (B, T, d_ff)\n"
                      "        x = x + self.linear2(z)                           # residual around the MLP\n",
                      "x = self.norm1(x + self.self_attn(x, x, x, mask)[0])\n"
                      "        x = self.norm2(x + self.linear2(F.relu(self.linear1(x))))\n"),)),
    Mistake("encoder: no residual around attention", **ENC,
            patches=(("x = x + self.self_attn(h, h, h, mask)[0]", "x = self.self_attn(h, h, h, mask)[0]"),)),
    Mistake("encoder: no residual around the MLP", **ENC,
            patches=(("x = x + self.linear2(z)", "x = self.linear2(z)"),)),
    Mistake("encoder: residual taken from the normalized input", **ENC,
            patches=(("x = x + self.self_attn(h, h, h, mask)[0]", "x = h + self.self_attn(h, h, h, mask)[0]"),)),
    Mistake("encoder: norm1 used for both sublayers", **ENC,
            patches=(("self.linear1(self.norm2(x))", "self.linear1(self.norm1(x))"),)),
    Mistake("encoder: no ReLU in the MLP", **ENC,
            patches=(("z = F.relu(self.linear1(self.norm2(x)))", "z = self.linear1(self.norm2(x))"),)),
    Mistake("encoder: GELU instead of ReLU", **ENC,
            patches=(("z = F.relu(self.linear1(", "z = F.gelu(self.linear1("),)),
    Mistake("encoder: mask not passed to attention", **ENC,
            patches=(("self.self_attn(h, h, h, mask)", "self.self_attn(h, h, h)"),)),
    Mistake("encoder: MLP normalized output without residual input", **ENC,
            patches=(("x = x + self.linear2(z)", "x = self.norm2(x) + self.linear2(z)"),)),
    # ---------------------------------------------------------------- Part D: beam_search
    Mistake("beam: sums probabilities instead of log-probs", **BEAM,
            patches=(("lp + token_lp", "lp + math.exp(token_lp)"),)),
    Mistake("beam: multiplies log-probs", **BEAM,
            patches=(("alive = [([bos_id], 0.0)]", "alive = [([bos_id], 1.0)]"), ("lp + token_lp", "lp * -token_lp"))),
    Mistake("beam: <eos> does not finish a hypothesis", **BEAM,
            patches=(("if tokens[-1] == eos_id or step == max_len:", "if step == max_len:"),)),
    Mistake("beam: finished hypotheses dropped unless they reach max_len", **BEAM,
            patches=(("finished.append((tokens[1:], lp))",
                      "finished.append((tokens[1:], lp)) if step == max_len else None"),)),
    Mistake("beam: no length normalization", **BEAM,
            patches=(("return hypothesis[1] / len(hypothesis[0]) ** length_penalty", "return hypothesis[1]"),)),
    Mistake("beam: length counts <bos>", **BEAM,
            patches=(("/ len(hypothesis[0]) ** length_penalty", "/ (len(hypothesis[0]) + 1) ** length_penalty"),)),
    Mistake("beam: one step too few", **BEAM,
            patches=(("for step in range(1, max_len + 1):", "for step in range(1, max_len):"),)),
    Mistake("beam: returns <bos> in the tokens", **BEAM,
            patches=(("finished.append((tokens[1:], lp))", "finished.append((tokens, lp))"),)),
    Mistake("beam: keeps the worst extensions", **BEAM,
            patches=(("candidates.sort(key=lambda c: c[1], reverse=True)", "candidates.sort(key=lambda c: c[1])"),)),
    Mistake("beam: best finished by log-prob, normalized score returned", **BEAM,
            patches=(("best = max(finished, key=score)", "best = max(finished, key=lambda h: h[1])"),)),
    Mistake("beam: beam_size ignored (greedy)", **BEAM,
            patches=(("candidates[:beam_size]", "candidates[:1]"),)),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
