"""Mistake bank of unit 03: plausible wrong answers, each of which must lose its cell's points."""

from notebook_cells import Mistake, bank_tests

UNIT = "03_rnn_bptt"

TANH_LINE = "h = torch.tanh(x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh)  # (B, H)"
LIN_LINE = "h = x[:, t] @ W_hx.T + h @ W_hh.T  # (B, H)"
RECURSION = "d_next = d_next @ W_hh + d_o[:, t] @ W_qh  # (B, H)"

BANK = [
    # ---------------------------------------------------------------- Part A: rnn_forward
    Mistake("rnn: no tanh", answer="rnn_answer", test="rnn_test",
            patches=((TANH_LINE, "h = x[:, t] @ W_ih.T + b_ih + h @ W_hh.T + b_hh  # (B, H)"),)),
    Mistake("rnn: relu instead of tanh", answer="rnn_answer", test="rnn_test",
            patches=(("h = torch.tanh(", "h = torch.relu("),)),
    Mistake("rnn: forgets b_hh", answer="rnn_answer", test="rnn_test",
            patches=((" + b_hh)  # (B, H)", ")  # (B, H)"),)),
    Mistake("rnn: recurs on h0 instead of h_{t-1}", answer="rnn_answer", test="rnn_test",
            patches=(("+ h @ W_hh.T", "+ h0 @ W_hh.T"),)),
    Mistake("rnn: W_hh not transposed", answer="rnn_answer", test="rnn_test",
            patches=(("+ h @ W_hh.T", "+ h @ W_hh"),)),
    Mistake("rnn: outputs hold the previous state", answer="rnn_answer", test="rnn_test",
            patches=(("        outputs.append(h)\n", ""),
                     ("        h = torch.tanh(", "        outputs.append(h)\n        h = torch.tanh("))),
    Mistake("rnn: time-major outputs", answer="rnn_answer", test="rnn_test",
            patches=(("torch.stack(outputs, dim=1)", "torch.stack(outputs, dim=0)"),)),
    Mistake("rnn: returns the first state as h_T", answer="rnn_answer", test="rnn_test",
            patches=(("dim=1), h  # (B, T, H)", "dim=1), outputs[0]  # (B, T, H)"),)),
    Mistake("rnn: float32 zero state", answer="rnn_answer", test="rnn_test",
            patches=(("hidden_size, dtype=x.dtype)", "hidden_size)"),)),
    # ---------------------------------------------------------------- Part B: bptt_grads
    Mistake("bptt: forgets the 1/T", answer="bptt_answer", test="bptt_test",
            patches=(("/ (batch_size * seq_len)", "/ batch_size"),)),
    Mistake("bptt: forgets the 1/2 (factor 2)", answer="bptt_answer", test="bptt_test",
            patches=(("d_o = (o - y) /", "d_o = 2 * (o - y) /"),)),
    Mistake("bptt: missing W_hh transpose", answer="bptt_answer", test="bptt_test",
            patches=(("d_next @ W_hh +", "d_next @ W_hh.T +"),)),
    Mistake("bptt: h_t instead of h_{t-1} in dW_hh", answer="bptt_answer", test="bptt_test",
            patches=(('"bth,btk->hk", dh, prev)', '"bth,btk->hk", dh, states)'),)),
    Mistake("bptt: tanh in the linear RNN", answer="bptt_answer", test="bptt_test",
            patches=((LIN_LINE, "h = torch.tanh(x[:, t] @ W_hx.T + h @ W_hh.T)  # (B, H)"),)),
    Mistake("bptt: backward loop stops before t=0", answer="bptt_answer", test="bptt_test",
            patches=(("range(seq_len - 1, -1, -1)", "range(seq_len - 1, 0, -1)"),)),
    Mistake("bptt: off-by-one output index in the recursion", answer="bptt_answer", test="bptt_test",
            patches=(("+ d_o[:, t] @ W_qh", "+ d_o[:, min(t + 1, seq_len - 1)] @ W_qh"),)),
    Mistake("bptt: no recursion (one step only)", answer="bptt_answer", test="bptt_test",
            patches=((RECURSION, "d_next = d_o[:, t] @ W_qh  # (B, H)"),)),
    Mistake("bptt: forward loop in the wrong order", answer="bptt_answer", test="bptt_test",
            patches=(("for t in range(seq_len):", "for t in reversed(range(seq_len)):"),)),
    Mistake("bptt: dW_qh from the previous states", answer="bptt_answer", test="bptt_test",
            patches=(('"btq,bth->qh", d_o, states)', '"btq,bth->qh", d_o, prev)'),)),
    # ---------------------------------------------------------------- Part C: spectral radius
    Mistake("radius: largest real part", answer="radius_answer", test="radius_test",
            patches=(("eigenvalues.abs().max()", "eigenvalues.real.max()"),)),
    Mistake("radius: modulus of the real part", answer="radius_answer", test="radius_test",
            patches=(("eigenvalues.abs().max()", "eigenvalues.real.abs().max()"),)),
    Mistake("radius: largest singular value", answer="radius_answer", test="radius_test",
            patches=(("torch.linalg.eigvals(W)", "torch.linalg.svdvals(W)"),)),
    Mistake("radius: eigvalsh on a non-symmetric matrix", answer="radius_answer", test="radius_test",
            patches=(("torch.linalg.eigvals(W)", "torch.linalg.eigvalsh(W)"),)),
    Mistake("radius: returns a tensor", answer="radius_answer", test="radius_test",
            patches=(("eigenvalues.abs().max().item()", "eigenvalues.abs().max()"),)),
    Mistake("radius: growth off by one step", answer="radius_answer", test="radius_test",
            patches=(("spectral_radius(W) ** k", "spectral_radius(W) ** (k - 1)"),)),
    Mistake("radius: growth from the operator norm", answer="radius_answer", test="radius_test",
            patches=(("spectral_radius(W) ** k", "torch.linalg.matrix_norm(W, 2).item() ** k"),)),
    # ---------------------------------------------------------------- Part D: clip_grad_norm
    Mistake("clip: per-parameter instead of global", answer="clip_answer", test="clip_test",
            patches=(("        g.mul_(scale)", "        g.mul_(min(1.0, max_norm / (g.norm().item() + 1e-6)))"),)),
    Mistake("clip: no min, scales small gradients up", answer="clip_answer", test="clip_test",
            patches=(("scale = min(1.0, max_norm / (total_norm.item() + 1e-6))",
                      "scale = max_norm / (total_norm.item() + 1e-6)"),)),
    Mistake("clip: max instead of min", answer="clip_answer", test="clip_test",
            patches=(("scale = min(1.0,", "scale = max(1.0,"),)),
    Mistake("clip: sum of per-parameter norms", answer="clip_answer", test="clip_test",
            patches=(("total_norm = torch.sqrt(sum((g ** 2).sum() for g in grads))",
                      "total_norm = sum(g.norm() for g in grads)"),)),
    Mistake("clip: mean of squares", answer="clip_answer", test="clip_test",
            patches=(("(g ** 2).sum() for g", "(g ** 2).mean() for g"),)),
    Mistake("clip: returns the norm after clipping", answer="clip_answer", test="clip_test",
            patches=(("    return total_norm\n", "    return total_norm * scale\n"),)),
    Mistake("clip: not in place", answer="clip_answer", test="clip_test",
            patches=(("        g.mul_(scale)", "        g = g * scale"),)),
    Mistake("clip: does not skip None gradients", answer="clip_answer", test="clip_test",
            patches=(("[p.grad for p in params if p.grad is not None]", "[p.grad for p in params]"),)),
    # ---------------------------------------------------------------- Part E: stream_batches
    Mistake("stream: targets not shifted", answer="stream_answer", test="stream_test",
            patches=(("targets = ids[1 : batch_size * n + 1]", "targets = ids[: batch_size * n]"),)),
    Mistake("stream: interleaved rows", answer="stream_answer", test="stream_test",
            patches=(("inputs = ids[: batch_size * n].reshape(batch_size, n)",
                      "inputs = ids[: batch_size * n].reshape(n, batch_size).T"),
                     ("targets = ids[1 : batch_size * n + 1].reshape(batch_size, n)",
                      "targets = ids[1 : batch_size * n + 1].reshape(n, batch_size).T"))),
    Mistake("stream: consecutive windows, no continuity", answer="stream_answer", test="stream_test",
            patches=(("        cols = slice(k * seq_len, (k + 1) * seq_len)\n"
                      "        batches.append((inputs[:, cols], targets[:, cols]))",
                      "        starts = [(k * batch_size + b) * seq_len for b in range(batch_size)]\n"
                      "        batches.append((torch.stack([ids[s : s + seq_len] for s in starts]),\n"
                      "                        torch.stack([ids[s + 1 : s + seq_len + 1] for s in starts])))"),)),
    Mistake("stream: n = N // B", answer="stream_answer", test="stream_test",
            patches=(("n = (len(ids) - 1) // batch_size", "n = len(ids) // batch_size"),)),
    Mistake("stream: keeps a partial last batch", answer="stream_answer", test="stream_test",
            patches=(("num_batches = n // seq_len", "num_batches = -(-n // seq_len)"),)),
    Mistake("stream: time-major batches", answer="stream_answer", test="stream_test",
            patches=(("(inputs[:, cols], targets[:, cols])", "(inputs[:, cols].T, targets[:, cols].T)"),)),
    Mistake("stream: no error for a too-short stream", answer="stream_answer", test="stream_test",
            patches=(("if num_batches == 0:\n        raise ValueError",
                      "if num_batches < 0:\n        raise ValueError"),)),
    Mistake("stream: drops the last full batch", answer="stream_answer", test="stream_test",
            patches=(("for k in range(num_batches):", "for k in range(num_batches - 1):"),)),
]

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
