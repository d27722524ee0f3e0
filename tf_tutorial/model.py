"""第 10 章：完整的 Transformer——把第 2–9 章的零件装在一起。

logits = Decoder(Embed(tgt_in)·√D + PE, Encoder(Embed(src)·√D + PE)) W_outᵀ

Shape legend: B batch, S source length, T target length, D d_model,
V vocabulary size.
"""
from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass, fields, replace

import numpy as np
import torch
from torch import nn

from tf_tutorial._checks import (_is_integer, bad_value, require_config,
                                 require_dropout, require_fits, require_flags,
                                 require_ids, require_instance, require_sizes)
from tf_tutorial.attention import causal_mask, padding_mask
from tf_tutorial.decoder import Decoder, DecoderCache
from tf_tutorial.embedding import SinusoidalPositionalEncoding, TokenEmbedding
from tf_tutorial.encoder import Encoder


def require_positive_ints(obj, names) -> None:
    """检查 ``obj`` 的这些属性都是正整数，否则报出第一个不合格的名字。

    Raise ``ValueError`` naming the first of ``names`` on ``obj`` that is not an
    int ≥ 1.
    """
    require_sizes(**{name: getattr(obj, name) for name in names})


def plain_numbers(config, names=None) -> None:
    """把配置里的 NumPy 数（np.int64(16)、np.float64(0.1)、np.bool_(True)）换成 Python 的数。

    A NumPy integer is an integer, and is accepted, as is a value taken from
    ``np.linspace``; stored as Python's own number, the config prints,
    compares and saves like one written by hand, in a JSON record and in a
    checkpoint that ``torch.load(weights_only=True)`` reads back (it refuses
    NumPy objects); any other real number (``Fraction(1, 2)``) becomes a
    float, for the same reason. ``names``: those fields (sizes, early, so
    that messages print them plainly), or every field (last, after the
    checks). Values of other types are left for the checks to refuse.
    """
    for name in names if names is not None else [f.name
                                                 for f in fields(config)]:
        value = getattr(config, name)
        if _is_integer(value):
            object.__setattr__(config, name, int(value))
        elif isinstance(value, np.generic):
            object.__setattr__(config, name, value.item())
        elif (isinstance(value, numbers.Real)            # Fraction(1, 2)
              and not isinstance(value, (bool, float))):
            object.__setattr__(config, name, float(value))


def check_shape(config, sizes) -> None:
    """检查尺寸是正整数、头数整除宽度、dropout 在 [0, 1) 里（10、11 章共用）。

    ``sizes``: the names of the config's integer sizes; ``d_model``, ``n_heads``
    and ``dropout`` are checked too. Raise ``ValueError`` naming the first bad
    value.
    """
    require_positive_ints(config, sizes)
    plain_numbers(config, sizes)
    if config.d_model % config.n_heads:
        raise ValueError(f"d_model={config.d_model} is not divisible by "
                         f"n_heads={config.n_heads}")
    require_dropout(config.dropout)


@dataclass
class TransformerConfig:
    """Transformer 的超参数，默认值就是论文的 base 模型。

    The paper's base model by default (d_model 512, 8 heads, 6 + 6 layers,
    d_ff 2048, dropout 0.1). A plain dataclass: change a field before building
    the model if you like; :class:`Transformer` checks the config again and
    keeps its own copy, so changing it afterwards leaves the model alone.

    ``norm_first``: False = Post-LN as in the paper, True = Pre-LN.
    ``dropout``: on each sub-layer's output and on embeddings + positions (the
    paper's two places), and also on attention weights and the FFN's hidden
    layer (as PyTorch does).
    ``pad_id``, ``bos_id``, ``eos_id``: the special tokens of the vocabularies
    (decoding reads them here). Left as None, ``bos_id`` is 1 and ``eos_id``
    is 2 (this package's vocabularies), except that the one ``pad_id`` takes
    becomes 0 (``pad_id=1`` gives bos 0, eos 2, as in fairseq).
    ``share_embeddings``: one table for source, target and output (paper §3.4;
    needs one shared vocabulary). ``tie_output``: the output projection reuses
    the target embedding.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 256
    pad_id: int = 0
    bos_id: int | None = None
    eos_id: int | None = None
    norm_first: bool = False
    share_embeddings: bool = False
    tie_output: bool = True

    def __post_init__(self):
        check_shape(self, ("src_vocab_size", "tgt_vocab_size", "d_model",
                           "n_heads", "n_layers", "d_ff", "max_len"))
        defaults = [name for name in ("bos_id", "eos_id")
                    if getattr(self, name) is None]
        plain_numbers(self, ("pad_id", "bos_id", "eos_id"))
        if (not _is_integer(self.pad_id)
                or not 0 <= self.pad_id < min(self.src_vocab_size,
                                              self.tgt_vocab_size)):
            raise bad_value(_is_integer(self.pad_id),
                f"pad_id={self.pad_id!r} is not a valid id for vocabularies "
                f"of size {self.src_vocab_size} and {self.tgt_vocab_size}")
        for name, usual in (("bos_id", 1), ("eos_id", 2)):
            if getattr(self, name) is None:
                object.__setattr__(self, name,
                                   usual if usual != self.pad_id else 0)
        for name in ("bos_id", "eos_id"):
            value = getattr(self, name)
            if (not _is_integer(value) or not 0 <= value < self.tgt_vocab_size
                    or value == self.pad_id):
                raise bad_value(
                    _is_integer(value),
                    f"{name}={value!r} must be an id of the target vocabulary "
                    f"(size {self.tgt_vocab_size}) other than "
                    f"pad_id={self.pad_id}"
                    + (f" ({name}={value} is the default: pass {name} for a "
                       "vocabulary this small)" if name in defaults else "")
                    + (" (if pad_id was changed on a built config, e.g. with "
                       "dataclasses.replace, the bos_id and eos_id it filled "
                       "in were not: pass them too)" if value == self.pad_id
                       and name not in defaults else ""))
        if self.bos_id == self.eos_id:   # decoding would never stop
            raise ValueError(f"bos_id={self.bos_id} and eos_id={self.eos_id} "
                             f"must be different ids")
        require_flags(norm_first=self.norm_first,
                      share_embeddings=self.share_embeddings,
                      tie_output=self.tie_output)
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "share_embeddings=True needs one shared vocabulary, but got "
                f"src_vocab_size={self.src_vocab_size} != "
                f"tgt_vocab_size={self.tgt_vocab_size}")
        plain_numbers(self)

    def to_dict(self) -> dict:
        """把配置转成普通的字典（写进检查点用）。"""
        return asdict(self)


def require_pair(src, tgt, tgt_name: str = "tgt_in") -> None:
    """检查源句和目标句是两批词元编号，批大小相同。

    src (B, S) and ``tgt`` (B, T) token ids; errors name ``tgt_name``, the
    argument the caller was given (``ids`` in :func:`decode.log_prob`).
    """
    require_ids(src, "src", lead="B, S")
    require_ids(tgt, tgt_name, lead="B, T")
    if src.shape[0] != tgt.shape[0]:
        raise ValueError(
            f"src and {tgt_name} must have the same batch size, but got "
            f"{tuple(src.shape)} and {tuple(tgt.shape)}")


def _embed(table: TokenEmbedding, ids: torch.Tensor, name: str):
    """Look ids up; an id out of range names the argument it came in."""
    try:
        return table(ids)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


class Transformer(nn.Module):
    """完整的编码器–解码器 Transformer（批维在前）。

    The encoder–decoder of "Attention Is All You Need", batch first.

    Shape:
        src (B, S) and tgt_in (B, T) token ids → logits (B, T, V_tgt). Padding
        masks come from ``pad_id``; the target also gets the causal mask.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        require_config(config, TransformerConfig)
        c = self.config = replace(config)  # checked again, and our own copy
        self.src_embed = TokenEmbedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = (self.src_embed if c.share_embeddings
                          else TokenEmbedding(c.tgt_vocab_size, c.d_model))
        self.positions = SinusoidalPositionalEncoding(c.d_model, c.max_len,
                                                      c.dropout)
        self.encoder = Encoder(c.d_model, c.n_heads, c.d_ff, c.n_layers,
                               c.dropout, c.norm_first)
        self.decoder = Decoder(c.d_model, c.n_heads, c.d_ff, c.n_layers,
                               c.dropout, c.norm_first)
        self.out = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        if c.share_embeddings or c.tie_output:
            # (V, D), one matrix, two uses
            self.out.weight = self.tgt_embed.table.weight

    def encode(self, src: torch.Tensor):
        """编码源序列，返回记忆和源序列的填充掩码。

        src (B, S) → memory (B, S, D) and the source mask (B, 1, S).
        """
        require_ids(src, "src", lead="B, S")
        require_fits("src", 0, src.shape[1], self.config.max_len)
        if src.shape[1] == 0:      # all <pad> gives zeros; no token is refused
            raise ValueError("src: expected at least one token (EOS), but got "
                             f"shape {tuple(src.shape)}")
        src_mask = padding_mask(src, self.config.pad_id)         # (B, 1, S)
        x = _embed(self.src_embed, src, "src")                   # (B, S, D)
        return self.encoder(self.positions(x), src_mask), src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor,
               src_mask: torch.Tensor, cache: DecoderCache | None = None,
               return_weights: bool = False):
        """由目标前缀和记忆算出每个位置对下一个词元的分数（logits）。

        tgt_in (B, T), memory (B, S, D) → logits (B, T, V).

        With a ``cache`` (:meth:`new_cache`), ``tgt_in`` holds only the new
        tokens: their positions start where the cache ends, and they attend to
        every cached position (the target padding mask is not applied then:
        decoding never feeds <pad> before a live token).
        ``return_weights=True`` also returns
        {"self": [(B, H, T, t + T)], "cross": [(B, H, T, S)]}.
        """
        require_ids(tgt_in, "tgt_in", lead="B, T")
        start, T = (0 if cache is None else cache.length), tgt_in.shape[1]
        require_fits("tgt_in", start, T, self.config.max_len)
        if T == 0:
            raise ValueError("tgt_in: expected at least one token (BOS), "
                             f"but got shape {tuple(tgt_in.shape)}")
        if cache is None:
            self_mask = causal_mask(T, tgt_in.device) & padding_mask(
                tgt_in, self.config.pad_id)                      # (B, T, T)
        else:
            # one new token may see everything cached; several see the cache
            # and their past
            self_mask = None if T == 1 else causal_mask(
                start + T, tgt_in.device)[start:]                # (T, t + T)
        x = self.positions(_embed(self.tgt_embed, tgt_in, "tgt_in"),
                           start)                                # (B, T, D)
        y = self.decoder(x, memory, self_mask, src_mask, cache, return_weights)
        if return_weights:
            y, maps = y
            return self.out(y), maps
        return self.out(y)                                       # (B, T, V)

    def new_cache(self) -> DecoderCache:
        """新建一个空的解码缓存，供逐步解码使用。

        An empty cache for step-by-step decoding with :meth:`decode`.
        """
        return DecoderCache(len(self.decoder.layers))

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """教师强制（teacher forcing）下的一次完整前向：先编码，再解码。"""
        require_pair(src, tgt_in)
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, memory, src_mask)


def count_parameters(model: nn.Module) -> int:
    """数出模型的可训练参数个数（共享的参数只算一次）。

    Trainable parameters, each shared tensor counted once (``parameters()``
    already dedupes).
    """
    require_instance(model, nn.Module, "model")
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
