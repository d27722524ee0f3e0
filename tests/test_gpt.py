"""The decoder-only model: equal to torch's causal encoder stack, causality, KV cache, sampling, generation,
and translation as continuation."""
import dataclasses
import math
import re

import pytest
import torch
from torch import nn

from tf_tutorial.attention import causal_mask
from tf_tutorial.corpus.data import Vocab
from tf_tutorial.gpt import (GPT, SEP, GPTBlock, GPTConfig, continuation_batch, continuation_vocab,
                             encode_continuation, evaluate_continuation, generate, sample, sampling_probs,
                             train_continuation, translate_continuation)
from tf_tutorial.interop import from_torch, torch_attn_mask
from tf_tutorial.metrics import score
from tf_tutorial.model import count_parameters
from tf_tutorial.train import CONFIGS

V, D, H, F, N = 29, 12, 3, 20, 2
SMALL = dict(vocab_size=V, d_model=D, n_heads=H, n_layers=N, d_ff=F, dropout=0.0, max_len=24)
PAD, EOS = 0, 2


def _model(seed=0, **kw):
    """A small float64 GPT in eval mode, with a spread-out output layer (distinct greedy choices)."""
    torch.manual_seed(seed)
    m = GPT(GPTConfig(**{**SMALL, **kw})).double().eval()
    with torch.no_grad():
        m.embed.table.weight.mul_(3.0)
    return m


def _tokens(B=3, L=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, V, (B, L), generator=g)


# --- equal to torch.nn ----------------------------------------------------------------------------

@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-ln", "post-ln"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_block_equals_torch_encoder_layer_under_a_causal_mask(activation, norm_first):
    torch.manual_seed(2)
    ref = nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation=activation, norm_first=norm_first,
                                     batch_first=True).double().eval()
    m = _model(n_layers=1, activation=activation, norm_first=norm_first)
    block = m.blocks[0]
    assert isinstance(block, GPTBlock)
    result = block.load_state_dict(from_torch(ref).state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    L = 6
    x = torch.randn(2, L, D, dtype=torch.float64)
    with torch.no_grad():
        want = ref(x, src_mask=nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64))
        want_bool = ref(x, src_mask=torch_attn_mask(causal_mask(L)))
        got = block(x, causal_mask(L))
    assert torch.allclose(got, want, atol=1e-12, rtol=0)
    assert torch.allclose(got, want_bool, atol=1e-12, rtol=0)
    # the mask matters: without it the block answers differently at every position but the last
    assert not torch.allclose(block(x)[:, :-1], got[:, :-1], atol=1e-6)


def test_whole_gpt_equals_torch_encoder_stack_with_final_norm():
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(D, H, F, dropout=0.0, activation="gelu", norm_first=True,
                                       batch_first=True)
    ref = nn.TransformerEncoder(layer, N, norm=nn.LayerNorm(D), enable_nested_tensor=False).double().eval()
    with torch.no_grad():                      # two different layers, and a norm that is not the identity
        ref.layers[1].linear1.weight.mul_(-1.5)
        ref.norm.weight.uniform_(0.5, 1.5)
        ref.norm.bias.uniform_(-0.5, 0.5)
    m = _model()
    for block, torch_layer in zip(m.blocks, ref.layers):
        result = block.load_state_dict(from_torch(torch_layer).state_dict())
        assert not result.missing_keys and not result.unexpected_keys
    m.norm.load_state_dict(from_torch(ref.norm).state_dict())
    tokens = _tokens(3, 7)
    tokens[1, 4:] = PAD                                   # right padding
    tokens[2, 2] = PAD                                    # a pad key inside the row: only the mask hides it
    L = tokens.shape[1]
    with torch.no_grad():
        y = ref(m.positions(m.embed(tokens)), mask=torch_attn_mask(causal_mask(L)),
                src_key_padding_mask=tokens == PAD)
        want = m.out(y)
        got = m(tokens)
    assert got.shape == (3, L, V)
    keep = tokens != PAD                                  # pad queries are never read
    assert torch.allclose(got[keep], want[keep], atol=1e-12, rtol=0)
    assert not torch.allclose(m(tokens.masked_fill(tokens == PAD, 5))[2, 3:], got[2, 3:], atol=1e-6)


# --- causality, padding, cache ----------------------------------------------------------------------

@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_changing_token_t_leaves_earlier_logits_unchanged(positions):
    m = _model(positions=positions)
    tokens = _tokens()
    out = m(tokens)
    for t in range(tokens.shape[1]):
        changed = tokens.clone()
        changed[:, t] = 4 + (changed[:, t] - 3) % (V - 4)          # another real token
        new = m(changed)
        assert torch.allclose(new[:, :t], out[:, :t], atol=1e-12, rtol=0)
        assert not torch.allclose(new[:, t], out[:, t], atol=1e-6)      # position t itself does see it


def test_right_padding_does_not_change_real_logits():
    m = _model()
    tokens = _tokens(2, 5)
    out = m(tokens)
    padded = torch.cat([tokens, torch.full((2, 4), PAD)], 1)
    assert torch.allclose(m(padded)[:, :5], out, atol=1e-12, rtol=0)
    ragged = padded.clone()
    ragged[0, 5:] = _tokens(1, 4, seed=9)                # row 0 longer, row 1 padded
    assert torch.allclose(m(ragged)[1, :5], out[1], atol=1e-12, rtol=0)


def test_cache_in_chunks_equals_the_full_forward():
    m = _model()
    tokens = _tokens(2, 8)
    full, maps = m(tokens, return_weights=True)
    assert len(maps) == N and maps[0].shape == (2, H, 8, 8)
    assert torch.all(maps[0].triu(1) == 0)                       # no weight on future positions
    cache = m.new_cache()
    parts = [m(tokens[:, a:b], cache) for a, b in ((0, 3), (3, 4), (4, 7), (7, 8))]
    assert cache.length == 8
    assert torch.allclose(torch.cat(parts, 1), full, atol=1e-12, rtol=0)


def test_the_cache_masks_pad_keys_as_the_full_forward_does():
    """A prompt drawn with torch.randint(0, V, ...) may hold <pad>: both paths must hide it."""
    m = _model()
    with torch.no_grad():
        m.embed.table.weight.mul_(4)                           # sharp enough for greedy to differ
    tokens = torch.tensor([[5, PAD, 7, 9, PAD, 11], [PAD, 3, 4, PAD, 6, 8]])
    full = m(tokens)
    for chunks in (((0, 6),), ((0, 1), (1, 2), (2, 6)), ((0, 3), (3, 4), (4, 5), (5, 6))):
        cache = m.new_cache()
        parts = torch.cat([m(tokens[:, a:b], cache) for a, b in chunks], 1)
        assert torch.allclose(parts, full, atol=1e-12, rtol=0)
    cache = m.new_cache()                      # a reordered cache keeps each row's pad positions
    m(tokens, cache)
    cache.reorder(torch.tensor([1, 1, 0]))
    step = m(torch.tensor([[12], [13], [14]]), cache)[:, -1]
    redo = m(torch.cat([tokens[[1, 1, 0]], torch.tensor([[12], [13], [14]])], 1))[:, -1]
    assert torch.allclose(step, redo, atol=1e-12, rtol=0)
    for seed in range(5):
        a = generate(m, tokens, 8, generator=torch.Generator().manual_seed(seed))
        b = generate(m, tokens, 8, generator=torch.Generator().manual_seed(seed), use_cache=False)
        assert torch.equal(a, b)
    assert torch.equal(generate(m, tokens, 8, top_k=1), generate(m, tokens, 8, top_k=1, use_cache=False))


@pytest.mark.parametrize("positions", ["sinusoidal", "rope"])
def test_built_on_meta_then_filled_from_a_checkpoint(positions):
    """Build without memory on 'meta', to_empty(), load the weights: the same model. The RoPE
    tables could not leave 'meta' (an outside probe); the sinusoidal table could."""
    kw = dict(positions=positions, n_kv_heads=1) if positions == "rope" else {}
    torch.manual_seed(0)
    ref = GPT(GPTConfig(**SMALL, **kw)).eval()
    with torch.device("meta"):
        empty = GPT(GPTConfig(**SMALL, **kw))
    model = empty.to_empty(device="cpu").eval()
    model.load_state_dict(ref.state_dict())
    tokens = _tokens()
    torch.testing.assert_close(model(tokens), ref(tokens), atol=0, rtol=0)


def test_a_replacing_part_starts_from_the_baselines_numbers():
    """Chapter 12 compares its variants seed by seed. Under one seed RoPE's model (the same shapes)
    starts from exactly the baseline's weights; GQA's from the baseline's wherever a tensor keeps its
    shape, except W^O, drawn after the narrower W^K and W^V; and building a variant leaves the
    random stream where the baseline leaves it. Replacing after chapter 8's layer had drawn gave
    RoPE's model other weights in every layer after the first."""
    def build(**kw):
        torch.manual_seed(3)
        weights = GPT(GPTConfig(**SMALL, **kw)).state_dict()
        return weights, torch.rand(4)
    w0, after0 = build()
    w, after = build(positions="rope")
    assert w.keys() == w0.keys() and all(torch.equal(w[k], w0[k]) for k in w)
    assert torch.equal(after, after0)
    w, after = build(n_kv_heads=1)
    agree = {k for k in w if w[k].shape == w0[k].shape}
    differ = {k for k in agree if not torch.equal(w[k], w0[k])}
    assert differ == {f"blocks.{i}.self_attn.w_o.{p}" for i in range(N) for p in ("weight", "bias")}
    assert len(agree) > 2 * len(differ) and torch.equal(after, after0)


def test_tied_output_and_parameter_count():
    m = _model()
    assert m.out.weight is m.embed.table.weight
    learned = GPT(GPTConfig(**SMALL, positions="learned"))
    assert count_parameters(learned) - count_parameters(GPT(GPTConfig(**SMALL))) == SMALL["max_len"] * D


@pytest.mark.parametrize("kw, message", [
    (dict(d_model=10, n_heads=3), "d_model=10 is not divisible by n_heads=3"),
    (dict(positions="rotary"), "positions must be one of .*'rotary'"),
    (dict(activation="swish"), "activation must be one of .*'swish'"),
    (dict(dropout=1.0), r"dropout must be in \[0, 1\), but got 1.0"),
    (dict(dropout=-0.1), r"dropout must be in \[0, 1\), but got -0.1"),
    (dict(pad_id=2, eos_id=2), r"eos_id and pad_id must differ, but both are 2 \(if pad_id was changed on a "
                               r"built config, e\.g\. with dataclasses\.replace, the eos_id it filled in "
                               r"was not: pass it too\)$"),
    (dict(eos_id=29), "eos_id=29 is not a valid id for vocab_size=29"),
    (dict(n_layers=0), "n_layers must be a positive integer, but got 0"),
    (dict(dropout="0.1"), r"dropout must be in \[0, 1\), but got '0.1'"),
    (dict(eps="1e-5"), "eps must be positive, but got '1e-5'"),
    (dict(eps=0.0), "eps must be positive, but got 0.0"),
])
def test_config_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{**SMALL, **kw})


# --- sampling ---------------------------------------------------------------------------------------

PROBS = torch.tensor([0.5, 0.3, 0.15, 0.05])


@pytest.mark.parametrize("top_p, nucleus", [(0.7, {0, 1}), (0.8, {0, 1}), (0.81, {0, 1, 2}),
                                             (0.96, {0, 1, 2, 3})])
def test_top_p_keeps_the_smallest_nucleus(top_p, nucleus):
    order = torch.tensor([2, 0, 3, 1])                  # shuffled positions: token order[i] has PROBS[i]
    logits = torch.empty(4).scatter(0, order, PROBS.log())
    kept = {order[i].item() for i in nucleus}
    p = sampling_probs(logits, top_p=top_p)
    assert {i for i in range(4) if p[i] > 0} == kept
    want = torch.zeros(4).scatter(0, order, PROBS) * torch.tensor([i in kept for i in range(4)])
    assert torch.allclose(p, want / want.sum(), atol=1e-6)


@pytest.mark.parametrize("top_p, size", [(0.5, 1), (0.75, 2), (0.7500001, 2), (0.7501, 3), (0.875, 3), (0.9, 4)])
def test_top_p_at_exact_boundaries(top_p, size):
    """Dyadic probabilities, exact in float32: a nucleus that reaches p exactly takes no more tokens
    (and within a few float32 ulps of p counts as reaching it: 0.7500001 is 0.75 give or take 2 ulps)."""
    probs = torch.tensor([0.0625, 0.5, 0.125, 0.0625, 0.25])
    assert torch.equal(torch.softmax(probs.log(), -1), probs)
    p = sampling_probs(probs.log(), top_p=top_p)
    kept = probs.argsort(descending=True)[:min(size, 3)]      # the two 0.0625 tie: either may be 4th
    assert (p > 0).sum() == size and (p[kept] > 0).all()


@pytest.mark.parametrize("vocab, top_p, size, dtype", [(10, 0.6, 6, torch.float32), (10, 0.8, 8, torch.float64),
                                                      (20, 0.3, 6, torch.float32), (10, 0.65, 7, torch.float32)])
def test_top_p_counts_a_rounded_sum_as_reaching_p(vocab, top_p, size, dtype):
    """Uniform logits: six tokens of 0.1 sum to 0.59999996 in float32, which is 0.6 (the nucleus is 6, not 7)."""
    p = sampling_probs(torch.zeros(1, vocab, dtype=dtype), top_p=top_p)
    assert (p > 0).sum() == size and p.dtype == dtype


@pytest.mark.parametrize("dtype, top_p", [(torch.float32, 1e-7), (torch.float32, 1e-30),
                                          (torch.float64, 1e-16), (torch.float16, 1e-4)])
def test_a_tiny_top_p_keeps_the_likeliest_token(dtype, top_p):
    """p below the rounding slack (8 eps) once dropped every token and gave NaN: the likeliest stays."""
    logits = torch.tensor([[1.0, 3.0, 2.0], [0.0, -1.0, 5.0]], dtype=dtype)
    p = sampling_probs(logits, top_p=top_p)
    assert torch.equal(p, torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=dtype))
    assert sample(logits, top_p=top_p).tolist() == [1, 2]


def test_top_p_never_samples_outside_the_nucleus():
    logits = PROBS.log().expand(2000, 4)
    draws = sample(logits, top_p=0.7, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (2000,)
    assert set(draws.tolist()) == {0, 1}                   # inside the nucleus, and both of it


def test_top_k_keeps_exactly_k_even_with_ties():
    logits = torch.tensor([[1.0, 1.0, 1.0, 0.0, 1.0], [3.0, 2.0, 2.0, 2.0, 1.0]])
    p = sampling_probs(logits, top_k=2)
    assert ((p > 0).sum(-1) == 2).all()
    assert torch.allclose(p.sum(-1), torch.ones(2))
    assert p[1, 0] > 0 and p[1, 4] == 0 and p[0, 3] == 0
    assert (p > 0).nonzero().tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]     # of equals, the first


def test_ties_go_to_the_first_token_as_argmax_takes():
    """sampling_probs is the distribution sample draws from, also when logits tie (topk orders ties arbitrarily)."""
    for z in (torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]]), torch.tensor([0.0] + [5.0] * 40)):
        first = z.argmax(-1)
        assert torch.equal(sample(z, top_k=1), first)
        one_hot = torch.nn.functional.one_hot(first, z.shape[-1]).float()
        for kw in (dict(top_k=1), dict(top_p=1e-6), dict(top_k=3, top_p=1e-6)):
            assert torch.equal(sampling_probs(z, **kw), one_hot), kw


@pytest.mark.parametrize("T", [0.3, 1.0, 2.5])
def test_temperature_scales_the_logits(T):
    z = torch.randn(3, 7, generator=torch.Generator().manual_seed(8))
    assert torch.allclose(sampling_probs(z, T), torch.softmax(z / T, -1), atol=1e-6)


def test_rows_sum_to_one_and_no_restriction_is_plain_softmax():
    z = torch.randn(4, 3, 9, generator=torch.Generator().manual_seed(5))
    for kw in (dict(), dict(top_k=3), dict(top_p=0.5), dict(temperature=0.7, top_k=5, top_p=0.9)):
        p = sampling_probs(z, **kw)
        assert p.shape == z.shape and (p >= 0).all()
        assert torch.allclose(p.sum(-1), torch.ones(4, 3), atol=1e-6)
    plain = torch.softmax(z, -1)
    for kw in (dict(top_p=1.0), dict(top_p=1), dict(top_k=9), dict(top_k=50), dict(top_k=9, top_p=1.0)):
        assert torch.allclose(sampling_probs(z, **kw), plain, atol=1e-6)


def test_empirical_frequencies_match_sampling_probs():
    z = torch.tensor([1.0, 0.2, -0.5, 2.0, 0.0, -3.0, 1.5])
    kw = dict(temperature=0.8, top_k=5, top_p=0.95)
    p = sampling_probs(z, **kw)
    draws = sample(z.expand(20000, 7), **kw, generator=torch.Generator().manual_seed(1))
    freq = torch.bincount(draws, minlength=7) / 20000
    assert (freq[p == 0] == 0).all()
    assert torch.allclose(freq, p, atol=0.02)
    assert (p > 0).sum() >= 3                              # a distribution worth checking


def test_temperature_zero_is_the_greedy_limit():
    """τ → 0 sends softmax(z / τ) to the argmax; temperature=0 is that limit, not an error."""
    z = torch.randn(4, 9, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(7)
    state = g.get_state()
    assert torch.equal(sample(z, temperature=0, generator=g), z.argmax(-1))
    assert torch.equal(g.get_state(), state)                       # no draw
    assert torch.equal(sampling_probs(z, temperature=0), torch.nn.functional.one_hot(z.argmax(-1), 9).float())
    tie = sampling_probs(torch.tensor([1.0, 3.0, 3.0, -2.0]), temperature=0)
    assert torch.equal(tie, torch.tensor([0.0, 0.5, 0.5, 0.0]))   # the limit splits a tie evenly
    m, prompt = _model(), torch.tensor([[4, 9, 11], [7, 3, 5]])
    assert torch.equal(generate(m, prompt, 6, temperature=0), _greedy(m, prompt, 6))


def test_top_k_one_is_argmax_and_draws_nothing():
    z = torch.randn(2, 3, 11, generator=torch.Generator().manual_seed(6))
    g = torch.Generator().manual_seed(7)
    state = g.get_state()
    ids = sample(z, top_k=1, generator=g)
    assert ids.shape == (2, 3) and torch.equal(ids, z.argmax(-1))
    assert torch.equal(g.get_state(), state)
    assert sample(z, temperature=5.0, generator=g).shape == (2, 3)


@pytest.mark.parametrize("fn", [sample, sampling_probs])
@pytest.mark.parametrize("kw, name, value", [
    (dict(temperature=-0.5), "temperature", "-0.5"), (dict(temperature=-1), "temperature", "-1"),
    (dict(temperature=float("nan")), "temperature", "nan"),
    (dict(top_p=0), "top_p", "0"), (dict(top_p=1.5), "top_p", "1.5"),
    (dict(top_k=0), "top_k", "0"), (dict(top_k=2.0), "top_k", "2.0"),
])
def test_bad_sampling_arguments(fn, kw, name, value):
    with pytest.raises(ValueError, match=rf"{name} must .*but got {re.escape(value)}$"):
        fn(torch.zeros(5), **kw)


@pytest.mark.parametrize("fn", [sample, sampling_probs])
def test_logits_without_a_vocabulary_dimension_are_refused(fn):
    for logits in (torch.tensor(1.0), torch.empty(2, 0)):
        with pytest.raises(ValueError, match=re.escape(f"logits: expected shape (..., |V|) with |V| >= 1, "
                                                       f"but got {tuple(logits.shape)}")):
            fn(logits)
    with pytest.raises(TypeError, match=r"^logits must be a torch\.Tensor, but got list$"):
        fn([1.0, 2.0])
    one = fn(torch.zeros(1))                         # one token is enough: it is certain
    assert torch.equal(one, torch.tensor(0) if fn is sample else torch.tensor([1.0]))


# --- generation -------------------------------------------------------------------------------------

def _greedy(m, seq, n):
    """Hand-written greedy decoding: recompute the whole sequence at every step."""
    for _ in range(n):
        seq = torch.cat([seq, m(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    return seq


@pytest.fixture
def prompt():
    return _tokens(3, 4, seed=11)


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generation_equals_a_hand_written_loop(prompt, use_cache):
    m = _model()
    want = _greedy(m, prompt, 9)
    assert len(set(map(tuple, want[:, 4:].tolist()))) >= 2          # rows differ: a real check
    assert torch.equal(generate(m, prompt, 9, top_k=1, use_cache=use_cache), want)
    assert torch.equal(generate(m, prompt, 9, temperature=1e-6, use_cache=use_cache), want)


def test_cache_equals_recomputation_when_sampling(prompt):
    m = _model()
    kw = dict(temperature=1.0, top_p=0.9)
    a = generate(m, prompt, 12, **kw, generator=torch.Generator().manual_seed(4))
    b = generate(m, prompt, 12, **kw, generator=torch.Generator().manual_seed(4), use_cache=False)
    c = generate(m, prompt, 12, **kw, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)                                  # the draws are random at all


def test_a_drawn_pad_is_hidden_alike_in_the_cache_and_in_recomputation(prompt):
    """generate draws from every token, <pad> too; once drawn it is masked as a key on both paths."""
    m = _model()
    kw = dict(temperature=10.0)          # nearly uniform over 29 tokens: 60 draws hit <pad>
    a = generate(m, prompt, 20, **kw, generator=torch.Generator().manual_seed(0))
    b = generate(m, prompt, 20, **kw, generator=torch.Generator().manual_seed(0), use_cache=False)
    new = a[:, prompt.shape[1]:]
    assert (new == PAD).any()                                      # the case this test is about
    assert torch.equal(a, b)


def test_greedy_generation_follows_the_argmax_even_onto_pad():
    """top_k=1 is the argmax of model(seq)[:, -1] at every step, whichever token that is."""
    m = _model()
    prompt = torch.tensor([[5, 9, PAD], [7, 3, 4]])
    want = _greedy(m, prompt, 6)
    assert (want[:, 3:] == PAD).any()                              # with tied weights: 0 follows 0
    assert torch.equal(generate(m, prompt, 6, top_k=1), want)
    assert torch.equal(generate(m, prompt, 6, top_k=1, use_cache=False), want)


def test_generate_shapes_and_training_mode(prompt):
    m = _model()
    m.train()
    out = generate(m, prompt, 6, top_k=1)
    assert m.training
    assert out.shape == (3, 4 + 6) and torch.equal(out[:, :4], prompt)
    one = generate(m, prompt[1], 6, top_k=1)
    assert one.dim() == 1 and torch.equal(one, out[1])
    assert torch.equal(generate(m, prompt, 0), prompt)
    assert generate(m, prompt[:0], 6).shape == (0, 4 + 6)      # an empty batch is no error
    m.eval()
    generate(m, prompt, 2)
    assert not m.training


@pytest.mark.parametrize("use_cache", [True, False])
def test_eos_pads_the_rest_of_a_row_and_stops_when_all_are_done(prompt, use_cache):
    m = _model()
    calls = []

    def force_eos(module, inputs, out):
        """Row 0 says EOS at its 2nd new token, every row at its 4th."""
        calls.append(1)
        out = out.clone()
        if len(calls) == 2:
            out[0, -1, EOS] += 1e3
        if len(calls) == 4:
            out[:, -1, EOS] += 1e3
        return out

    free = generate(m, prompt, 10, top_k=1)
    assert not (free[:, 4:] == EOS).any()                      # EOS only comes from the hook
    handle = m.out.register_forward_hook(force_eos)
    try:
        ids = generate(m, prompt, 10, top_k=1, eos_id=EOS, use_cache=use_cache)
    finally:
        handle.remove()
    assert ids.shape == (3, 4 + 4)                             # stopped early, not at 10
    assert ids[0, 4:].tolist() == [free[0, 4].item(), EOS, PAD, PAD]
    assert torch.equal(ids[1:, :7], free[1:, :7]) and (ids[1:, 7] == EOS).all()


@pytest.mark.parametrize("use_cache", [True, False])
def test_prompts_of_different_lengths_in_one_batch_equal_each_prompt_alone(use_cache):
    m = _model()
    ends = [2, 5, 3, 5]
    prompt = _tokens(4, 5, seed=12)
    prompt[0, 2:] = PAD                                        # padded on the right
    prompt[2, 3:] = 7                                          # whatever lies past a row's length is ignored
    got = generate(m, prompt, 6, top_k=1, use_cache=use_cache, lengths=ends)
    assert got.shape == (4, 5 + 6)
    for b, n in enumerate(ends):
        alone = generate(m, prompt[b, :n], 6, top_k=1)
        assert torch.equal(got[b, :n + 6], alone)
        assert (got[b, n + 6:] == PAD).all()
    # the rows really differ in what they read: pretending every row is 5 long changes rows 0 and 2
    full = generate(m, prompt, 6, top_k=1)
    assert not torch.equal(full[0, 5:], got[0, 2:8]) and not torch.equal(full[2, 5:], got[2, 3:9])


@pytest.mark.parametrize("use_cache", [True, False])
def test_rows_of_different_lengths_stop_at_their_own_eos(use_cache):
    """A row that says EOS leaves the batch; the others go on as if it had never been there."""
    m = _model()
    ends = [4, 2, 3]
    prompt = _tokens(3, 4, seed=13)
    free = generate(m, prompt, 8, top_k=1, lengths=ends)
    eos = int(free[1, ends[1] + 2])          # call row 1's 3rd new token "EOS"
    new = [free[b, n:n + 8].tolist() for b, n in enumerate(ends)]
    stops = [row.index(eos) if eos in row else None for row in new]
    assert stops[1] == 2 and len(set(stops)) == 3            # rows stop at different steps, or never
    out = generate(m, prompt, 8, top_k=1, eos_id=eos, use_cache=use_cache, lengths=ends)
    assert out.shape[1] == max(n + (8 if k is None else k + 1) for n, k in zip(ends, stops))
    for b, (n, k) in enumerate(zip(ends, stops)):
        one = generate(m, prompt[b, :n], 8, top_k=1, eos_id=eos, use_cache=use_cache)
        assert torch.equal(out[b, :len(one)], one)             # the same tokens as the row alone
        assert (out[b, len(one):] == PAD).all()
        assert k is None or one[-1] == eos and len(one) == n + k + 1


@pytest.mark.parametrize("use_cache", [True, False])
def test_eos_inside_a_longer_prompt_is_read_not_obeyed(use_cache):
    m = _model()
    prompt = _tokens(2, 6, seed=14)
    prompt[1, 3] = EOS                      # read while the shorter row is already writing
    got = generate(m, prompt, 4, top_k=1, eos_id=EOS, use_cache=use_cache, lengths=[2, 6])
    alone = generate(m, prompt[1], 4, top_k=1, eos_id=EOS, use_cache=use_cache)
    assert len(alone) > 6 and torch.equal(got[1, :len(alone)], alone)


def test_what_lies_past_a_length_never_reaches_the_output():
    m = _model()
    prompt = _tokens(3, 6, seed=15)         # no PAD anywhere: all of it past the lengths is junk
    assert torch.equal(generate(m, prompt, 0, lengths=[2, 6, 3])[0], torch.tensor([*prompt[0, :2], *[PAD] * 4]))
    free = generate(m, prompt, 3, top_k=1, lengths=[1, 6, 3])
    eos = int(free[0, 1])                    # row 0 stops at its first new token
    out = generate(m, prompt, 3, top_k=1, eos_id=eos, lengths=[1, 6, 3])
    assert out[0, 1] == eos and (out[0, 2:] == PAD).all()


def test_a_row_that_finishes_while_another_still_reads_its_prompt():
    m = _model()
    prompt = _tokens(2, 8, seed=16)
    got = generate(m, prompt, 2, top_k=1, lengths=torch.tensor([1, 8], dtype=torch.int32))
    assert torch.equal(got[0], torch.tensor([*generate(m, prompt[0, :1], 2, top_k=1), *[PAD] * 7]))
    assert torch.equal(got[1], generate(m, prompt[1], 2, top_k=1))
    one = generate(m, prompt[0, :5].int(), 2, top_k=1, lengths=[3])   # a 1-D prompt, int32 ids
    assert torch.equal(one, generate(m, prompt[0, :3], 2, top_k=1))    # width max(lengths) + 2
    assert generate(m, prompt[:0], 2, lengths=[]).shape == (0, 8 + 2)  # an empty batch


@pytest.mark.parametrize("lengths, message, wrong_type", [
    ([4, 4], r"lengths: expected 3 integer\(s\) in \[1, 4\] \(one per prompt row\), but got \[4, 4\]", False),
    ([0, 4, 4], r"expected 3 integer\(s\) in \[1, 4\].*but got \[0, 4, 4\]", False),
    ([5, 4, 4], r"but got \[5, 4, 4\]", False),
    (torch.tensor([1.0, 2.0, 3.0]), r"lengths: expected 3 integer", True),
    (torch.tensor([True, True, True]), r"lengths: expected 3 integer", True),     # [True] would be 1
    (["a", "b", "c"], r"lengths: expected 3 integer.*but got \['a', 'b', 'c'\]", True),
    ([[1], [2, 3], [4]], r"lengths: expected 3 integer", True),
    ([1, None, 2], r"lengths: expected 3 integer", True),
    ([2 ** 70, 1, 1], r"lengths: expected 3 integer", True),                     # not an int64
    (3, r"lengths: expected 3 integer.*but got 3$", True),
])
def test_bad_lengths(prompt, lengths, message, wrong_type):
    """A value of the wrong type is also a TypeError (WrongTypeError); a wrong count or range is a ValueError."""
    with pytest.raises(ValueError, match=message) as caught:
        generate(_model(), prompt, 2, lengths=lengths)
    assert isinstance(caught.value, TypeError) == wrong_type


@pytest.mark.parametrize("prompt_, n, message", [
    (torch.ones(1, 25, dtype=torch.long), 0, "prompt length 25 exceeds the model's max_len=24"),
    (torch.ones(1, 20, dtype=torch.long), 5, r"prompt length 20 \+ max_new_tokens 5 = 25 exceeds .*=24"),
    (torch.ones(1, 0, dtype=torch.long), 3, "prompt is empty"),
    (torch.ones(1, 3), 3, "prompt: expected integer ids .*torch.float32"),
    (torch.ones(1, 1, 3, dtype=torch.long), 3, r"prompt: expected integer ids .*\(1, 1, 3\)"),
    (torch.ones(1, 3, dtype=torch.long), -1, "max_new_tokens must be an integer >= 0, but got -1"),
    (torch.tensor([[3, 29]]), 3, "^prompt: token id 29 is out of range for vocab_size=29$"),
    (torch.tensor([[-1, 3]]), 3, "^prompt: token id -1 is out of range"),
])
def test_bad_generate_arguments(prompt_, n, message):
    with pytest.raises(ValueError, match=message):
        generate(_model(), prompt_, n)


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "rope"])
def test_tokens_past_max_len_are_named_for_every_kind_of_position(positions):
    """RoPE has no table, yet the model's context is still max_len; the
    message names the argument, not an internal module."""
    m = _model(positions=positions)
    with pytest.raises(ValueError,
                       match="tokens: 25 tokens exceed the model's max_len=24"):
        m(torch.ones(1, 25, dtype=torch.long))
    cache = m.new_cache()
    m(torch.ones(1, 20, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="tokens: 5 tokens after 20 cached"):
        m(torch.ones(1, 5, dtype=torch.long), cache=cache)
    assert m(torch.ones(1, 4, dtype=torch.long), cache=cache).shape == (1, 4, V)
    with pytest.raises(ValueError, match=r"^tokens: expected at least one token, but got shape \(1, 0\)$"):
        m(torch.ones(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^tokens: token id 29 is out of range for vocab_size=29$"):
        m(torch.tensor([[3, 29]]))


@pytest.mark.parametrize("kw, message", [
    (dict(temperature=-1), r"temperature must be a finite number >= 0 \(0: greedy\), but got -1"),
    (dict(temperature=float("inf")), r"temperature must be a finite number >= 0 \(0: greedy\), but got inf"),
    (dict(top_p=1.5), r"top_p must be None or in \(0, 1\], but got 1.5"),
    (dict(top_k=0), "top_k must be None or an integer >= 1, but got 0"),
])
def test_generate_checks_sampling_arguments(kw, message):
    with pytest.raises(ValueError, match=message):
        generate(_model(), torch.ones(1, 3, dtype=torch.long), 2, **kw)


# --- translation as continuation --------------------------------------------------------------------

EN = {"I": "我", "you": "你", "he": "他", "see": "看见", "like": "喜欢", "cats": "猫", "dogs": "狗", "fish": "鱼"}


def _pairs():
    """A toy language: English subject verb object ., Chinese word for word plus 。"""
    out = []
    for s in ("I", "you", "he"):
        for v in ("see", "like"):
            for o in ("cats", "dogs", "fish"):
                out.append(([s, v, o, "."], [EN[s], EN[v], EN[o], "。"]))
    out.append((["cats", "."], ["猫", "。"]))
    return out


def _vocab(pairs):
    src, tgt = Vocab(t for en, _ in pairs for t in en), Vocab(t for _, zh in pairs for t in zh)
    return continuation_vocab(src, tgt)


def test_continuation_vocab_and_encoding():
    pairs = _pairs()
    vocab = _vocab(pairs)
    assert SEP in vocab and all(t in vocab for en, zh in pairs for t in en + zh)
    assert len(vocab) == 4 + len(set(EN) | {"."}) + len(set(EN.values()) | {"。"}) + 1
    items = encode_continuation([pairs[0], pairs[-1]], vocab)
    (ids, p), (ids2, p2) = items
    assert [vocab.itos[i] for i in ids] == ["I", "see", "cats", ".", SEP, "我", "看见", "猫", "。", "<eos>"]
    assert p == 5 and p2 == 3 and ids2[p2 - 1] == vocab.stoi[SEP]


def test_continuation_batch_masks_the_prompt():
    items = [([10, 11, 12, 3, 20, 21, 2], 4), ([13, 3, 22, 2], 2)]   # (ids, prompt length P)
    x, y = continuation_batch(items, PAD)
    assert x.tolist() == [[10, 11, 12, 3, 20, 21], [13, 3, 22, 2, 0, 0]]
    assert y.tolist() == [[0, 0, 0, 20, 21, 2], [0, 22, 2, 0, 0, 0]]
    for row, (ids, p) in enumerate(items):                  # pad exactly at t < P - 1, seq[1:] elsewhere
        seq = ids + [PAD] * (7 - len(ids))
        assert y[row].tolist() == [PAD if t < p - 1 else seq[t + 1] for t in range(6)]


def test_translation_budget_is_each_sentences_own_reference_plus_extra():
    pairs = _pairs() + [(["I", "see", "fish", "."], ["我", "看见", "鱼", "鱼", "。"])]  # one longer reference
    vocab = _vocab(pairs)
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=40,
                          pad_id=vocab.pad_id, eos_id=vocab.eos_id)).eval()

    def never_eos(module, inputs, out):
        out = out.clone()
        out[..., vocab.eos_id] = float("-inf")
        return out

    handle = model.out.register_forward_hook(never_eos)
    try:
        hyps = translate_continuation(model, vocab, pairs, extra=2)
    finally:
        handle.remove()
    # each its own reference + 2; once every prompt of a length got the longest of their references
    assert [len(h.split()) for h in hyps] == [len(zh) + 2 for _, zh in pairs]
    assert len({len(zh) for en, zh in pairs if len(en) == 4}) > 1     # the case that tells the two apart
    assert hyps[:3] == [translate_continuation(model, vocab, [p], extra=2)[0] for p in pairs[:3]]
    with pytest.raises(ValueError, match="extra must be an integer >= 0, but got -1"):
        translate_continuation(model, vocab, pairs, extra=-1)


def test_a_float64_model_trains_on_a_float64_loss(monkeypatch):
    """The loss went through logits.float(): float32 for a float64 model."""
    import torch.nn.modules.loss as loss_module
    seen, original = [], loss_module.F.cross_entropy

    def spy(input, *args, **kwargs):
        seen.append(input.dtype)
        return original(input, *args, **kwargs)
    monkeypatch.setattr(loss_module.F, "cross_entropy", spy)
    pairs = _pairs()
    vocab = _vocab(pairs)
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16,
                          pad_id=vocab.pad_id, eos_id=vocab.eos_id)).double()
    train_continuation(model, vocab, pairs, dataclasses.replace(CONFIGS["tiny"], steps=2, batch_size=8),
                       progress=False)
    assert seen == [torch.float64, torch.float64]


def test_train_and_translate_continuation():
    pairs = _pairs()
    vocab = _vocab(pairs)
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=2, d_ff=32, max_len=16,
                          pad_id=vocab.pad_id, eos_id=vocab.eos_id))
    cfg = dataclasses.replace(CONFIGS["tiny"], steps=40, batch_size=8)
    run = train_continuation(model, vocab, pairs, cfg, progress=False)
    loss = run.history["loss"]
    assert len(loss) == 40 and run.history["step"][-1] == 40
    assert sum(loss[-5:]) / 5 < sum(loss[:5]) / 5
    assert not model.training
    model.double()
    hyps = translate_continuation(model, vocab, pairs)
    assert len(hyps) == len(pairs) and all(isinstance(h, str) for h in hyps)
    assert all(t in vocab for h in hyps for t in h.split())
    assert hyps == [translate_continuation(model, vocab, [p])[0] for p in pairs]   # one batch keeps the order
    g = lambda: torch.Generator().manual_seed(3)                                  # noqa: E731
    sampled = translate_continuation(model, vocab, pairs, temperature=2.0, top_k=None, generator=g())
    assert len(sampled) == len(pairs) and sampled != hyps
    assert sampled == translate_continuation(model, vocab, pairs, temperature=2.0, top_k=None, generator=g())
    result = evaluate_continuation(model, vocab, pairs)
    right = sum(h == " ".join(zh) for h, (_, zh) in zip(hyps, pairs))
    assert result["hyps"] == hyps and result["exact_match"] == right / len(pairs)


def test_train_continuation_uses_its_configurations_smoothing_clip_and_schedule(monkeypatch):
    """Its docstring promises cfg's warmup schedule (at the model's own width), label smoothing
    and clipping: an outside audit found that dropping any one of them failed no test."""
    import tf_tutorial.train as T
    pairs = _pairs()
    vocab = _vocab(pairs)
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16,
                          pad_id=vocab.pad_id, eos_id=vocab.eos_id))
    cfg = dataclasses.replace(CONFIGS["tiny"], steps=3, batch_size=8, label_smoothing=0.3, clip=0.25,
                              lr_scale=0.7, warmup=50)
    assert cfg.d_model != model.config.d_model
    losses, clips, first_lr = [], [], []
    real_loss, real_clip, real_opt = nn.CrossEntropyLoss, nn.utils.clip_grad_norm_, T.optimizer_and_schedule

    class Loss(real_loss):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            losses.append(self)

    def clip(params, max_norm, *a, **kw):
        clips.append(max_norm)
        return real_clip(params, max_norm, *a, **kw)

    def opt_and_schedule(*a, **kw):
        opt, sched = real_opt(*a, **kw)
        first_lr.append(opt.param_groups[0]["lr"])
        return opt, sched
    monkeypatch.setattr(nn, "CrossEntropyLoss", Loss)
    monkeypatch.setattr(nn.utils, "clip_grad_norm_", clip)
    monkeypatch.setattr(T, "optimizer_and_schedule", opt_and_schedule)
    train_continuation(model, vocab, pairs, cfg, progress=False)
    assert [loss.label_smoothing for loss in losses] == [0.3] and clips == [0.25] * 3
    assert first_lr == [pytest.approx(0.7 * 16 ** -0.5 * 50 ** -1.5, rel=1e-12)]   # the model's D = 16


def test_score_of_the_references_is_perfect():
    pairs = _pairs()
    result = score(pairs, [" ".join(zh) for _, zh in pairs])
    assert result["exact_match"] == 1.0 and result["bleu"] > 99
    wrong = score(pairs, ["猫 。"] * len(pairs))
    assert wrong["exact_match"] == 1 / len(pairs)


# --- chapter 12's switches ---------------------------------------------------------------------

from tf_tutorial.ffn import SwiGLUFeedForward  # noqa: E402
from tf_tutorial.multihead import GroupedQueryAttention, MultiHeadAttention  # noqa: E402
from tf_tutorial.norm import LayerNorm, RMSNorm  # noqa: E402

SWITCHES = {"rms": dict(norm="rms"), "rope": dict(positions="rope"), "swiglu": dict(activation="swiglu", d_ff=14),
            "gqa": dict(n_heads=4, d_model=16, n_kv_heads=2), "mqa": dict(n_heads=4, d_model=16, n_kv_heads=1),
            "all": dict(norm="rms", positions="rope", activation="swiglu", d_ff=14, n_heads=4, d_model=16,
                        n_kv_heads=2)}


def test_the_default_block_is_chapter_8s_encoder_layer():
    m = _model()
    block = m.blocks[0]
    assert type(block.self_attn) is MultiHeadAttention and type(block.attn_block.norm) is LayerNorm
    assert type(m.norm) is LayerNorm and not isinstance(block.ffn, SwiGLUFeedForward)


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_each_switch_replaces_its_part_and_keeps_generation_exact(name):
    kw = SWITCHES[name]
    m = _model(**kw)
    block = m.blocks[0]
    rms = kw.get("norm") == "rms"
    assert isinstance(block.attn_block.norm, RMSNorm) == rms and isinstance(m.norm, RMSNorm) == rms
    assert isinstance(block.ffn, SwiGLUFeedForward) == (kw.get("activation") == "swiglu")
    grouped = "n_kv_heads" in kw or kw.get("positions") == "rope"
    assert isinstance(block.self_attn, GroupedQueryAttention) == grouped
    if kw.get("positions") == "rope":
        assert block.self_attn.rotary is not None and not any("positions" in n for n, _ in m.named_parameters())
    prompt = _tokens(B=2, L=5)
    cached = generate(m, prompt, 6, top_k=1)
    assert torch.equal(cached, generate(m, prompt, 6, top_k=1, use_cache=False))
    # causality holds with every part
    t = _tokens(B=2, L=7)
    changed = t.clone()
    changed[:, 4] = 5
    with torch.no_grad():
        assert torch.allclose(m(t)[:, :4], m(changed)[:, :4], atol=1e-12)


@pytest.mark.parametrize("n_kv", [4, 2, 1])
def test_grouped_query_attention_shrinks_the_kv_cache(n_kv):
    m = _model(n_heads=4, d_model=16, n_kv_heads=n_kv)
    cache = m.new_cache()
    with torch.no_grad():
        m(_tokens(B=2, L=5), cache)
    k = cache.layers[0].k
    assert k.shape == (2, n_kv, 5, 4)


def test_swiglu_at_two_thirds_width_matches_the_relu_ffn_in_parameters():
    relu = count_parameters(GPT(GPTConfig(**{**SMALL, "d_model": 24, "d_ff": 48, "n_heads": 3})))
    glu = count_parameters(GPT(GPTConfig(**{**SMALL, "d_model": 24, "d_ff": 32, "n_heads": 3,
                                            "activation": "swiglu"})))
    assert abs(glu - relu) / relu < 0.02


@pytest.mark.parametrize("kw, message", [
    (dict(norm="batch"), "norm must be one of"),
    (dict(n_kv_heads=2), "n_heads=3 is not divisible by n_kv_heads=2"),
    (dict(n_kv_heads=6), "n_kv_heads=6 is more than n_heads=3"),
    (dict(n_kv_heads=0), "n_kv_heads must be a positive integer"),
    (dict(positions="rope", d_model=15, n_heads=3), "needs an even head width"),
])
def test_switch_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**{**SMALL, **kw})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("T", [1e-30, 1e-40, 1e-45, 1e-46, 1e-300, 5e-324])   # float32 has no 1e-46
def test_a_vanishing_temperature_is_argmax_not_nan(T, dtype):
    z = torch.tensor([[2.0, 1.0, 0.5], [-1.0, 3.0, float("-inf")]], dtype=dtype)
    p = sampling_probs(z, temperature=T)
    assert not p.isnan().any()
    assert torch.equal(p, torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=dtype))
    assert torch.equal(sample(z, temperature=T), torch.tensor([0, 1]))


def test_rms_switch_replaces_every_norm_and_post_ln_has_no_final_norm():
    pre = GPT(GPTConfig(**SMALL, norm="rms", norm_first=True))
    assert isinstance(pre.norm, RMSNorm)
    for block in pre.blocks:
        assert isinstance(block.attn_block.norm, RMSNorm) and isinstance(block.ffn_block.norm, RMSNorm)
    post = GPT(GPTConfig(**SMALL, norm="rms", norm_first=False))
    assert isinstance(post.norm, nn.Identity)     # Post-LN: the last sub-layer already normalised
    assert isinstance(post.blocks[0].ffn_block.norm, RMSNorm)


def test_batch_lengths_are_chapter_10s_source_and_target_lengths():
    from tf_tutorial.gpt import batch_lengths, encode_continuation
    vocab = continuation_vocab(Vocab(["i", "love", "china"]), Vocab(["我", "爱", "中国"]))
    items = encode_continuation([(["i", "love", "china"], ["我", "爱", "中国"])], vocab)
    assert batch_lengths(items) == [(3 + 1, 3 + 2)]     # English + <sep>; <bos> + Chinese + <eos>


def test_both_trainers_see_the_same_sentences_in_each_step(monkeypatch):
    # chapters 11 and 12 compare the two architectures seed by seed because one seed gives both
    # the same batches: train() and train_continuation() must ask batch_indices the same question
    import tf_tutorial.gpt as gpt_module
    import tf_tutorial.train as train_module
    from tf_tutorial.corpus.data import make_corpus

    corpus = make_corpus(300, n_valid=10, n_test=10, n_longer=1, n_deeper=1, seed=0)
    cfg = dataclasses.replace(CONFIGS["tiny"], steps=5, batch_tokens=120, eval_every=5, seed=3)
    seen = {}

    def recording(name, real):
        def batch_indices(*args, **kwargs):
            chunks = real(*args, **kwargs)
            seen.setdefault(name, []).extend(chunks)
            return chunks
        return batch_indices

    for name, module in (("ed", train_module), ("gpt", gpt_module)):
        monkeypatch.setattr(module, "batch_indices", recording(name, module.batch_indices))
    train_module.train(cfg, corpus=corpus, device="cpu", progress=False)
    vocab = continuation_vocab(corpus.src_vocab, corpus.tgt_vocab)
    model = GPT(GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=256))
    train_continuation(model, vocab, corpus.train, cfg, progress=False)
    assert len(seen["ed"]) > cfg.steps and seen["ed"] == seen["gpt"]     # the same order of batches
    same_seed = seen.pop("gpt")
    train_continuation(model, vocab, corpus.train, dataclasses.replace(cfg, seed=4), progress=False)
    assert seen["gpt"] != same_seed                   # another seed, another order: the check has teeth


def test_generate_returns_the_prompt_dtype():
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=11, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16))
    prompt = torch.tensor([[3, 4, 5]], dtype=torch.int32)
    for use_cache in (True, False):
        out = generate(m, prompt, 4, top_k=1, use_cache=use_cache)
        assert out.dtype == torch.int32 and out.shape == (1, 7)
        assert torch.equal(out.long(), generate(m, prompt.long(), 4, top_k=1, use_cache=use_cache))


def test_config_takes_numpy_ids_and_a_vocabulary_too_small_for_the_default_eos():
    import numpy as np

    cfg = GPTConfig(vocab_size=12, d_model=16, n_heads=2, pad_id=np.int64(0), eos_id=np.int64(3))
    assert (cfg.pad_id, cfg.eos_id) == (0, 3) and type(cfg.pad_id) is type(cfg.eos_id) is int
    assert GPTConfig(vocab_size=3, d_model=16, n_heads=2).eos_id == 2
    # no room for eos_id=2: a model without one
    tiny = GPT(GPTConfig(vocab_size=2, d_model=16, n_heads=2, n_layers=1))
    assert tiny.config.eos_id is None
    out = generate(tiny, torch.zeros(1, 2, dtype=torch.long), 3, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 5) and int(out.max()) < 2
    # one token only: the padding one, which is never a key and never scored
    with pytest.raises(ValueError, match="^vocab_size=1 leaves no token but the padding one: "
                                         "a model needs at least 2$"):
        GPTConfig(vocab_size=1, d_model=16, n_heads=2)
    with pytest.raises(ValueError, match="^eos_id=2 is not a valid id for vocab_size=2$"):
        GPTConfig(vocab_size=2, d_model=16, n_heads=2, eos_id=2)        # given, not defaulted


def test_numpy_scalars_are_numbers_for_sampling_and_tensors_are_not():
    import numpy as np
    z = torch.randn(4, 9, generator=torch.Generator().manual_seed(8))
    kept = sampling_probs(z, temperature=np.float32(0.5), top_k=np.int64(3), top_p=np.float64(0.9))
    assert torch.equal(kept, sampling_probs(z, temperature=0.5, top_k=3, top_p=0.9))
    with pytest.raises(ValueError, match=r"^temperature must be a finite number >= 0 \(0: greedy\), but got tensor"):
        sample(z, temperature=torch.tensor(0.7))
    with pytest.raises(ValueError, match=r"^top_p must be None or in \(0, 1\], but got True$"):
        sample(z, top_p=True)


@pytest.mark.parametrize("kwargs", [{}, {"top_k": 1}, {"temperature": 0}])
def test_a_generator_that_is_not_one_is_refused_even_when_nothing_is_drawn(kwargs):
    m = GPT(GPTConfig(12, d_model=8, n_heads=2, n_layers=1, d_ff=16)).eval()
    with pytest.raises(TypeError, match=r"^generator must be None or a torch.Generator, but got int$"):
        generate(m, torch.tensor([3, 4]), 2, generator=5, **kwargs)
    with pytest.raises(TypeError, match=r"^generator must be None or a torch.Generator, but got int$"):
        sample(torch.zeros(2, 12), generator=5, **kwargs)


def test_generate_refuses_a_bool_eos_id_by_name():
    m = GPT(GPTConfig(12, d_model=8, n_heads=2, n_layers=1, d_ff=16)).eval()
    with pytest.raises(TypeError, match=r"^eos_id must be an integer token id, but got True$"):
        generate(m, torch.tensor([3, 4]), 2, top_k=1, eos_id=True)


@pytest.mark.parametrize("eos_id", [12, 999, -1])
def test_generate_refuses_an_eos_id_outside_the_vocabulary(eos_id):
    """An id the model can never produce would silently turn stopping off."""
    m = GPT(GPTConfig(12, d_model=8, n_heads=2, n_layers=1, d_ff=16)).eval()
    with pytest.raises(ValueError, match=rf"^eos_id must be None or an id in \[0, 12\) other than pad_id=0, "
                                         rf"but got {eos_id}$"):
        generate(m, torch.tensor([3, 4]), 2, top_k=1, eos_id=eos_id)
    assert generate(m, torch.tensor([3, 4]), 2, top_k=1, eos_id=11).shape == (4,)


def test_every_continuation_step_runs_without_cudnn_attention():
    # the decoder-only trainer sees batches of many shapes too (tf_tutorial.train
    # .varying_shapes): its forward passes run with cuDNN's attention off, and it is back on after
    pairs = _pairs()
    vocab = _vocab(pairs)
    model = GPT(GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16,
                          pad_id=vocab.pad_id, eos_id=vocab.eos_id))
    seen = []
    model.register_forward_pre_hook(lambda *_: seen.append(torch.backends.cuda.cudnn_sdp_enabled()))
    train_continuation(model, vocab, pairs, dataclasses.replace(CONFIGS["tiny"], steps=3, batch_size=8),
                       progress=False)
    assert seen == [False] * 3
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_a_bad_keep_mask_or_cache_is_refused_by_name():
    m = _model()
    tokens = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"^keep: expected a boolean mask of shape \(2, 5\) "
                                         r"or 1-D int64 \(or int32\) positions, but got torch.int64 of shape \(2, 5\)$"):
        m(tokens, keep=torch.ones(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"^keep: expected .* but got torch.bool of shape \(2, 4\)$"):
        m(tokens, keep=torch.ones(2, 4, dtype=torch.bool))
    for dtype in (torch.float32, torch.uint8, torch.int16):       # index_select takes int32/int64 only
        with pytest.raises(ValueError, match=rf"^keep: expected .* but got {dtype} of shape \(3,\)$"):
            m(tokens, keep=torch.zeros(3, dtype=dtype))
    with pytest.raises(TypeError, match=r"^keep must be a torch.Tensor, but got list$"):
        m(tokens, keep=[0, 1])
    with pytest.raises(ValueError, match=r"^keep: positions must be on the tokens' device \(cpu\), "
                                         r"but got them on meta$"):
        m(tokens, keep=torch.zeros(3, dtype=torch.long, device="meta"))
    for bad in (10, -1):
        with pytest.raises(ValueError, match=rf"^keep: positions must lie in \[0, 10\) \(row-major over "
                                             rf"tokens of shape \(2, 5\)\), but got {bad}$"):
            m(tokens, keep=torch.tensor([0, bad]))
    with pytest.raises(ValueError, match=f"^cache: expected a GPTCache for {N} layers, but got one for 5$"):
        m(tokens, cache=GPT(GPTConfig(**{**SMALL, "n_layers": 5})).new_cache())
    keep = torch.tensor([[0, 0, 0, 0, 1], [0, 1, 0, 0, 1]], dtype=torch.bool)
    torch.testing.assert_close(m(tokens, keep=keep), m(tokens)[keep])   # and a good one picks the rows


def test_keep_as_row_major_indices_equals_the_boolean_mask_in_values_and_gradients():
    """Indices found on the host and copied with the batch spare a GPU the mid-forward wait
    for the count K that a boolean mask costs; the numbers must not change."""
    tokens = torch.randint(1, SMALL["vocab_size"], (2, 5))
    keep = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 0, 0, 1]], dtype=torch.bool)
    rows = keep.flatten().nonzero()[:, 0]
    out = {}
    for name, k in (("mask", keep), ("rows", rows)):
        m = _model()
        logits = m(tokens, keep=k)
        logits.square().sum().backward()
        out[name] = logits.detach(), [p.grad for p in m.parameters()]
    assert torch.equal(out["mask"][0], out["rows"][0])
    assert all(torch.equal(a, b) for a, b in zip(out["mask"][1], out["rows"][1]))
    m = _model().to("meta")                          # a device other than the CPU
    on_meta = m(tokens.to("meta"), keep=rows.to("meta"))
    assert on_meta.device.type == "meta" and on_meta.shape == (5, SMALL["vocab_size"])


def test_train_continuation_hands_the_model_indices_on_its_device_not_a_mask(monkeypatch):
    seen = []
    forward = GPT.forward

    def spy(self, tokens, *args, keep=None, **kwargs):
        seen.append((keep.dtype, keep.dim(), keep.device == tokens.device))
        return forward(self, tokens, *args, keep=keep, **kwargs)
    monkeypatch.setattr(GPT, "forward", spy)
    pairs = _pairs()
    vocab = _vocab(pairs)
    model = GPT(GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16,
                          pad_id=vocab.pad_id, eos_id=vocab.eos_id))
    train_continuation(model, vocab, pairs, dataclasses.replace(CONFIGS["tiny"], steps=2, batch_size=8),
                       progress=False)
    assert seen == [(torch.int64, 1, True)] * 2


def test_generate_names_a_model_that_is_not_a_gpt():
    # a plain module failed inside torch's __getattr__ ('Linear' object has no attribute 'config')
    prompt = torch.ones(1, 2, dtype=torch.long)
    with pytest.raises(TypeError, match="model: expected a tf_tutorial.gpt.GPT, but got Linear"):
        generate(nn.Linear(2, 2), prompt, 3)
    assert generate(_model(), prompt, 3).shape == (1, 5)


def test_translate_continuation_samples_when_given_only_a_temperature_or_a_top_p():
    # temperature=0.5 alone used to be decoded greedily: the default top_k=1 won
    pairs = _pairs()
    vocab = _vocab(pairs)
    torch.manual_seed(0)
    model = GPT(GPTConfig(len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=16,
                          pad_id=vocab.pad_id, eos_id=vocab.eos_id)).double().eval()
    greedy = translate_continuation(model, vocab, pairs)
    assert greedy == translate_continuation(model, vocab, pairs, top_k=1)
    g = lambda: torch.Generator().manual_seed(1)                                  # noqa: E731
    for kw in (dict(temperature=3.0), dict(top_p=0.99)):
        assert translate_continuation(model, vocab, pairs, generator=g(), **kw) != greedy, kw
    assert translate_continuation(model, vocab, pairs, temperature=0) == greedy


def test_a_cache_of_another_batch_size_or_type_is_refused_by_name():
    from tf_tutorial.multihead import KVCache
    m = _model()
    cache = m.new_cache()
    m(_tokens(2, 3), cache)
    with pytest.raises(ValueError, match=r"^cache: it holds a batch of 2, but tokens has 3 rows"):
        m(_tokens(3, 1), cache)
    assert cache.not_pad.shape == (2, 3)                         # the refused call stored nothing
    with pytest.raises(TypeError, match=r"^cache must be a GPTCache, but got KVCache \(model\.new_cache\(\) makes one\)$"):
        m(_tokens(1, 2), KVCache())


def test_a_plus_inf_logit_is_certainty_in_every_sampling_path():
    # z - max(z) was inf - inf = NaN, and sample() said the row had "no distribution"
    logits = torch.tensor([[0.0, math.inf, 1.0], [0.0, math.inf, math.inf]])
    p = sampling_probs(logits)
    assert torch.equal(p, torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.5, 0.5]]))
    for kw in ({}, {"temperature": 0.3}, {"top_k": 2}, {"top_p": 0.5}, {"top_k": 1}):
        drawn = sample(logits[:1], generator=torch.Generator().manual_seed(0), **kw)
        assert drawn.tolist() == [1], kw
    assert set(sample(logits[1:].expand(200, 3), generator=torch.Generator().manual_seed(0)).tolist()) == {1, 2}


def test_a_call_refused_for_its_token_ids_leaves_the_cache_as_it_was():
    # the out-of-range id used to be caught after the cache's pad record had grown: the next
    # valid call then failed with a mask error about shapes the user never chose
    m = _model()
    tokens = _tokens(B=1, L=3)
    full = m(tokens)
    cache = m.new_cache()
    m(tokens[:, :2], cache=cache)
    with pytest.raises(ValueError, match=rf"^tokens: token id 99 is out of range for vocab_size={V}$"):
        m(torch.tensor([[99]]), cache=cache)
    assert cache.length == 2 and cache.not_pad.shape == (1, 2)
    torch.testing.assert_close(m(tokens[:, 2:], cache=cache), full[:, 2:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("change, error, message", [
    # no pairs used to loop for ever: an epoch with no batch, again and again
    (dict(pairs=[]), ValueError, r"^pairs: expected at least one \(English, Chinese\) pair, but got none$"),
    (dict(cfg="tiny"), TypeError, r"^cfg must be a TrainConfig, but got str$"),
    (dict(model="gpt"), TypeError, r"^model: expected a tf_tutorial.gpt.GPT, but got str$"),
    # 'meta' used to move the model there and fail inside torch.nonzero, leaving it without data
    (dict(device="meta"), ValueError, r"^device 'meta' holds shapes but no data"),
])
def test_train_continuation_names_a_bad_argument_before_it_starts(change, error, message):
    from tf_tutorial.corpus.data import make_corpus
    corpus = make_corpus(n_train=50, n_valid=5, n_test=5, n_longer=1, n_deeper=1, seed=0)
    vocab = continuation_vocab(corpus.src_vocab, corpus.tgt_vocab)
    model = GPT(GPTConfig(vocab_size=len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=80))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = dict(model=model, vocab=vocab, pairs=corpus.train, cfg=dataclasses.replace(CONFIGS["tiny"], steps=2))
    with pytest.raises(error, match=message):
        train_continuation(**{**args, **change}, progress=False)
    assert all(v.device.type == "cpu" and torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_ctrl_c_closes_train_continuations_progress_bar(capsys, monkeypatch):
    """As train()'s (tests/test_train.py): the bar is closed when Ctrl-C leaves the loop, not redrawn later."""
    import tf_tutorial.gpt as G
    from tf_tutorial.corpus.data import make_corpus
    corpus = make_corpus(n_train=50, n_valid=5, n_test=5, n_longer=1, n_deeper=1, seed=0)
    vocab = continuation_vocab(corpus.src_vocab, corpus.tgt_vocab)
    model = GPT(GPTConfig(vocab_size=len(vocab), d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=80))
    real_batch, calls = G.continuation_batch, []

    def ctrl_c_at_step_3(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_batch(*args, **kwargs)

    monkeypatch.setattr(G, "continuation_batch", ctrl_c_at_step_3)
    capsys.readouterr()
    try:
        train_continuation(model, vocab, corpus.train, dataclasses.replace(CONFIGS["tiny"], steps=10, batch_size=8))
    except KeyboardInterrupt:
        closed = capsys.readouterr().err            # while the traceback still holds the bar
    else:
        pytest.fail("the fake Ctrl-C did not stop the training")
    assert "train[gpt]" in closed and closed.endswith("\n")


def test_a_compiled_gpt_with_rope_and_gqa_decodes_from_its_cache_as_the_eager_one():
    """No test compiled the decoder-only model; its per-step checks (RoPE's start, the cache, the mask) must
    trace in one graph and give the eager numbers."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, d_model=16, n_heads=4, n_kv_heads=2, n_layers=1, d_ff=32, max_len=40,
                          positions="rope")).eval()
    step = torch.compile(lambda tokens, cache: model(tokens, cache=cache), backend="eager", fullgraph=True)
    compiled, eager = model.new_cache(), model.new_cache()
    tokens = torch.randint(4, 20, (2, 3))
    with torch.no_grad():
        for _ in range(4):                                          # the prompt, then one token at a time
            torch.testing.assert_close(step(tokens, compiled), model(tokens, cache=eager))
            tokens = torch.randint(4, 20, (2, 1))
    assert compiled.length == eager.length == 6


def test_a_top_k_of_the_vocabulary_or_more_keeps_every_token():
    from tf_tutorial.gpt import sampling_probs
    logits = torch.randn(3, 7, generator=torch.Generator().manual_seed(0))
    whole = sampling_probs(logits)
    for k in (7, 8, 100):                                  # as Hugging Face's filter: no error
        torch.testing.assert_close(sampling_probs(logits, top_k=k), whole, rtol=0, atol=0)
    assert (sampling_probs(logits, top_k=6) == 0).sum(-1).tolist() == [1, 1, 1]
