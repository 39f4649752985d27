"""course_utils: the helper library of the sequence-models course.

One module per concern, grown unit by unit:

- ``primitives`` the ground floor every module may stand on (imports only torch): ``causal_mask``,
                ``lengths_to_mask`` / ``padding_mask``, ``masked_softmax``, ``masked_pool``, ``check_qkv``,
                ``count_parameters``, ``trainable_parameters``
- ``device``    pick CUDA, then Apple MPS, then the CPU (``get_device``); ``native_bf16``
- ``repro``     seeding for repeatable notebooks (``seed_everything``)
- ``testing``   the exercise tests' support: ``checks`` (assertions whose failures name the mistake),
                ``guard`` (``forbid``), ``work`` (``watch_work``) and ``layer`` beneath them
- ``progress``  progress bars that end as one line of text (live widget in a notebook)
- ``training``  a small training loop with a progress bar and a ``History``
- ``plotting``  figures drawn from a ``History`` and friends
- ``data``      offline-first data: generated corpora, text shipped with Python, local files, hub
- ``text``      unit 01: tokenizers, vocabulary, padding/collation, BPE, character n-grams
- ``lm``        unit 02: n-gram language models, cross-entropy, perplexity
- ``bleu``      unit 02: BLEU from scratch (clipped precision, brevity penalty, smoothing)
- ``metrics``   unit 02: the course's metrics packaged as local ``evaluate`` modules
- ``bow``       unit 03: bags of words, TF-IDF, word-word co-occurrence counts
- ``embeddings`` unit 03: PPMI and truncated SVD, word2vec (skip-gram with negative sampling), GloVe,
                fastText vectors, neighbours, 3CosAdd analogies, Spearman correlation
- ``rnn``       unit 04: the RNN loop, manual BPTT, clipping, truncated-BPTT batches, a char RNN LM
- ``gated``     unit 05: LSTM and GRU cells, masked pooling, the adding problem, classifiers
- ``seq2seq``   units 06-07: parallel-corpus batches, teacher forcing, greedy decoding, scoring
- ``transformer`` unit 07: positional encodings, encoder/decoder layers, a classifier, a seq2seq model
- ``decoding``  unit 07: beam search, sampling (temperature, top-k, top-p), MLM and next-token targets
- ``self_attention`` units 07-10: the fused query/key/value projections the GPT and the ViT share
                (``FusedSelfAttention``) and the key-value cache (``KVCache``)
- ``gpt``       units 07-08, 10: a configurable decoder-only transformer LM (Pre/Post-LN, RMSNorm, SwiGLU, RoPE,
                ALiBi, ReZero) and ``generate``; a key-value cache is an option of its forward pass
                (``model(idx, cache)``) and of ``generate(..., use_cache=True)``
- ``attention`` unit 06: masked softmax, scaled dot-product and multi-head attention, additive
                attention, a GRU encoder-decoder with Bahdanau attention (``BahdanauSeq2Seq``)
- ``taming``    unit 08: warm-up + cosine, weight-decay groups, RMSNorm, GLU feed-forwards, ReZero,
                label smoothing, relative positions
- ``images``    unit 09: image datasets offline first (Fashion-MNIST, digits) and augmentation
- ``vit``       unit 09: patches, patch embedding, the Vision Transformer, attention rollout
- ``memory``    unit 10: ``PeakMemory``, peak bytes of the tensors a block creates, the same on every device
- ``fast_attention`` unit 10: naive vs tiled attention (online softmax, log-sum-exp), its tiled backward from
                the saved log-sum-exp and ``flash_attention`` (an autograd.Function tiled both ways);
                ``generate_with_cache`` / ``generate_without_cache``, unit 10's names for ``gpt.generate``
- ``linear_attention`` unit 10: linear attention (parallel, recurrent, chunkwise) and its family as one
                recurrence: RetNet, gated (GLA / Mamba-2), DeltaNet and gated DeltaNet (also by chunks)
- ``rwkv``      unit 10: RWKV's WKV operator (naive, max-subtracted parallel, by matmul, stable recurrent, chunkwise
                linear in T), RWKV's time-mix and channel-mix blocks
- ``ssm``       unit 10: zero-order hold, S4's convolution and recurrent views, the associative scan,
                Mamba's selective scan
- ``xlstm``     unit 10: xLSTM's mLSTM (parallel, recurrent) and sLSTM (heads with a block-diagonal R) cells
- ``xlstm_blocks`` unit 10: the xLSTM paper's mLSTM and sLSTM blocks and their stack (xLSTM[a:b])
- ``reformer``  unit 10: the Reformer's LSH buckets, bucketed attention (with the shared-QK self-mask),
                sort-and-chunk attention, a chunked feed-forward
- ``reversible`` unit 10: reversible residual blocks and a stack whose backward recomputes activations
- ``recall``    unit 10: multi-query associative recall (MQAR) batches, small models for five token mixers
                at equal parameters, their training and scoring
- ``pretraining`` unit 11: BERT's masking (``mask_tokens``), a word-level corpus with a word-order task, a small
                Pre-LN ``Encoder`` with a tied MLM head, ``pretrain_mlm``, a classifier and ``finetune``
                (full, linear probe or LoRA)
- ``lora``      unit 11: LoRA by hand with peft's conventions (``LoRALinear`` with merge and unmerge, ``add_lora``,
                ``merge_lora``, ``trainable_parameters``)
- ``convert``   unit 11: the course GPT and transformers' ``GPT2LMHeadModel``, weight for weight, both ways
- ``hub``       unit 11: pretrained models offline first (a saved folder always; a hub name only with
                ``COURSE_DOWNLOAD=1``, failing fast otherwise), a ``tokenizers`` BPE as a fast tokenizer

The instructors' autograder is not part of it: it is the top-level package ``grader``.
"""

__all__ = ["get_device", "seed_everything"]


def __getattr__(name: str):
    # Imported on first use, so that tools which never touch a tensor (the autograder's parent
    # process, which grades many submissions) do not pay for importing torch.
    if name == "get_device":
        from .device import get_device

        return get_device
    if name == "seed_everything":
        from .repro import seed_everything

        return seed_everything
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
