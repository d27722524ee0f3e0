"""Tests for ``tf_tutorial.flash`` (chapter 12): tiled attention with the online softmax."""
import re

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from tf_tutorial.attention import scaled_dot_product_attention
from tf_tutorial.flash import flash_attention, online_softmax_step

B, H, d_k, d_v = 2, 3, 4, 6


def qkv(L, S, dtype=torch.float64, seed=0, batch=(B, H)):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*batch, L, d_k, generator=g, dtype=dtype),
            torch.randn(*batch, S, d_k, generator=g, dtype=dtype),
            torch.randn(*batch, S, d_v, generator=g, dtype=dtype))


def random_mask(shape, seed=1):
    """Boolean mask; key 0 always allowed, so every row keeps a key (older F.sdpa gave NaN there)."""
    m = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.4
    m[..., 0] = True
    return m


def allowed(mask, causal, L, S):
    """The (…, L, S) boolean mask that ``mask`` and ``causal`` mean together (None if neither)."""
    # top-left aligned, as F.scaled_dot_product_attention(is_causal=True): tril of an (L, S) ones
    tril = torch.ones(L, S, dtype=torch.bool).tril() if causal else None
    if mask is None:
        return tril
    return mask if tril is None else mask & tril


CASES = {  # name: (L, S, block_size, mask shape or None, causal)
    "plain": (16, 16, 4, None, False),
    "causal": (16, 16, 4, None, True),
    "mask_B1LS": (16, 16, 4, (B, 1, 16, 16), False),
    "mask_LS": (16, 16, 4, (16, 16), False),
    "padding_B11S": (16, 16, 4, (B, 1, 1, 16), False),
    "causal_and_mask": (16, 16, 4, (B, 1, 16, 16), True),
    "ragged_blocks": (13, 29, 8, None, False),
    "ragged_causal_mask": (13, 29, 8, (B, 1, 13, 29), True),
    "block_larger_than_L": (13, 29, 64, (13, 29), True),
    "L_lt_S_causal": (5, 19, 3, None, True),
    "L_gt_S_causal": (19, 5, 3, None, True),
    "L_ne_S_mask": (5, 19, 4, (5, 19), False),
    "block_1": (6, 7, 1, (6, 7), True),
}


@pytest.mark.parametrize("name", CASES)
def test_equals_torch_sdpa_and_chapter3_in_float64(name):
    L, S, block_size, mask_shape, causal = CASES[name]
    q, k, v = qkv(L, S)
    mask = None if mask_shape is None else random_mask(mask_shape)
    out = flash_attention(q, k, v, mask=mask, causal=causal, block_size=block_size)
    assert out.shape == (B, H, L, d_v) and out.dtype == torch.float64
    if mask is None:  # F.sdpa(is_causal=True) is top-left aligned for L != S too (see next test)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    else:
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed(mask, causal, L, S))
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    ch3, _ = scaled_dot_product_attention(q, k, v, allowed(mask, causal, L, S))
    torch.testing.assert_close(out, ch3, atol=1e-12, rtol=0)


@pytest.mark.parametrize("L, S", [(5, 19), (19, 5)])
def test_torch_is_causal_is_top_left_aligned(L, S):
    """The convention ``causal=True`` copies: query i sees keys j <= i, also when L != S."""
    q, k, v = qkv(L, S)
    tril = torch.ones(L, S, dtype=torch.bool).tril()
    torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=tril))


def test_batch_dims_broadcast_and_no_batch():
    q, k, v = qkv(7, 9, batch=(2, 3))
    out = flash_attention(q, k[:1], v[:1], block_size=4)       # k, v broadcast over the batch
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k[:1], v[:1]),
                               atol=1e-12, rtol=0)
    q, k, v = qkv(7, 9, batch=())
    out = flash_attention(q, k, v, causal=True, block_size=3)
    assert out.shape == (7, d_v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               atol=1e-12, rtol=0)


def test_causal_output_ignores_future_keys():
    q, k, v = qkv(12, 12)
    out = flash_attention(q, k, v, causal=True, block_size=5)
    k2, v2 = k.clone(), v.clone()
    k2[..., 7:, :] += 10.0
    v2[..., 7:, :] -= 3.0
    out2 = flash_attention(q, k2, v2, causal=True, block_size=5)
    torch.testing.assert_close(out2[..., :7, :], out[..., :7, :], atol=0, rtol=0)
    assert not torch.allclose(out2[..., 7:, :], out[..., 7:, :])


@pytest.mark.parametrize("splits", [[10], [1] * 10, [3, 7], [4, 4, 2], [9, 1], [2, 5, 3]])
def test_online_softmax_recurrence_on_one_row(splits):
    g = torch.Generator().manual_seed(3)
    s = torch.randn(1, 10, generator=g, dtype=torch.float64) * 1000  # exp(s) alone overflows
    s[0, [0, 1, 6]] = -torch.inf                                     # masked keys
    v = torch.randn(10, 3, generator=g, dtype=torch.float64)
    m = torch.full((1, 1), -torch.inf, dtype=torch.float64)
    l, acc = torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 3, dtype=torch.float64)
    start = 0
    for n in splits:
        m, l, acc = online_softmax_step(m, l, acc, s[:, start:start + n], v[start:start + n])
        start += n
        seen = s[:, :start]
        assert not (torch.isnan(l).any() or torch.isnan(acc).any())
        assert m.item() == seen.max().item()
        if m.item() > -torch.inf:  # the invariant: l = Σ exp(s − m) over the keys seen so far
            torch.testing.assert_close(l, torch.exp(seen - m).sum(-1, keepdim=True))
    torch.testing.assert_close(acc / l, torch.softmax(s, dim=-1) @ v, atol=1e-12, rtol=0)
    assert torch.isinf(torch.exp(s.max())), "the test should need the shift m"


def empty_rows_case(L=9, S=11):
    """q, k, v in float32 and a mask whose rows 2 and 5 are empty, row 7 empty only with causal."""
    q, k, v = qkv(L, S, dtype=torch.float32)
    mask = random_mask((B, 1, L, S))
    mask[..., [2, 5], :] = False
    mask[..., 7, :] = False
    mask[..., 7, 8:] = True          # keys 8.. are in row 7's future: causal empties the row
    return q, k, v, mask, [2, 5, 7]


@pytest.mark.parametrize("mode", ["float32", "bf16_inputs", "bf16_autocast"])
def test_fully_masked_rows_give_zeros_not_nan(mode):
    q, k, v, mask, empty = empty_rows_case()
    ref, _ = scaled_dot_product_attention(q.double(), k.double(), v.double(), allowed(mask, True, 9, 11))
    if mode == "bf16_inputs":
        out = flash_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, causal=True, block_size=4)
        assert out.dtype == torch.bfloat16
    elif mode == "bf16_autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = flash_attention(q, k, v, mask, causal=True, block_size=4)
        assert out.dtype == torch.float32
    else:
        out = flash_attention(q, k, v, mask, causal=True, block_size=4)
    assert not torch.isnan(out).any()
    assert (out[..., empty, :] == 0).all()
    tol = 1e-5 if mode == "float32" else 5e-2
    torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)
    assert ref[..., 0, :].abs().max() > 0.1  # the other rows are not trivially zero


@pytest.mark.parametrize("causal, use_mask", [(False, False), (True, False), (False, True), (True, True)])
def test_gradcheck(causal, use_mask):
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, n, 4, generator=g, dtype=torch.float64, requires_grad=True)
               for n in (5, 7, 7))
    mask = None
    if use_mask:
        mask = torch.rand(2, 5, 7, generator=g) > 0.4
        mask[0, 1] = False   # one fully masked row: its zero output must have zero gradient
    f = lambda q, k, v: flash_attention(q, k, v, mask=mask, causal=causal, block_size=3)  # noqa: E731
    assert torch.autograd.gradcheck(f, (q, k, v))


class ShapeRecorder(TorchDispatchMode):
    """Records, for every aten op, its name, output shape and the bytes of the output's storage."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else [out]):
            if isinstance(t, torch.Tensor):
                self.ops.append((str(func.overloadpacket), tuple(t.shape),
                                 t.untyped_storage().nbytes()))
        return out


def record(fn, *args, **kwargs):
    with torch.no_grad(), ShapeRecorder() as rec:
        fn(*args, **kwargs)
    return rec.ops


@pytest.mark.parametrize("causal", [False, True])
def test_never_allocates_an_L_by_S_tensor(causal):
    L = S = 1024
    block = 64
    q, k, v = qkv(L, S, dtype=torch.float32, batch=(1,))
    mask = random_mask((1, 1, S))    # padding-style: broadcast to (1, L, S) only as a view
    ops = record(flash_attention, q, k, v, mask=mask, causal=causal, block_size=block)
    biggest = max(nbytes for _, _, nbytes in ops)
    assert biggest <= 4 * L * max(d_k, d_v), f"an op allocated {biggest} bytes (L*S*4 = {L * S * 4})"
    products = [shape for name, shape, _ in ops if name in ("aten.mm", "aten.bmm")]
    assert products and all(max(shape[-2:]) <= block for shape in products)
    n = L // block   # two products per tile (Q K^T and P V); causal skips the future tiles
    assert len(products) == 2 * (n * (n + 1) // 2 if causal else n * n)
    # the recorder does see an L×S score matrix where one is made: chapter 3's reference
    ref_ops = record(scaled_dot_product_attention, q, k, v, mask)
    assert max(nbytes for _, _, nbytes in ref_ops) >= L * S * 4


@pytest.mark.parametrize("block_size", [0, -1, 2.5, True])
def test_bad_block_size(block_size):
    q, k, v = qkv(5, 7)
    with pytest.raises(ValueError, match=re.escape(f"block_size must be a positive integer, but got "
                                                   f"{block_size!r}")):
        flash_attention(q, k, v, block_size=block_size)


def test_bad_shapes_and_masks_read_as_chapter_3():
    q, k, v = qkv(5, 7)
    with pytest.raises(ValueError, match=re.escape("mask must be boolean (True = may attend), but got "
                                                   "dtype torch.float32")):
        flash_attention(q, k, v, mask=torch.ones(5, 7))
    with pytest.raises(ValueError, match=r"mask of shape \(6, 7\) does not broadcast to the scores' "
                                         r"shape \(2, 3, 5, 7\)"):
        flash_attention(q, k, v, mask=torch.ones(6, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match="q and k must have the same last dimension d_k"):
        flash_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="k and v must have the same length S"):
        flash_attention(q, k, v[..., :6, :])


def test_no_queries_give_an_empty_output_as_the_reference_does():
    k = torch.randn(2, 3, 4, dtype=torch.float64)
    for causal in (False, True):
        out = flash_attention(torch.randn(2, 0, 4, dtype=torch.float64), k, k[..., :2], causal=causal)
        assert out.shape == (2, 0, 2) and out.dtype == torch.float64
    ref, _ = scaled_dot_product_attention(torch.randn(2, 0, 4), k.float(), k.float())
    assert ref.shape == (2, 0, 4)


@pytest.mark.parametrize("length, block", [(1024, 64), (100, 16), (16, 16), (5, 8), (0, 4)])
def test_causal_tiles_counts_the_tiles_the_causal_loop_computes(monkeypatch, length, block):
    import tf_tutorial.flash as flash_module
    from tf_tutorial.flash import causal_tiles
    calls, step = [], flash_module.online_softmax_step
    monkeypatch.setattr(flash_module, "online_softmax_step", lambda *a: calls.append(1) or step(*a))
    q = torch.randn(1, 1, length, 2)
    flash_module.flash_attention(q, q, q, causal=True, block_size=block)
    assert len(calls) == causal_tiles(length, block)
    n = -(-length // block)
    assert causal_tiles(length, block) < n * n or n <= 1      # the future blocks are skipped
