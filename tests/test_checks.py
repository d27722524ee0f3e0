"""tf_tutorial._checks: the argument checks every module shares, and the entry points that use them.

An independent audit passed a Python list where a tensor belongs and got
``AttributeError: 'list' object has no attribute 'dim'`` from thirteen public entry points. PyTorch's
own layers raise TypeError there, and so must ours, naming the argument.
"""
import dataclasses
import re

import numpy as np
import pytest
import torch
from torch import nn

from tf_tutorial._checks import (DtypeMismatchError, WrongTypeError, require_counts, require_dropout, require_fits, require_flags, require_finite, require_ids, require_nonnegative, require_positive, require_sizes,
                                 require_tensors, require_width)
from tf_tutorial.attention import causal_mask, fused_attention, grouped_query_attention, padding_mask, scaled_dot_product_attention
from tf_tutorial.corpus.data import Vocab, pad
from tf_tutorial.decode import length_penalty, strip
from tf_tutorial.decoder import DecoderCache, DecoderLayer
from tf_tutorial.embedding import SinusoidalPositionalEncoding, TokenEmbedding, positional_encoding
from tf_tutorial.encoder import EncoderLayer
from tf_tutorial.flash import causal_tiles, flash_attention
from tf_tutorial.ffn import PositionwiseFeedForward, SwiGLUFeedForward, swiglu_hidden
from tf_tutorial.gpt import (GPT, GPTBlock, GPTCache, GPTConfig, generate, sample, sampling_probs,
                             train_continuation)
from tf_tutorial.model import Transformer, TransformerConfig
from tf_tutorial.multihead import GroupedQueryAttention, KVCache, MultiHeadAttention
from tf_tutorial.norm import LayerNorm, RMSNorm
from tf_tutorial.residual import SublayerConnection
from tf_tutorial.rnn import ElmanRNN
from tf_tutorial.rope import rotate
from tf_tutorial.train import CONFIGS, autocast_dtype, batch_stream, train

D = 12
ROWS = [[0.0] * D, [1.0] * D]                    # a (2, 12) matrix, as a list
IDS = [[5, 6, 0]]


def _transformer():
    return Transformer(TransformerConfig(20, 21, D, 3, 1, 16, 0.0, 30))


def _gpt():
    return GPT(GPTConfig(vocab_size=20, d_model=D, n_heads=3, n_layers=1, d_ff=16, max_len=30))


CALLS = {
    "padding_mask": (lambda: padding_mask(IDS, 0), "tokens"),
    "rotate": (lambda: rotate([[1.0, 2.0]], torch.arange(1)), "x"),
    "MultiHeadAttention": (lambda: MultiHeadAttention(D, 3)(ROWS, ROWS, ROWS), "query"),
    "LayerNorm": (lambda: LayerNorm(D)(ROWS), "x"),
    "RMSNorm": (lambda: RMSNorm(D)(ROWS), "x"),
    "TokenEmbedding": (lambda: TokenEmbedding(20, D)(IDS), "tokens"),
    "SinusoidalPositionalEncoding": (lambda: SinusoidalPositionalEncoding(D, 30)([ROWS]), "x"),
    "PositionwiseFeedForward": (lambda: PositionwiseFeedForward(D, 16)(ROWS), "x"),
    "SwiGLUFeedForward": (lambda: SwiGLUFeedForward(D, 16)(ROWS), "x"),
    "EncoderLayer": (lambda: EncoderLayer(D, 3, 16, 0.0)([ROWS]), "x"),
    "SublayerConnection Post-LN": (lambda: SublayerConnection(D)(ROWS, lambda x: x), "x"),
    "SublayerConnection Pre-LN": (lambda: SublayerConnection(D, norm_first=True)(ROWS, lambda x: x), "x"),
    "DecoderLayer memory": (lambda: DecoderLayer(D, 3, 16, 0.0)(torch.zeros(1, 2, D), [ROWS]),
                            "memory"),
    "Transformer src": (lambda: _transformer()(IDS, torch.ones(1, 2, dtype=torch.long)), "src"),
    "Transformer tgt_in": (lambda: _transformer()(torch.ones(1, 2, dtype=torch.long), IDS),
                           "tgt_in"),
    "GPT": (lambda: _gpt()(IDS), "tokens"),
    "generate": (lambda: generate(_gpt(), [5, 6, 7], 2), "prompt"),
    "sample": (lambda: sample([1.0, 2.0]), "logits"),
    "sampling_probs": (lambda: sampling_probs([1.0, 2.0]), "logits"),
    "scaled_dot_product_attention": (lambda: scaled_dot_product_attention(ROWS, ROWS, ROWS), "q"),
    "grouped_query_attention": (lambda: grouped_query_attention([ROWS], [ROWS], [ROWS]), "q"),
    "flash_attention": (lambda: flash_attention(ROWS, ROWS, ROWS), "q"),
}


@pytest.mark.parametrize("name", CALLS)
def test_a_list_where_a_tensor_belongs_is_a_type_error_naming_the_argument(name):
    call, argument = CALLS[name]
    with pytest.raises(TypeError, match=rf"^{argument} must be a torch\.Tensor, but got list$"):
        call()


def test_require_tensors_names_the_first_argument_that_is_not_one():
    require_tensors(a=torch.zeros(1), b=torch.zeros(2))
    with pytest.raises(TypeError, match=r"^b must be a torch\.Tensor, but got tuple$"):
        require_tensors(a=torch.zeros(1), b=(1, 2))


@pytest.mark.parametrize("tokens", [torch.ones(4, dtype=torch.long), torch.ones(2, 3, 1, dtype=torch.long),
                                    torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool)])
def test_require_ids_wants_a_two_dimensional_integer_tensor(tokens):
    require_ids(torch.ones(2, 3, dtype=torch.long))
    require_ids(torch.ones(2, 3, dtype=torch.int32))
    got = re.escape(f"{tokens.dtype} of shape {tuple(tokens.shape)}")
    with pytest.raises(ValueError, match=rf"^src: expected token ids of shape \(B, S\), but got {got}$"):
        require_ids(tokens, "src", lead="B, S")


def test_require_width_checks_the_last_dimension_and_with_lead_the_number_of_dimensions():
    require_width(torch.zeros(4, D), D)
    require_width(torch.zeros(2, 3, 4, D), D)                   # any leading shape
    require_width(torch.zeros(2, 3, D), D, lead="B, L")
    with pytest.raises(ValueError, match=r"^x: expected last dimension 12, but got shape \(4, 5\)$"):
        require_width(torch.zeros(4, 5), D)
    with pytest.raises(ValueError, match=r"^x: expected last dimension 12, but got shape \(\)$"):
        require_width(torch.tensor(1.0), D)
    with pytest.raises(ValueError, match=r"^memory: expected shape \(B, S, 12\), but got \(4, 12\)$"):
        require_width(torch.zeros(4, D), D, "memory", lead="B, S")
    with pytest.raises(ValueError, match=r"expected shape \(B, S, 12\), but got \(2, 3, 5\)"):
        require_width(torch.zeros(2, 3, 5), D, lead="B, S")


@pytest.mark.parametrize("value", [0, -3, 2.0, True, "4", None])
def test_require_sizes_wants_positive_integers(value):
    require_sizes(d_model=4, n_heads=1)
    with pytest.raises(ValueError, match=rf"^n_heads must be a positive integer, but got {value!r}$"):
        require_sizes(d_model=4, n_heads=value)


@pytest.mark.parametrize("value", [-1, 2.0, True, "4", None])
def test_require_counts_wants_integers_from_zero(value):
    require_counts(extra=0, max_new_tokens=7)                  # 0 is a count
    with pytest.raises(ValueError, match=rf"^extra must be an integer >= 0, but got {value!r}$"):
        require_counts(max_new_tokens=3, extra=value)


@pytest.mark.parametrize("value", [1.0, -0.1, 1.5, "0.1", None, True, float("nan")])
def test_require_dropout_wants_a_number_in_zero_to_one(value):
    import numpy as np
    for fine in (0, 0.0, 0.5, np.float32(0.1)):
        require_dropout(fine)
    with pytest.raises(ValueError, match=rf"^dropout must be in \[0, 1\), but got {re.escape(repr(value))}$"):
        require_dropout(value)


@pytest.mark.parametrize("value", [0, -1e-5, "1e-5", None, False, float("nan")])
def test_require_positive_names_the_first_value_that_is_not(value):
    require_positive(eps=1e-5, base=10000)
    with pytest.raises(ValueError, match=rf"^eps must be positive, but got {re.escape(repr(value))}$"):
        require_positive(base=2.0, eps=value)


@pytest.mark.parametrize("value, error", [(-0.5, ValueError), (float("inf"), ValueError), (float("nan"), ValueError),
                                          ("0.6", WrongTypeError), (None, WrongTypeError), (True, WrongTypeError)])
def test_require_nonnegative_wants_a_finite_number_from_zero(value, error):
    require_nonnegative(alpha=0, beta=0.6)
    with pytest.raises(error, match=rf"^alpha must be a finite number >= 0, but got {re.escape(repr(value))}$"):
        require_nonnegative(beta=1, alpha=value)


@pytest.mark.parametrize("value, error", [(float("inf"), ValueError), (float("nan"), ValueError),
                                          (10 ** 400, ValueError), ("0.6", WrongTypeError),
                                          (None, WrongTypeError), (True, WrongTypeError)])
def test_require_finite_wants_a_finite_real_number_of_either_sign(value, error):
    require_finite(k=-3, shift=0.5, big=10 ** 300)
    with pytest.raises(error, match=rf"^k must be a finite number, but got {re.escape(repr(value))}$"):
        require_finite(shift=1, k=value)


def test_require_ids_names_the_two_id_dtypes_an_embedding_takes():
    for dtype in (torch.int16, torch.int8, torch.uint8):
        with pytest.raises(ValueError, match=rf"^src: expected token ids of shape \(B, S\), but got {dtype} of "
                                             r"shape \(2, 3\) \(ids must be int64 or int32\)$"):
            require_ids(torch.ones(2, 3, dtype=dtype), "src", lead="B, S")


@pytest.mark.parametrize("value", ["False", "no", 0, 1, None, torch.tensor(True)])
def test_require_flags_refuses_what_python_would_read_as_true_or_false(value):
    import numpy as np
    require_flags(causal=True, use_cache=False, norm_first=np.bool_(True))
    with pytest.raises(TypeError, match=rf"^causal must be True or False, but got {re.escape(repr(value))}$"):
        require_flags(use_cache=True, causal=value)


@pytest.mark.parametrize("call, name", [
    (lambda v: flash_attention(*[torch.ones(1, 3, 4)] * 3, causal=v), "causal"),
    (lambda v: EncoderLayer(8, 2, 16, 0.0, norm_first=v), "norm_first"),
    (lambda v: DecoderLayer(8, 2, 16, 0.0, norm_first=v), "norm_first"),
    (lambda v: TransformerConfig(10, 10, tie_output=v), "tie_output"),
    (lambda v: TransformerConfig(10, 10, share_embeddings=v), "share_embeddings"),
    (lambda v: GPTConfig(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16, norm_first=v), "norm_first"),
    (lambda v: generate(GPT(GPTConfig(vocab_size=10, d_model=8, n_heads=2, n_layers=1, d_ff=16)),
                        torch.ones(1, 2, dtype=torch.long), 1, use_cache=v), "use_cache"),
    # probe 9: these took anything, bos=2 added two BOS
    (lambda v: MultiHeadAttention(8, 2, fused=v), "fused"),
    (lambda v: KVCache(static=v), "static"),
    (lambda v: fused_attention(*[torch.ones(1, 2, 3, 4)] * 3, enable_gqa=v), "enable_gqa"),
    (lambda v: Vocab(["i"]).encode(["i"], bos=v), "bos"),
    (lambda v: Vocab(["i"]).encode(["i"], eos=v), "eos"),
    (lambda v: Vocab(["i"]).encode(["i"], bos=np.bool_(v), eos=v), "eos"),      # np.True_ was accepted, then failed
])
def test_switches_are_refused_unless_true_or_false(call, name):
    """The string "False" is truthy: without the check, norm_first="False" builds a Pre-LN model."""
    for fine in (False, True):
        call(fine)
    with pytest.raises(TypeError, match=f"^{name} must be True or False, but got 'False'$"):
        call("False")


# (call, a value of the wrong type, a value of the right type out of range, the message's start)
SCALARS = {
    "MultiHeadAttention d_model": (lambda v: MultiHeadAttention(v, 2), "8", 0, "d_model must be"),
    "EncoderLayer dropout": (lambda v: EncoderLayer(8, 2, 16, v), None, 1.0, "dropout must be"),
    "LayerNorm eps": (lambda v: LayerNorm(8, eps=v), "1e-5", -1e-5, "eps must be"),
    "flash_attention block_size": (lambda v: flash_attention(*[torch.ones(1, 3, 4)] * 3, block_size=v),
                                   2.0, 0, "block_size must be"),
    "TransformerConfig pad_id": (lambda v: TransformerConfig(10, 10, pad_id=v), True, 10, "pad_id="),
    "GPTConfig eos_id": (lambda v: GPTConfig(vocab_size=10, eos_id=v), "2", 10, "eos_id="),
    "causal_mask": (causal_mask, 3.0, 0, "length must be"),
    "sampling_probs temperature": (lambda v: sampling_probs(torch.zeros(4), temperature=v), "1", -1.0,
                                   "temperature must be"),
    "sampling_probs top_k": (lambda v: sampling_probs(torch.zeros(4), top_k=v), 2.0, 0, "top_k must be"),
    "sampling_probs top_p": (lambda v: sampling_probs(torch.zeros(4), top_p=v), "0.9", 0.0, "top_p must be"),
    "RMSNorm d": (lambda v: RMSNorm(v), [8], -8, "d must be"),
    "GroupedQueryAttention n_kv_heads": (lambda v: GroupedQueryAttention(8, 4, v), "2", 0, "n_kv_heads must be"),
    # probe 9: these took a bool as 1, a float as a size, or ran into torch's own error
    "causal_mask True": (causal_mask, True, -1, "length must be"),
    "pad pad_id": (lambda v: pad([[4, 5], [6]], v), 1.5, ..., "pad_id must be"),      # ...: no range to check
    "batch_stream skip": (lambda v: next(batch_stream([([4, 2], [1, 5, 2])], CONFIGS["tiny"], 0, skip=v)),
                          True, -1, "skip must be"),
    "batch_stream world": (lambda v: next(batch_stream([([4, 2], [1, 5, 2])], CONFIGS["tiny"], 0, world=v)),
                           8.0, 0, "world must be"),
    "DecoderCache": (DecoderCache, True, 0, "n_layers must be"),
    "GPTCache": (GPTCache, "2", -1, "n_layers must be"),
    "GPTBlock n_kv_heads": (lambda v: GPTBlock(8, 4, 16, n_kv_heads=v), "2", 0, "n_kv_heads must be"),
    "causal_tiles": (lambda v: causal_tiles(v, 4), 8.0, -1, "length must be"),
    "swiglu_hidden": (lambda v: swiglu_hidden(8, multiple_of=v), None, 0, "multiple_of must be"),
    "length_penalty": (lambda v: length_penalty(torch.tensor([3]), v), "0.6", -1.0, "alpha must be"),
    "train_continuation max_seconds": (lambda v: train_continuation(_gpt(), None, [("a", "b")], CONFIGS["tiny"],
                                                                    max_seconds=v), "60", -1.0,
                                       "max_seconds must be"),
    # a name from a list: ["relu"] was an "unhashable type" error, 5 a ValueError
    "PositionwiseFeedForward activation": (lambda v: PositionwiseFeedForward(8, 16, activation=v), ["relu"],
                                           "swish", "activation must be one of ['gelu', 'relu'], but got"),
    "GPTConfig positions": (lambda v: GPTConfig(vocab_size=10, positions=v), None, "rotary",
                            "positions must be one of"),
    "GPTConfig norm": (lambda v: GPTConfig(vocab_size=10, norm=v), 5, "batch", "norm must be one of"),
    "autocast_dtype precision": (lambda v: autocast_dtype(torch.device("cpu"), v), 16, "fp8",
                                 "precision must be one of"),
}


@pytest.mark.parametrize("name", SCALARS)
def test_a_scalar_of_the_wrong_type_is_both_a_type_error_and_a_value_error(name):
    """Python's habit is TypeError for a wrong type, this package's was ValueError for any bad size:
    a caller may catch either. A value of the right type out of range stays a plain ValueError."""
    call, wrong_type, out_of_range, start = SCALARS[name]
    with pytest.raises(WrongTypeError, match=f"^{re.escape(start)}") as caught:
        call(wrong_type)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)
    if out_of_range is ...:
        return
    with pytest.raises(ValueError, match=f"^{re.escape(start)}") as caught:
        call(out_of_range)
    assert not isinstance(caught.value, TypeError)


def test_the_training_loops_check_their_switches_before_they_start():
    """progress="False" would show the bar, compile=5 start an inductor compile; resume=5 is no path."""
    with pytest.raises(WrongTypeError, match=r"^progress must be True or False, but got 'False'$"):
        train(CONFIGS["tiny"], progress="False")
    with pytest.raises(WrongTypeError, match=r"^compile must be True, False or the name of a torch.compile "
                                             r"backend, but got 5$"):
        train(CONFIGS["tiny"], progress=False, compile=5)
    with pytest.raises(TypeError, match=r"^resume: expected a file or folder name \(str or Path\), but got int$"):
        train(CONFIGS["tiny"], progress=False, resume=5)
    for empty in ("", "  "):                                      # was "no resume", or ./checkpoint.pt
        with pytest.raises(ValueError, match=rf"^resume: expected a file or folder name, but got {empty!r}$"):
            train(CONFIGS["tiny"], progress=False, resume=empty)
    with pytest.raises(WrongTypeError, match=r"^progress must be True or False, but got None$"):
        train_continuation(_gpt(), None, [("a", "b")], CONFIGS["tiny"], progress=None)


def test_ids_that_are_not_integers_are_refused_where_a_bool_would_be_read_as_an_id():
    vocab = Vocab(["i", "love"])
    with pytest.raises(WrongTypeError, match=r"^ids: expected one sentence's integer token ids, but got True "
                                             r"at position 0$"):
        vocab.decode([True, 4])
    with pytest.raises(WrongTypeError, match=r"^eos_id must be an integer token id, but got '2'$"):
        strip(torch.tensor([[4, 2, 0]]), "2")                 # cut nothing
    with pytest.raises(WrongTypeError, match=r"^eos_id must be an integer token id, but got True$"):
        strip(torch.tensor([[4, 1, 0]]), True)                # cut at id 1
    with pytest.raises(TypeError, match=r"^ids must be a torch.Tensor, but got list$"):
        strip([[4, 2, 0]], 2)
    assert strip(torch.tensor([[4, 2, 0]]), 2) == [[4]]


def test_a_gpt_block_refuses_a_norm_it_does_not_have():
    """GPTConfig checked norm; the block built a LayerNorm for 'rsm' or None."""
    for bad in ("rsm", None, 5):
        with pytest.raises(ValueError, match=rf"^norm must be one of \('layer', 'rms'\), but got {bad!r}$"):
            GPTBlock(8, 2, 16, norm=bad)


def test_the_rnn_names_an_input_in_another_float_dtype():
    rnn = ElmanRNN(3, 4)
    with pytest.raises(DtypeMismatchError, match=r"^x: dtype torch.float64 does not match"):
        rnn(torch.zeros(2, 5, 3, dtype=torch.float64))
    with pytest.raises(DtypeMismatchError, match=r"^h0: dtype torch.bfloat16 does not match"):
        rnn(torch.zeros(2, 5, 3), torch.zeros(2, 4, dtype=torch.bfloat16))
    with pytest.raises(DtypeMismatchError, match=r"^x must be floating point, but got dtype torch.int64$"):
        rnn(torch.zeros(2, 5, 3, dtype=torch.int64))              # not "convert the layer to int64"
    out, h = rnn.double()(torch.zeros(2, 5, 3, dtype=torch.float64))
    assert out.dtype == h.dtype == torch.float64


def test_objects_of_the_wrong_kind_are_refused_when_built():
    """A str Vocab was a vocabulary of letters, an int dtype a sine table of -1, 0 and 1; a kernel of 5 and
    a TrainConfig named 5 failed only later."""
    with pytest.raises(TypeError, match=r"^tokens must be a collection of tokens, but got the string 'hello'$"):
        Vocab("hello")
    with pytest.raises(WrongTypeError, match=r"^dtype must be a floating-point torch.dtype, but got torch.int64$"):
        positional_encoding(8, 8, dtype=torch.int64)
    with pytest.raises(WrongTypeError, match=r"^dtype must be a floating-point torch.dtype, but got 'float32'$"):
        positional_encoding(8, 8, dtype="float32")
    assert positional_encoding(8, 8, dtype=torch.float64).dtype == torch.float64
    for name in ("kernel", "rotary"):
        with pytest.raises(TypeError, match=rf"^{name} must be None or callable, but got int$"):
            GroupedQueryAttention(8, 2, 1, **{name: 5})
    with pytest.raises(WrongTypeError, match=r"^name must be a str, but got 5$"):
        dataclasses.replace(CONFIGS["tiny"], name=5)


def test_require_fits_counts_the_cached_tokens():
    require_fits("tokens", 3, 5, 8)                           # positions 3..7 of 8: fits
    with pytest.raises(ValueError, match="^src: 9 tokens exceed the model's max_len=8$"):
        require_fits("src", 0, 9, 8)
    with pytest.raises(ValueError, match="^tokens: 6 tokens after 3 cached ones exceed the model's max_len=8$"):
        require_fits("tokens", 3, 6, 8)


def test_sampling_a_row_with_no_distribution_names_the_rows():
    """An all -inf row (every token forbidden), or a NaN, used to reach torch.multinomial's own message."""
    logits = torch.randn(2, 3, 5)
    logits[1, 2] = float("-inf")
    logits[0, 0, 1] = float("nan")
    with pytest.raises(ValueError, match=re.escape("logits: 2 row(s) give no distribution to sample from "
                                                   "(rows [0, 5] of the flattened (6, 5))")):
        sample(logits)
    with pytest.raises(ValueError, match=re.escape("logits: 2 row(s) give no distribution to sample from "
                                                   "(rows [0, 5] of the flattened (6, 5))")):
        sample(logits, top_k=1)                              # greedy: argmax alone gave 0 and the NaN's index
    logits[0, 0, 1] = logits[1, 2, 3] = 0.0                   # one finite logit is enough
    assert sample(logits)[1, 2] == 3 and sample(logits, top_k=1)[1, 2] == 3


@pytest.mark.parametrize("module, name", [
    (MultiHeadAttention(8, 2), "query"),
    (PositionwiseFeedForward(8, 16), "x"),
    (EncoderLayer(8, 2, 16, 0.0), "x"),
    (LayerNorm(8), "x"),
])
def test_integer_vectors_are_refused_by_name(module, name):
    """An int query reached nn.Linear: "mat1 and mat2 must have the same dtype, but got Long and Float"."""
    x = torch.ones(2, 3, 8, dtype=torch.long)
    with pytest.raises(ValueError, match=f"^{name} must be floating point, but got dtype torch.int64$"):
        module(*([x, x, x] if name == "query" else [x]))


ONES = torch.ones(2, 3, 8)


@pytest.mark.parametrize("build, inputs, name", [
    (lambda: MultiHeadAttention(8, 2), lambda x: (x, x, x), "query"),
    (lambda: GroupedQueryAttention(8, 2, 1), lambda x: (x, x, x), "query"),
    (lambda: PositionwiseFeedForward(8, 16), lambda x: (x,), "x"),
    (lambda: SwiGLUFeedForward(8), lambda x: (x,), "x"),
    # a layer names its own argument, not its attention's (query, key)
    (lambda: EncoderLayer(8, 2, 16, 0.0), lambda x: (x,), "x"),
    (lambda: EncoderLayer(8, 2, 16, 0.0, norm_first=True), lambda x: (x,), "x"),   # the norm comes first
    (lambda: DecoderLayer(8, 2, 16, 0.0), lambda x: (x, ONES), "x"),
    (lambda: DecoderLayer(8, 2, 16, 0.0), lambda x: (ONES, x), "memory"),     # cross-attention's keys
    (lambda: GPTBlock(8, 2, 16, 0.0), lambda x: (x,), "x"),
    (lambda: GPTBlock(8, 2, 16, 0.0, n_kv_heads=1), lambda x: (x,), "x"),
])
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_an_input_in_another_float_dtype_than_the_layer_is_refused_by_name(build, inputs, name, dtype):
    """PyTorch's own message, "mat1 and mat2 must have the same dtype, but got Double and Float", names
    neither the argument nor the layer. Ours does, and it is still the RuntimeError PyTorch raised."""
    module, args = build(), inputs(ONES.to(dtype))
    message = (f"{name}: dtype {dtype} does not match the layer's parameters (torch.float32); convert one of "
               f"them, e.g. layer.to({dtype}) or {name}.to(torch.float32)")
    for error in (ValueError, RuntimeError):
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            module(*args)
    if dtype == torch.bfloat16:    # autocast casts both the input and the weights: not a mistake
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert module(*args).shape == (2, 3, 8)
    module.to(dtype)               # the fix the message names
    assert module(*[a.to(dtype) for a in args]).dtype == dtype


def test_the_dtype_check_fires_only_where_the_matrix_product_would_refuse():
    import warnings
    x64 = ONES.double()
    with torch.autocast("cpu", dtype=torch.bfloat16):     # autocast casts every float type but float64
        with pytest.raises(DtypeMismatchError, match=r"^query: dtype torch.float64 does not match"):
            MultiHeadAttention(8, 2)(x64, x64, x64)
        with pytest.raises(DtypeMismatchError, match=r"^x: dtype torch.float32 does not match .*\(torch.float64\)"):
            PositionwiseFeedForward(8, 16).double()(ONES)
        assert MultiHeadAttention(8, 2)(ONES.half(), ONES, ONES).dtype == torch.bfloat16
    meta = MultiHeadAttention(8, 2).to("meta")            # shapes only: nn.Linear does not refuse there
    x = torch.ones(2, 3, 8, dtype=torch.float64, device="meta")
    assert meta(x, x, x).shape == (2, 3, 8)
    with warnings.catch_warnings():                       # quantize_dynamic's deprecation notice
        warnings.simplefilter("ignore")
        for module, args in ((MultiHeadAttention(8, 2), (ONES, ONES, ONES)), (PositionwiseFeedForward(8, 16), (ONES,))):
            quantized = torch.ao.quantization.quantize_dynamic(module, {nn.Linear}, dtype=torch.qint8)
            assert callable(quantized.w_q.weight if hasattr(quantized, "w_q") else quantized.w1.weight)
            assert quantized(*args).shape == (2, 3, 8)   # its weight is a method: not judged


def test_broadcast_shape_agrees_with_torch():
    from tf_tutorial._checks import broadcast_shape
    cases = [((2, 1, 3), (4, 1)), ((), (5,)), ((0,), (1,)), ((3, 0), (3, 1)), ((2, 3), (3, 2)),
             ((1,), (0,), (7, 1)), ((4, 1, 2), (3, 1), (1, 1, 1, 2)), ((2,), (0,))]
    for shapes in cases:
        try:
            expected = tuple(torch.broadcast_shapes(*shapes))
        except RuntimeError:
            expected = None
        assert broadcast_shape(*shapes) == expected, shapes
    assert broadcast_shape() == ()


def test_a_model_given_a_dict_for_its_config_names_the_class_it_wants():
    from tf_tutorial.gpt import GPT, GPTConfig
    from tf_tutorial.model import Transformer, TransformerConfig
    with pytest.raises(TypeError, match=r"^config must be a TransformerConfig, but got dict "
                                        r"\(TransformerConfig\(\*\*d\) builds one from a dict\)$"):
        Transformer(dict(src_vocab_size=10, tgt_vocab_size=10))
    with pytest.raises(TypeError, match=r"^config must be a GPTConfig, but got TransformerConfig$"):
        GPT(TransformerConfig(10, 10, d_model=8, n_heads=2, n_layers=1, d_ff=16))
    assert isinstance(GPT(GPTConfig(vocab_size=10, d_model=8, n_heads=2, n_layers=1)), GPT)


def test_a_layer_whose_attention_packs_its_projections_checks_its_input_dtype_too():
    """The dtype a layer's input must have is read off its attention's first weight, whatever the
    attention keeps: appendix A's packed attention has one (3D, D) W^QKV and no W^Q."""
    from tf_tutorial.timing.compare import PackedQKVAttention
    layer = EncoderLayer(8, 2, 16, 0.0)
    layer.self_attn = PackedQKVAttention(layer.self_attn)
    assert not hasattr(layer.self_attn, "w_q")
    assert layer(ONES).shape == (2, 3, 8)
    with pytest.raises(DtypeMismatchError, match=r"^x: dtype torch.float64 does not match"):
        layer(ONES.double())
