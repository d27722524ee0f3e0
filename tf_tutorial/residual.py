"""第 6 章：残差连接（residual connection）与层归一化的两种放法。

Post-LN (2017 paper):  y = LayerNorm(x + Dropout(Sublayer(x)))
Pre-LN (most models now): y = x + Dropout(Sublayer(LayerNorm(x)))

Shape legend: B batch, L sequence length, D d_model.
"""
from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn

from tf_tutorial._checks import (require_dropout, require_flags, require_sizes,
                                require_tensors)
from tf_tutorial.ffn import ACTIVATIONS
from tf_tutorial.norm import LayerNorm


class SublayerConnection(nn.Module):
    """用残差连接和层归一化包住一个子层（注意力或前馈网络）。

    Wrap a sublayer, Sublayer(·) (attention or FFN), with a residual connection
    and a LayerNorm.

    Args:
        d_model: D.
        dropout: on the sublayer's output before the residual add (training
            only), as in the paper (§5.4).
        norm_first: False = Post-LN, True = Pre-LN.
        eps: LayerNorm's ε.
    Shape:
        x (B, L, D); ``sublayer`` maps (B, L, D) → (B, L, D).
    """

    def __init__(self, d_model: int, dropout: float = 0.0,
                 norm_first: bool = False, eps: float = 1e-5):
        super().__init__()
        require_dropout(dropout)
        require_flags(norm_first=norm_first)
        self.norm, self.dropout, self.norm_first = (
            LayerNorm(d_model, eps), nn.Dropout(dropout), norm_first)

    def forward(
            self, x: torch.Tensor,
            sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """按 ``norm_first`` 选择 Post-LN 或 Pre-LN 的算法。

        Post-LN 算 LayerNorm(x + Sublayer(x))，
        Pre-LN 算 x + Sublayer(LayerNorm(x))。
        """
        require_tensors(x=x)
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


def stack_norm(d_model: int, norm_first: bool, enabled: bool | None = None,
               eps: float = 1e-5) -> nn.Module:
    """一摞层之后的归一化：层归一化，或者什么也不做（恒等映射）。

    The norm after a stack of layers: a LayerNorm, or the identity.

    ``enabled=None`` follows the placement: on for Pre-LN (no sublayer
    normalises the stack's output there), off for Post-LN (the last sublayer
    already did).
    """
    require_flags(norm_first=norm_first)
    if enabled is not None:
        require_flags(final_norm=enabled)
    use = norm_first if enabled is None else enabled
    return LayerNorm(d_model, eps) if use else nn.Identity()


def given_settings(**settings) -> dict:
    """栈的调用者明确给出的每层设置（None 表示没给，用层自己的默认值）。

    The per-layer settings a stack's caller gave: those that are not None.
    The rest take the layer class's own defaults, written in one place.
    """
    return {k: v for k, v in settings.items() if v is not None}


def layer_settings(layer: nn.Module) -> dict:
    """一个层构造时用的 dropout、norm_first、activation 和 eps。

    The dropout, norm_first, activation and eps a layer was built with.
    """
    block = layer.ffn_block
    names = {fn: name for name, fn in ACTIVATIONS.items()}
    return dict(dropout=block.dropout.p, norm_first=block.norm_first,
                activation=names.get(layer.ffn.act, layer.ffn.act),
                eps=block.norm.eps)


def require_stack_sizes(kind: type, n_heads, d_ff, n_layers) -> None:
    """``Encoder(d_model, n_heads, d_ff, n_layers)`` 这种写法：四个尺寸缺一不可。

    Names every size left out at once (``Encoder(8, 2)`` lacks d_ff and
    n_layers), and the other way to build the stack; then checks n_layers.
    """
    missing = [name for name, value in (("n_heads", n_heads), ("d_ff", d_ff),
                                        ("n_layers", n_layers))
               if value is None]
    if missing:
        stack = kind.__name__.replace("Layer", "")
        names = (", ".join(missing[:-1]) + " and " if missing[:-1]
                 else "") + missing[-1]
        raise TypeError(f"{stack}(d_model, n_heads, d_ff, n_layers) is "
                        f"missing {names} (or build it from one layer: "
                        f"{stack}(layer, n_layers))")
    require_sizes(n_layers=n_layers)


def stack_from_layer(kind: type, layer: nn.Module, n_heads, d_ff, n_layers,
                     final_norm: bool | None, given: dict | None = None
                     ) -> tuple[nn.ModuleList, nn.Module]:
    """``Encoder(layer, N)`` 这种写法：把一个层深拷贝成 N 个彼此独立的层。

    The stacks' second way to be built, as ``nn.TransformerEncoder(layer, N)``
    does: N deep copies of ``layer`` (a ``kind``), and, as there, no final
    norm unless ``final_norm=True`` (torch's ``norm=``; a Pre-LN stack wants
    one, chapter 6). N comes second (the slot of ``n_heads``) or as
    ``n_layers=``; the other sizes belong to the layer, so none may be given
    with it. ``given`` holds the caller's dropout, norm_first, activation and
    eps (as :func:`given_settings` keeps them): these too come from the layer, so a value that
    differs from the layer's is refused rather than silently ignored.
    """
    if not isinstance(layer, kind):
        hint = (" (tf_tutorial.interop.from_torch converts torch.nn's)"
                if type(layer).__module__.startswith("torch.nn") else "")
        raise TypeError(f"d_model: expected an int or {kind.__name__}, "
                        f"but got {type(layer).__name__}{hint}")
    if n_layers is None:             # (layer, N): N sits in n_heads' slot
        n_heads, n_layers = None, n_heads
    extra = {name: value for name, value in
             (("n_heads", n_heads), ("d_ff", d_ff)) if value is not None}
    if extra:
        raise TypeError(f"{kind.__name__.replace('Layer', '')}(layer, "
                        f"n_layers) takes no other size, but also got "
                        + ", ".join(f"{k}={v}" for k, v in extra.items()))
    require_sizes(n_layers=n_layers)
    own = layer_settings(layer)
    clash = [(k, v) for k, v in (given or {}).items() if v != own[k]]
    if clash:
        stack = kind.__name__.replace("Layer", "")
        raise ValueError(
            f"{stack}(layer, n_layers) copies the layer, whose "
            + ", ".join(f"{k}={own[k]!r}" for k, _ in clash)
            + ", but also got " + ", ".join(f"{k}={v!r}" for k, v in clash)
            + f": build the layer with those settings, or the {stack} "
            "from sizes")
    return (nn.ModuleList(copy.deepcopy(layer) for _ in range(n_layers)),
            norm_after(layer, final_norm or False))


def norm_after(layer: nn.Module, enabled: bool | None = None) -> nn.Module:
    """一摞 ``layer`` 这样的层之后的归一化（:func:`stack_norm`），宽度、放法和 ε 取自这个层。

    :func:`stack_norm` for a stack of layers like ``layer``: its width,
    placement (``norm_first``) and ε, on its dtype and device.
    """
    norm = layer.ffn_block.norm   # every layer ends in its FFN's connection
    return stack_norm(norm.d_model, layer.ffn_block.norm_first, enabled,
                      norm.eps).to(norm.weight)
