import re
import warnings

import pytest
import torch
import torch.nn.functional as F

from tf_tutorial.attention import (causal_mask, fused_attention, padding_mask,
                                   scaled_dot_product_attention)

B, H, T, S, d_k, d_v = 2, 3, 5, 7, 4, 6


def qkv(dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, T, d_k, generator=g, dtype=dtype),
            torch.randn(B, H, S, d_k, generator=g, dtype=dtype),
            torch.randn(B, H, S, d_v, generator=g, dtype=dtype))


def random_mask(seed=1):
    m = torch.rand(B, 1, T, S, generator=torch.Generator().manual_seed(seed)) > 0.4
    m[..., 0] = True  # every row keeps at least one key, as PyTorch needs for a NaN-free reference
    return m


@pytest.mark.parametrize("use_mask", [False, True])
def test_equals_torch_sdpa_in_float64(use_mask):
    q, k, v = qkv()
    mask = random_mask() if use_mask else None
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    torch.testing.assert_close(fused_attention(q, k, v, mask), out)
    assert weights.shape == (B, H, T, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T, dtype=torch.float64))
    if use_mask:
        assert (weights[~mask.expand_as(weights)] == 0).all()  # masked weights are exactly 0


def test_causal_mask_equals_is_causal():
    q, k, v = qkv()
    k, v = k[..., :T, :], v[..., :T, :]
    out, _ = scaled_dot_product_attention(q, k, v, causal_mask(T))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_padding_mask():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    assert padding_mask(tokens, pad_id=0).tolist() == [[[True, True, False, False]],
                                                       [[True, False, False, False]]]
    assert padding_mask(tokens, 0).shape == (2, 1, 4)
    # a negative pad_id matches no token, so it would mask nothing: refused
    with pytest.raises(ValueError, match=r"^pad_id must be an integer >= 0, but got -1$"):
        padding_mask(tokens, pad_id=-1)


@pytest.mark.parametrize("path", ["reference", "fused"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fully_masked_row_gives_zeros_not_nan_and_zero_gradient(path, dtype):
    q, k, v = (t.requires_grad_() for t in qkv(dtype))
    mask = random_mask()
    mask[0, 0, 2] = False  # query 2 of batch 0 may attend to nothing
    if path == "reference":
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        assert (weights[0, :, 2] == 0).all()
    else:
        out = fused_attention(q, k, v, mask)
    assert (out[0, :, 2] == 0).all() and not out.isnan().any()
    out.sum().backward()
    for t in (q, k, v):
        assert not t.grad.isnan().any()
    assert (q.grad[0, :, 2] == 0).all()


def test_the_fused_path_guards_against_a_kernel_that_gives_nan_for_an_empty_row(monkeypatch):
    """Older PyTorch gave NaN for a query row with no key (pytorch/pytorch#103963); torch 2.13 gives
    zeros, so the guard in fused_attention is tested against a stand-in kernel that does what the old
    ones did: softmax over a row of -inf."""
    def old_kernel(q, k, v, attn_mask=None, dropout_p=0.0, **kw):
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if attn_mask is not None:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        return scores.softmax(-1) @ v
    q, k, v = (t.requires_grad_() for t in qkv(torch.float64))
    mask = random_mask()
    mask[0, 0, 2] = False
    with torch.no_grad():           # the stand-in is what the guard must defend against
        assert old_kernel(q, k, v, attn_mask=mask)[0, :, 2].isnan().all()
    monkeypatch.setattr(F, "scaled_dot_product_attention", old_kernel)
    out = fused_attention(q, k, v, mask)
    assert (out[0, :, 2] == 0).all() and not out.isnan().any()
    out.sum().backward()
    assert not any(t.grad.isnan().any() for t in (q, k, v)) and (q.grad[0, :, 2] == 0).all()
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v, mask)[0])


def test_no_nan_under_bf16_autocast():
    q, k, v = qkv(torch.float32)
    mask = random_mask()
    mask[1, 0, 4] = False
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        fused = fused_attention(q, k, v, mask)
    assert weights.dtype == torch.float32  # softmax ran in float32
    assert not out.isnan().any() and not fused.isnan().any()
    assert (out[1, :, 4] == 0).all() and (fused[1, :, 4] == 0).all()
    ref, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out.float(), ref, atol=5e-2, rtol=5e-2)


def test_float16_scores_whose_raw_product_overflows_stay_finite():
    """q·k = 40·40·64 = 102400 passes float16's 65504, q·k/√64 = 12800 does not:
    scaling before the product keeps the weights finite, as torch's attention does."""
    from tf_tutorial.attention import grouped_query_attention
    from tf_tutorial.multihead import MultiHeadAttention

    q = torch.full((1, 1, 2, 64), 40.0, dtype=torch.float16)
    k = q * torch.tensor([1.0, -1.0], dtype=torch.float16)[:, None]
    v = torch.randn(1, 1, 2, 64, generator=torch.Generator().manual_seed(0)).half()
    assert (q @ k.mT).isinf().any()                      # the product itself overflows
    ref = F.scaled_dot_product_attention(q, k, v)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert weights.isfinite().all() and torch.equal(weights[0, 0, :, 0], torch.ones(2))
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grouped_query_attention(q, k, v), ref)
    mha = MultiHeadAttention(64, 1, bias=False).half()
    with torch.no_grad():
        for lin in (mha.w_q, mha.w_k, mha.w_v, mha.w_o):
            lin.weight.copy_(torch.eye(64))
    x = torch.cat([q[0, 0, :1], k[0, 0, 1:]])[None]     # (1, 2, 64): rows of +40 and −40
    slow, _ = mha(x, x, x, return_weights=True)
    assert slow.isfinite().all()
    torch.testing.assert_close(slow, mha(x, x, x))


def test_float16_scores_that_overflow_even_after_scaling_stay_finite():
    """q·k/√4 = 300·300·4/2 = 180000 passes 65504 too: the scores are computed in float32,
    as the fused kernels keep them, so asking for the weights cannot turn the output into NaN."""
    from tf_tutorial.attention import grouped_query_attention
    from tf_tutorial.flash import flash_attention
    from tf_tutorial.multihead import MultiHeadAttention

    q = torch.full((1, 1, 1, 4), 300.0, dtype=torch.float16)
    k = torch.cat([q, -q], dim=2)                                   # (1, 1, 2, 4)
    v = torch.randn(1, 1, 2, 4, generator=torch.Generator().manual_seed(0)).half()
    assert (q / 2 @ k.mT).isinf().all()                           # scaling first is not enough
    ref = F.scaled_dot_product_attention(q, k, v)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert torch.equal(weights, torch.tensor([[[[1.0, 0.0]]]])) and torch.equal(out, ref)
    assert torch.equal(grouped_query_attention(q, k, v), ref) and torch.equal(flash_attention(q, k, v), ref)
    mha = MultiHeadAttention(8, 2).half()
    x = torch.randn(1, 3, 8, generator=torch.Generator().manual_seed(1)).half() * 1000
    slow, _ = mha(x, x, x, return_weights=True)
    assert slow.isfinite().all()
    torch.testing.assert_close(slow, mha(x, x, x))                # the fused path's answer
    # under float16 autocast (chapter 10's T4 path) too: it would cast the product back to float16
    with torch.autocast("cpu", dtype=torch.float16):
        out, weights = scaled_dot_product_attention(q.float(), k.float(), v.float())
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert weights.dtype == torch.float32 and torch.equal(weights, torch.tensor([[[[1.0, 0.0]]]]))
    assert out.dtype == ref.dtype == torch.float16 and torch.equal(out, ref)


def test_gradcheck_float64():
    q, k, v = (t[:1, :1].clone().requires_grad_() for t in qkv())
    mask = random_mask()[:1]
    assert torch.autograd.gradcheck(lambda a, b, c: scaled_dot_product_attention(a, b, c, mask)[0],
                                    (q, k, v))


def test_scores_scale_by_sqrt_dk():
    q = torch.ones(1, 1, 16, dtype=torch.float64)
    k = torch.cat([torch.ones(1, 16), torch.zeros(1, 16)]).to(torch.float64)[None]
    _, w = scaled_dot_product_attention(q, k, k)
    # scores are 16/sqrt(16) = 4 and 0: weights e^4/(e^4+1) and 1/(e^4+1)
    expected = torch.softmax(torch.tensor([4.0, 0.0], dtype=torch.float64), -1)
    torch.testing.assert_close(w[0, 0], expected)


@pytest.mark.parametrize("make, pattern", [
    (lambda q, k, v: (q[..., :3], k, v, None), r"same last dimension d_k.*q \(2, 3, 5, 3\)"),
    (lambda q, k, v: (q, k, v[..., :4, :], None), r"same length S.*v \(2, 3, 4, 6\)"),
    (lambda q, k, v: (q, k, v, torch.ones(T, S)), r"mask must be boolean.*torch.float32"),
    (lambda q, k, v: (q, k, v, torch.ones(S, T, dtype=torch.bool)),
     r"mask of shape \(7, 5\) does not broadcast to the scores' shape \(2, 3, 5, 7\)"),
])
def test_bad_input(make, pattern):
    args = make(*qkv())
    for fn in (scaled_dot_product_attention, fused_attention):
        with pytest.raises(ValueError, match=pattern):
            fn(*args)


def test_inputs_that_are_not_tensors_get_a_type_error_naming_them():
    from tf_tutorial.attention import grouped_query_attention
    from tf_tutorial.flash import flash_attention
    q, k, v = qkv()
    nested = [[True] * S] * T
    for fn in (scaled_dot_product_attention, fused_attention, grouped_query_attention, flash_attention):
        with pytest.raises(TypeError, match="mask must be a boolean torch.Tensor.*but got list"):
            fn(q, k, v, nested)
        with pytest.raises(TypeError, match="k must be a torch.Tensor, but got list"):
            fn(q, k.tolist(), v)
    # the same mask as a tensor is accepted
    out = scaled_dot_product_attention(q, k, v, torch.tensor(nested))[0]
    torch.testing.assert_close(out, scaled_dot_product_attention(q, k, v)[0])


@pytest.mark.parametrize("shapes", [((3, 5, 4), (2, 7, 4), (2, 7, 6)),     # q's batch
                                    ((2, 5, 4), (2, 7, 4), (3, 7, 6)),     # k and v differ
                                    ((2, 3, 5, 4), (3, 2, 7, 4), (3, 2, 7, 6))])
def test_batch_dimensions_that_do_not_broadcast_are_named(shapes):
    from tf_tutorial.attention import grouped_query_attention
    from tf_tutorial.flash import flash_attention
    q, k, v = (torch.randn(s) for s in shapes)
    message = re.escape(f"q, k, v: the leading dimensions (...) must broadcast, but got shapes "
                        f"{shapes[0]}, {shapes[1]}, {shapes[2]}")
    for fn in (scaled_dot_product_attention, fused_attention, flash_attention):
        with pytest.raises(ValueError, match=message):
            fn(q, k, v)
    if q.dim() == 4:             # grouped: q's 3 heads against k's 2 is the other error
        q = torch.randn(2, 4, 5, 4)
        with pytest.raises(ValueError, match=re.escape("must broadcast, but got shapes (2, 4, 5, 4), "
                                                       "(3, 2, 7, 4), (3, 2, 7, 6)")):
            grouped_query_attention(q, k, v)
        with pytest.raises(ValueError, match="must broadcast"):
            fused_attention(q, k, v, enable_gqa=True)
    else:                        # a batch of 1 broadcasts, as in PyTorch's matmul
        q1 = torch.randn(1, 5, 4)
        for fn in (scaled_dot_product_attention, fused_attention, flash_attention):
            out = fn(q1, k, k)
            assert (out[0] if isinstance(out, tuple) else out).shape == (2, 5, 4)


def test_bad_mask_helpers():
    with pytest.raises(ValueError, match="length must be a positive integer, but got 0"):
        causal_mask(0)
    with pytest.raises(ValueError, match=r"tokens: expected token ids of shape \(B, S\), but got torch.int64 of shape \(4,\)"):
        padding_mask(torch.ones(4, dtype=torch.long), 0)
    with pytest.raises(TypeError, match="pad_id must be an integer token id, but got None"):
        padding_mask(torch.ones(2, 4, dtype=torch.long), None)
    with pytest.raises(TypeError, match="pad_id must be an integer token id, but got True"):
        padding_mask(torch.ones(2, 4, dtype=torch.long), True)    # not id 1


def test_causal_mask_takes_integers_only():
    import numpy as np
    assert causal_mask(np.int64(3)).shape == (3, 3)
    for bad in (2.5, True, "3"):
        with pytest.raises(ValueError, match=f"length must be a positive integer, but got {bad!r}"):
            causal_mask(bad)


@pytest.mark.parametrize("dtypes", [(torch.long,) * 3, (torch.float32, torch.float32, torch.float64)],
                         ids=["integers", "mixed"])
def test_integer_or_mixed_dtypes_are_refused(dtypes):
    q, k, v = (torch.ones(2, 3, 4).to(d) for d in dtypes)
    for fn in (scaled_dot_product_attention, fused_attention):
        with pytest.raises(ValueError, match="q, k, v must be floating point of one dtype, but got"):
            fn(q, k, v)


def test_a_one_dimensional_key_mask_works_on_both_paths():
    q, k, v = qkv()
    keep = torch.tensor([True, True, False, True, True, False, True])   # (S,)
    want, _ = scaled_dot_product_attention(q, k, v, keep.expand(q.shape[-2], -1))
    got, _ = scaled_dot_product_attention(q, k, v, keep)
    assert torch.allclose(got, want)
    assert torch.allclose(fused_attention(q, k, v, keep), want, atol=1e-6)


def test_readable_path_drops_attention_weights_and_rescales_the_rest():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, dtype=torch.float64) for _ in range(3))
    ref_out, ref_w = scaled_dot_product_attention(q, k, v)
    torch.manual_seed(1)
    out, w = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    dropped = w == 0
    assert dropped.any() and not dropped.all()
    torch.testing.assert_close(w[~dropped], 2 * ref_w[~dropped])     # kept weights / (1 - p)
    torch.testing.assert_close(out, w @ v)


@pytest.mark.parametrize("fn", [scaled_dot_product_attention, fused_attention])
@pytest.mark.parametrize("p", [-0.5, 1.0, True, "0.1"])
def test_dropout_p_outside_0_1_is_refused_by_name(fn, p):
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=rf"^dropout_p must be in \[0, 1\), but got {re.escape(repr(p))}$"):
        fn(q, q, q, dropout_p=p)


def test_inputs_without_a_length_and_a_width_are_refused():
    q = torch.randn(5)                                  # a bare vector: no (L, d) to attend over
    for fn in (scaled_dot_product_attention, fused_attention):
        with pytest.raises(ValueError, match=r"^q, k, v: expected at least 2 dimensions \(\.\.\., L, d\), "
                                             r"but got shapes \(5,\), \(5,\), \(5,\)$"):
            fn(q, q, q)


def test_a_mask_per_sentence_must_name_the_heads_dimension():
    """A (B, 1, S) padding mask against (B, H, T, S) scores broadcasts B onto the heads: when B == H
    nothing fails and each sentence is masked with another's padding. That is legal broadcasting
    (an (H, T, S) mask per head looks the same, and torch accepts it), so it computes what torch
    computes and warns with the fix; when B != H it cannot broadcast and is refused with the fix."""
    from tf_tutorial.attention import grouped_query_attention, padding_mask
    from tf_tutorial.flash import flash_attention
    tokens = torch.tensor([[5, 6, 7, 0], [5, 6, 0, 0]])          # B = 2
    q = torch.randn(2, 2, 4, 8)                                    # H = 2 = B
    q3 = torch.randn(2, 3, 4, 8)                                   # H = 3 != B
    fix = r"mask\[:, None\] has shape \(2, 1, 1, 4\)"
    for attend in (lambda q, m: scaled_dot_product_attention(q, q, q, m)[0],
                   lambda q, m: grouped_query_attention(q, q[:, :1], q[:, :1], m),
                   lambda q, m: flash_attention(q, q, q, m)):
        m = padding_mask(tokens, 0)
        with pytest.warns(UserWarning, match=fix):
            attend(q, m)
        with pytest.raises(ValueError, match=fix):
            attend(q3, m)
    with pytest.warns(UserWarning, match="meets dimension 1"):
        out, _ = scaled_dot_product_attention(q, q, q, padding_mask(tokens, 0))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, q, q, padding_mask(tokens, 0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # a mask per head said so: no warning
        scaled_dot_product_attention(q, q, q, padding_mask(tokens, 0)[None])
    _, w = scaled_dot_product_attention(q, q, q, padding_mask(tokens, 0)[:, None])
    assert (w[0, :, :, 3] == 0).all() and (w[1, :, :, 2:] == 0).all()
    assert (w[0, :, :, 2] > 0).all()                     # sentence 0's third word is real
    # a mask shared by every sentence still broadcasts: (T, S) and (1, T, S)
    for shared in (causal_mask(4), causal_mask(4)[None]):
        scaled_dot_product_attention(q, q, q, shared)


def test_causal_mask_refuses_a_second_length_in_the_place_of_device():
    # causal_mask(3, 5) read 5 as a device and failed deep inside torch
    with pytest.raises(TypeError, match=r"device must be .* but got 5; .*causal_mask\(S\)\[S - T:\]"):
        causal_mask(3, 5)
    assert causal_mask(3, "cpu").device.type == "cpu"
    assert causal_mask(3, torch.device("cpu")).shape == (3, 3)
