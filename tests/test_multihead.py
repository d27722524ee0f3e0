import pytest
import torch
from torch import nn

from tf_tutorial.attention import causal_mask, padding_mask, scaled_dot_product_attention
from tf_tutorial.interop import from_torch, torch_attn_mask, torch_key_padding_mask
from tf_tutorial.multihead import MultiHeadAttention

B, S, T, D, H = 2, 7, 5, 12, 3


def torch_mha(bias=True, seed=0):
    torch.manual_seed(seed)
    m = nn.MultiheadAttention(D, H, bias=bias, batch_first=True).double().eval()
    with torch.no_grad():  # non-zero biases, and values float32 could not hold
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return m


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("fused", [True, False])
def test_cross_attention_equals_torch_with_key_padding(bias, fused):
    ref = torch_mha(bias)
    ours = from_torch(ref)
    ours.fused = fused
    x, mem = torch.randn(B, T, D, dtype=torch.float64), torch.randn(B, S, D, dtype=torch.float64)
    tokens = torch.tensor([[3, 4, 5, 6, 7, 0, 0], [3, 4, 5, 0, 0, 0, 0]])
    allowed = padding_mask(tokens, pad_id=0)                                  # (B, 1, S)
    expected, _ = ref(x, mem, mem, key_padding_mask=torch_key_padding_mask(allowed),
                      need_weights=False)
    torch.testing.assert_close(ours(x, mem, mem, allowed), expected)


def test_causal_self_attention_equals_torch_and_weights_match():
    ref = torch_mha()
    ours = from_torch(ref)
    x = torch.randn(B, T, D, dtype=torch.float64)
    allowed = causal_mask(T)
    expected, expected_w = ref(x, x, x, attn_mask=torch_attn_mask(allowed),
                               need_weights=True, average_attn_weights=False)
    out, weights = ours(x, x, x, allowed, return_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)
    assert weights.shape == (B, H, T, T)


def test_one_big_projection_is_h_small_ones():
    torch.manual_seed(1)
    mha = MultiHeadAttention(D, H).double()
    x = torch.randn(B, T, D, dtype=torch.float64)
    out, _ = mha(x, x, x, return_weights=True)
    heads = []
    for i in range(H):  # head i uses rows i*d_k:(i+1)*d_k of each (D, D) weight: a (D, d_k) map
        rows = slice(i * mha.d_k, (i + 1) * mha.d_k)
        q = x @ mha.w_q.weight[rows].T + mha.w_q.bias[rows]
        k = x @ mha.w_k.weight[rows].T + mha.w_k.bias[rows]
        v = x @ mha.w_v.weight[rows].T + mha.w_v.bias[rows]
        heads.append(scaled_dot_product_attention(q, k, v)[0])                 # (B, T, d_k)
    torch.testing.assert_close(mha.w_o(torch.cat(heads, dim=-1)), out)


def test_parameter_count_is_that_of_single_head():
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(MultiHeadAttention(D, H)) == count(MultiHeadAttention(D, 1)) == 4 * D * D + 4 * D


def test_fully_masked_query_gives_zeros_not_the_bias_and_leaves_other_rows_alone():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H)  # bias=True: W^O of zeros would be W^O's bias
    x = torch.randn(B, T, D, requires_grad=True)
    allowed = torch.ones(B, T, T, dtype=torch.bool)
    allowed[0, 1] = False
    others = torch.ones(B, T, dtype=torch.bool)
    others[0, 1] = False
    for fused in (True, False):
        mha.fused = fused
        out = mha(x, x, x, allowed)
        assert not out.isnan().any() and (out[0, 1] == 0).all()
        assert (mha.w_o.bias != 0).any()
        # a query row's output depends on its own mask row only
        torch.testing.assert_close(out[others], mha(x, x, x)[others])
        x.grad = None
        out.sum().backward()
        assert x.grad.isfinite().all()
    # a padding mask (B, 1, S) that hides a whole sentence: every row of it is 0
    keys = torch.ones(B, 1, T, dtype=torch.bool)
    keys[1] = False
    out = mha(x, x, x, keys)
    assert (out[1] == 0).all() and (out[0] != 0).any()


def test_eval_is_deterministic_and_dropout_acts_in_training():
    torch.manual_seed(2)
    mha = MultiHeadAttention(D, H, dropout=0.5)
    x = torch.randn(B, T, D)
    mha.eval()
    torch.testing.assert_close(mha(x, x, x), mha(x, x, x), rtol=0, atol=0)
    mha.train()
    assert not torch.allclose(mha(x, x, x), mha(x, x, x))


def test_split_and_merge_are_inverse():
    mha = MultiHeadAttention(D, H)
    x = torch.randn(B, T, D)
    assert mha.split_heads(x).shape == (B, H, T, D // H)
    torch.testing.assert_close(mha.merge_heads(mha.split_heads(x)), x)


def test_bad_input():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by n_heads=3"):
        MultiHeadAttention(10, 3)
    mha = MultiHeadAttention(D, H)
    x = torch.randn(B, T, D)
    with pytest.raises(ValueError, match=r"key: expected shape \(B, L, 12\), but got \(2, 7, 10\)"):
        mha(x, torch.randn(B, S, 10), torch.randn(B, S, D))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 5, 6\) does not broadcast.*\(2, 5, 7\)"):
        mha(x, torch.randn(B, S, D), torch.randn(B, S, D), torch.ones(B, T, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"^mask must be boolean \(True = may attend\), but got dtype torch.float32$"):
        mha(x, x, x, torch.ones(T, T))


def test_interop_refuses_what_we_do_not_model():
    for options, message in ((dict(batch_first=False), "expected batch_first=True, but got False"),
                             (dict(kdim=5, vdim=5), f"expected kdim = vdim = embed_dim = {D}, "
                                                    "but got kdim=5, vdim=5"),
                             (dict(add_bias_kv=True), "expected add_bias_kv=False, but got True"),
                             (dict(add_zero_attn=True), "expected add_zero_attn=False, but got True")):
        with pytest.raises(ValueError, match=r"from_torch\(nn\.MultiheadAttention\): " + message):
            from_torch(nn.MultiheadAttention(D, H, **(dict(batch_first=True) | options)))
    with pytest.raises(ValueError, match=r"padding mask of shape \(B, 1, S\), but got \(2, 7\)"):
        torch_key_padding_mask(torch.ones(B, S, dtype=torch.bool))


@pytest.mark.parametrize("args, pattern", [
    ((10, 0), "n_heads must be a positive integer, but got 0"),
    ((-4, 2), "d_model must be a positive integer, but got -4"),
    ((0, 1), "d_model must be a positive integer, but got 0"),
    ((10, 3), "d_model=10 is not divisible by n_heads=3"),
])
def test_bad_sizes_are_named(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        MultiHeadAttention(*args)


def test_bias_must_be_a_bool():
    """bias="no" used to keep the biases (a non-empty string is truthy) and None dropped them."""
    from tf_tutorial.multihead import GroupedQueryAttention
    for bad in ("no", None, 0):
        with pytest.raises(TypeError, match=rf"^bias must be True or False, but got {bad!r}$"):
            MultiHeadAttention(12, 3, bias=bad)
        with pytest.raises(TypeError, match="bias must be True or False"):
            GroupedQueryAttention(12, 3, 1, bias=bad)
    assert MultiHeadAttention(12, 3, bias=False).w_q.bias is None


def test_query_key_and_value_are_checked_against_each_other():
    mha = MultiHeadAttention(12, 3)
    q, kv = torch.randn(2, 4, 12), torch.randn(1, 6, 12)
    with pytest.raises(ValueError, match="same batch size B, but got 2, 1 and 1"):
        mha(q, kv, kv)
    with pytest.raises(ValueError, match=r"key and value must have the same length S, but got "
                                         r"key \(2, 6, 12\) and value \(2, 5, 12\)"):
        mha(q, torch.randn(2, 6, 12), torch.randn(2, 5, 12))


def test_a_one_dimensional_key_mask_broadcasts_on_the_fused_path():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    x, kv = torch.randn(2, 4, 8), torch.randn(2, 5, 8)
    keep = torch.tensor([True, True, False, True, True])
    want = mha(x, kv, kv, keep.expand(2, 4, 5))
    assert torch.allclose(mha(x, kv, kv, keep), want, atol=1e-6)
    mha.fused = False
    assert torch.allclose(mha(x, kv, kv, keep), want, atol=1e-6)


def test_a_per_head_mask_is_refused_with_the_shared_shape_named():
    mha = MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"^mask: one \(B, T, S\) or \(B, 1, T, S\) mask serves every head, "
                                         r"but got shape \(2, 2, 3, 3\)$"):
        mha(x, x, x, mask=torch.ones(2, 2, 3, 3, dtype=torch.bool))


@pytest.mark.parametrize("shape", [(2, 1, 3, 4), (2, 1, 1, 4), (1, 1, 3, 4)])
def test_a_mask_with_a_head_axis_of_one_is_the_shared_mask(shape):
    """(B, 1, T, S) and (B, 1, 1, S), as the Annotated Transformer and HF write masks, mean (B, T, S)."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    x, kv = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    mask = torch.rand(shape, generator=torch.Generator().manual_seed(1)) > 0.4
    mask[..., 0] = True
    want = mha(x, kv, kv, mask[:, 0])
    assert torch.equal(mha(x, kv, kv, mask), want)
    assert not torch.allclose(want, mha(x, kv, kv))                       # the mask matters
    from tf_tutorial.multihead import GroupedQueryAttention
    gqa = GroupedQueryAttention(8, 2, 1).eval()
    assert torch.equal(gqa(x, kv, kv, mask), gqa(x, kv, kv, mask[:, 0]))


def test_attention_refuses_a_cache_that_is_not_a_kv_cache():
    from tf_tutorial.multihead import GroupedQueryAttention, KVCache, MultiHeadAttention
    x = torch.randn(2, 3, 8)
    for attn in (MultiHeadAttention(8, 2), GroupedQueryAttention(8, 2, 1)):
        for bad in (5, {"k": None}):
            with pytest.raises(TypeError, match=f"^cache must be a KVCache, but got {type(bad).__name__}$"):
                attn(x, x, x, cache=bad)
        cache = KVCache()
        attn(x, x, x, cache=cache)
        assert cache.length == 3


def test_a_kv_cache_refuses_rows_of_another_batch_size():
    from tf_tutorial.multihead import KVCache
    mha = MultiHeadAttention(8, 2).eval()
    cache = KVCache()
    x = torch.randn(2, 3, 8)
    mha(x, x, x, cache=cache)
    y = torch.randn(3, 1, 8)
    with pytest.raises(ValueError, match=r"^cache: it holds a batch of 2, but got 3 rows$"):
        mha(y, y, y, cache=cache)
    assert cache.length == 3 and cache.k.shape[0] == 2
    # a static (cross-attention) cache is read, not updated: it used to broadcast one row's memory to three
    cross = KVCache(static=True)
    one = torch.randn(1, 4, 8)
    mha(one, one, one, cache=cross)
    with pytest.raises(ValueError, match=r"^cache: it holds a batch of 1, but got 3 rows$"):
        mha(y, y, y, cache=cross)


def test_no_key_at_all_gives_zeros_like_a_fully_masked_row():
    # S = 0 with no mask used to return W^O's bias, unlike a fully masked row and the bare function
    from tf_tutorial.multihead import GroupedQueryAttention
    q, empty = torch.randn(2, 3, 8), torch.randn(2, 0, 8)
    for mha in (MultiHeadAttention(8, 2), GroupedQueryAttention(8, 2, 1)):
        with torch.no_grad():
            mha.w_o.bias.fill_(0.5)
        assert torch.equal(mha(q, empty, empty), torch.zeros(2, 3, 8))
        masked = mha(q, q, q, mask=torch.zeros(2, 3, 3, dtype=torch.bool))
        assert torch.equal(masked, torch.zeros(2, 3, 8))


@pytest.mark.parametrize("kind", ["mha", "gqa", "gqa-rope"])
def test_a_call_refused_for_its_mask_leaves_the_kv_cache_as_it_was(kind):
    # the bad mask used to be caught only after the new keys were appended: the retry then
    # attended to the position twice and gave a wrong answer without an error
    from tf_tutorial.multihead import GroupedQueryAttention, KVCache
    from tf_tutorial.rope import RotaryEmbedding
    torch.manual_seed(0)
    m = {"mha": lambda: MultiHeadAttention(8, 2),
         "gqa": lambda: GroupedQueryAttention(8, 2, 1),
         "gqa-rope": lambda: GroupedQueryAttention(8, 2, 1, rotary=RotaryEmbedding(4))}[kind]().double().eval()
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    full = m(x, x, x, mask=causal_mask(4))
    cache = KVCache()
    m(x[:, :3], x[:, :3], x[:, :3], mask=causal_mask(3), cache=cache)
    with pytest.raises(ValueError, match=r"mask of shape \(1, 2\)"):
        m(x[:, 3:], x[:, 3:], x[:, 3:], mask=torch.ones(1, 2, dtype=torch.bool), cache=cache)
    assert cache.length == 3
    retry = m(x[:, 3:], x[:, 3:], x[:, 3:], mask=torch.ones(1, 4, dtype=torch.bool), cache=cache)
    torch.testing.assert_close(retry, full[:, 3:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["mha", "gqa"])
def test_a_mask_with_one_row_per_sentence_is_told_to_take_a_query_axis(kind):
    """nn.MultiheadAttention's key_padding_mask is (B, S); broadcasting reads a 2-D mask as (T, S)."""
    from tf_tutorial.multihead import GroupedQueryAttention
    layer = MultiHeadAttention(8, 2) if kind == "mha" else GroupedQueryAttention(8, 2, 1)
    x, kv = torch.randn(2, 3, 8), torch.randn(2, 4, 8)
    keep = torch.tensor([[True, True, False, False], [True, True, True, True]])
    with pytest.raises(ValueError, match=r"^mask of shape \(2, 4\): a 2-D mask is read as \(T, S\), one row per "
                                         r"query\. A mask with one row per sentence needs a query axis: "
                                         r"mask\[:, None\] has shape \(2, 1, 4\)$"):
        layer(x, kv, kv, keep)
    out = layer(x, kv, kv, keep[:, None])                                   # the advice works
    assert out.shape == (2, 3, 8)
    assert torch.equal(layer(x, kv, kv, torch.ones(3, 4, dtype=torch.bool)),   # a real (T, S) mask
                       layer(x, kv, kv))


@pytest.mark.parametrize("call", ["mha", "gqa", "decode", "gpt"])
def test_return_weights_must_be_a_bool_at_every_entry(call):
    """return_weights="no" is truthy: it used to return weights the caller did not ask for."""
    from tf_tutorial._checks import WrongTypeError
    from tf_tutorial.gpt import GPT, GPTConfig
    from tf_tutorial.model import Transformer, TransformerConfig
    from tf_tutorial.multihead import GroupedQueryAttention
    torch.manual_seed(0)
    x = torch.randn(1, 3, 8)
    ids = torch.tensor([[4, 5, 6]])
    runs = {
        "mha": lambda: MultiHeadAttention(8, 2)(x, x, x, return_weights="no"),
        "gqa": lambda: GroupedQueryAttention(8, 2, 1)(x, return_weights="no"),
        "decode": lambda: (lambda m: m.decode(ids, *m.encode(ids), return_weights="no"))(
            Transformer(TransformerConfig(10, 10, d_model=8, n_heads=2, n_layers=1, d_ff=16))),
        "gpt": lambda: GPT(GPTConfig(10, d_model=8, n_heads=2, n_layers=1, d_ff=16))(ids, return_weights="no"),
    }
    with pytest.raises(WrongTypeError, match=r"^return_weights must be True or False, but got 'no'$"):
        runs[call]()


def test_a_static_cache_replaces_and_a_growing_one_appends():
    """KVCache.update: the self-attention cache grows by the new positions; the cross-attention
    (static) one holds only what it was last given, as its docstring says."""
    from tf_tutorial.multihead import KVCache
    a, b = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 2, 5)
    growing, static = KVCache(), KVCache(static=True)
    for cache in (growing, static):
        cache.update(a, a + 1)
        k, v = cache.update(b, b + 1)
        assert torch.equal(k, cache.k) and torch.equal(v, cache.v)
    assert torch.equal(growing.k, torch.cat([a, b], dim=2)) and torch.equal(growing.v, torch.cat([a, b], 2) + 1)
    assert torch.equal(static.k, b) and torch.equal(static.v, b + 1)
