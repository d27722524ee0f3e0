"""Tests of chapter 12's rotary position embedding (tf_tutorial/rope.py)."""
import math

import pytest
import torch

from tf_tutorial.embedding import positional_encoding, shift_matrix
from tf_tutorial.rope import RotaryEmbedding, rope_angles, rotate

B, H, L, DK = 2, 3, 7, 12
F64 = torch.float64


def complex_reference(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Independent RoPE: pair i as z_i = x_{2i} + i·x_{2i+1}, multiplied by exp(i·m·θ_i)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=F64) / d)                   # (d/2,)
    angle = positions.to(F64)[:, None] * theta                                # (L, d/2)
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    turned = z * torch.polar(torch.ones_like(angle), angle)
    return torch.view_as_real(turned).flatten(-2)


def swap_pairs(d: int) -> torch.Tensor:
    """The permutation (0 1)(2 3)…: swaps the two entries of every adjacent pair."""
    return torch.arange(d).view(-1, 2).flip(-1).flatten()


def test_equals_complex_reference_float64():
    torch.manual_seed(0)
    x = torch.randn(B, H, L, DK, dtype=F64)
    pos = torch.tensor([0, 1, 5, 17, 300, 1000, 2047])
    torch.testing.assert_close(rotate(x, pos), complex_reference(x, pos), atol=1e-12, rtol=0)
    # Far positions: the angle m·θ_i ≈ 1e5 carries the last-bit difference between the two ways of
    # computing θ_i (exp/log here, ** in the reference) times m, so allow 1e-9 there.
    far = torch.tensor([100_000, 65_536, 4095, 8191, 10**6, 3, 12_345])
    torch.testing.assert_close(rotate(x, far), complex_reference(x, far), atol=1e-9, rtol=0)
    torch.testing.assert_close(rotate(x, pos, base=500.0), complex_reference(x, pos, 500.0),
                               atol=1e-12, rtol=0)
    assert not torch.allclose(rotate(x, pos, base=500.0), rotate(x, pos), atol=1e-3)


def test_rope_angles_shape_dtype_and_values():
    pos = torch.arange(L)
    a = rope_angles(pos, DK)
    assert a.shape == (L, DK // 2) and a.dtype == torch.float32
    a64 = rope_angles(pos, DK, dtype=F64)
    assert a64.dtype == F64
    theta = 10000.0 ** (-torch.arange(0, DK, 2, dtype=F64) / DK)
    torch.testing.assert_close(a64, pos[:, None].double() * theta, atol=1e-12, rtol=0)
    assert rope_angles(torch.zeros(B, L, dtype=torch.long), DK).shape == (B, L, DK // 2)
    assert rope_angles(range(3), 4).shape == (3, 2)


def test_score_depends_only_on_offset():
    """⟨R_m q, R_n k⟩ is the same for every (m, m + Δ) and equals ⟨q, R_Δ k⟩; offsets differ."""
    torch.manual_seed(1)
    q, k = torch.randn(8, dtype=F64), torch.randn(8, dtype=F64)
    n_pos = 40
    pos = torch.arange(n_pos)
    qs = rotate(q.expand(n_pos, 8), pos)                                      # row m = R_m q
    ks = rotate(k.expand(n_pos, 8), pos)                                      # row n = R_n k
    scores = qs @ ks.T                                                        # [m, n]
    per_offset = []
    for delta in range(-(n_pos - 1), n_pos):
        diag = torch.diagonal(scores, offset=delta)                           # all (m, m + Δ)
        direct = q @ rotate(k[None], [delta])[0]                              # ⟨q, R_Δ k⟩
        assert (diag - direct).abs().max() < 1e-10, delta
        per_offset.append(direct)
    values = torch.stack(per_offset).sort().values
    assert values.diff().min() > 1e-6, "different offsets must give different scores"
    # Chapter 2's additive encoding does not have this property: (q + P_m)·(k + P_n) moves along a diagonal.
    pe = positional_encoding(n_pos, 8).double()
    additive = (q + pe) @ (k + pe).T
    assert torch.diagonal(additive, offset=3).std() > 1e-2


def test_norm_preserved_identity_at_zero_and_composition():
    torch.manual_seed(2)
    x = torch.randn(B, L, DK, dtype=F64)
    m = torch.tensor([0, 3, -4, 50, 999, 7, 12])
    n = torch.tensor([5, -3, 8, 1, 1, 100, 2000])
    torch.testing.assert_close(rotate(x, m).norm(dim=-1), x.norm(dim=-1), atol=1e-12, rtol=0)
    assert torch.equal(rotate(x, torch.zeros(L, dtype=torch.long)), x)
    torch.testing.assert_close(rotate(rotate(x, m), n), rotate(x, m + n), atol=1e-12, rtol=0)
    torch.testing.assert_close(rotate(rotate(x, m), -m), x, atol=1e-12, rtol=0)
    assert (rotate(x, m) - x)[:, 1:].abs().max() > 0.1


def test_numpy_positions_are_positions():
    import numpy as np
    x = torch.randn(2, 5, 8)
    assert torch.equal(rotate(x, np.arange(5)), rotate(x, torch.arange(5)))
    assert torch.equal(rotate(x, np.arange(3, 8, dtype=np.int32)), rotate(x, torch.arange(3, 8)))
    with pytest.raises(ValueError, match=r"^positions must be integers, but got dtype torch.float64$"):
        rotate(x, np.arange(5.0))


def test_positions_broadcast_over_leading_dimensions():
    torch.manual_seed(3)
    x = torch.randn(B, H, L, DK, dtype=F64)
    per_row = torch.randint(0, 100, (B, 1, L))                                # e.g. per-sequence offsets
    out = rotate(x, per_row)
    for b in range(B):
        torch.testing.assert_close(out[b], rotate(x[b], per_row[b, 0]), atol=0, rtol=0)
    torch.testing.assert_close(rotate(x, list(range(L))), rotate(x, torch.arange(L)), atol=0, rtol=0)
    torch.testing.assert_close(rotate(x, range(L)), rotate(x, torch.arange(L)), atol=0, rtol=0)


def test_positions_per_sentence_on_heads_even_when_batch_equals_heads():
    """Positions (B, L) on x (B, H, L, d_k) are per sentence, as position_ids are. Broadcast
    plainly, they lined up with the heads: with B == H, head h of every sentence silently got
    sentence h's positions."""
    torch.manual_seed(4)
    x = torch.randn(2, 2, L, DK, dtype=F64)
    pos = torch.stack([torch.arange(L), torch.arange(L) + 10])               # (B, L)
    out = rotate(x, pos)
    for b in range(2):
        for h in range(2):
            torch.testing.assert_close(out[b, h], rotate(x[b, h], pos[b]), atol=0, rtol=0)
    torch.testing.assert_close(out, rotate(x, pos[:, None, :]), atol=0, rtol=0)
    # a third sentence's positions for two sentences: an error, not a broadcast over heads
    with pytest.raises(ValueError, match=r"positions of shape \(3, 7\), read as \(3, 1, 7\)"):
        rotate(torch.randn(2, 3, L, DK), torch.zeros(3, L, dtype=torch.long))


def test_link_to_chapter_2_table():
    """The exact relation between rotate and chapter 2 (P = positional_encoding, R = shift_matrix).

    Chapter 2 lays each pair out as (sin mω_i, cos mω_i) and moves it forward with
    R_i(Δ) = [[cos, sin], [−sin, cos]], a clockwise turn. RoPE's block turns counter-clockwise
    (x_{2i} cos − x_{2i+1} sin, x_{2i} sin + x_{2i+1} cos). Same frequencies (θ_i = ω_i, base 10000),
    opposite sense in that layout, so:

    1. as matrices, rotate(·, m) = R(m)ᵀ = R(−m), i.e. shift_matrix(-m, d);
    2. on chapter 2's rows, rotate(P[m + Δ], Δ) = P[m]  (rotating by +Δ steps the table BACK);
    3. with each pair swapped to (cos mω_i, sin mω_i), Q = P[:, swap], rotate(Q[0], m) = Q[m] for all m,
       Q[0] = (1, 0, 1, 0, …): RoPE's R_m is S R(m) S with S the pair swap.
    """
    d, n = 16, 60
    for m in (1, 7, 100, 999):
        as_matrix = rotate(torch.eye(d, dtype=F64), [m] * d).T                # column j = R_m e_j
        torch.testing.assert_close(as_matrix, shift_matrix(m, d).T, atol=1e-12, rtol=0)
        torch.testing.assert_close(as_matrix, shift_matrix(-m, d), atol=1e-12, rtol=0)
        swap = swap_pairs(d)
        torch.testing.assert_close(as_matrix, shift_matrix(m, d)[swap][:, swap], atol=1e-12, rtol=0)
        assert not torch.allclose(as_matrix, shift_matrix(m, d), atol=1e-3)   # not R(m) itself

    table = positional_encoding(n, d).double()                                # (n, d), float32 values
    for delta in (1, 5, 23):
        back = rotate(table[delta:], [delta] * (n - delta))
        torch.testing.assert_close(back, table[:-delta], atol=1e-6, rtol=0)
        assert (rotate(table[:-delta], [delta] * (n - delta)) - table[delta:]).abs().max() > 0.1

    swapped = table[:, swap_pairs(d)]                                         # pairs (cos mω, sin mω)
    assert torch.equal(swapped[0], torch.tensor([1.0, 0.0] * (d // 2), dtype=F64))
    torch.testing.assert_close(rotate(swapped[0].expand(n, d), torch.arange(n)), swapped, atol=1e-6, rtol=0)


def test_rotary_embedding_equals_rotate_with_shifted_positions():
    torch.manual_seed(4)
    rope = RotaryEmbedding(DK, max_len=64)
    for dtype in (torch.float32, F64):
        x = torch.randn(B, H, L, DK, dtype=dtype)
        for start in (0, 9, 64 - L):
            expected = rotate(x, torch.arange(start, start + L))
            torch.testing.assert_close(rope(x, start=start), expected, atol=0, rtol=0)
    x = torch.randn(B, H, L, DK, dtype=F64)
    assert not torch.allclose(rope(x, start=1), rope(x), atol=1e-3)
    assert rope.state_dict() == {}                                            # non-persistent tables
    base = RotaryEmbedding(DK, max_len=64, base=500.0)
    torch.testing.assert_close(base(x, 3), rotate(x, torch.arange(3, 3 + L), base=500.0), atol=0, rtol=0)


def test_cached_decoding_one_key_at_a_time():
    torch.manual_seed(5)
    rope = RotaryEmbedding(DK, max_len=32)
    keys = torch.randn(B, H, 9, DK)
    cached = torch.cat([rope(keys[:, :, t:t + 1], start=t) for t in range(9)], dim=-2)
    torch.testing.assert_close(cached, rope(keys), atol=0, rtol=0)
    q_last = torch.randn(B, H, 1, DK)                                          # new query at position 8
    full_q = torch.cat([torch.randn(B, H, 8, DK), q_last], dim=-2)
    scores_step = rope(q_last, start=8) @ cached.transpose(-2, -1)
    scores_full = (rope(full_q) @ rope(keys).transpose(-2, -1))[:, :, -1:]
    torch.testing.assert_close(scores_step, scores_full)


def test_low_precision_in_and_out():
    torch.manual_seed(6)
    x = torch.randn(B, H, L, DK)
    pos = torch.arange(100, 100 + L)
    ref = rotate(x, pos)
    rope = RotaryEmbedding(DK, max_len=256).to(torch.bfloat16)
    assert rope.cos.dtype == F64 and rope.sin.dtype == F64                  # tables keep their precision
    for dtype in (torch.bfloat16, torch.float16):
        out = rotate(x.to(dtype), pos)
        assert out.dtype == dtype
        torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=1e-2)
        torch.testing.assert_close(rope(x.to(dtype), start=100), out, atol=0, rtol=0)


def test_built_on_meta_then_filled_by_to_empty():
    """The standard way to build a big model without memory: on 'meta', then to_empty(). The
    tables were only moved, and a meta tensor has no data (an outside probe)."""
    with torch.device("meta"):
        rope = RotaryEmbedding(DK, max_len=64)
    assert rope.cos.is_meta
    rope.to_empty(device="cpu")
    ref = RotaryEmbedding(DK, max_len=64)
    assert rope.cos.dtype == rope.sin.dtype == F64
    assert torch.equal(rope.cos, ref.cos) and torch.equal(rope.sin, ref.sin)
    assert not rope.state_dict()                                  # the tables are not saved
    x = torch.randn(B, H, L, DK)
    torch.testing.assert_close(rope(x, start=5), rotate(x, torch.arange(5, 5 + L)))


def test_gradcheck_float64():
    x = torch.randn(2, 3, 6, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: rotate(t, torch.tensor([0, 4, 31])), (x,))


def test_bad_input():
    x = torch.randn(2, 5, 8)
    for width in (7, 0):
        with pytest.raises(ValueError, match=f"^rotate: the last dimension must be even and positive, but got {width} "):
            rotate(torch.randn(2, 5, width), torch.arange(5))
    with pytest.raises(ValueError, match=r"length 4.*L=5"):
        rotate(x, torch.arange(4))
    with pytest.raises(ValueError, match="base must be positive, but got 0"):
        rotate(x, torch.arange(5), base=0)
    with pytest.raises(ValueError, match="base must be positive"):
        rotate(x, torch.arange(5), base=-2.0)
    with pytest.raises(ValueError, match="positions must be integers, but got dtype torch.float32"):
        rotate(x, torch.arange(5.0))
    with pytest.raises(ValueError, match="positions must be an integer tensor or a sequence of ints"):
        rotate(x, 3)
    rope = RotaryEmbedding(8, max_len=16)
    with pytest.raises(ValueError, match=r"positions 12\.\.16 are outside 0\.\.15 \(max_len=16"):
        rope(x, start=12)
    with pytest.raises(ValueError, match=r"positions -1\.\.3"):
        rope(x, start=-1)
    for bad in (True, 2.0, "2"):            # True started at 1
        with pytest.raises(TypeError, match=rf"^start must be an integer, but got {bad!r}$"):
            rope(x, start=bad)
    with pytest.raises(ValueError, match=r"expected shape \(\.\.\., L, 8\)"):
        rope(torch.randn(2, 5, 6))
    for head_dim in (7, 0, 8.0, True):
        with pytest.raises(ValueError, match=rf"^head_dim must be a positive even integer \(pairs\), but got {head_dim!r}$"):
            RotaryEmbedding(head_dim)
    with pytest.raises(ValueError, match="^max_len must be a positive integer, but got 0$"):
        RotaryEmbedding(8, max_len=0)
    assert rope(x, start=11).shape == x.shape                                  # the last allowed start
    assert not math.isnan(rotate(x, torch.arange(5)).sum().item())


def test_low_precision_rotates_in_float32_and_rounds_once():
    """bf16 input: the rotation is computed in float32 and rounded once at the end, so it
    equals rotating the float32 copy; at far positions bf16 maths would differ visibly."""
    from tf_tutorial.rope import rotate
    torch.manual_seed(0)
    x = torch.randn(2, 50, 8).to(torch.bfloat16)
    pos = torch.arange(1000, 1050)
    assert torch.equal(rotate(x, pos), rotate(x.float(), pos).to(torch.bfloat16))


def test_integer_vectors_are_refused_not_truncated():
    """float32 inside, then back to x's dtype: an int64 x came back as rounded garbage."""
    with pytest.raises(ValueError, match="^rotate: x must be floating point, but got dtype torch.int64"):
        rotate(torch.tensor([[3, 4], [3, 4]]), [0, 1])


def test_a_single_vector_is_told_it_has_no_row_dimension():
    # the message said "(L=none) ... a shape broadcastable to ()"
    with pytest.raises(ValueError, match=r"x has no L dimension: give it as \(\.\.\., L, d_k\), e\.g\. x\[None\]"):
        rotate(torch.randn(4), [0])
    with pytest.raises(ValueError, match=r"one position per row \(L=3\), a shape broadcastable to \(3,\)"):
        rotate(torch.randn(3, 4), [0, 1])
    assert rotate(torch.randn(4)[None], [0]).shape == (1, 4)


@pytest.mark.parametrize("base, message", [(math.inf, "finite, but got inf"), (-1.0, "positive, but got -1.0"),
                                           (0.0, "positive, but got 0.0"), (math.nan, "positive, but got nan")])
def test_an_infinite_or_non_positive_base_is_refused_by_name(base, message):
    # base = inf made θ₀ = exp(-inf · 0) NaN: every rotated pair came out NaN
    with pytest.raises(ValueError, match=f"^base must be {message}$"):
        rotate(torch.randn(3, 4), [0, 1, 2], base=base)
    with pytest.raises(ValueError, match=f"^base must be {message}$"):
        RotaryEmbedding(4, 8, base=base)


@pytest.mark.parametrize("base, message", [(math.inf, "finite, but got inf"), (-1.0, "positive, but got -1.0")])
def test_gpt_config_names_rope_base(base, message):
    from tf_tutorial.gpt import GPTConfig
    with pytest.raises(ValueError, match=f"^rope_base must be {message}$"):
        GPTConfig(11, d_model=16, n_heads=4, n_layers=1, d_ff=32,
                  positions="rope", rope_base=base)


def test_a_symbolic_start_from_torch_export_is_accepted():
    """torch.export (non-strict) hands RoPE the cache length as a torch.SymInt, which is not a numbers.Integral:
    the start check must let it through, as it did before the check existed."""
    rope = RotaryEmbedding(8, 64)

    class AfterCache(torch.nn.Module):
        def forward(self, x, past):
            return rope(x, past.shape[0])

    x, past = torch.randn(2, 4, 8), torch.zeros(5)
    program = torch.export.export(AfterCache(), (x, past), strict=False,
                                  dynamic_shapes=({}, {0: torch.export.Dim("t", min=2, max=50)}))
    torch.testing.assert_close(program.module()(x, torch.zeros(9)), rope(x, 9))
