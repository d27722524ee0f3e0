"""第 11 章（续篇）：只用解码器的 Transformer（GPT 式），采样，把翻译当作续写。

A decoder-only model is one stack of causal self-attention blocks that reads and
writes one sequence: p(x_1 … x_L) = Π_t p(x_t | x_<t). Each block is chapter 8's
encoder layer with a causal mask (no cross-attention: there is no encoder to
attend to).

    logits = Norm(Block_N(… Block_1(E[x]·√D + P) …)) Eᵀ

Translation becomes continuation: the model reads ``English <sep>`` and
continues it with ``Chinese <eos>``; the loss counts only the continuation.

Shape legend (book/appendix_notation.md): B batch, L sequence length, D d_model,
H heads, d_ff FFN hidden width, N layers, |𝒱| vocabulary size, t positions
already in a cache.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace

import torch
from torch import nn

from tf_tutorial._checks import (WrongTypeError, _is_integer, _is_real,
                                 bad_value, first_weight,
                                 require_choice, require_config,
                                 require_counts, require_eps, require_fits,
                                 require_finite_positive, require_flags,
                                 require_groups,
                                 require_ids, require_instance,
                                 require_sizes, require_tensors,
                                 require_token_id, require_width)
from tf_tutorial.attention import causal_mask, padding_mask
from tf_tutorial.corpus.data import Vocab, batch_indices, pad
from tf_tutorial.decode import top_k_mask
from tf_tutorial.embedding import (LearnedPositionalEncoding,
                                   SinusoidalPositionalEncoding, TokenEmbedding)
from tf_tutorial.embedding import _PositionalBase
from tf_tutorial.encoder import EncoderLayer
from tf_tutorial.ffn import SwiGLUFeedForward
from tf_tutorial.model import _embed, check_shape, plain_numbers
from tf_tutorial.multihead import (GroupedQueryAttention, KVCache,
                                   MultiHeadAttention)
from tf_tutorial.norm import RMSNorm
from tf_tutorial.residual import stack_norm
from tf_tutorial.rope import RotaryEmbedding

POSITIONS = ("sinusoidal", "learned", "rope")
ACTIVATIONS = ("relu", "gelu", "swiglu")
NORMS = ("layer", "rms")


def _require_parts(norm, n_kv_heads) -> None:
    """The norm's name, and n_kv_heads None or a positive integer."""
    require_choice("norm", norm, NORMS)
    if n_kv_heads is not None:
        require_sizes(n_kv_heads=n_kv_heads)


@dataclass
class GPTConfig:
    """只用解码器的模型的超参数。

    Hyperparameters of a decoder-only model. A plain dataclass, like
    :class:`~tf_tutorial.model.TransformerConfig`: :class:`GPT` checks it
    again and keeps its own copy.

    ``norm_first``: True = Pre-LN with a final norm (GPT-2 and later),
    False = Post-LN.
    ``positions``: "sinusoidal" (the 2017 table, as in chapter 10), "learned"
    (GPT-1/2) or "rope" (rotary, inside attention: nothing is added to the token
    vectors; chapter 12).
    ``activation``: the FFN's, "relu" (2017), "gelu" (GPT-1/2/3) or "swiglu" (a
    gated FFN with three (D, d_ff) matrices, chapter 7; LLaMA). Chapter 12's
    switches also include ``norm``: "layer" (LayerNorm) or "rms" (RMSNorm), and
    ``n_kv_heads``: key/value heads shared by groups of query heads
    (None = ``n_heads``: ordinary multi-head attention; 1 = multi-query
    attention).
    ``pad_id``: the padding token (never a key); ``eos_id``: the token that
    ends an answer in training (None: 2, or 0 when ``pad_id`` is 2; it stays
    None in a vocabulary of one or two tokens, too small for the default);
    :func:`generate` stops there only when given ``eos_id=`` itself.
    The output layer always reuses the token embedding (tied, as in GPT-2 and
    chapter 10).
    """

    vocab_size: int
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int = 512
    dropout: float = 0.0
    max_len: int = 256
    pad_id: int = 0
    eos_id: int | None = None
    norm_first: bool = True
    positions: str = "sinusoidal"
    activation: str = "gelu"
    eps: float = 1e-5
    norm: str = "layer"
    n_kv_heads: int | None = None
    rope_base: float = 10000.0

    def __post_init__(self):
        check_shape(self, ("vocab_size", "d_model", "n_heads", "n_layers",
                           "d_ff", "max_len"))
        plain_numbers(self, ("pad_id", "eos_id"))
        if self.vocab_size < 2:     # pad is never a key nor an answer
            raise ValueError(f"vocab_size={self.vocab_size} leaves no token "
                             "but the padding one: a model needs at least 2")
        if self.eos_id is None and 2 < self.vocab_size:
            object.__setattr__(self, "eos_id", 2 if self.pad_id != 2 else 0)
        for name in ("pad_id", "eos_id"):
            value = getattr(self, name)
            if name == "eos_id" and value is None:      # no room for one
                continue
            if not _is_integer(value) or not 0 <= value < self.vocab_size:
                raise bad_value(_is_integer(value), f"{name}={value!r} is not "
                                f"a valid id for vocab_size={self.vocab_size}")
        if self.eos_id == self.pad_id:
            raise ValueError("eos_id and pad_id must differ, "
                             f"but both are {self.pad_id} (if pad_id was "
                             "changed on a built config, e.g. with "
                             "dataclasses.replace, the eos_id it filled in "
                             "was not: pass it too)")
        require_choice("positions", self.positions, POSITIONS)
        require_choice("activation", self.activation, ACTIVATIONS)
        _require_parts(self.norm, self.n_kv_heads)
        if self.n_kv_heads is not None:
            plain_numbers(self, ("n_kv_heads",))
            require_groups(self.n_heads, self.n_kv_heads)
        if self.positions == "rope" and (self.d_model // self.n_heads) % 2:
            raise ValueError("positions='rope' needs an even head width, "
                             "but d_model / n_heads = "
                             f"{self.d_model // self.n_heads}")
        require_eps(self.eps)
        require_finite_positive(rope_base=self.rope_base)
        require_flags(norm_first=self.norm_first)
        plain_numbers(self)

    def to_dict(self) -> dict:
        """把配置转成普通的字典（写进检查点或记录用）。"""
        return asdict(self)


class NoPositions(_PositionalBase):
    """不加位置编码（用 RoPE 时位置在注意力里），只做 dropout 并检查长度。

    With RoPE the positions live inside attention: nothing is added to the token
    vectors.
    Shape: x (B, L, D) → (B, L, D), start + L <= max_len.
    """

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        """检查位置不超过 max_len，再做 dropout。"""
        self._check(x, start)
        return self.dropout(x)


class GPTCache:
    """生成时各层自注意力的 KV 缓存：每层一个只增不减的 :class:`KVCache`。

    The KV caches of the self-attention of every block, kept between generation
    steps.
    """

    def __init__(self, n_layers: int):
        require_sizes(n_layers=n_layers)
        self.layers = [KVCache() for _ in range(n_layers)]
        # (B, t): which cached positions hold a token that is not <pad>
        self.not_pad: torch.Tensor | None = None

    @property
    def length(self) -> int:
        """缓存里已有的位置数 t，也就是下一个词元的位置。"""
        return self.layers[0].length

    def reorder(self, index: torch.Tensor) -> None:
        """按 ``index`` 保留批里的这些行。"""
        for cache in self.layers:
            cache.reorder(index)
        if self.not_pad is not None:
            self.not_pad = self.not_pad[index]


class GPTBlock(EncoderLayer):
    """只用解码器的模型的一层：第 8 章的编码器层配上因果掩码，并能带 KV 缓存。

    Chapter 8's encoder layer, used with a causal mask. The parameters and the
    maths are the encoder layer's; ``forward`` only adds the cache and the
    attention weights. Chapter 12's switches replace single parts:
    ``activation="swiglu"`` the FFN (chapter 7's SwiGLU), ``norm="rms"`` both
    norms, ``n_kv_heads`` or ``rotary`` the attention (grouped-query attention,
    with RoPE applied to q and k). A replacing part draws its initial weights
    from where the part it replaces drew them, and the layer leaves the
    random stream where chapter 8's layer does: under one seed, every variant
    starts from the baseline's numbers wherever their shapes agree (RoPE's
    model from exactly the baseline's weights).

    Shape:
        x (B, L, D); mask boolean, broadcastable to (B, L, t + L), True = may
        attend; with a ``cache`` (a :class:`~tf_tutorial.multihead.KVCache`) x
        holds only the new positions.
    Returns:
        (B, L, D); with ``return_weights=True`` also the weights
        (B, H, L, t + L).
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int,
                 dropout: float = 0.1, norm_first: bool = False,
                 activation: str = "relu", eps: float = 1e-5,
                 norm: str = "layer", n_kv_heads: int | None = None,
                 rotary: RotaryEmbedding | None = None):
        # a known norm; n_kv_heads None or >= 1 (0 would read as None below)
        _require_parts(norm, n_kv_heads)
        gated = activation == "swiglu"
        grouped = rotary is not None or (n_kv_heads or n_heads) != n_heads
        start = torch.random.get_rng_state()  # chapter 8's attention draws here
        super().__init__(d_model, n_heads, d_ff, dropout, norm_first,
                         "relu" if gated else activation, eps)
        # chapter 12's parts replace chapter 8's one by one; with the defaults
        # nothing is replaced. They draw again from the start, in chapter 8's
        # order (attention, then FFN), then the stream goes on as it would
        if grouped or gated:
            end = torch.random.get_rng_state()
            torch.random.set_rng_state(start)
            if grouped:
                self.self_attn = GroupedQueryAttention(
                    d_model, n_heads, n_kv_heads or n_heads, dropout,
                    rotary=rotary)
            else:      # draw chapter 8's attention again, to reach the FFN's
                MultiHeadAttention(d_model, n_heads, dropout=dropout)
            if gated:
                self.ffn = SwiGLUFeedForward(d_model, d_ff, dropout)
            torch.random.set_rng_state(end)
        if norm == "rms":
            self.attn_block.norm, self.ffn_block.norm = (
                RMSNorm(d_model, eps), RMSNorm(d_model, eps))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                cache: KVCache | None = None, return_weights: bool = False):
        """因果自注意力（可带缓存），再接前馈网络；各自带残差连接和层归一化。"""
        require_width(x, self.self_attn.d_model, lead="B, L",
                      weight=first_weight(self.self_attn))
        kept = []

        def attend(y):
            out = self.self_attn(y, y, y, mask, return_weights=return_weights,
                                 cache=cache)
            if return_weights:
                out, w = out
                kept.append(w)
            return out

        x = self.attn_block(x, attend)   # (B, L, D)
        x = self.ffn_block(x, self.ffn)  # (B, L, D)
        return (x, kept[0]) if return_weights else x


class GPT(nn.Module):
    """只用解码器的 Transformer：N 个因果自注意力层，输出层与词向量共用。

    A decoder-only Transformer: token embedding (×√D) and positions, N
    :class:`GPTBlock` under a causal mask, a final LayerNorm (Pre-LN), and an
    output layer tied to the embedding.

    Shape:
        tokens (B, L) ids → logits (B, L, |𝒱|): row t scores the token at
        position t + 1.
        Keys that are ``pad_id`` are masked. With a ``cache``
        (:meth:`new_cache`), ``tokens`` holds only the new tokens, whose
        positions start where the cache ends; they see every cached position
        that is not <pad> (the cache remembers which are), so cached and
        recomputed logits agree.
        ``return_weights=True`` also returns the weights, one (B, H, L, t + L)
        per block.
        ``keep``: boolean (B, L); when given, only the kept positions get
        logits, returned as (K, |V|) for the K kept positions in row-major
        order. The output layer is the widest matrix product of the model:
        training on a continuation needs the logits of the answer's positions
        only, and generation those of the last position only. ``keep`` may
        also be those positions' row-major indices, 1-D integers on the
        model's device (``mask.flatten().nonzero()[:, 0]``): a boolean mask
        makes the CPU wait mid-forward on a GPU until the count K comes back,
        indices found beforehand on the host and copied with the batch do not.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        require_config(config, GPTConfig)
        c = self.config = replace(config)  # checked again, and our own copy
        self.embed = TokenEmbedding(c.vocab_size, c.d_model)
        position = {"sinusoidal": SinusoidalPositionalEncoding,
                    "learned": LearnedPositionalEncoding,
                    "rope": NoPositions}[c.positions]
        self.positions = position(c.d_model, c.max_len, c.dropout)
        rotary = (RotaryEmbedding(c.d_model // c.n_heads, c.max_len,
                                  c.rope_base)
                  if c.positions == "rope" else None)
        self.blocks = nn.ModuleList(
            GPTBlock(c.d_model, c.n_heads, c.d_ff, c.dropout, c.norm_first,
                     c.activation, c.eps, c.norm, c.n_kv_heads, rotary)
            for _ in range(c.n_layers))
        self.norm = stack_norm(c.d_model, c.norm_first, eps=c.eps)
        if c.norm == "rms" and c.norm_first:
            self.norm = RMSNorm(c.d_model, c.eps)
        self.out = nn.Linear(c.d_model, c.vocab_size, bias=False)
        # (|V|, D): one matrix, two uses
        self.out.weight = self.embed.table.weight

    def new_cache(self) -> GPTCache:
        """新建一个空的 KV 缓存，供逐词生成使用。"""
        return GPTCache(len(self.blocks))

    def forward(self, tokens: torch.Tensor, cache: GPTCache | None = None,
                return_weights: bool = False, keep: torch.Tensor | None = None):
        """由词元编号算出每个位置（或 ``keep`` 选出的位置）对下一词元的分数。"""
        require_ids(tokens)
        if keep is not None:
            _check_keep(keep, tokens.shape, tokens.device)
        if cache is not None:
            require_instance(cache, GPTCache, "cache",
                             " (model.new_cache() makes one)")
        if cache is not None and len(cache.layers) != len(self.blocks):
            raise ValueError("cache: expected a GPTCache for "
                             f"{len(self.blocks)} layers, "
                             f"but got one for {len(cache.layers)}")
        if (cache is not None and cache.not_pad is not None
                and cache.not_pad.shape[0] != tokens.shape[0]):
            raise ValueError(f"cache: it holds a batch of "
                             f"{cache.not_pad.shape[0]}, but tokens has "
                             f"{tokens.shape[0]} rows")
        start, L = (0 if cache is None else cache.length), tokens.shape[1]
        require_fits("tokens", start, L, self.config.max_len)
        if L == 0:
            raise ValueError("tokens: expected at least one token, "
                             f"but got shape {tuple(tokens.shape)}")
        x = _embed(self.embed, tokens, "tokens")       # (B, L, D); ids checked
        if cache is None:
            mask = (causal_mask(L, tokens.device)
                    & padding_mask(tokens, self.config.pad_id))     # (B, L, L)
        else:
            # the new tokens see the cached positions that are not <pad>, and
            # their own past
            new = tokens != self.config.pad_id                      # (B, L)
            cache.not_pad = (new if cache.not_pad is None
                             else torch.cat([cache.not_pad, new], 1))
            mask = cache.not_pad[:, None, :]                # (B, 1, t + L)
            if L > 1:
                mask = mask & causal_mask(start + L, tokens.device)[start:]
        x = self.positions(x, start)
        maps = []
        for i, block in enumerate(self.blocks):
            x = block(x, mask, None if cache is None else cache.layers[i],
                      return_weights)
            if return_weights:
                x, w = x
                maps.append(w)
        x = self.norm(x)                               # (B, L, D)
        if keep is not None and keep.dtype == torch.bool:
            x = x[keep]                                # (K, D)
        elif keep is not None:     # row-major indices: no count to wait for
            x = x.flatten(0, 1).index_select(0, keep)  # (K, D)
        logits = self.out(x)                           # (B, L, |V|) or (K, |V|)
        return (logits, maps) if return_weights else logits


def _check_keep(keep, shape, device) -> None:
    """``keep`` is a boolean mask of ``shape`` or 1-D integer row-major
    indices; indices held on the CPU are checked against B·L too (on a GPU
    that would mean waiting for them)."""
    require_tensors(keep=keep)
    if keep.dtype == torch.bool and keep.shape == shape:
        return
    if keep.dtype not in (torch.int32, torch.int64) or keep.dim() != 1:
        raise ValueError(f"keep: expected a boolean mask of shape "
                         f"{tuple(shape)} or 1-D int64 (or int32) positions, "
                         f"but got {keep.dtype} of shape {tuple(keep.shape)}")
    if keep.device != device:
        raise ValueError(f"keep: positions must be on the tokens' device "
                         f"({device}), but got them on {keep.device}")
    n = shape[0] * shape[1]
    if keep.device.type == "cpu" and len(keep):
        lo, hi = int(keep.min()), int(keep.max())
        if lo < 0 or hi >= n:
            raise ValueError(f"keep: positions must lie in [0, {n}) "
                             f"(row-major over tokens of shape "
                             f"{tuple(shape)}), but got {lo if lo < 0 else hi}")


# --- sampling -----------------------------------------------------------------

def _require_gpt(model) -> None:
    """``model`` must be a :class:`GPT` (or a compiled one, which passes its
    ``config`` on): an encoder–decoder or a plain module gets a TypeError."""
    if not isinstance(getattr(model, "config", None), GPTConfig):
        raise TypeError(f"model: expected a tf_tutorial.gpt.GPT, but got "
                        f"{type(model).__name__}")


def _check_sampling(temperature, top_k, top_p, logits=None,
                    generator=None) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        # checked even when no draw is made (greedy), not left to multinomial
        raise TypeError("generator must be None or a torch.Generator, "
                        f"but got {type(generator).__name__}")
    if logits is not None:                  # sample, sampling_probs
        require_tensors(logits=logits)
        if logits.dim() == 0 or logits.shape[-1] == 0:
            raise ValueError("logits: expected shape (..., |V|) with |V| >= 1,"
                             f" but got {tuple(logits.shape)}")
    # NumPy scalars are numbers too; bools and tensors are not
    if not _is_real(temperature) or not (0 <= temperature < math.inf):
        raise bad_value(_is_real(temperature), "temperature must be a finite "
                        f"number >= 0 (0: greedy), but got {temperature!r}")
    if top_k is not None and (not _is_integer(top_k) or top_k < 1):
        raise bad_value(_is_integer(top_k), "top_k must be None or an "
                        f"integer >= 1, but got {top_k!r}")
    if top_p is not None and (not _is_real(top_p) or not 0 < top_p <= 1):
        raise bad_value(_is_real(top_p),
                        f"top_p must be None or in (0, 1], but got {top_p!r}")


def sampling_probs(logits: torch.Tensor, temperature: float = 1.0,
                   top_k: int | None = None,
                   top_p: float | None = None) -> torch.Tensor:
    """采样的概率分布：除以温度，留前 k 个，再留累积概率达 p 的最小集合（核）。

    The distribution :func:`sample` draws from: softmax(logits / temperature),
    restricted to the ``top_k`` most likely tokens, then to the nucleus (the
    fewest most likely tokens whose probability adds up to at least ``top_p``),
    renormalised; a ``top_k`` of |V| or more keeps every token, as Hugging
    Face's top-k filter does. logits (..., |V|) → (..., |V|). A +inf logit
    is certainty: the +inf tokens of a row share all its probability. A row
    whose logits are all -inf has no distribution: its probabilities come out
    NaN.
    """
    _check_sampling(temperature, top_k, top_p, logits)
    # float64 stays
    z = logits.to(torch.promote_types(logits.dtype, torch.float32))
    # shifted so the largest is 0: a tiny temperature sends the rest to -inf,
    # not to nan; one below the dtype's smallest normal number acts as that
    # number (in float32, 1e-46 would be 0, and 0 / 0 is nan)
    t = max(temperature, torch.finfo(z.dtype).tiny)
    top = z.amax(-1, keepdim=True)
    certain = torch.where(z == math.inf, 0.0, -math.inf)   # rows with a +inf
    z = torch.where(top == math.inf, certain, z - top) / t
    if top_k is not None and top_k < z.shape[-1]:
        # exactly k tokens survive; of equal ones the first, as argmax takes
        z = z.masked_fill(~top_k_mask(z, top_k), float("-inf"))
    p = torch.softmax(z, dim=-1)
    if top_p is not None and top_p < 1:
        sorted_p, index = p.sort(dim=-1, descending=True, stable=True)
        # mass of the more likely tokens
        before = sorted_p.cumsum(-1) - sorted_p
        # the nucleus already had p without it; a few ulps of slack, so that
        # a sum that should be exactly top_p (0.1 * 6 = 0.6) counts as there
        slack = 8 * torch.finfo(p.dtype).eps
        drop = before >= top_p - slack
        drop[..., 0] = False    # the likeliest token stays, even for tiny p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        p = torch.zeros_like(p).scatter(-1, index, sorted_p)
        p = p / p.sum(-1, keepdim=True)
    return p


def sample(logits: torch.Tensor, temperature: float = 1.0,
           top_k: int | None = None, top_p: float | None = None,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """按分数采样下一个词元：温度、top-k、top-p 见 :func:`sampling_probs`。

    Draw the next token from logits (..., |V|) → ids (...). ``top_k=1`` is
    greedy decoding (argmax, no random number is drawn), and so is
    ``temperature=0``, the limit τ → 0 of softmax(z / τ). ``generator``: a
    ``torch.Generator`` on the logits' device, for repeatable draws.

    Raises:
        ValueError: on the CPU, a row of logits that are all -inf, or that
            hold a NaN: there is no distribution to draw from. The check
            costs nothing on the normal path; on a GPU the draw fails on
            the device instead.
    """
    _check_sampling(temperature, top_k, top_p, logits, generator)
    if top_k == 1 or temperature == 0:  # greedy: the same refusal, no draw
        flat = logits.reshape(-1, logits.shape[-1])
        bad = flat.isnan().any(-1) | (flat == -math.inf).all(-1)
        if bad.any():
            raise _no_distribution(flat, bad)
        return logits.argmax(-1)
    p = sampling_probs(logits, temperature, top_k, top_p)
    flat = p.reshape(-1, p.shape[-1])
    try:
        drawn = torch.multinomial(flat, 1, generator=generator)
    except RuntimeError:
        bad = ~torch.isfinite(flat).all(-1)
        if not bad.any():
            raise
        raise _no_distribution(flat, bad) from None
    return drawn.view(p.shape[:-1])


def _no_distribution(flat: torch.Tensor, bad: torch.Tensor) -> ValueError:
    """The error of :func:`sample` for the rows of ``flat`` marked ``bad``."""
    rows = bad.nonzero().flatten().tolist()
    return ValueError(f"logits: {len(rows)} row(s) give no distribution to "
                      f"sample from (rows {rows[:5]} of the flattened "
                      f"{tuple(flat.shape)}): all -inf, or a NaN")


@torch.no_grad()
def generate(model: GPT, prompt: torch.Tensor, max_new_tokens: int,
             temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None,
             generator: torch.Generator | None = None,
             eos_id: int | None = None,
             use_cache: bool = True,
             lengths: torch.Tensor | list[int] | None = None
             ) -> torch.Tensor:
    """从提示逐词生成：每一步把最新的词元送进模型，按 :func:`sample` 抽下一个。

    Continue ``prompt`` by ``max_new_tokens`` tokens, one at a time.

    Args:
        prompt: (B, L) ids, or (L,) for one sequence. Every row is a real prompt
            (no padding), unless ``lengths`` says otherwise.
        max_new_tokens: tokens to add to each row; prompt length +
            max_new_tokens must fit in ``max_len``.
        temperature, top_k, top_p, generator: as in :func:`sample`, over
            the whole vocabulary (``temperature=0`` or ``top_k=1``: greedy).
            A drawn ``pad_id`` is kept and, like any <pad>, later tokens do
            not attend to it.
        eos_id: stop a row once it has produced this id (the rest of the row
            becomes ``pad_id``), and stop when every row has; None (default)
            always adds ``max_new_tokens`` tokens.
        use_cache: False recomputes the whole sequence at every step (for
            comparison).
        lengths: (B,) the true length of each row of a (B, L) prompt that is
            padded on the right, so that prompts of different lengths share
            one batch. The first forward pass reads the first min(lengths)
            tokens, which every row has; after that, a row still inside its
            prompt takes its own next prompt token instead of the drawn one
            (no padding mask is needed). A finished row leaves the batch, so
            with ``lengths`` or ``eos_id`` a row's random draws depend on the
            other rows. None: every row has length L.
    Returns:
        (B, L + n) ids in the prompt's dtype, the prompt followed by the
        n ≤ max_new_tokens new tokens ((L + n,) for a 1-D prompt). With
        ``lengths``, L is max(lengths): row b holds its ``lengths[b]`` prompt
        tokens, its new tokens, then ``pad_id``.
    Raises:
        ValueError: temperature < 0, top_k < 1, top_p outside (0, 1], an empty
        prompt, one that does not fit in ``max_len`` with the new tokens, or
        ``lengths`` that are not B integers in [1, L].
    """
    _require_gpt(model)
    _check_sampling(temperature, top_k, top_p, generator=generator)
    if eos_id is not None:
        require_token_id(eos_id=eos_id)
    if eos_id is not None and (eos_id == model.config.pad_id or not
                               0 <= eos_id < model.config.vocab_size):
        raise ValueError("eos_id must be None or an id in "
                         f"[0, {model.config.vocab_size}) other than "
                         f"pad_id={model.config.pad_id}, but got {eos_id!r}")
    require_counts(max_new_tokens=max_new_tokens)
    require_flags(use_cache=use_cache)
    require_tensors(prompt=prompt)
    if (prompt.dim() not in (1, 2)
            or prompt.dtype not in (torch.int64, torch.int32)):
        raise ValueError("prompt: expected integer ids of shape "
                         "(B, L) or (L,), but got "
                         f"{prompt.dtype} of shape {tuple(prompt.shape)}")
    one = prompt.dim() == 1
    seq = prompt[None] if one else prompt
    (B, L), limit, pad_id = seq.shape, model.config.max_len, model.config.pad_id
    if L == 0:
        raise ValueError("prompt is empty: give at least one token to continue")
    try:                                      # once here, not at every step
        model.embed.check_ids(seq)
    except ValueError as error:
        raise ValueError(f"prompt: {error}") from None
    ends = _prompt_lengths(lengths, B, L)     # (B,) each row's prompt length
    longest = int(ends.max()) if B else L
    if longest > limit:
        raise ValueError(f"prompt length {longest} exceeds the model's "
                         f"max_len={limit}")
    if longest + max_new_tokens > limit:
        raise ValueError(f"prompt length {longest} + max_new_tokens "
                         f"{max_new_tokens} = {longest + max_new_tokens} "
                         f"exceeds the model's max_len={limit}")
    device = next(model.parameters()).device
    ends = ends.to(device)
    width = longest + max_new_tokens
    out = torch.full((B, width), pad_id, dtype=seq.dtype, device=device)
    out[:, :longest] = seq[:, :longest].to(device).masked_fill(
        torch.arange(longest, device=device) >= ends[:, None], pad_id)
    if max_new_tokens == 0 or B == 0:
        return out[0] if one else out
    first = int(ends.min())                   # every row has a real token here
    was_training = model.training
    model.eval()
    try:
        rows = torch.arange(B, device=device)   # the rows still being written
        cache = model.new_cache() if use_cache else None
        last = torch.zeros(B, first, dtype=torch.bool, device=device)
        last[:, -1] = True                # only the last position's logits
        logits = model(out[:, :first], cache, keep=last)   # (B, |V|)
        for t in range(first, width):
            nxt = sample(logits, temperature, top_k, top_p,
                         generator).to(out.dtype)        # (b,)
            # a row still inside its prompt takes the prompt's token instead
            reading = t < ends[rows]
            nxt = torch.where(reading, out[rows, t], nxt)
            out[rows, t] = nxt
            finished = t + 1 == ends[rows] + max_new_tokens
            if eos_id is not None:
                finished |= ~reading & (nxt == eos_id)
            alive = (~finished).nonzero()[:, 0]
            if len(alive) == 0:
                break
            if len(alive) < len(rows):    # finished rows leave the batch
                rows, nxt = rows[alive], nxt[alive]
                if use_cache:
                    cache.reorder(alive)
            logits = (model(nxt[:, None], cache) if use_cache
                      else model(out[rows, :t + 1]))[:, -1]
    finally:
        model.train(was_training)
    out = out[:, :t + 1]
    return out[0] if one else out


def _prompt_lengths(lengths, B: int, L: int) -> torch.Tensor:
    """``generate`` 的 ``lengths``：检查后成为 (B,) 的整数张量。"""
    if lengths is None:
        return torch.full((B,), L)
    problem = (f"lengths: expected {B} integer(s) in [1, {L}] (one per "
               f"prompt row), but got {lengths!r}")
    try:
        ends = torch.as_tensor(lengths, dtype=None if len(lengths) else
                               torch.long)  # [] is an empty batch's lengths
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise WrongTypeError(problem) from None
    if ends.is_floating_point() or ends.is_complex() or ends.dtype == torch.bool:
        raise WrongTypeError(problem)           # [True] would be 1
    if ends.shape != (B,) or B and not (1 <= int(ends.min())
                                         and int(ends.max()) <= L):
        raise ValueError(problem)
    return ends.long()


# --- translation as continuation ----------------------------------------------

SEP = "<sep>"


def continuation_vocab(src_vocab: Vocab, tgt_vocab: Vocab) -> Vocab:
    """把英文和中文词表合成一个，加上 ``<sep>``：只用解码器的模型只有一张词表。

    One vocabulary for both languages plus ``<sep>``; the special ids are
    :class:`Vocab`'s.
    """
    return Vocab([*src_vocab.words, *tgt_vocab.words, SEP])


def encode_continuation(pairs, vocab: Vocab) -> list[tuple[list[int], int]]:
    """把句对写成一条序列 ``英文 <sep> 中文 <eos>``，并记下提示的长度。

    (English, Chinese) tokens → (ids of ``English <sep> Chinese <eos>``, prompt
    length S).
    """
    sep = vocab.stoi[SEP]
    out = []
    for en, zh in pairs:
        prompt = vocab.encode(en) + [sep]
        out.append((prompt + vocab.encode(zh, eos=True), len(prompt)))
    return out


def continuation_batch(items, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """一批续写序列的输入和答案：提示部分的答案记作 ``pad_id``（不计损失）。

    Inputs x = seq[:-1] and targets y = seq[1:], both (B, L - 1), right-padded.
    Targets at positions t < S - 1, S being the row's prompt length (they would
    be English tokens or <sep>), are set to ``pad_id``, so a loss that ignores
    ``pad_id`` counts only the Chinese tokens and <eos>: that is the loss mask.
    """
    seqs = pad([ids for ids, _ in items], pad_id)  # (B, L)
    x, y = seqs[:, :-1], seqs[:, 1:].clone()
    for row, (_, p) in enumerate(items):
        y[row, :p - 1] = pad_id
    return x, y


def batch_lengths(items) -> list[tuple[int, int]]:
    """按第 10 章的编码给出每个句对的（源句长，目标句长），让两种模型批次相同。

    For ``encode_continuation`` items: (len(English) + 1, len(Chinese) + 2), the
    lengths of chapter 10's source (+ <eos>) and target (<bos> + … + <eos>),
    which its batches are cut by.
    """
    return [(p, len(ids) - p + 1) for ids, p in items]


@dataclass
class ContinuationRun:
    """只用解码器的模型在续写语料上的一次训练：模型、合并词表和记录下的曲线。"""
    model: GPT
    vocab: Vocab
    history: dict


def train_continuation(model: GPT, vocab: Vocab, pairs, cfg,
                       device: str | torch.device = "cpu",
                       max_seconds: float | None = None, progress: bool = True,
                       precision: str = "auto") -> ContinuationRun:
    """用第 10 章的设置训练：同样的批次、优化器、学习率日程、标签平滑和裁剪。

    Train ``model`` on ``English <sep> Chinese <eos>`` sequences with the
    settings of ``cfg``, a :class:`~tf_tutorial.train.TrainConfig`: the same
    sentence batches as chapter 10 (grouped by the pair's lengths in chapter
    10's encoding, with ``cfg.batch_tokens`` and the same seeds),
    Adam(0.9, 0.98, 1e-9), the warmup schedule, label smoothing and gradient
    clipping. ``max_seconds`` stops once that much training time has passed.
    ``precision``: as in :func:`tf_tutorial.train.train` (mixed precision on a
    GPU, float32 on a CPU).
    """
    import contextlib

    from tf_tutorial.train import (TrainConfig, _progress, autocast_dtype,
                                   check_limits, optimizer_and_schedule,
                                   pick_device, varying_shapes)

    _require_gpt(model)
    require_config(cfg, TrainConfig, "cfg")
    check_limits(max_seconds=max_seconds, progress=progress)
    if not pairs:         # an epoch without a batch would loop for ever
        raise ValueError("pairs: expected at least one (English, Chinese) "
                         "pair, but got none")
    dev = pick_device(device)      # 'meta' or an absent GPU: said here
    torch.manual_seed(cfg.seed)
    model.to(dev)
    items = encode_continuation(pairs, vocab)
    lengths = batch_lengths(items)
    opt, sched = optimizer_and_schedule(model, cfg, model.config.d_model)
    loss_fn = nn.CrossEntropyLoss(ignore_index=vocab.pad_id,
                                  label_smoothing=cfg.label_smoothing)
    amp = autocast_dtype(dev, precision)
    scaler = torch.amp.GradScaler(dev.type, enabled=amp is torch.float16)
    history = {"step": [], "loss": [], "seconds": 0.0, "tokens": 0,
               "input_tokens": 0}
    size = None if cfg.batch_tokens else cfg.batch_size
    bar = _progress(progress, total=cfg.steps, desc="train[gpt]")
    start, step, epoch = time.perf_counter(), 0, 0
    losses = []                                # on the device
    model.train()
    # batches of many shapes (train.py); Ctrl-C closes the bar too
    with varying_shapes(), contextlib.closing(bar):
        while step < cfg.steps and not (
                max_seconds and time.perf_counter() - start > max_seconds):
            for chunk in batch_indices(lengths, size, cfg.batch_tokens,
                                       seed=cfg.seed * 1000 + epoch):
                if step >= cfg.steps or (max_seconds and time.perf_counter()
                                         - start > max_seconds):
                    break
                x, y = continuation_batch([items[i] for i in chunk],
                                          vocab.pad_id)
                answer = y != vocab.pad_id      # (B, L - 1): the loss mask
                target = y[answer]              # (K,): the answers' tokens
                rows = answer.flatten().nonzero()[:, 0]   # (K,): where
                # counted on the host, before the copy: no device sync
                history["tokens"] += len(target)              # in the loss
                history["input_tokens"] += int((x != vocab.pad_id).sum())
                # copied as train() copies its batch (a blocking copy would
                # wait for the GPU); the indices with it: no wait mid-forward
                x, target, rows = (t.to(dev, non_blocking=True)
                                   for t in (x, target, rows))
                with (torch.autocast(dev.type, dtype=amp) if amp
                      else contextlib.nullcontext()):
                    logits = model(x, keep=rows)    # (K, |V|): answers only
                # mean over the answer tokens; half precision goes up to
                # float32, float64 stays
                loss = loss_fn(logits.to(torch.promote_types(
                    logits.dtype, torch.float32)), target)
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
                scaler.step(opt)
                scaler.update()
                sched.step()
                step += 1
                history["step"].append(step)
                losses.append(loss.detach())   # read at the end: one sync
                bar.update(1)
            epoch += 1
    history["loss"] = torch.stack(losses).tolist() if losses else []
    history["seconds"] = time.perf_counter() - start
    model.eval()
    return ContinuationRun(model, vocab, history)


@torch.no_grad()
def translate_continuation(model: GPT, vocab: Vocab, pairs, extra: int = 10,
                           temperature: float | None = None,
                           top_k: int | None = None,
                           top_p: float | None = None,
                           generator: torch.Generator | None = None
                           ) -> list[str]:
    """把 ``pairs`` 的英文当作提示续写中文（默认贪心），返回空格连接词元的译文。

    Continue ``English <sep>`` for every pair; outputs as space-joined strings.

    All prompts go through :func:`generate` together, padded on the right and
    passed with their ``lengths``. An output may have as many tokens as its
    own reference plus ``extra`` (as long as the longest prompt still fits
    in ``max_len`` with them): a limit of its own, so with greedy decoding a
    sentence gets the same output alone or among others.

    Greedy unless one of ``temperature``, ``top_k``, ``top_p`` is given: then
    they (``temperature`` 1.0 if left out) and ``generator`` go to
    :func:`sample`. So ``temperature=0.5`` alone samples.
    """
    if temperature is None and top_k is None and top_p is None:
        top_k = 1                                      # nothing asked: greedy
    temperature = 1.0 if temperature is None else temperature
    require_counts(extra=extra)
    if not pairs:
        return []
    device = next(model.parameters()).device
    items = encode_continuation(pairs, vocab)
    lengths = [p for _, p in items]
    limits = [min(len(zh) + extra, model.config.max_len - p)  # new tokens
              for p, (_, zh) in zip(lengths, pairs)]
    L = max(lengths)
    prompt = pad([ids[:p] for ids, p in items], vocab.pad_id).to(device)
    ids = generate(model, prompt, min(max(limits), model.config.max_len - L),
                   temperature, top_k, top_p, generator, eos_id=vocab.eos_id,
                   lengths=lengths)
    return [" ".join(vocab.decode(row[p:p + n]))
            for p, n, row in zip(lengths, limits, ids.cpu())]


def evaluate_continuation(model: GPT, vocab: Vocab, pairs) -> dict:
    """与 :func:`tf_tutorial.metrics.evaluate` 相同的评测，译文由续写得到。"""
    from tf_tutorial.metrics import score

    return score(pairs, translate_continuation(model, vocab, pairs))
