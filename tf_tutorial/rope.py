"""第 12 章（续篇）：旋转位置编码（RoPE），把位置写成 q 和 k 的旋转。

RoFormer (Su et al., 2021; su2021roformer). Split a row x ∈ ℝ^{d_k} into
adjacent pairs (x_{2i}, x_{2i+1}), i = 0 … d_k/2 − 1, with θ_i = base^(−2i/d_k).
Position m turns pair i by m·θ_i:

    (x_{2i}, x_{2i+1}) → (x_{2i} cos mθ_i − x_{2i+1} sin mθ_i,
                          x_{2i} sin mθ_i + x_{2i+1} cos mθ_i)

i.e. R_m x with R_m = diag(B_0(m), …, B_{d_k/2−1}(m)) and the 2×2 rotation
B_i(m) = [[cos mθ_i, −sin mθ_i], [sin mθ_i, cos mθ_i]].
R_m is orthogonal and R_m R_n = R_{m+n}, so for a query at m and a key at n

    ⟨R_m q, R_n k⟩ = qᵀ R_mᵀ R_n k = ⟨q, R_{n−m} k⟩,

a function of q, k and the offset n − m only: the absolute positions cancel in
the score.

Link to chapter 2: its table P has the same frequencies (θ_i = ω_i for base
10000) and P_{pos+Δ} = R(Δ) P_pos with the same 2×2 block rotations, written
there for the pair order (sin, cos): B_i(m) = R_i(m)ᵀ = R_i(−m). With S the swap
of each pair, R_m = S R(m) S, so RoPE turns (1, 0, 1, 0, …) into chapter 2's row
P_m with its pairs swapped to (cos mω_i, sin mω_i). Chapter 2 ADDS the rotated
table to the token vector, and the dot product then mixes content with absolute
position; RoPE MULTIPLIES q and k themselves by the rotation, so the dot product
sees only the offset. Values v are not rotated.

Pairing: adjacent pairs as in the paper. GPT-NeoX and Hugging Face's LLaMA code
pair dimension i with i + d_k/2 instead ("rotate_half"): an equivalent
permutation of the dimensions, so weights trained with one convention fit the
other only after permuting the output columns of W^Q and W^K.

Shape legend: B batch, H heads, L sequence length (of the queries or of the
keys), d_k head width;
"..." any leading dimensions (B, H).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from tf_tutorial._checks import (WrongTypeError, _is_integer, bad_value,
                                 broadcast_shape,
                                 require_finite_positive, require_integers,
                                 require_sizes, require_tensors)


def _require_pairs(name: str, width) -> None:
    """The rotated width: a positive even integer (its features pair up)."""
    if not _is_integer(width) or width < 2 or width % 2:
        raise bad_value(_is_integer(width), f"{name} must be a positive even "
                        f"integer (pairs), but got {width!r}")


def _thetas(dim: int, base: float, device=None) -> torch.Tensor:
    """θ_i = base^(−2i/dim), i = 0 … dim/2 − 1, float64, shape (dim/2,)."""
    _require_pairs("dim", dim)
    require_finite_positive(base=base)     # inf: θ₀ = exp(-inf · 0) is NaN
    return torch.exp(-math.log(base) * torch.arange(
        0, dim, 2, dtype=torch.float64, device=device) / dim)


def _as_positions(positions) -> torch.Tensor:
    if type(positions).__module__ == "numpy" and hasattr(positions, "dtype"):
        positions = torch.as_tensor(positions)   # np.arange(L), checked below
    if isinstance(positions, torch.Tensor):
        if (positions.dtype.is_floating_point or positions.dtype.is_complex
                or positions.dtype == torch.bool):
            raise ValueError("positions must be integers, "
                             f"but got dtype {positions.dtype}")
        return positions
    if (isinstance(positions, (Sequence, range))
            and not isinstance(positions, (str, bytes))):
        if all(isinstance(p, int) and not isinstance(p, bool)
               for p in positions):
            return torch.tensor(list(positions), dtype=torch.int64)
    raise WrongTypeError("positions must be an integer tensor or a sequence "
                         "of ints (one per row), but got "
                         f"{positions!r}; for start … start+L−1 "
                         "use torch.arange(start, start + L)")


def rope_angles(positions, dim: int, base: float = 10000.0, *,
                dtype: torch.dtype = torch.float32):
    """旋转角 m·θ_i：每个位置 m、每一对维度 i 各一个角。

    Args:
        positions: integer tensor (or sequence of ints) of positions m, shape
            (..., L).
        dim: d_k, the (even) width of the rotated rows.
        base: the base of θ_i = base^(−2i/d_k) (default 10000.0).
        dtype: dtype of the result (default torch.float32); computed in float64
            first.
    Shape: positions (..., L) → (..., L, d_k/2).
    Raises: ValueError for an odd or non-positive dim, base <= 0 or non-integer
        positions.
    """
    pos = _as_positions(positions)
    return (pos.to(torch.float64)[..., None]
            * _thetas(dim, base, pos.device)).to(dtype)


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor,
                  sin: torch.Tensor) -> torch.Tensor:
    """Turn each pair (x_{2i}, x_{2i+1}) by the angle whose cos/sin are given,
    (..., L, d_k/2)."""
    # at least float32
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    pairs = x.to(work).unflatten(-1, (-1, 2))           # (..., L, d_k/2, 2)
    even, odd = pairs[..., 0], pairs[..., 1]            # (..., L, d_k/2)
    cos, sin = cos.to(work), sin.to(work)
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    return out.flatten(-2).to(x.dtype)                  # (..., L, d_k)


def rotate(x: torch.Tensor, positions, base: float = 10000.0) -> torch.Tensor:
    """旋转位置编码：把 x 的每一行按它的位置 m 逐对旋转 m·θ_i。

    Args:
        x: queries or keys, shape (..., L, d_k) with d_k even.
        positions: the position m of each row: an integer tensor (or sequence
            of ints) of length L, or any integer tensor broadcastable to
            x.shape[:-1]. On heads x (B, H, L, d_k), positions (B, L) give
            each sentence its own positions, shared by its heads (like
            ``position_ids``; plain broadcasting would line B up with H).
            Negative positions are allowed.
        base: the base of θ_i = base^(−2i/d_k) (default 10000.0).
    Shape: x (..., L, d_k) → (..., L, d_k).
    Returns: R_m x row by row, in x's dtype (computed in float32, or float64 for
        float64 x).
    Raises: ValueError for an odd d_k, integer x, positions that do not
        match L, non-integer positions, or base <= 0.
    """
    require_tensors(x=x)
    if x.dim() < 1 or x.shape[-1] % 2 or x.shape[-1] == 0:
        raise ValueError(f"rotate: the last dimension must be even and "
                         f"positive, but got "
                         f"{x.shape[-1] if x.dim() else 'a 0-d tensor'} "
                         f"(x of shape {tuple(x.shape)})")
    if not x.is_floating_point():
        raise ValueError(f"rotate: x must be floating point, but got dtype "
                         f"{x.dtype} (an integer result would be truncated)")
    pos = _as_positions(positions).to(x.device)
    given, read_as = tuple(pos.shape), ""
    if x.dim() == 4 and pos.dim() == 2:
        pos = pos[:, None, :]            # (B, L) → (B, 1, L): per sentence
        read_as = f", read as {tuple(pos.shape)}: one row per sentence"
    rows = tuple(x.shape[:-1])
    if broadcast_shape(pos.shape, rows) != rows:
        length = pos.shape[-1] if pos.dim() else "a scalar"
        raise ValueError(f"rotate: positions of shape {given}{read_as} "
                         f"(length {length}) do not match "
                         f"x of shape {tuple(x.shape)}; " + (
                             f"expected one position per row (L="
                             f"{x.shape[-2]}), a shape broadcastable to "
                             f"{rows}" if x.dim() > 1 else
                             "x has no L dimension: give it as (..., L, "
                             "d_k), e.g. x[None] for one row"))
    angles = rope_angles(pos, x.shape[-1], base,
                         dtype=torch.float64)           # (..., L, d_k/2)
    return _rotate_pairs(x, angles.cos(), angles.sin())


class RotaryEmbedding(nn.Module):
    """旋转位置编码模块：预先算好 cos/sin 表，按从 start 开始的位置旋转 q 或 k。

    With a KV cache each key is rotated once, at its own position, before it is
    cached; a new query at position t is rotated with ``start=t``.
    ``forward(x, start)`` equals
    ``rotate(x, torch.arange(start, start + L), base)``.

    Args:
        head_dim: d_k, the (even) width of the rotated rows.
        max_len: number of positions in the tables (default 4096).
        base: the base of θ_i = base^(−2i/d_k) (default 10000.0).
    Shape: x (..., L, d_k) → (..., L, d_k), start + L <= max_len.

    The tables ``cos`` and ``sin`` (max_len, d_k/2) are non-persistent float64
    buffers that follow the module's device but keep float64 under ``.half()`` /
    ``.to(torch.bfloat16)``: in bfloat16 the tables would keep only 2–3
    significant digits (and angles m·θ computed in bfloat16 would be wrong
    outright at large positions).
    """

    def __init__(self, head_dim: int, max_len: int = 4096,
                 base: float = 10000.0):
        super().__init__()
        require_sizes(max_len=max_len)
        _require_pairs("head_dim", head_dim)
        self.head_dim, self.max_len, self.base = head_dim, max_len, base
        self.register_buffer("cos", None, persistent=False)
        self.register_buffer("sin", None, persistent=False)
        self._tables(None)

    def _tables(self, device) -> None:
        """Compute cos and sin (max_len, d_k/2) in float64 on ``device`` (None:
        the default device, 'meta' inside ``with torch.device("meta")``)."""
        angles = rope_angles(torch.arange(self.max_len, device=device),
                             self.head_dim, self.base, dtype=torch.float64)
        self.cos, self.sin = angles.cos(), angles.sin()

    def _apply(self, fn, recurse=True):
        # the device follows; the tables are computed again there, in
        # float64: a half-precision cast would keep 2-3 digits, and a model
        # built on 'meta' and filled by to_empty() has no data to copy
        super()._apply(fn, recurse)
        self._tables(self.cos.device)
        return self

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """把 x 的 L 行当作位置 start … start+L−1 旋转。"""
        if x.dim() < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"x: expected shape (..., L, {self.head_dim}), "
                             f"but got {tuple(x.shape)}")
        L = x.shape[-2]
        if not isinstance(start, torch.SymInt):   # torch.export's lengths
            require_integers(start=start)         # True would start at 1
        if start < 0 or start + L > self.max_len:
            raise ValueError(f"positions {start}..{start + L - 1} are outside "
                             f"0..{self.max_len - 1} "
                             f"(max_len={self.max_len} of RotaryEmbedding)")
        return _rotate_pairs(x, self.cos[start:start + L],
                             self.sin[start:start + L])

    def extra_repr(self) -> str:
        """打印模块时显示的参数。"""
        return (f"head_dim={self.head_dim}, max_len={self.max_len}, "
                f"base={self.base}")
