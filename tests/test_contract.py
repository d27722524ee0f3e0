"""The public API as the design document states it: names, argument order and defaults.

Other people's code and tests call these names (DESIGN.md, "Public API contract": extend freely,
do not rename). Each entry is the contract's own spelling; the package may add arguments after
them, never rename or reorder them.
"""
import dataclasses
import inspect

import pytest

from tf_tutorial import (attention, decode, decoder, embedding, encoder, ffn, flash, gpt, interop,
                         model, multihead, norm, rope)

_ = inspect.Parameter.empty        # no default
ANY = ...                          # the contract leaves the default open
CONTRACT = [   # (callable, [(name, default), ...]: the leading arguments, in order)
    (attention.scaled_dot_product_attention, [("q", _), ("k", _), ("v", _), ("mask", None)]),
    (attention.padding_mask, [("tokens", _), ("pad_id", _)]),
    (multihead.MultiHeadAttention, [("d_model", _), ("n_heads", _), ("dropout", 0.0), ("bias", True)]),
    (multihead.MultiHeadAttention.forward, [("self", _), ("query", _), ("key", _), ("value", _),
                                            ("mask", None)]),
    (embedding.positional_encoding, [("max_len", _), ("d_model", _)]),
    (embedding.SinusoidalPositionalEncoding, [("d_model", _), ("max_len", ANY)]),
    (embedding.TokenEmbedding, [("vocab_size", _), ("d_model", _)]),
    (norm.LayerNorm, [("d_model", _), ("eps", 1e-5)]),
    (ffn.PositionwiseFeedForward, [("d_model", _), ("d_ff", _), ("dropout", 0.0)]),
    (encoder.EncoderLayer, [("d_model", _), ("n_heads", _), ("d_ff", _), ("dropout", ANY)]),
    (encoder.EncoderLayer.forward, [("self", _), ("x", _), ("mask", None)]),
    (decoder.DecoderLayer, [("d_model", _), ("n_heads", _), ("d_ff", _), ("dropout", ANY)]),
    (decoder.DecoderLayer.forward, [("self", _), ("x", _), ("memory", _), ("self_mask", None),
                                    ("memory_mask", None)]),
    (model.Transformer, [("config", _)]),
    (model.Transformer.forward, [("self", _), ("src", _), ("tgt_in", _)]),
    (interop.from_torch, [("module", _)]),
    (decode.load_translator, [("path", _)]),
    (gpt.GPT, [("config", _)]),
    (gpt.generate, [("model", _), ("prompt", _), ("max_new_tokens", _), ("temperature", 1.0),
                    ("top_k", None), ("top_p", None), ("generator", None)]),
    (norm.RMSNorm, [("d", _), ("eps", 1e-6)]),
    (rope.rotate, [("x", _), ("positions", _), ("base", 10000.0)]),
    (attention.grouped_query_attention, [("q", _), ("k", _), ("v", _), ("mask", None)]),
    (multihead.GroupedQueryAttention, [("d_model", _), ("n_heads", _), ("n_kv_heads", _)]),
    (flash.flash_attention, [("q", _), ("k", _), ("v", _), ("mask", None), ("causal", False),
                             ("block_size", 64)]),
]


@pytest.mark.parametrize("fn, leading", CONTRACT, ids=[f.__qualname__ for f, _ in CONTRACT])
def test_the_contract_signatures(fn, leading):
    params = list(inspect.signature(fn).parameters.values())
    got = [(p.name, ANY if d is ANY else p.default) for p, (_name, d) in zip(params, leading)]
    assert got == leading
    # what the package adds after them has a default: every contract call still works
    assert all(p.default is not _ or p.kind is p.VAR_KEYWORD for p in params[len(leading):])


def test_the_contract_config_fields():
    fields = [f.name for f in dataclasses.fields(model.TransformerConfig)]
    assert fields[:9] == ["src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers",
                          "d_ff", "dropout", "max_len", "pad_id"]
    assert "vocab_size" in {f.name for f in dataclasses.fields(gpt.GPTConfig)}


def test_the_contract_names_exist():
    for module, names in [(attention, ["causal_mask"]), (encoder, ["Encoder"]), (decoder, ["Decoder"]),
                          (model, ["TransformerConfig"]), (decode, ["greedy_decode", "beam_search"]),
                          (gpt, ["GPTConfig", "sample"])]:
        for name in names:
            assert callable(getattr(module, name)), f"{module.__name__}.{name}"
