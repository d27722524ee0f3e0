import math
import re

import pytest
import torch

from tf_tutorial.attention import scaled_dot_product_attention
from tf_tutorial.embedding import (LearnedPositionalEncoding, SinusoidalPositionalEncoding,
                                   TokenEmbedding, positional_encoding, shift_matrix)

B, L, D, V = 2, 7, 12, 11


def test_table_matches_the_formula():
    pe = positional_encoding(50, D)
    assert pe.shape == (50, D) and pe.dtype == torch.float32
    for pos, i in [(0, 0), (3, 1), (17, 4), (49, 5)]:
        angle = pos / 10000 ** (2 * i / D)
        assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
        assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_bounded_in_minus_one_one():
    pe = positional_encoding(2000, 64)
    assert pe.abs().max() <= 1.0
    # each (sin, cos) pair is a point on the unit circle: every row has norm sqrt(D/2)
    torch.testing.assert_close(pe.norm(dim=-1), torch.full((2000,), 32 ** 0.5))


@pytest.mark.parametrize("k", [1, 5, 37])
def test_shift_is_one_linear_map_for_every_position(k):
    pe = positional_encoding(300, D).double()
    m = shift_matrix(k, D)
    torch.testing.assert_close(pe[k:], pe[:-k] @ m.T, atol=1e-6, rtol=0)
    torch.testing.assert_close(m @ m.T, torch.eye(D, dtype=torch.float64))  # a rotation


@pytest.mark.parametrize("k, error", [("a", TypeError), (True, TypeError), (None, TypeError),
                                      (float("nan"), ValueError), (float("inf"), ValueError)])
def test_a_shift_that_is_not_a_finite_number_is_refused_by_name(k, error):
    with pytest.raises(error, match=f"^k must be a finite number, but got {re.escape(repr(k))}$"):
        shift_matrix(k, D)


def test_a_shift_may_be_negative_or_fractional():
    from fractions import Fraction
    torch.testing.assert_close(shift_matrix(-3, D), shift_matrix(3, D).T)        # the inverse rotation
    torch.testing.assert_close(shift_matrix(0.5, D) @ shift_matrix(0.5, D), shift_matrix(1, D))
    for same in (Fraction(1, 2), torch.tensor(0.5)):                           # any real number, 0-d too
        torch.testing.assert_close(shift_matrix(same, D), shift_matrix(0.5, D))
    with pytest.raises(ValueError, match=r"^k must be a finite number, but got 1000"):
        shift_matrix(10 ** 400, D)                                            # too large for a float


def test_without_positions_attention_is_permutation_equivariant():
    torch.manual_seed(0)
    x = torch.randn(1, L, D, dtype=torch.float64)
    perm = torch.randperm(L)
    out = scaled_dot_product_attention(x, x, x)[0]
    out_perm = scaled_dot_product_attention(x[:, perm], x[:, perm], x[:, perm])[0]
    torch.testing.assert_close(out_perm, out[:, perm])
    pe = SinusoidalPositionalEncoding(D, max_len=L).double()
    y, y_perm = pe(x), pe(x[:, perm])
    out = scaled_dot_product_attention(y, y, y)[0]
    out_perm = scaled_dot_product_attention(y_perm, y_perm, y_perm)[0]
    assert not torch.allclose(out_perm, out[:, perm])


def test_modules_add_the_positions():
    x = torch.zeros(B, L, D)
    torch.testing.assert_close(SinusoidalPositionalEncoding(D, 20)(x)[0], positional_encoding(L, D))
    learned = LearnedPositionalEncoding(D, 20)
    torch.testing.assert_close(learned(x)[1], learned.table[:L])
    assert learned.table.requires_grad
    assert not any(p.requires_grad for p in SinusoidalPositionalEncoding(D, 20).parameters())


def test_positions_beyond_the_table_are_refused():
    for module in (SinusoidalPositionalEncoding(D, max_len=6), LearnedPositionalEncoding(D, 6)):
        with pytest.raises(ValueError, match=f"sequence length 7 exceeds max_len=6 of {type(module).__name__}"):
            module(torch.zeros(B, L, D))
    with pytest.raises(ValueError, match=r"x: expected shape \(B, L, 12\), but got \(2, 7, 10\)"):
        SinusoidalPositionalEncoding(D, 20)(torch.zeros(B, L, 10))


def test_token_embedding_scale_and_lookup():
    torch.manual_seed(0)
    emb = TokenEmbedding(1000, 256)
    tokens = torch.arange(1000)[None]
    out = emb(tokens)
    one_hot = torch.nn.functional.one_hot(tokens, 1000).float()
    torch.testing.assert_close(out, one_hot @ emb.table.weight * 16.0)  # lookup = one-hot × matrix
    assert emb.table.weight.norm(dim=-1).mean().item() == pytest.approx(1.0, abs=0.05)
    assert out.norm(dim=-1).mean().item() == pytest.approx(16.0, rel=0.05)


def test_eval_determinism_and_bad_input():
    emb = TokenEmbedding(V, D).eval()
    t = torch.randint(V, (B, L))
    torch.testing.assert_close(emb(t), emb.table.weight[t] * D ** 0.5, rtol=0, atol=0)   # a lookup, scaled
    with pytest.raises(ValueError, match="token id 11 is out of range for vocab_size=11"):
        emb(torch.tensor([[1, 11]]))
    for dtype in (torch.float32, torch.int16, torch.bool):
        with pytest.raises(ValueError, match=f"tokens must be int64 or int32 ids, but got dtype {dtype}$"):
            emb(torch.ones(B, L, dtype=dtype))
    pe = SinusoidalPositionalEncoding(D, 10)
    for bad in (-1, 0.5, True, None):
        with pytest.raises(ValueError, match=f"^start must be an integer >= 0, but got {bad!r}$"):
            pe(torch.zeros(1, 4, D), start=bad)
    with pytest.raises(ValueError, match="d_model must be a positive integer, but got 0"):
        positional_encoding(10, 0)
    with pytest.raises(ValueError, match="max_len must be a positive integer, but got 0"):
        positional_encoding(0, 8)
    with pytest.raises(ValueError, match="d_model must be even for the shift matrix.*but got 7"):
        shift_matrix(1, 7)


def test_odd_d_model_ends_with_a_lone_sine():
    # the paper's formula is defined for every column j: sin for even j,
    # cos for odd j, both at frequency 10000^(-2*(j//2)/D)
    D = 7
    pe = positional_encoding(12, D)
    assert pe.shape == (12, D) and pe.dtype == torch.float32
    for pos in (0, 1, 5, 11):
        for j in range(D):
            angle = pos / 10000 ** (2 * (j // 2) / D)
            want = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert pe[pos, j].item() == pytest.approx(want, abs=1e-6)
    assert SinusoidalPositionalEncoding(D, max_len=12)(torch.zeros(2, 12, D)).shape == (2, 12, D)


def test_token_embedding_starts_at_variance_one_over_d_not_torch_default():
    # chapter 2 states this: N(0, 1/D), unlike nn.Embedding's N(0, 1)
    torch.manual_seed(1)
    emb = TokenEmbedding(2000, 256)
    assert emb.table.weight.std().item() == pytest.approx(256 ** -0.5, rel=0.02)
    assert torch.nn.Embedding(2000, 256).weight.std().item() == pytest.approx(1.0, rel=0.02)
    # after the sqrt(D) factor a row is about sqrt(2) times a PE row (norm sqrt(D/2))
    ratio = emb(torch.arange(2000)[None]).norm(dim=-1).mean() / 128 ** 0.5
    assert ratio.item() == pytest.approx(2 ** 0.5, rel=0.02)


@pytest.mark.parametrize("args, pattern", [
    ((0, 4), "vocab_size must be a positive integer, but got 0"),
    ((-1, 4), "vocab_size must be a positive integer, but got -1"),
    ((10, 0), "d_model must be a positive integer, but got 0"),
])
def test_token_embedding_sizes_are_named(args, pattern):
    from tf_tutorial.embedding import TokenEmbedding
    with pytest.raises(ValueError, match=pattern):
        TokenEmbedding(*args)


def test_learned_positions_start_where_asked():
    torch.manual_seed(0)
    enc = LearnedPositionalEncoding(8, 20)
    x = torch.randn(2, 4, 8)
    assert torch.equal(enc(x, start=3), x + enc.table[3:7])
    assert not torch.equal(enc(x, start=3), enc(x))


def test_dropout_acts_on_the_sum_of_embeddings_and_positions():
    import torch.nn.functional as F
    pe = SinusoidalPositionalEncoding(8, 20, dropout=0.5).train()
    x = torch.randn(2, 5, 8)
    torch.manual_seed(1)
    y = pe(x)
    torch.manual_seed(1)
    assert torch.equal(y, F.dropout(x + pe.pe[:5], 0.5, True))
    assert torch.equal(pe.eval()(x), x + pe.pe[:5])


def test_positional_encodings_refuse_a_bad_dropout_and_ids_given_as_vectors():
    for cls in (SinusoidalPositionalEncoding, LearnedPositionalEncoding):
        with pytest.raises(ValueError, match=r"^dropout must be in \[0, 1\), but got 1\.0$"):
            cls(8, 16, dropout=1.0)
        with pytest.raises(ValueError, match=r"^x must be floating-point vectors \(B, L, D\), but got dtype "
                                             r"torch\.int64: embed the ids first$"):
            cls(8, 16)(torch.zeros(1, 3, 8, dtype=torch.long))


def test_one_unbatched_sequence_gets_the_same_positions_as_a_batch_of_one():
    from tf_tutorial.embedding import LearnedPositionalEncoding
    torch.manual_seed(0)
    emb = TokenEmbedding(V, D)
    x = emb(torch.tensor([3, 1, 4, 1, 5]))                       # (L, D): TokenEmbedding keeps 1-D ids 1-D
    for pe in (SinusoidalPositionalEncoding(D, 10), LearnedPositionalEncoding(D, 10)):
        torch.testing.assert_close(pe(x), pe(x[None])[0])
        torch.testing.assert_close(pe(x, start=2), pe(x[None], start=2)[0])
        assert not torch.equal(pe(x), pe(x, start=2))           # the positions really are added
        with pytest.raises(ValueError, match=f"^positions 6..10 go past the last position 9 for max_len=10 of {type(pe).__name__}$"):
            pe(x, start=6)
    with pytest.raises(ValueError, match=r"^x: expected shape \(L, 12\), but got \(5, 3\)$"):
        SinusoidalPositionalEncoding(D, 10)(torch.randn(5, 3))


def test_a_float64_model_gets_a_float64_exact_positional_table():
    # the buffer is float32: .double() used to leave the table ~3e-8 from the float64 formula
    from tf_tutorial.embedding import SinusoidalPositionalEncoding, positional_encoding
    pe = SinusoidalPositionalEncoding(16, 2000).double()
    x = torch.zeros(1, 2000, 16, dtype=torch.float64)
    pos = torch.arange(2000, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    exact = torch.stack([(pos * freq).sin(), (pos * freq).cos()], -1).reshape(2000, 16)
    assert (pe(x)[0] - exact).abs().max() < 1e-12
    assert (pe(x[:, :5], start=1995)[0] - exact[1995:]).abs().max() < 1e-12
    # back to float32 and to float64 again: still the formula, not a cast of a cast
    back = pe.float().double()
    assert torch.equal(back.pe, positional_encoding(2000, 16, torch.float64))


def test_token_embedding_weight_is_its_table_like_nn_embedding():
    """emb.weight, as on nn.Embedding, is the table itself (the same Parameter, before √D)."""
    emb = TokenEmbedding(10, 4)
    assert emb.weight is emb.table.weight
    assert [name for name, _ in emb.named_parameters()] == ["table.weight"]   # counted once
    with torch.no_grad():
        emb.weight[3] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert torch.equal(emb(torch.tensor([[3]]))[0, 0], torch.tensor([2.0, 4.0, 6.0, 8.0]))
