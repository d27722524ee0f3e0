"""与 ``torch.nn`` 互换：由 PyTorch 的模块造出本软件包里权重相同的对应模块。

Bridge to ``torch.nn``: build this package's module from PyTorch's, holding the
same weights.

Shape legend: B batch, S key length (the positions a mask hides or shows),
L or T query length, as in :mod:`tf_tutorial.attention`.

The book uses it to prove, to float tolerance, that our readable code computes
what PyTorch computes. Each supported ``torch.nn`` class registers one converter
below.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from tf_tutorial._checks import require_bool_mask

_CONVERTERS: dict[type, Callable[[nn.Module], nn.Module]] = {}


def _converter(torch_type: type):
    def register(fn):
        _CONVERTERS[torch_type] = fn
        return fn
    return register


def from_torch(module: nn.Module) -> nn.Module:
    """把 ``torch.nn`` 模块换成本软件包的对应模块，复制权重、数据类型和设备。

    Return this package's equivalent of ``module`` with copied weights, dtype
    and device. Building it draws random initial weights that are then
    overwritten; that happens under :func:`torch.random.fork_rng`, so the
    caller's random stream is the same as if ``from_torch`` had not run.

    An ``nn.MultiheadAttention(bias=False)`` becomes ours with ``bias=False``
    (no bias parameters either). Other torch modules without biases
    (``bias=False``), or a LayerNorm without weights
    (``elementwise_affine=False``), become ours with biases of 0 and weights of
    1 that do not train (``requires_grad=False``): those layers of ours always
    have them, and so it computes, and trains, as the torch module does. Such
    a LayerNorm holds float32 parameters where torch's held none; a float64
    input is still normalised in float64, as by the torch module. Apart from
    those, every parameter of the result trains: ``requires_grad=False`` on a
    torch parameter is not copied.

    PyTorch's ``nn.TransformerEncoder`` in eval mode without autograd may take
    its nested-tensor fast path, which writes zeros at padded positions; ours
    computes them like any other position. Compare real positions then, or
    build the encoder with ``enable_nested_tensor=False``.

    Raises:
        TypeError: no converter for ``type(module)``.
        ValueError: the module uses an option that our version does not model.
    """
    for torch_type, convert in _CONVERTERS.items():
        if type(module) is torch_type:
            with torch.random.fork_rng(devices=[]):
                return convert(module).train(module.training)
    names = ", ".join(sorted(f"nn.{t.__name__}" for t in _CONVERTERS))
    raise TypeError(f"from_torch() supports {names}, "
                    f"but got {type(module).__name__}")


def _placed_like(ours: nn.Module, ref: nn.Module) -> nn.Module:
    """Move ``ours`` to ``ref``'s dtype and device *before* copying, so no
    precision is lost."""
    p = next(ref.parameters(), None)
    return ours if p is None else ours.to(device=p.device, dtype=p.dtype)


@_converter(nn.RNN)
def convert_rnn(m: nn.RNN) -> nn.Module:
    """把单层、tanh、批维在前的 ``nn.RNN`` 换成本书的 ``ElmanRNN``。"""
    from tf_tutorial.rnn import ElmanRNN

    problems = {"num_layers": (m.num_layers, 1),
                "nonlinearity": (m.nonlinearity, "tanh"),
                "bidirectional": (m.bidirectional, False),
                "batch_first": (m.batch_first, True)}
    for arg, (got, want) in problems.items():
        if got != want:
            raise ValueError(f"from_torch(nn.RNN): expected {arg}={want!r}, "
                             f"but got {got!r}")
    ours = _placed_like(ElmanRNN(m.input_size, m.hidden_size, bias=m.bias), m)
    with torch.no_grad():
        ours.weight_ih.copy_(m.weight_ih_l0)
        ours.weight_hh.copy_(m.weight_hh_l0)
        if m.bias:
            ours.bias_ih.copy_(m.bias_ih_l0)
            ours.bias_hh.copy_(m.bias_hh_l0)
    return ours


@_converter(nn.MultiheadAttention)
def convert_multihead_attention(m: nn.MultiheadAttention) -> nn.Module:
    """把 ``nn.MultiheadAttention`` 换成本书的 ``MultiHeadAttention``。"""
    from tf_tutorial.multihead import MultiHeadAttention

    # our W^K and W^V read width D, as in the paper
    if not m._qkv_same_embed_dim:
        raise ValueError(f"from_torch(nn.MultiheadAttention): expected "
                         f"kdim = vdim = embed_dim = {m.embed_dim}, "
                         f"but got kdim={m.kdim}, vdim={m.vdim}")
    problems = {"batch_first": (m.batch_first, True),
                "add_bias_kv": (m.bias_k is not None, False),
                "add_zero_attn": (m.add_zero_attn, False)}
    for arg, (got, want) in problems.items():
        if got != want:
            raise ValueError(f"from_torch(nn.MultiheadAttention): expected "
                             f"{arg}={want!r}, but got {got!r}")
    bias = m.in_proj_bias is not None
    ours = _placed_like(MultiHeadAttention(m.embed_dim, m.num_heads,
                                           dropout=m.dropout, bias=bias), m)
    # PyTorch stacks the three (D, D) blocks
    w_q, w_k, w_v = m.in_proj_weight.chunk(3)
    with torch.no_grad():
        for lin, w in ((ours.w_q, w_q), (ours.w_k, w_k), (ours.w_v, w_v),
                       (ours.w_o, m.out_proj.weight)):
            lin.weight.copy_(w)
        if bias:
            for lin, b in zip((ours.w_q, ours.w_k, ours.w_v),
                              m.in_proj_bias.chunk(3)):
                lin.bias.copy_(b)
            ours.w_o.bias.copy_(m.out_proj.bias)
    return ours


def torch_attn_mask(allowed: torch.Tensor) -> torch.Tensor:
    """把本书的掩码（True 可以看）换成 PyTorch 的 ``attn_mask``（True 屏蔽）。

    Our mask (True = may attend) → ``nn.MultiheadAttention``'s ``attn_mask``
    (True = blocked).
    """
    require_bool_mask(allowed, "allowed")
    return ~allowed


def torch_key_padding_mask(allowed: torch.Tensor) -> torch.Tensor:
    """把本书的填充掩码换成 PyTorch 的 ``key_padding_mask``（True 表示填充）。

    Our padding mask (B, 1, S), True = real token → PyTorch's
    ``key_padding_mask`` (B, S), True = padding."""
    require_bool_mask(allowed, "allowed")
    if allowed.dim() != 3 or allowed.shape[1] != 1:
        raise ValueError(f"allowed: expected a padding mask of shape "
                         f"(B, 1, S), but got {tuple(allowed.shape)}")
    return ~allowed[:, 0]


@_converter(nn.LayerNorm)
def convert_layer_norm(m: nn.LayerNorm) -> nn.Module:
    """把 ``nn.LayerNorm`` 换成本书的 ``LayerNorm``。"""
    from tf_tutorial.norm import LayerNorm

    if len(m.normalized_shape) != 1:
        raise ValueError(f"from_torch(nn.LayerNorm): expected one normalised "
                         f"dimension, but got "
                         f"normalized_shape={m.normalized_shape}")
    ours = _placed_like(LayerNorm(m.normalized_shape[0], eps=m.eps), m)
    _copy_linear_norm([(ours, m)])
    return ours


def _activation_name(m: nn.Module) -> str:
    """'relu' or 'gelu' for a torch Transformer layer; ValueError for
    anything else."""
    act = m.activation
    if act is F.relu or act is torch.relu or isinstance(act, nn.ReLU):
        return "relu"
    if act is F.gelu or (isinstance(act, nn.GELU)
                         and act.approximate == "none"):
        return "gelu"
    raise ValueError(f"from_torch({type(m).__name__}): expected a relu or "
                     f"gelu activation, but got {act!r}")


def _copy_linear_norm(pairs) -> None:
    """Copy weights and biases; a LayerNorm also takes its own ε (each of a
    torch layer's norms may have been given another after construction). A
    weight or bias that torch's module lacks becomes 1 or 0, frozen; one that
    ours lacks (RMSNorm has no bias) is skipped."""
    with torch.no_grad():
        for mine, theirs in pairs:
            for name, absent in (("weight", 1.0), ("bias", 0.0)):
                if not hasattr(mine, name):
                    continue
                if getattr(theirs, name, None) is not None:
                    getattr(mine, name).copy_(getattr(theirs, name))
                else:
                    getattr(mine, name).fill_(absent).requires_grad_(False)
            if isinstance(theirs, nn.LayerNorm):
                mine.eps = theirs.eps


def _copy_dropout(pairs) -> None:
    """Each dropout site takes torch's own p: its constructor sets them all
    alike, but each may have been changed after (as a norm's ε may)."""
    for mine, theirs in pairs:
        mine.p = theirs.p


def _layer_kwargs(m: nn.Module) -> dict:
    """Our layer's constructor arguments, read off a torch encoder or decoder
    layer."""
    if not m.self_attn.batch_first:
        raise ValueError(f"from_torch({type(m).__name__}): expected "
                         "batch_first=True, but got False")
    return dict(d_model=m.self_attn.embed_dim, n_heads=m.self_attn.num_heads,
                d_ff=m.linear1.out_features,   # dropout: _copy_dropout
                norm_first=m.norm_first, activation=_activation_name(m),
                eps=m.norm1.eps)


@_converter(nn.TransformerEncoderLayer)
def convert_encoder_layer(m: nn.TransformerEncoderLayer) -> nn.Module:
    """把 ``nn.TransformerEncoderLayer`` 换成本书的 ``EncoderLayer``。"""
    from tf_tutorial.encoder import EncoderLayer

    ours = _placed_like(EncoderLayer(**_layer_kwargs(m)), m)
    ours.self_attn = convert_multihead_attention(m.self_attn)
    _copy_linear_norm([(ours.ffn.w1, m.linear1), (ours.ffn.w2, m.linear2),
                       (ours.attn_block.norm, m.norm1),
                       (ours.ffn_block.norm, m.norm2)])
    _copy_dropout([(ours.attn_block.dropout, m.dropout1),
                   (ours.ffn.dropout, m.dropout),
                   (ours.ffn_block.dropout, m.dropout2)])
    return ours


@_converter(nn.TransformerDecoderLayer)
def convert_decoder_layer(m: nn.TransformerDecoderLayer) -> nn.Module:
    """把 ``nn.TransformerDecoderLayer`` 换成本书的 ``DecoderLayer``。"""
    from tf_tutorial.decoder import DecoderLayer

    ours = _placed_like(DecoderLayer(**_layer_kwargs(m)), m)
    ours.self_attn = convert_multihead_attention(m.self_attn)
    ours.cross_attn = convert_multihead_attention(m.multihead_attn)
    _copy_linear_norm([(ours.ffn.w1, m.linear1), (ours.ffn.w2, m.linear2),
                       (ours.self_block.norm, m.norm1),
                       (ours.cross_block.norm, m.norm2),
                       (ours.ffn_block.norm, m.norm3)])
    _copy_dropout([(ours.self_block.dropout, m.dropout1),
                   (ours.cross_block.dropout, m.dropout2),
                   (ours.ffn.dropout, m.dropout),
                   (ours.ffn_block.dropout, m.dropout3)])
    return ours


def _convert_stack(m: nn.Module, ours: nn.Module) -> nn.Module:
    ours.layers = nn.ModuleList(from_torch(layer) for layer in m.layers)
    if m.norm is None or type(m.norm) is nn.Identity:
        ours.norm = nn.Identity()
    elif type(m.norm) is nn.LayerNorm or type(m.norm) is getattr(
            nn, "RMSNorm", None):
        ours.norm = from_torch(m.norm)
    else:
        raise ValueError(f"from_torch({type(m).__name__}): expected a final "
                         f"norm that is None, nn.LayerNorm or nn.RMSNorm, "
                         f"but got {type(m.norm).__name__}")
    return _placed_like(ours, m)


@_converter(nn.TransformerEncoder)
def convert_encoder(m: nn.TransformerEncoder) -> nn.Module:
    """把 ``nn.TransformerEncoder`` 换成本书的 ``Encoder``。"""
    from tf_tutorial.encoder import Encoder

    first = m.layers[0]
    return _convert_stack(m, Encoder(first.self_attn.embed_dim,
                                     first.self_attn.num_heads,
                                     first.linear1.out_features,
                                     len(m.layers)))


@_converter(nn.TransformerDecoder)
def convert_decoder(m: nn.TransformerDecoder) -> nn.Module:
    """把 ``nn.TransformerDecoder`` 换成本书的 ``Decoder``。"""
    from tf_tutorial.decoder import Decoder

    first = m.layers[0]
    return _convert_stack(m, Decoder(first.self_attn.embed_dim,
                                     first.self_attn.num_heads,
                                     first.linear1.out_features,
                                     len(m.layers)))


def convert_rms_norm(m: nn.Module) -> nn.Module:
    """把 ``nn.RMSNorm`` 换成本书的 ``RMSNorm``（第 12 章）。

    ``eps=None`` in PyTorch means the machine epsilon of the dtype the norm is
    computed in: ``torch.finfo(torch.float32).eps`` (≈ 1.19e-7) for float32,
    bfloat16 and float16 modules, ``torch.finfo(torch.float64).eps`` for float64
    ones. Our ``RMSNorm`` holds a number, so it gets the value for the module's
    dtype now; a later ``.double()`` does not change it.

    Without a weight (``elementwise_affine=False``) ours gets a frozen weight
    of 1, as for a LayerNorm.

    Raises:
        ValueError: more than one normalised dimension.
    """
    from tf_tutorial.norm import RMSNorm

    if len(m.normalized_shape) != 1:
        raise ValueError(f"from_torch(nn.RMSNorm): expected one normalised "
                         f"dimension, but got "
                         f"normalized_shape={m.normalized_shape}")
    eps = m.eps
    if eps is None:
        dtype = torch.float32 if m.weight is None else m.weight.dtype
        eps = torch.finfo(torch.promote_types(dtype, torch.float32)).eps
    ours = _placed_like(RMSNorm(m.normalized_shape[0], eps=eps), m)
    _copy_linear_norm([(ours, m)])
    return ours


# torch >= 2.4; the package itself asks for torch >= 2.2
if hasattr(nn, "RMSNorm"):
    _converter(nn.RMSNorm)(convert_rms_norm)
