"""Tiny transformers configurations shared by the tests of convert, hub and lora: small enough to build in
milliseconds, with the token ids the course's vocabularies do not have left unset."""


def tiny_gpt2_config(**overrides):
    """A ``transformers.GPT2Config`` of one layer, width 16, 2 heads, 30 tokens, 8 positions, no bos/eos;
    ``overrides`` replace any field."""
    import transformers

    fields = dict(vocab_size=30, n_positions=8, n_embd=16, n_layer=1, n_head=2, bos_token_id=None, eos_token_id=None)
    return transformers.GPT2Config(**{**fields, **overrides})


def tiny_bert_config(**overrides):
    """A ``transformers.BertConfig`` of one layer, width 16, 2 heads, MLP 32, 30 tokens, 8 positions;
    ``overrides`` replace any field."""
    import transformers

    fields = dict(
        vocab_size=30,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=8,
    )
    return transformers.BertConfig(**{**fields, **overrides})
