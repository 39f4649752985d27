"""Mistake bank of unit 03 (word embeddings): each plausible wrong answer must lose the points of its test cell,
run through the very test code nbgrader runs (hidden tests included).

The ``shortcut`` entries are whole answer cells that reach a blocked function another way (the course library
under another name or path, autograd through any of its doors): correct code, each checked once to earn full
marks with the call guard switched off, that only the guard stops, with ``ForbiddenCall``."""

from textwrap import dedent

from notebook_cells import (
    COMPLEX_STEP_GRADIENTS,
    FIVE_POINT_GRADIENTS,
    FRAMES_READER,
    Mistake,
    bank_tests,
    frames_entries,
)

UNIT = "03_word_embeddings"

# ---------------------------------------------------------------- lines of the solution that the patches target
PPMI_P_W = "p_w = counts.sum(dim=1, keepdim=True) / total  # (V, 1)"
PPMI_P_C = "p_c = smoothed / smoothed.sum()  # (C,)"
PPMI_RET = "return torch.where(counts > 0, pmi.clamp(min=0), torch.zeros_like(pmi))"

CBOW_H = "h = W_in[contexts].mean(dim=1)  # (B, D): the mean of the context vectors"
CBOW_SIGN = "sign[:, 1:] = -1  # the center should score high (+x), the noise words low (-x)"
CBOW_LOSS = "loss = -F.logsigmoid(sign * scores).sum(dim=1).mean()"
CBOW_D_SCORES = (
    "d_scores = -sign * torch.sigmoid(-sign * scores) / batch_size  # (B, 1 + K): d(-ln sigma(sign x))/dx, over B"
)
CBOW_OUT_ROWS = "out_rows = (d_scores[:, :, None] * h[:, None, :]).reshape(-1, d_model)  # (B * (1 + K), D)"
CBOW_OUT = "grad_out = torch.zeros_like(W_out).index_add_(0, targets.reshape(-1), out_rows)  # (V, D)"
CBOW_D_H = 'd_h = torch.einsum("bj,bjd->bd", d_scores, u)  # (B, D)'
CBOW_IN_ROWS = (
    "in_rows = (d_h / window).repeat_interleave(window, dim=0)  # (B * C, D): each context word gets dL/dh / C"
)
CBOW_IN = "grad_in = torch.zeros_like(W_in).index_add_(0, contexts.reshape(-1), in_rows)  # (V, D)"

GLOVE_WEIGHT = "weight = (counts / x_max).pow(alpha).clamp(max=1.0)  # (N,): f(X), capped at 1"
GLOVE_ERR = "err = (w * w_ctx).sum(dim=-1) + b[rows] + b_ctx[cols] - torch.log(counts)  # (N,)"
GLOVE_G = "g = 2 * weight * err  # (N,): dJ/d(prediction)"
GLOVE_DW = "dW = torch.zeros_like(W).index_add_(0, rows, g[:, None] * w_ctx)  # (V, D)"
GLOVE_DW_CTX = "dW_ctx = torch.zeros_like(W_ctx).index_add_(0, cols, g[:, None] * w)  # (V, D)"
GLOVE_DB = "db = torch.zeros_like(b).index_add_(0, rows, g)  # (V,)"
GLOVE_DB_CTX = "db_ctx = torch.zeros_like(b_ctx).index_add_(0, cols, g)  # (V,)"

MUL_UNIT = "unit = E / E.norm(dim=1, keepdim=True)  # (V, D)"
MUL_SCORES = "scores = (cos_b * cos_c / (cos_a + eps)).T  # (Q, V)"
MUL_EXCLUDE = "for ids in (a, b, c):"
MUL_RET = "return scores.topk(k, dim=1).indices  # (Q, k)"

FNV_BYTES = 'for byte in text.encode("utf-8"):'
FNV_STEP = "        h ^= byte\n        h = (h * 0x01000193) & 0xFFFFFFFF"
NGRAMS = "char_ngrams(word, n_min, n_max)]"
WHOLE = 'buckets.append(fnv1a_32(f"<{word}>") % num_buckets)  # the whole word, one more feature'
SUBWORD_RET = "return table[torch.tensor(buckets)].mean(dim=0)  # (G, D) -> (D,)"

BANK = [
    # ---------------------------------------------------------------- Part A: ppmi
    Mistake(
        "ppmi: alpha smooths the word distribution too",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=(
            (
                PPMI_P_W,
                "p_w = (counts.sum(dim=1, keepdim=True) ** alpha) / (counts.sum(dim=1) ** alpha).sum()  # (V, 1)",
            ),
        ),
    ),
    Mistake(
        "ppmi: NaN for words or contexts without counts (0/0 not caught)",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=((PPMI_RET, "return pmi.clamp(min=0)"),),
    ),
    Mistake(
        "ppmi: PMI not clipped at 0",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=((PPMI_RET, "return torch.where(counts > 0, pmi, torch.zeros_like(pmi))"),),
    ),
    Mistake(
        "ppmi: alpha applied to the context probabilities, not renormalised",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=((PPMI_P_C, "p_c = (counts.sum(dim=0) / total) ** alpha  # (C,)"),),
    ),
    Mistake(
        "ppmi: log base 2",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=(("pmi = torch.log(p_wc", "pmi = torch.log2(p_wc"),),
    ),
    Mistake(
        "ppmi: rows and columns swapped (contexts smoothed along the words)",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=(
            ("smoothed = counts.sum(dim=0) ** alpha  # (C,)", "smoothed = counts.sum(dim=1, keepdim=True) ** alpha"),
            (PPMI_P_W, "p_w = counts.sum(dim=0) / total"),
        ),
    ),
    Mistake(
        "ppmi: no ValueError for counts that are not 2-D",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=(("if counts.dim() != 2:", "if False:"),),
    ),
    Mistake(
        "ppmi: the ValueError does not say which shape it got",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=(
            (
                'raise ValueError(f"counts must be a 2-D tensor (V, C), got shape {tuple(counts.shape)}")',
                'raise ValueError("counts must be a 2-D tensor")',
            ),
        ),
    ),
    Mistake(
        "ppmi: float32 result for float64 counts",
        answer="ppmi_answer",
        test="ppmi_test",
        patches=((PPMI_RET, PPMI_RET + ".float()"),),
    ),
    # ---------------------------------------------------------------- Part B: cbow_ns_grads
    Mistake(
        "cbow: h is the sum of the context vectors, not their mean",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_H, "h = W_in[contexts].sum(dim=1)  # (B, D)"),),
    ),
    Mistake(
        "cbow: forgot the 1/C of the mean in grad_in",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_IN_ROWS, "in_rows = d_h.repeat_interleave(window, dim=0)  # (B * C, D)"),),
    ),
    Mistake(
        "cbow: index assignment for W_out's rows (repeated centers and negatives overwrite)",
        answer="cbow_answer",
        test="cbow_test",
        patches=(
            (CBOW_OUT, "grad_out = torch.zeros_like(W_out)  # (V, D)\n    grad_out[targets.reshape(-1)] = out_rows"),
        ),
    ),
    Mistake(
        "cbow: index assignment for the context words (repeated contexts overwrite)",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_IN, "grad_in = torch.zeros_like(W_in)  # (V, D)\n    grad_in[contexts.reshape(-1)] = in_rows"),),
    ),
    Mistake(
        "cbow: the sign dropped from the gradient (noise words pulled closer)",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_D_SCORES, "d_scores = -torch.sigmoid(-sign * scores) / batch_size  # (B, 1 + K)"),),
    ),
    Mistake(
        "cbow: sigma(x) instead of sigma(-x) in the gradient",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_D_SCORES, "d_scores = -sign * torch.sigmoid(sign * scores) / batch_size  # (B, 1 + K)"),),
    ),
    Mistake(
        "cbow: the noise words treated as positives (no sign)",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_SIGN, "pass"),),
    ),
    Mistake(
        "cbow: loss summed over the batch",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_LOSS, CBOW_LOSS.replace(".mean()", ".sum()")),),
    ),
    Mistake(
        "cbow: loss averaged over the 1 + K scores too",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_LOSS, "loss = -F.logsigmoid(sign * scores).mean()"),),
    ),
    Mistake(
        "cbow: gradients not divided by B (the mean forgotten)",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_D_SCORES, "d_scores = -sign * torch.sigmoid(-sign * scores)  # (B, 1 + K)"),),
    ),
    Mistake(
        "cbow: log of sigmoid underflows for large scores",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_LOSS, "loss = -torch.log(torch.sigmoid(sign * scores)).sum(dim=1).mean()"),),
    ),
    Mistake(
        "cbow: W_out's gradient uses the output vectors instead of h",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_OUT_ROWS, "out_rows = (d_scores[:, :, None] * u).reshape(-1, d_model)  # (B * (1 + K), D)"),),
    ),
    Mistake(
        "cbow: dL/dh from the center only, the noise words forgotten",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_D_H, "d_h = d_scores[:, 0, None] * u[:, 0]  # (B, D)"),),
    ),
    Mistake(
        "cbow: context rows tiled instead of repeated (wrong word gets each row)",
        answer="cbow_answer",
        test="cbow_test",
        patches=((CBOW_IN_ROWS, "in_rows = (d_h / window).repeat(window, 1)  # (C * B, D)"),),
    ),
    # ---------------------------------------------------------------- Part C: glove_grads
    Mistake(
        "glove: missing factor 2 of the square",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_G, "g = weight * err  # (N,)"),),
    ),
    Mistake(
        "glove: weight f not capped at 1",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_WEIGHT, "weight = (counts / x_max).pow(alpha)  # (N,)"),),
    ),
    Mistake(
        "glove: weight without the exponent alpha",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_WEIGHT, "weight = (counts / x_max).clamp(max=1.0)  # (N,)"),),
    ),
    Mistake(
        "glove: fits the count instead of its log",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_ERR, GLOVE_ERR.replace("- torch.log(counts)", "- counts")),),
    ),
    Mistake(
        "glove: the weight left out of the gradient",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_G, "g = 2 * err  # (N,)"),),
    ),
    Mistake(
        "glove: loss averaged instead of summed",
        answer="glove_answer",
        test="glove_test",
        patches=(("loss = (weight * err**2).sum()", "loss = (weight * err**2).mean()"),),
    ),
    Mistake(
        "glove: word-bias gradient assigned, not accumulated",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_DB, "db = torch.zeros_like(b)  # (V,)\n    db[rows] = g"),),
    ),
    Mistake(
        "glove: context-bias gradient assigned, not accumulated",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_DB_CTX, "db_ctx = torch.zeros_like(b_ctx)  # (V,)\n    db_ctx[cols] = g"),),
    ),
    Mistake(
        "glove: dW assigned, not accumulated",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_DW, "dW = torch.zeros_like(W)  # (V, D)\n    dW[rows] = g[:, None] * w_ctx"),),
    ),
    Mistake(
        "glove: dW from the word's own vector instead of the context vector",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_DW, GLOVE_DW.replace("g[:, None] * w_ctx", "g[:, None] * w")),),
    ),
    Mistake(
        "glove: dW_ctx indexed by the rows",
        answer="glove_answer",
        test="glove_test",
        patches=((GLOVE_DW_CTX, GLOVE_DW_CTX.replace("index_add_(0, cols,", "index_add_(0, rows,")),),
    ),
    # ---------------------------------------------------------------- Part D: analogy_3cosmul
    Mistake(
        "3cosmul: cosines not shifted to [0, 1]",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=tuple(
            (f"cos_{x} = (unit @ unit[{x}].T + 1) / 2", f"cos_{x} = unit @ unit[{x}].T") for x in ("a", "b", "c")
        ),
    ),
    Mistake(
        "3cosmul: the query words are not excluded",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_EXCLUDE, "for ids in ():"),),
    ),
    Mistake(
        "3cosmul: only c excluded",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_EXCLUDE, "for ids in (c,):"),),
    ),
    Mistake(
        "3cosmul: eps in the wrong place",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_SCORES, "scores = ((cos_b * cos_c + eps) / cos_a).T  # (Q, V)"),),
    ),
    Mistake(
        "3cosmul: dot products instead of cosines (rows not normalised)",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_UNIT, "unit = E  # (V, D)"),),
    ),
    Mistake(
        "3cosmul: the columns normalised instead of the rows",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_UNIT, "unit = E / E.norm(dim=0, keepdim=True)  # (V, D)"),),
    ),
    Mistake(
        "3cosmul: 3CosAdd instead",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_SCORES, "scores = (cos_b - cos_a + cos_c).T  # (Q, V)"),),
    ),
    Mistake(
        "3cosmul: a and b swapped",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_SCORES, "scores = (cos_a * cos_c / (cos_b + eps)).T  # (Q, V)"),),
    ),
    Mistake(
        "3cosmul: the k best in ascending order (best last)",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_RET, "return scores.sort(dim=1).indices[:, -k:]  # (Q, k)"),),
    ),
    Mistake(
        "3cosmul: returns the scores instead of the word ids",
        answer="cosmul_answer",
        test="cosmul_test",
        patches=((MUL_RET, "return scores.topk(k, dim=1).values  # (Q, k)"),),
    ),
    # ---------------------------------------------------------------- Part E: fnv1a_32 and hashed_subword_vector
    Mistake(
        "fnv: hashes code points instead of UTF-8 bytes",
        answer="hashing_answer",
        test="hashing_test",
        patches=((FNV_BYTES, "for byte in map(ord, text):"),),
    ),
    Mistake(
        "fnv: no 32-bit mask",
        answer="hashing_answer",
        test="hashing_test",
        patches=(("h = (h * 0x01000193) & 0xFFFFFFFF", "h = h * 0x01000193"),),
    ),
    Mistake(
        "fnv: FNV-1 order (multiply, then XOR)",
        answer="hashing_answer",
        test="hashing_test",
        patches=((FNV_STEP, "        h = (h * 0x01000193) & 0xFFFFFFFF\n        h ^= byte"),),
    ),
    Mistake(
        "fnv: offset basis 0",
        answer="hashing_answer",
        test="hashing_test",
        patches=(("h = 0x811C9DC5", "h = 0"),),
    ),
    Mistake(
        "fnv: the 64-bit FNV prime",
        answer="hashing_answer",
        test="hashing_test",
        patches=(("h = (h * 0x01000193) & 0xFFFFFFFF", "h = (h * 0x100000001B3) & 0xFFFFFFFF"),),
    ),
    Mistake(
        "fnv: fastText's sign extension of bytes above 127",
        answer="hashing_answer",
        test="hashing_test",
        patches=(("h ^= byte", "h ^= byte if byte < 128 else byte | 0xFFFFFF00"),),
    ),
    Mistake(
        "subword: the whole <word> forgotten",
        answer="hashing_answer",
        test="hashing_test",
        patches=((WHOLE, "pass"),),
    ),
    Mistake(
        "subword: sum instead of mean",
        answer="hashing_answer",
        test="hashing_test",
        patches=((SUBWORD_RET, SUBWORD_RET.replace(".mean(dim=0)", ".sum(dim=0)")),),
    ),
    Mistake(
        "subword: n-grams without the boundary markers",
        answer="hashing_answer",
        test="hashing_test",
        patches=((NGRAMS, "char_ngrams(word, n_min, n_max, boundary=False)]"),),
    ),
    Mistake(
        "subword: repeated features counted once",
        answer="hashing_answer",
        test="hashing_test",
        patches=((WHOLE, WHOLE + "\n    buckets = sorted(set(buckets))"),),
    ),
    Mistake(
        "subword: only n-grams of length n_min",
        answer="hashing_answer",
        test="hashing_test",
        patches=((NGRAMS, "char_ngrams(word, n_min)]"),),
    ),
    Mistake(
        "subword: the whole word hashed without its boundary markers",
        answer="hashing_answer",
        test="hashing_test",
        patches=((WHOLE, WHOLE.replace('f"<{word}>"', "word")),),
    ),
]

# ---------------------------------------------------------------- shortcuts: whole answer cells a student could submit

PPMI_ALIAS = dedent('''\
    import course_utils.embeddings as _emb

    _library_ppmi = _emb.ppmi


    def ppmi(counts, alpha=1.0):
        """counts (V, C) -> PPMI (V, C) by the course's function under another name."""
        if counts.dim() != 2:
            raise ValueError(f"counts must be 2-D, got shape {tuple(counts.shape)}")
        return _library_ppmi(counts, alpha)
    ''')

PPMI_PARTIAL = dedent('''\
    import functools
    import importlib

    _smoothed_ppmi = functools.partial(importlib.import_module("course_utils.embeddings").ppmi)


    def ppmi(counts, alpha=1.0):
        """counts (V, C) -> PPMI (V, C) through importlib and functools.partial."""
        if counts.dim() != 2:
            raise ValueError(f"counts must be 2-D, got shape {tuple(counts.shape)}")
        return _smoothed_ppmi(counts, alpha=alpha)
    ''')

CBOW_LIBRARY = dedent('''\
    from course_utils.embeddings import skipgram_ns_grads as _sgns


    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """CBOW through the library's skip-gram: the context means become B extra input rows."""
        vocab_size, d_model = W_in.shape
        batch_size, window = contexts.shape
        h = W_in[contexts].mean(dim=1)  # (B, D)
        table_in = torch.cat([W_in, h])  # (V + B, D)
        table_out = torch.cat([W_out, torch.zeros_like(h)])  # (V + B, D)
        rows = vocab_size + torch.arange(batch_size)  # (B,)
        loss, g_in, g_out = _sgns(table_in, table_out, rows, centers, negatives)
        grad_in = torch.zeros_like(W_in)  # (V, D)
        ctx_rows = (g_in[vocab_size:] / window)[:, None, :].expand(-1, window, -1).reshape(-1, d_model)  # (B*C, D)
        grad_in.index_add_(0, contexts.reshape(-1), ctx_rows)
        return loss, grad_in, g_out[:vocab_size]
    ''')

# The CBOW loss on leaf copies, shared by the autograd shortcuts below.
_CBOW_LOSS = """\
def _cbow_loss(w_in, w_out, contexts, centers, negatives):
    h = w_in[contexts].mean(dim=1)  # (B, D)
    pos = (h * w_out[centers]).sum(-1)  # (B,)
    neg = torch.einsum("bd,bkd->bk", h, w_out[negatives])  # (B, K)
    return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()


"""

CBOW_GRAD_EARLIER = _CBOW_LOSS + dedent('''\
    from torch.autograd import grad as _differentiate  # autograd under another name, taken before the test


    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """CBOW loss and gradients by torch.autograd.grad."""
        w_in, w_out = (w.detach().clone().requires_grad_(True) for w in (W_in, W_out))
        loss = _cbow_loss(w_in, w_out, contexts, centers, negatives)
        grad_in, grad_out = _differentiate(loss, (w_in, w_out))
        return loss.detach(), grad_in, grad_out
    ''')

CBOW_BACKWARD = _CBOW_LOSS + dedent('''\
    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """CBOW loss and gradients by loss.backward()."""
        w_in, w_out = (w.detach().clone().requires_grad_(True) for w in (W_in, W_out))
        loss = _cbow_loss(w_in, w_out, contexts, centers, negatives)
        loss.backward()
        return loss.detach(), w_in.grad, w_out.grad
    ''')

CBOW_FUNC = _CBOW_LOSS + dedent('''\
    import torch.func


    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """CBOW loss and gradients by torch.func.grad_and_value."""
        (grad_in, grad_out), loss = torch.func.grad_and_value(_cbow_loss, argnums=(0, 1))(
            W_in, W_out, contexts, centers, negatives
        )
        return loss, grad_in, grad_out
    ''')

CBOW_ENGINE = _CBOW_LOSS + dedent('''\
    from torch.autograd.variable import Variable

    _engine = Variable._execution_engine  # the C++ autograd engine behind backward() and grad()


    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """CBOW loss and gradients by the autograd engine itself."""
        w_in, w_out = (w.detach().clone().requires_grad_(True) for w in (W_in, W_out))
        loss = _cbow_loss(w_in, w_out, contexts, centers, negatives)
        # run_backward(tensors, grad_tensors, keep_graph, create_graph, inputs, allow_unreachable, accumulate_grad)
        grad_in, grad_out = _engine.run_backward((loss,), (torch.ones_like(loss),), False, False, (w_in, w_out), False, False)
        return loss.detach(), grad_in, grad_out
    ''')

CBOW_FUNCTIONAL = _CBOW_LOSS + dedent('''\
    from torch.autograd.functional import vjp as _vector_jacobian


    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """CBOW loss and gradients by torch.autograd.functional.vjp."""
        loss, (grad_in, grad_out) = _vector_jacobian(
            lambda w_in, w_out: _cbow_loss(w_in, w_out, contexts, centers, negatives), (W_in, W_out)
        )
        return loss, grad_in, grad_out
    ''')

CBOW_FORWARD_MODE = _CBOW_LOSS + dedent('''\
    from torch.func import jacfwd


    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """CBOW loss and gradients by forward-mode AD (one tangent per entry of the weights)."""
        grad_in, grad_out = jacfwd(_cbow_loss, argnums=(0, 1))(W_in, W_out, contexts, centers, negatives)
        return _cbow_loss(W_in, W_out, contexts, centers, negatives), grad_in, grad_out
    ''')

GLOVE_BACKWARD = dedent('''\
    from course_utils.embeddings import glove_loss  # allowed: it only computes the loss


    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """GloVe loss and gradients by loss.backward() on the course's glove_loss."""
        params = [t.detach().clone().requires_grad_(True) for t in (W, W_ctx, b, b_ctx)]
        loss = glove_loss(*params, rows, cols, counts, x_max=x_max, alpha=alpha)
        loss.backward()
        return (loss.detach(), *(p.grad for p in params))
    ''')

GLOVE_FUNC = dedent('''\
    import torch.func

    from course_utils.embeddings import glove_loss


    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """GloVe loss and gradients by torch.func.grad_and_value of the course's glove_loss."""
        grads, loss = torch.func.grad_and_value(glove_loss, argnums=(0, 1, 2, 3))(
            W, W_ctx, b, b_ctx, rows, cols, counts, x_max, alpha
        )
        return (loss, *grads)
    ''')

GLOVE_GRAD_EARLIER = dedent('''\
    import torch.autograd as _ag

    from course_utils.embeddings import glove_loss

    _gradient_of = _ag.grad  # a reference taken before the test


    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """GloVe loss and gradients by torch.autograd.grad under another name."""
        params = [t.detach().clone().requires_grad_(True) for t in (W, W_ctx, b, b_ctx)]
        loss = glove_loss(*params, rows, cols, counts, x_max=x_max, alpha=alpha)
        return (loss.detach(), *_gradient_of(loss, params))
    ''')

GLOVE_FRESH_ENGINE = dedent('''\
    from course_utils.embeddings import glove_loss

    _engine = torch._C._ImperativeEngine()  # a new autograd engine of its own


    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """GloVe loss and gradients by run_backward of a fresh autograd engine."""
        params = [t.detach().clone().requires_grad_(True) for t in (W, W_ctx, b, b_ctx)]
        loss = glove_loss(*params, rows, cols, counts, x_max=x_max, alpha=alpha)
        grads = _engine.run_backward((loss,), (torch.ones_like(loss),), False, False, tuple(params), False, False)
        return (loss.detach(), *grads)
    ''')

GLOVE_FUNCTIONAL = dedent('''\
    import torch.autograd.functional

    from course_utils.embeddings import glove_loss


    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """GloVe loss and gradients by torch.autograd.functional.vjp."""
        loss, grads = torch.autograd.functional.vjp(
            lambda *p: glove_loss(*p, rows, cols, counts, x_max=x_max, alpha=alpha), (W, W_ctx, b, b_ctx)
        )
        return (loss, *grads)
    ''')

MUL_LIBRARY_CANDIDATES = dedent('''\
    import course_utils.embeddings as _emb

    _add = _emb.analogy  # 3CosAdd under another name, used only to drop the query words


    def analogy_3cosmul(E, a, b, c, k=1, eps=1e-3):
        """3CosMul scores; the candidates (every word but a, b, c) come from the library's analogy."""
        unit = E / E.norm(dim=1, keepdim=True)  # (V, D)
        shifted = (unit @ unit.T + 1) / 2  # (V, V)
        scores = shifted[b] * shifted[c] / (shifted[a] + eps)  # (Q, V)
        candidates = _add(E, a, b, c, k=E.shape[0] - 3)  # (Q, V - 3)
        keep = torch.zeros_like(scores, dtype=torch.bool).scatter_(1, candidates, True)  # (Q, V)
        return scores.masked_fill(~keep, float("-inf")).topk(k, dim=1).indices  # (Q, k)
    ''')

MUL_LIBRARY_PARTIAL = dedent('''\
    import functools
    import sys

    _candidates = functools.partial(sys.modules["course_utils.embeddings"].analogy, exclude=True)


    def analogy_3cosmul(E, a, b, c, k=1, eps=1e-3):
        """3CosMul scores; the query words dropped by the library's analogy through sys.modules and a partial."""
        unit = E / E.norm(dim=1, keepdim=True)  # (V, D)
        shifted = (unit @ unit.T + 1) / 2  # (V, V)
        scores = shifted[b] * shifted[c] / (shifted[a] + eps)  # (Q, V)
        keep = torch.zeros_like(scores, dtype=torch.bool).scatter_(1, _candidates(E, a, b, c, k=E.shape[0] - 3), True)
        return scores.masked_fill(~keep, float("-inf")).topk(k, dim=1).indices  # (Q, k)
    ''')

_FNV = '''\
def fnv1a_32(text):
    """32-bit FNV-1a of the UTF-8 bytes of text."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


'''

HASH_LIBRARY = _FNV + dedent('''\
    import course_utils.embeddings as _emb

    _summed = _emb.fasttext_vector  # the library's fastText vector (a sum) under another name


    def hashed_subword_vector(word, table, n_min=3, n_max=6):
        """The library's fasttext_vector over a dict that maps each feature to its hashed bucket, / count."""
        features = char_ngrams(word, n_min, n_max) + [f"<{word}>"]
        buckets = {g: fnv1a_32(g) % table.shape[0] for g in features}
        return _summed(word, buckets, table, n_min, n_max) / len(features)
    ''')

HASH_LIBRARY_PARTIAL = _FNV + dedent('''\
    import functools
    import importlib

    _summed = functools.partial(importlib.import_module("course_utils.embeddings").fasttext_vector)


    def hashed_subword_vector(word, table, n_min=3, n_max=6):
        """fasttext_vector through importlib and functools.partial, over hashed buckets."""
        features = char_ngrams(word, n_min, n_max) + [f"<{word}>"]
        buckets = {g: fnv1a_32(g) % table.shape[0] for g in features}
        return _summed(word, buckets, table, n_min=n_min, n_max=n_max) / len(features)
    ''')

BANK += [
    Mistake("shortcut (alias): the course's ppmi under another name", "ppmi_answer", "ppmi_test", source=PPMI_ALIAS),
    Mistake(
        "shortcut (path): the course's ppmi through importlib and functools.partial",
        "ppmi_answer",
        "ppmi_test",
        source=PPMI_PARTIAL,
    ),
    Mistake(
        "shortcut (library): skipgram_ns_grads on a table augmented with the context means",
        "cbow_answer",
        "cbow_test",
        source=CBOW_LIBRARY,
    ),
    Mistake(
        "shortcut (path): torch.autograd.grad imported under another name",
        "cbow_answer",
        "cbow_test",
        source=CBOW_GRAD_EARLIER,
    ),
    Mistake("shortcut (method): loss.backward()", "cbow_answer", "cbow_test", source=CBOW_BACKWARD),
    Mistake("shortcut (torch.func): grad_and_value", "cbow_answer", "cbow_test", source=CBOW_FUNC),
    Mistake("shortcut (engine): run_backward called directly", "cbow_answer", "cbow_test", source=CBOW_ENGINE),
    Mistake("shortcut (functional): torch.autograd.functional.vjp", "cbow_answer", "cbow_test", source=CBOW_FUNCTIONAL),
    Mistake("shortcut (forward mode): torch.func.jacfwd", "cbow_answer", "cbow_test", source=CBOW_FORWARD_MODE),
    Mistake(
        "shortcut (method): loss.backward() on the course's glove_loss",
        "glove_answer",
        "glove_test",
        source=GLOVE_BACKWARD,
    ),
    Mistake("shortcut (torch.func): grad_and_value of glove_loss", "glove_answer", "glove_test", source=GLOVE_FUNC),
    Mistake(
        "shortcut (path): torch.autograd.grad taken before the test",
        "glove_answer",
        "glove_test",
        source=GLOVE_GRAD_EARLIER,
    ),
    Mistake(
        "shortcut (engine): run_backward of a fresh autograd engine",
        "glove_answer",
        "glove_test",
        source=GLOVE_FRESH_ENGINE,
    ),
    Mistake(
        "shortcut (functional): torch.autograd.functional.vjp of glove_loss",
        "glove_answer",
        "glove_test",
        source=GLOVE_FUNCTIONAL,
    ),
    Mistake(
        "shortcut (alias): the course's analogy, under another name, drops the query words",
        "cosmul_answer",
        "cosmul_test",
        source=MUL_LIBRARY_CANDIDATES,
    ),
    Mistake(
        "shortcut (path): the course's analogy through sys.modules and functools.partial",
        "cosmul_answer",
        "cosmul_test",
        source=MUL_LIBRARY_PARTIAL,
    ),
    Mistake(
        "shortcut (alias): the course's fasttext_vector over hashed buckets",
        "hashing_answer",
        "hashing_test",
        source=HASH_LIBRARY,
    ),
    Mistake(
        "shortcut (path): the course's fasttext_vector through importlib and functools.partial",
        "hashing_answer",
        "hashing_test",
        source=HASH_LIBRARY_PARTIAL,
    ),
]

# ---------------------------------------------------------------- numerical gradients: the right values, not the method
# Parts B and C teach the gradient derived by hand. Each entry below computes the right values by differentiating the
# loss numerically instead (no blocked function is called): with the checks off it earns the part's points, with
# them on the work watch stops it (WrongMethod), by the work that grows with the parameters, the complex dtype or
# the size of a batch holding one perturbed copy of the weights per parameter.

# The CBOW loss with -ln sigma(x) = ln(1 + e^-x) written out, so that it also runs on complex tensors.
_CBOW_PLAIN_LOSS = """\
def _cbow_loss(w_in, w_out, contexts, centers, negatives):
    h = w_in[contexts].mean(dim=1)  # (B, D)
    pos = (h * w_out[centers]).sum(dim=-1)  # (B,)
    neg = torch.einsum("bd,bkd->bk", h, w_out[negatives])  # (B, K)
    return (torch.log(1 + torch.exp(-pos)) + torch.log(1 + torch.exp(neg)).sum(dim=-1)).mean()


"""

CBOW_CENTRAL_DIFFERENCES = (
    _CBOW_PLAIN_LOSS
    + FIVE_POINT_GRADIENTS
    + dedent('''\
    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """The loss, and its gradients by central differences of fourth order in float64, one parameter at a time."""
        params = (W_in.double().clone(), W_out.double().clone())
        grads = _five_point_gradients(lambda: _cbow_loss(*params, contexts, centers, negatives), params)
        loss = _cbow_loss(*params, contexts, centers, negatives)
        return loss.to(W_in.dtype), grads[0].to(W_in.dtype), grads[1].to(W_in.dtype)
    ''')
)

CBOW_COMPLEX_STEP = (
    _CBOW_PLAIN_LOSS
    + COMPLEX_STEP_GRADIENTS
    + dedent('''\
    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """The loss, and its gradients by the complex step Im L(w + ih e_i) / h in complex128: one loss per parameter."""
        params = (W_in.to(torch.complex128), W_out.to(torch.complex128))
        grads = _complex_step_gradients(lambda: _cbow_loss(*params, contexts, centers, negatives), params)
        loss = _cbow_loss(*params, contexts, centers, negatives).real
        return loss.to(W_in.dtype), grads[0].to(W_in.dtype), grads[1].to(W_in.dtype)
    ''')
)

CBOW_BATCHED_DIFFERENCES = dedent('''\
    def _batched_loss(w_in, w_out, contexts, centers, negatives):
        """The CBOW loss of S sets of weights at once: w_in, w_out (S, V, D) -> (S,)."""
        h = w_in[:, contexts].mean(dim=2)  # (S, B, D)
        pos = (h * w_out[:, centers]).sum(dim=-1)  # (S, B)
        neg = torch.einsum("sbd,sbkd->sbk", h, w_out[:, negatives])  # (S, B, K)
        return (F.softplus(-pos) + F.softplus(neg).sum(dim=-1)).mean(dim=-1)


    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """Central differences with every parameter perturbed at once: one batch of P copies of the weights."""
        w_in, w_out = W_in.double(), W_out.double()
        count = w_in.numel()
        bumps = torch.eye(count, dtype=torch.float64).reshape(count, *w_in.shape)  # (P, V, D): one bump per copy
        step = 1e-3
        grads = []
        for bump_in in (True, False):
            losses = []
            for shift in (-2, -1, 1, 2):
                moved = shift * step * bumps  # (P, V, D)
                copies_in = w_in + moved if bump_in else w_in.expand(count, -1, -1)
                copies_out = w_out.expand(count, -1, -1) if bump_in else w_out + moved
                losses.append(_batched_loss(copies_in, copies_out, contexts, centers, negatives))  # (P,)
            grad = (losses[0] - 8 * losses[1] + 8 * losses[2] - losses[3]) / (12 * step)  # (P,)
            grads.append(grad.reshape(w_in.shape).to(W_in.dtype))
        loss = _batched_loss(w_in[None], w_out[None], contexts, centers, negatives)[0]
        return loss.to(W_in.dtype), grads[0], grads[1]
    ''')

# GloVe's loss as a plain function of its four parameters; the weights f(X) are real, the rest may be complex.
_GLOVE_PLAIN_LOSS = """\
def _glove_loss(W, W_ctx, b, b_ctx, rows, cols, counts, x_max, alpha):
    weight = (counts / x_max).pow(alpha).clamp(max=1.0)  # (N,)
    err = (W[rows] * W_ctx[cols]).sum(dim=-1) + b[rows] + b_ctx[cols] - torch.log(counts)  # (N,)
    return (weight * err**2).sum()


"""

GLOVE_CENTRAL_DIFFERENCES = (
    _GLOVE_PLAIN_LOSS
    + FIVE_POINT_GRADIENTS
    + dedent('''\
    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """The loss, and its gradients by central differences of fourth order in float64, one parameter at a time."""
        params = [t.double().clone() for t in (W, W_ctx, b, b_ctx)]
        data = (rows, cols, counts.double(), x_max, alpha)
        grads = _five_point_gradients(lambda: _glove_loss(*params, *data), params)
        return (_glove_loss(*params, *data).to(W.dtype), *(grad.to(W.dtype) for grad in grads))
    ''')
)

GLOVE_COMPLEX_STEP = (
    _GLOVE_PLAIN_LOSS
    + COMPLEX_STEP_GRADIENTS
    + dedent('''\
    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """The loss, and its gradients by the complex step Im J(p + ih e_i) / h in complex128: one loss per parameter."""
        params = [t.to(torch.complex128) for t in (W, W_ctx, b, b_ctx)]
        data = (rows, cols, counts.double(), x_max, alpha)
        grads = _complex_step_gradients(lambda: _glove_loss(*params, *data), params)
        return (_glove_loss(*params, *data).real.to(W.dtype), *(grad.to(W.dtype) for grad in grads))
    ''')
)

GLOVE_BATCHED_DIFFERENCES = dedent('''\
    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """Central differences with every parameter perturbed at once: one batch of P copies of all four parameters."""
        params = [t.double() for t in (W, W_ctx, b, b_ctx)]
        sizes = [p.numel() for p in params]
        flat = torch.cat([p.reshape(-1) for p in params])  # (P,)
        weight = (counts.double() / x_max).pow(alpha).clamp(max=1.0)  # (N,)
        log_counts = torch.log(counts.double())  # (N,)
        step = 1e-3

        def batched_loss(copies):  # (S, P) -> (S,)
            parts = copies.split(sizes, dim=1)
            w, w_ctx, bias, bias_ctx = (part.reshape(-1, *p.shape) for part, p in zip(parts, params))
            err = (w[:, rows] * w_ctx[:, cols]).sum(dim=-1) + bias[:, rows] + bias_ctx[:, cols] - log_counts  # (S, N)
            return (weight * err**2).sum(dim=-1)

        bumps = torch.eye(flat.numel(), dtype=torch.float64)  # (P, P): one bump per copy
        losses = [batched_loss(flat + shift * step * bumps) for shift in (-2, -1, 1, 2)]  # 4 x (P,)
        grad = (losses[0] - 8 * losses[1] + 8 * losses[2] - losses[3]) / (12 * step)  # (P,)
        grads = [part.reshape(p.shape).to(W.dtype) for part, p in zip(grad.split(sizes), params)]
        return (batched_loss(flat[None])[0].to(W.dtype), *grads)
    ''')

# ---------------------------------------------------------------- frames: the answer key read from the test's frames
# Each answer walks its callers' frames up to the outermost one, looks in their locals and globals (and one level
# into tuples, lists and dicts) for the reference the test computed, and returns it. Against the test cells as they
# were before issue 24 (references computed before the call: `expected`, `ref_in`, `ref`, `table`) each one earned its
# part's points; the test cells now compute every reference after the call, so each finds nothing and returns its
# wrong fallback.
_KEY_NAMES = ("expected", "_expected", "ref", "_ref", "want", "_want", "reference", "_reference")

PPMI_FRAMES = FRAMES_READER + dedent(f'''\
    def ppmi(counts, alpha=1.0):
        """The test's own PPMI, read from its frames; plain PMI, unclipped, where it finds none."""
        if counts.dim() != 2:
            raise ValueError(f"counts must be a 2-D tensor (V, C), got shape {{tuple(counts.shape)}}")
        key = _answer_key({_KEY_NAMES!r},
                          lambda v: type(v) is torch.Tensor and v.shape == counts.shape and v.dtype == counts.dtype)
        if key is not None:
            return key.clone()
        return torch.log(counts / counts.sum()).nan_to_num(0.0, 0.0, 0.0)
    ''')

CBOW_FRAMES = FRAMES_READER + dedent(f'''\
    def cbow_ns_grads(W_in, W_out, contexts, centers, negatives):
        """The test's own loss and gradients, read from its frames; zeros where it finds none."""
        def matrix(v):
            return type(v) is torch.Tensor and v.shape == W_in.shape

        loss = _answer_key(("ref_loss", "_ref_loss", "expected_loss") + {_KEY_NAMES!r},
                           lambda v: type(v) is torch.Tensor and v.dim() == 0)
        grad_in = _answer_key(("ref_in", "_ref_in", "expected_in", "grad_in_ref"), matrix)
        grad_out = _answer_key(("ref_out", "_ref_out", "expected_out", "grad_out_ref"), matrix)
        if loss is None or grad_in is None or grad_out is None:
            return W_in.new_zeros(()), torch.zeros_like(W_in), torch.zeros_like(W_out)
        return loss.to(W_in.dtype), grad_in.to(W_in.dtype), grad_out.to(W_in.dtype)
    ''')

GLOVE_FRAMES = FRAMES_READER + dedent(f'''\
    def glove_grads(W, W_ctx, b, b_ctx, rows, cols, counts, x_max=100.0, alpha=0.75):
        """The test's own loss and gradients, read from its frames; zeros where it finds none."""
        def key(v):
            return (type(v) is tuple and len(v) == 5 and all(type(t) is torch.Tensor for t in v)
                    and v[1].shape == W.shape and v[3].shape == b.shape)

        found = _answer_key({_KEY_NAMES!r}, key)
        if found is None:
            return (W.new_zeros(()), torch.zeros_like(W), torch.zeros_like(W_ctx), torch.zeros_like(b),
                    torch.zeros_like(b_ctx))
        return tuple(t.to(W.dtype) for t in found)
    ''')

MUL_FRAMES = FRAMES_READER + dedent(f'''\
    def analogy_3cosmul(E, a, b, c, k=1, eps=1e-3):
        """The k best words of the test's own table of scores, read from its frames; 3CosAdd where it finds none."""
        def table(v):
            return (type(v) is list and len(v) == a.shape[0]
                    and all(type(row) is list and len(row) == E.shape[0] for row in v))

        found = _answer_key(("table", "_table", "scores", "_scores") + {_KEY_NAMES!r}, table)
        if found is not None:
            return torch.tensor(found, dtype=torch.float64).topk(k, dim=1).indices  # (Q, k)
        unit = E / E.norm(dim=1, keepdim=True)  # (V, D)
        scores = (unit @ unit[b].T - unit @ unit[a].T + unit @ unit[c].T).T  # (Q, V)
        query = torch.arange(a.shape[0])  # (Q,)
        for ids in (a, b, c):
            scores[query, ids] = float("-inf")
        return scores.topk(k, dim=1).indices  # (Q, k)
    ''')

HASH_FRAMES = (
    _FNV
    + FRAMES_READER
    + dedent(f'''\
    def hashed_subword_vector(word, table, n_min=3, n_max=6):
        """The test's own vector, read from its frames; the mean without the whole-word feature where it finds none."""
        found = _answer_key({_KEY_NAMES!r},
                            lambda v: type(v) is torch.Tensor and v.shape == table.shape[1:] and v.dtype == table.dtype)
        if found is not None:
            return found.clone()
        buckets = [fnv1a_32(gram) % table.shape[0] for gram in char_ngrams(word, n_min, n_max)]
        return table[torch.tensor(buckets)].mean(dim=0)  # (D,)
    ''')
)

BANK += [
    Mistake(
        "numerical: CBOW gradients by central differences, parameter by parameter",
        "cbow_answer",
        "cbow_test",
        source=CBOW_CENTRAL_DIFFERENCES,
        passes_unchecked=True,
    ),
    Mistake(
        "numerical: CBOW gradients by the complex step (complex128)",
        "cbow_answer",
        "cbow_test",
        source=CBOW_COMPLEX_STEP,
        passes_unchecked=True,
    ),
    Mistake(
        "numerical: CBOW gradients by central differences, all parameters perturbed in one batched tensor",
        "cbow_answer",
        "cbow_test",
        source=CBOW_BATCHED_DIFFERENCES,
        passes_unchecked=True,
    ),
    Mistake(
        "numerical: GloVe gradients by central differences, parameter by parameter",
        "glove_answer",
        "glove_test",
        source=GLOVE_CENTRAL_DIFFERENCES,
        passes_unchecked=True,
    ),
    Mistake(
        "numerical: GloVe gradients by the complex step (complex128)",
        "glove_answer",
        "glove_test",
        source=GLOVE_COMPLEX_STEP,
        passes_unchecked=True,
    ),
    Mistake(
        "numerical: GloVe gradients by central differences, all parameters perturbed in one batched tensor",
        "glove_answer",
        "glove_test",
        source=GLOVE_BATCHED_DIFFERENCES,
        passes_unchecked=True,
    ),
    Mistake("frames: ppmi returns the test's expected PPMI", "ppmi_answer", "ppmi_test", source=PPMI_FRAMES),
    Mistake(
        "frames: cbow_ns_grads returns the test's autograd reference", "cbow_answer", "cbow_test", source=CBOW_FRAMES
    ),
    Mistake(
        "frames: glove_grads returns the test's autograd reference", "glove_answer", "glove_test", source=GLOVE_FRAMES
    ),
    Mistake(
        "frames: analogy_3cosmul ranks the test's table of scores", "cosmul_answer", "cosmul_test", source=MUL_FRAMES
    ),
    Mistake(
        "frames: hashed_subword_vector returns the test's expected vector",
        "hashing_answer",
        "hashing_test",
        source=HASH_FRAMES,
    ),
]

# the course's generic frame reader as well: each function returns any value of its answer's type and shape that
# it finds in its callers' frames (see notebook_cells.frames_entries)
BANK += frames_entries(UNIT)

# The answer key called rather than read: the test cell's own reference function, reached through the callers'
# frames. The call guard refuses every function the test cell defines (forbid's own-cell rule), so this loses its
# points to ForbiddenCall; with the guard off it earns them all.
BANK.append(
    Mistake(
        "frames: calls the test's own _reference_ppmi",
        answer="ppmi_answer",
        test="ppmi_test",
        passes_unchecked=True,
        source=dedent('''\
            import sys


            def ppmi(counts, alpha=1.0):
                """The test's reference, found in a calling frame and called; zeros where there is none."""
                if counts.dim() != 2:
                    raise ValueError(f"counts must be a 2-D tensor (V, C), got shape {tuple(counts.shape)}")
                frame = sys._getframe(1)
                while frame is not None:
                    reference = frame.f_locals.get("_reference_ppmi") or frame.f_globals.get("_reference_ppmi")
                    if reference is not None:
                        return reference(counts, alpha).to(counts.dtype)
                    frame = frame.f_back
                return torch.zeros_like(counts, dtype=torch.float32)
            '''),
    )
)

test_bank_covers_every_answer, test_solution_passes, test_mistake_loses_points = bank_tests(UNIT, BANK)
