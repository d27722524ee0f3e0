"""Tests of chapter 12's grouped-query attention: ``grouped_query_attention`` (tf_tutorial/attention.py)
and ``GroupedQueryAttention`` (tf_tutorial/multihead.py)."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tf_tutorial.attention import causal_mask, grouped_query_attention, padding_mask, scaled_dot_product_attention
from tf_tutorial.interop import from_torch
from tf_tutorial.multihead import GroupedQueryAttention, KVCache, MultiHeadAttention
from tf_tutorial.rope import RotaryEmbedding

B, T, S, D, H = 2, 5, 7, 24, 6
DK = D // H
F64 = torch.float64
KV_HEADS = [1, 2, 3, 6]


def gen(seed):
    return torch.Generator().manual_seed(seed)


def qkv(n_kv, seed=0, d_v=5):
    g = gen(seed)
    return (torch.randn(B, H, T, DK, generator=g, dtype=F64),
            torch.randn(B, n_kv, S, DK, generator=g, dtype=F64),
            torch.randn(B, n_kv, S, d_v, generator=g, dtype=F64))


def random_mask(seed=1, shape=(B, 1, T, S)):
    m = torch.rand(shape, generator=gen(seed)) > 0.4
    m[..., 0] = True  # every row keeps a key, so PyTorch's reference has no NaN
    return m


def gqa_layer(n_kv, seed=0, **kwargs):
    """A float64 GroupedQueryAttention with non-zero biases, in eval mode."""
    torch.manual_seed(seed)
    m = GroupedQueryAttention(D, H, n_kv, **kwargs).double().eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


def inputs(seed=2):
    g = gen(seed)
    return torch.randn(B, T, D, generator=g, dtype=F64), torch.randn(B, S, D, generator=g, dtype=F64)


# --- the function --------------------------------------------------------------------------

@pytest.mark.parametrize("n_kv", KV_HEADS)
@pytest.mark.parametrize("use_mask", [False, True])
def test_function_equals_torch_sdpa_enable_gqa(n_kv, use_mask):
    q, k, v = qkv(n_kv)
    mask = random_mask() if use_mask else None
    out = grouped_query_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    assert out.shape == (B, H, T, v.shape[-1])
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)


def test_query_head_h_uses_kv_head_h_div_group():
    q, k, v = qkv(2)
    out = grouped_query_attention(q, k, v)
    for h in range(H):  # H / H_kv = 3: heads 0, 1, 2 read kv head 0, heads 3, 4, 5 kv head 1
        w = torch.softmax(q[:, h] @ k[:, h // 3].transpose(-2, -1) / math.sqrt(DK), dim=-1)
        torch.testing.assert_close(out[:, h], w @ v[:, h // 3])
    # the other grouping (h % H_kv, what repeat() rather than repeat_interleave() gives) differs
    w = torch.softmax(q[:, 1] @ k[:, 1].transpose(-2, -1) / math.sqrt(DK), dim=-1)
    assert not torch.allclose(out[:, 1], w @ v[:, 1])


def test_function_takes_extra_leading_dims_and_fully_masked_rows_give_zeros():
    q, k, v = qkv(3)
    mask = random_mask(shape=(B, H, T, S))
    mask[1, 4, 2] = False                                     # query 2 of head 4 sees no key
    out = grouped_query_attention(q[None], k[None], v[None], mask)
    assert out.shape == (1, B, H, T, 5) and not out.isnan().any()
    assert (out[0, 1, 4, 2] == 0).all()
    torch.testing.assert_close(out[0, 0], grouped_query_attention(q, k, v, mask)[0])


def test_function_errors():
    q, k, v = qkv(3)
    with pytest.raises(ValueError, match=r"n_heads=8 is not divisible by n_kv_heads=3: q has 8 heads, "
                                         r"k and v have 3"):
        grouped_query_attention(torch.randn(B, 8, T, DK, dtype=F64), k, v)
    with pytest.raises(ValueError, match=r"n_kv_heads=3 is more than n_heads=2: each key/value head serves "
                                         r"a group of one or more query heads: q has 2 heads, k and v have 3"):
        grouped_query_attention(q[:, :2], k, v)
    with pytest.raises(ValueError, match=r"k and v: expected at least one head, but got k \(2, 0, 7, 4\)"):
        grouped_query_attention(q, k[:, :0], v[:, :0])
    with pytest.raises(ValueError, match=r"same number of heads H_kv, but got k \(2, 3, 7, 4\) and v "
                                         r"\(2, 2, 7, 5\)"):
        grouped_query_attention(q, k, v[:, :2])
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        grouped_query_attention(q[0, 0], k[0, 0], v[0, 0])
    with pytest.raises(ValueError, match="mask must be boolean .* but got dtype torch.float32"):
        grouped_query_attention(q, k, v, torch.ones(T, S))
    with pytest.raises(ValueError, match=r"mask of shape \(5, 5\) does not broadcast to the scores' "
                                         r"shape \(2, 6, 5, 7\)"):
        grouped_query_attention(q, k, v, causal_mask(T))


# --- the layer -----------------------------------------------------------------------------

def mha_like(gqa):
    """A MultiHeadAttention whose W^K, W^V repeat each of gqa's key/value heads for its group."""
    group = gqa.n_heads // gqa.n_kv_heads
    mha = MultiHeadAttention(D, H).double().eval()
    expand = lambda t: t.unflatten(0, (gqa.n_kv_heads, DK)).repeat_interleave(group, 0).flatten(0, 1)
    with torch.no_grad():
        for mine, theirs in ((mha.w_q, gqa.w_q), (mha.w_o, gqa.w_o)):
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
        for mine, theirs in ((mha.w_k, gqa.w_k), (mha.w_v, gqa.w_v)):
            mine.weight.copy_(expand(theirs.weight))                      # (D, D) from (H_kv·d_k, D)
            mine.bias.copy_(expand(theirs.bias))
    return mha


def by_hand(gqa, x, mem, mask):
    """GQA written out: project, split, repeat_interleave the kv heads, softmax, merge, W^O."""
    group = H // gqa.n_kv_heads
    q = gqa.w_q(x).view(B, T, H, DK).transpose(1, 2)                               # (B, H, T, d_k)
    k = gqa.w_k(mem).view(B, S, gqa.n_kv_heads, DK).transpose(1, 2).repeat_interleave(group, 1)
    v = gqa.w_v(mem).view(B, S, gqa.n_kv_heads, DK).transpose(1, 2).repeat_interleave(group, 1)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(DK)).masked_fill(~mask[:, None], -math.inf)
    out = torch.softmax(scores, dim=-1) @ v                                        # (B, H, T, d_k)
    return gqa.w_o(out.transpose(1, 2).reshape(B, T, D))


@pytest.mark.parametrize("n_kv", KV_HEADS)
def test_layer_equals_hand_written_maths_and_mha_with_repeated_kv_weights(n_kv):
    gqa = gqa_layer(n_kv)
    x, mem = inputs()
    mask = random_mask()[:, 0]                                                     # (B, T, S)
    fused = gqa(x, mem, mem, mask)
    out, weights = gqa(x, mem, mem, mask, return_weights=True)
    expected = by_hand(gqa, x, mem, mask)
    torch.testing.assert_close(fused, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)
    assert weights.shape == (B, H, T, S)
    torch.testing.assert_close(mha_like(gqa)(x, mem, mem, mask), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("n_kv", [1, 3, 6])
def test_another_kernel_sees_the_repeated_heads_and_gives_the_same_output(n_kv):
    """kernel=flash_attention (chapter 12 puts it in chapter 11's model) computes what the fused
    kernel does; the kernel gets every query head its own key/value head, and the mask once."""
    import functools

    from tf_tutorial.flash import flash_attention

    seen = []

    def spy(q, k, v, mask):
        seen.append((q.shape, k.shape, v.shape, None if mask is None else mask.shape))
        return functools.partial(flash_attention, block_size=3)(q, k, v, mask)

    x, mem = inputs()
    mask = random_mask()[:, 0]                                                     # (B, T, S)
    expected = gqa_layer(n_kv)(x, mem, mem, mask)
    flash = gqa_layer(n_kv, kernel=spy)
    torch.testing.assert_close(flash(x, mem, mem, mask), expected, atol=1e-12, rtol=0)
    assert seen == [((B, H, T, DK), (B, H, S, DK), (B, H, S, DK), (B, 1, T, S))]
    out, weights = flash(x, mem, mem, mask, return_weights=True)   # weights: the readable path
    assert len(seen) == 1 and weights.shape == (B, H, T, S)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)
    # the kernel has no dropout: in training with dropout it refuses, in eval it runs
    dropping = gqa_layer(n_kv, kernel=spy, dropout=0.1).train()
    with pytest.raises(ValueError, match="has no dropout, but dropout=0.1 in training mode"):
        dropping(x, mem, mem, mask)
    torch.testing.assert_close(dropping.eval()(x, mem, mem, mask), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("shape", [(B, T, S), (1, T, S), (T, S), (S,), ()])
def test_another_kernel_gets_every_mask_as_b_1_t_s(shape):
    """The docstring promises a kernel the mask as (B, 1, T, S); a (T, S), (S,) or 0-d mask, all
    broadcastable to (B, T, S), reached it unchanged (an outside probe: F.scaled_dot_product_attention
    as the kernel read (S,) wrongly or raised)."""
    seen = []

    def kernel(q, k, v, mask):
        seen.append(tuple(mask.shape))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    x, mem = inputs()
    full = random_mask()[:, 0]                                   # (B, T, S), every row a key
    mask = full[(0,) * (3 - len(shape))] if shape else torch.tensor(True)
    mask = mask[:1] if shape == (1, T, S) else mask
    assert tuple(mask.shape) == shape
    expected = gqa_layer(2)(x, mem, mem, mask)
    torch.testing.assert_close(gqa_layer(2, kernel=kernel)(x, mem, mem, mask), expected,
                               atol=1e-12, rtol=0)
    assert seen == [(B, 1, T, S)]


def test_heads_in_a_group_share_keys_but_not_queries():
    gqa = gqa_layer(2)
    x, mem = inputs()
    _, w = gqa(x, mem, mem, return_weights=True)
    assert not torch.allclose(w[:, 0], w[:, 1])     # same keys, different queries: different weights
    # the keys each query head meets: heads 0-2 share key head 0, heads 3-5 key head 1
    seen = {}

    def kernel(q, k, v, mask):
        seen["k"], seen["v"] = k, v
        return scaled_dot_product_attention(q, k, v, mask)[0]
    gqa.kernel = kernel
    gqa(x, mem, mem)
    k, v = seen["k"], seen["v"]                      # (B, H, S, d_k), repeated for each group
    assert k.shape[1] == H
    for t in (k, v):
        assert all(torch.equal(t[:, h], t[:, 0]) for h in range(3))
        assert all(torch.equal(t[:, h], t[:, 3]) for h in range(3, 6)) and not torch.equal(t[:, 0], t[:, 3])


@pytest.mark.parametrize("bias", [True, False])
def test_with_n_kv_heads_equal_n_heads_it_is_multi_head_attention(bias):
    torch.manual_seed(3)
    ref = nn.MultiheadAttention(D, H, bias=bias, batch_first=True).double().eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.1 * torch.randn_like(p))
    mha = from_torch(ref)
    gqa = GroupedQueryAttention(D, H, H, bias=bias).double().eval()
    gqa.load_state_dict(mha.state_dict())          # same names and shapes when H_kv = H
    x, mem = inputs()
    allowed = padding_mask(torch.tensor([[3, 4, 5, 6, 7, 0, 0], [3, 4, 0, 0, 0, 0, 0]]), 0)
    expected, expected_w = ref(x, mem, mem, key_padding_mask=~allowed[:, 0], need_weights=True,
                               average_attn_weights=False)
    torch.testing.assert_close(gqa(x, mem, mem, allowed), expected)
    torch.testing.assert_close(gqa(x, mem, mem, allowed), mha(x, mem, mem, allowed), atol=1e-12, rtol=0)
    out, w = gqa(x, mem, mem, allowed, return_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(w, expected_w)


@pytest.mark.parametrize("n_kv", KV_HEADS)
def test_parameter_count(n_kv):
    gqa = GroupedQueryAttention(D, H, n_kv)
    assert gqa.w_k.weight.shape == gqa.w_v.weight.shape == (n_kv * DK, D)
    assert gqa.w_k.bias.shape == (n_kv * DK,)
    count = sum(p.numel() for p in gqa.parameters())
    assert count == 2 * (D * D + D) + 2 * (D * n_kv * DK + n_kv * DK)
    if n_kv == H:
        assert count == sum(p.numel() for p in MultiHeadAttention(D, H).parameters())


def test_fully_masked_query_gives_zeros_on_both_paths():
    gqa = GroupedQueryAttention(D, H, 2)  # bias=True: W^O of zeros would be W^O's bias
    x = torch.randn(B, T, D)
    allowed = torch.ones(B, T, T, dtype=torch.bool)
    allowed[0, 1] = False
    for out in (gqa(x, x, x, allowed), gqa(x, x, x, allowed, return_weights=True)[0]):
        assert not out.isnan().any() and (out[0, 1] == 0).all()
        assert (out[1, 1] != 0).any()


def test_dropout_acts_in_training_only():
    gqa = gqa_layer(3, dropout=0.5)
    x, _ = inputs()
    torch.testing.assert_close(gqa(x, x, x), gqa(x, x, x))
    gqa.train()
    assert not torch.allclose(gqa(x, x, x), gqa(x, x, x))


# --- the KV cache ----------------------------------------------------------------------------

def decode_step_by_step(layer, x, cache, chunks=(1, 2, 1, 1)):
    """Feed x's positions in chunks through ``layer`` with a growing cache and a causal mask."""
    outs, start = [], 0
    for n in chunks:
        allowed = causal_mask(T)[start:start + n, :start + n]                     # (n, t + n)
        outs.append(layer(x[:, start:start + n], x[:, start:start + n], x[:, start:start + n],
                          allowed, cache=cache))
        start += n
    assert start == x.shape[1]
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("n_kv", KV_HEADS)
def test_cached_decoding_equals_full_pass_and_the_cache_is_smaller(n_kv):
    gqa = gqa_layer(n_kv)
    x, _ = inputs()
    cache = KVCache()
    stepped = decode_step_by_step(gqa, x, cache)
    torch.testing.assert_close(stepped, gqa(x, x, x, causal_mask(T)), atol=1e-12, rtol=0)
    assert cache.k.shape == cache.v.shape == (B, n_kv, T, DK)
    mha_cache = KVCache()
    decode_step_by_step(MultiHeadAttention(D, H).double().eval(), x, mha_cache)
    assert mha_cache.k.numel() == (H // n_kv) * cache.k.numel()


def test_static_cache_for_cross_attention():
    gqa = gqa_layer(2)
    x, mem = inputs()
    allowed = padding_mask(torch.tensor([[3, 4, 5, 6, 7, 0, 0], [3, 4, 0, 0, 0, 0, 0]]), 0)
    cache = KVCache(static=True)
    steps = [gqa(x[:, i:i + 1], mem, mem, allowed, cache=cache) for i in range(T)]
    torch.testing.assert_close(torch.cat(steps, 1), gqa(x, mem, mem, allowed), atol=1e-12, rtol=0)
    assert cache.k.shape == (B, 2, S, DK)


# --- rotary positions ------------------------------------------------------------------------

class ShiftedRotary(nn.Module):
    """RotaryEmbedding that puts every position ``offset`` further (queries, keys or both)."""

    def __init__(self, rope, offset, only=None):
        super().__init__()
        self.rope, self.offset, self.only, self.calls = rope, offset, only, 0

    def forward(self, x, start):
        self.calls += 1          # the layer rotates q first, then k
        which = "q" if self.calls % 2 else "k"
        shift = self.offset if self.only in (None, which) else 0
        return self.rope(x, start + shift)


@pytest.mark.parametrize("n_kv", [1, 3])
def test_rotary_cached_decoding_equals_full_recomputation(n_kv):
    gqa = gqa_layer(n_kv, rotary=RotaryEmbedding(DK, max_len=32))
    x, _ = inputs()
    full = gqa(x, x, x, causal_mask(T))
    torch.testing.assert_close(decode_step_by_step(gqa, x, KVCache()), full, atol=1e-12, rtol=0)
    plain = gqa_layer(n_kv)                        # same weights (same seed), no rotation
    assert not torch.allclose(plain(x, x, x, causal_mask(T)), full, atol=1e-3)


def test_rotary_scores_depend_only_on_relative_positions():
    rope = RotaryEmbedding(DK, max_len=64)
    gqa = gqa_layer(2, rotary=rope)
    x, _ = inputs()
    allowed = causal_mask(T)
    out = gqa(x, x, x, allowed)
    gqa.rotary = ShiftedRotary(rope, 17)           # every position + 17: the offsets n − m are kept
    torch.testing.assert_close(gqa(x, x, x, allowed), out, atol=1e-10, rtol=0)
    gqa.rotary = ShiftedRotary(rope, 17, only="k")  # keys alone moved: the offsets change
    assert not torch.allclose(gqa(x, x, x, allowed), out, atol=1e-3)


def test_rotary_checks():
    with pytest.raises(ValueError, match=r"rotary: expected head_dim 4 \(d_model / n_heads\), but got 8"):
        GroupedQueryAttention(D, H, 2, rotary=RotaryEmbedding(8))
    gqa = GroupedQueryAttention(D, H, 2, rotary=RotaryEmbedding(DK))
    x = torch.randn(B, T, D)
    with pytest.raises(ValueError, match="static=True"):
        gqa(x, x, x, cache=KVCache(static=True))


# --- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    ((D, 5, 1), "d_model=24 is not divisible by n_heads=5"),
    ((D, 6, 4), "n_heads=6 is not divisible by n_kv_heads=4"),
    ((D, 6, 12), "n_kv_heads=12 is more than n_heads=6: each key/value head serves a group"),
    ((D, 6, 0), "n_kv_heads must be a positive integer, but got 0"),
    ((D, 6, -2), "n_kv_heads must be a positive integer, but got -2"),
])
def test_constructor_errors(args, message):
    with pytest.raises(ValueError, match=message):
        GroupedQueryAttention(*args)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), but got 1.0"):
        GroupedQueryAttention(D, H, 2, dropout=1.0)


def test_forward_errors():
    gqa = GroupedQueryAttention(D, H, 2)
    x, mem = torch.randn(B, T, D), torch.randn(B, S, D)
    with pytest.raises(ValueError, match=r"key: expected shape \(B, L, 24\), but got \(2, 7, 12\)"):
        gqa(x, mem[..., :12], mem)
    with pytest.raises(ValueError, match=r"^mask must be boolean \(True = may attend\), but got dtype torch.float32$"):
        gqa(x, mem, mem, torch.ones(B, T, S))
    for return_weights in (False, True):
        with pytest.raises(ValueError, match=r"mask of shape \(5, 5\) does not broadcast to the "
                                             r"scores' shape \(2, 5, 7\)"):
            gqa(x, mem, mem, causal_mask(T), return_weights=return_weights)


def test_fused_attention_with_enable_gqa_equals_the_readable_path():
    from tf_tutorial.attention import fused_attention, grouped_query_attention
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 6, 5, 4, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 2, 7, 4, generator=g, dtype=torch.float64) for _ in range(2))
    mask = torch.rand(2, 1, 5, 7, generator=g) > 0.4
    mask[0, 0, 3] = False                                 # a query with no key
    got = fused_attention(q, k, v, mask, enable_gqa=True)
    assert torch.allclose(got, grouped_query_attention(q, k, v, mask), atol=1e-12)
    assert torch.equal(got[0, :, 3], torch.zeros(6, 4, dtype=torch.float64))


def test_the_mask_is_checked_against_the_scores_real_shape():
    """q's batch of 1 broadcasts against k's batch of 2: the scores are (2, H, L, S), and a (2, 1, L, S) mask
    fits them. The check once used q's leading dimensions only, and refused it."""
    torch.manual_seed(3)
    q, k, v = torch.randn(1, 4, 3, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    mask = torch.rand(2, 1, 3, 5) > 0.3
    out = grouped_query_attention(q, k, v, mask)
    out = out[0] if isinstance(out, tuple) else out
    ref = F.scaled_dot_product_attention(q.expand(2, -1, -1, -1), k.repeat_interleave(2, 1),
                                         v.repeat_interleave(2, 1), attn_mask=mask)
    assert out.shape == (2, 4, 3, 8) and torch.allclose(out, ref, atol=1e-6)
    with pytest.raises(ValueError, match=r"does not broadcast to .*\(2, 4, 3, 5\)"):
        grouped_query_attention(q, k, v, torch.ones(3, 1, 3, 5, dtype=torch.bool))


def test_one_argument_is_self_attention():
    """gqa(x), as LLaMA-style code calls its attention, is gqa(x, x, x); gqa(x, memory) reads memory twice."""
    from tf_tutorial.attention import causal_mask
    from tf_tutorial.multihead import GroupedQueryAttention
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(16, 4, 2).eval()
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    assert torch.equal(gqa(x), gqa(x, x, x))
    assert torch.equal(gqa(x, mask=causal_mask(5)), gqa(x, x, x, causal_mask(5)))
    assert not torch.equal(gqa(x, mask=causal_mask(5)), gqa(x))            # the mask is not dropped
    assert torch.equal(gqa(x, memory), gqa(x, memory, memory))
