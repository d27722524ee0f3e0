"""各模块共用的参数检查：错误信息说出参数名、收到的值和期望的值。

Argument checks shared by the modules, so that every constructor and every
``forward`` says which argument was wrong, what it got and what it expected.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import torch


class WrongTypeError(TypeError, ValueError):
    """类型不对的参数（如尺寸给了字符串）：既是 TypeError，也是 ValueError。

    Python raises ``TypeError`` for an argument of the wrong type; the checks
    here raise ``ValueError`` for a value out of range. An argument of the
    wrong type (``d_model="8"``, ``dropout=None``, ``causal="no"``) raises
    this, so that ``except TypeError`` and ``except ValueError`` both catch
    it, whichever a caller expects.
    """


def bad_value(right_type: bool, message: str) -> ValueError:
    """一个参数该报的错：类型对而值不对报 ValueError，类型不对报 WrongTypeError。

    ``raise bad_value(_is_real(eps), "eps must be positive, ...")``: the one
    place that picks the class, so every check follows the same rule.
    """
    return (ValueError if right_type else WrongTypeError)(message)


def _is_integer(value) -> bool:
    """An integer (int, NumPy integer), but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _require_ints(values: dict, least: int, what: str) -> None:
    for name, value in values.items():     # NumPy integers are integers
        if not _is_integer(value) or value < least:
            raise bad_value(_is_integer(value),
                            f"{name} must be {what}, but got {value!r}")


def require_sizes(**sizes) -> None:
    """检查这些尺寸都是正整数，否则报出第一个不合格的参数名。

    ``require_sizes(d_model=0)`` raises
    ``ValueError: d_model must be a positive integer, but got 0``.
    """
    _require_ints(sizes, 1, "a positive integer")


def require_groups(n_heads: int, n_kv_heads: int, detail: str = "") -> None:
    """检查查询头能平均分给键值头：H_kv 不多于 H，且整除 H。

    Both are positive integers already. ``require_groups(4, 8)`` raises
    ``ValueError: n_kv_heads=8 is more than n_heads=4: each key/value head
    serves a group of one or more query heads``; ``require_groups(6, 4)``
    raises ``n_heads=6 is not divisible by n_kv_heads=4``. ``detail`` is
    added after a colon (e.g. the shapes it was read from).
    """
    tail = f": {detail}" if detail else ""
    if n_kv_heads > n_heads:
        raise ValueError(f"n_kv_heads={n_kv_heads} is more than "
                         f"n_heads={n_heads}: each key/value head serves a "
                         f"group of one or more query heads" + tail)
    if n_heads % n_kv_heads:
        raise ValueError(f"n_heads={n_heads} is not divisible by "
                         f"n_kv_heads={n_kv_heads}" + tail)


def require_range(name: str, value, least: int = 1) -> tuple[int, int]:
    """一个整数，或一对 ``(low, high)``，且 ``least <= low <= high``；返回这一对。

    ``require_range("lengths", (9, 5))`` raises ``ValueError: lengths must be
    an integer or a pair (low, high) with 1 <= low <= high, but got (9, 5)``.
    """
    pair = (value, value) if isinstance(value, numbers.Integral) else value
    try:
        low, high = pair
    except (TypeError, ValueError):
        low = high = None
    integers = _is_integer(low) and _is_integer(high)
    if not integers or not least <= low <= high:
        raise bad_value(integers, f"{name} must be an integer or a pair (low, "
                        f"high) with {least} <= low <= high, but got {value!r}")
    return int(low), int(high)


def require_token_id(**ids) -> None:
    """检查这些词元编号都是整数（不是 bool），否则报出第一个不合格的参数名。

    ``require_token_id(pad_id=True)`` raises
    ``WrongTypeError: pad_id must be an integer token id, but got True`` (True
    would silently mean id 1). NumPy integers are integers; the range is the
    caller's to check.
    """
    for name, value in ids.items():
        if not _is_integer(value):
            raise WrongTypeError(f"{name} must be an integer token id, "
                                 f"but got {value!r}")


def require_flags(**flags) -> None:
    """检查这些开关都是 True 或 False，否则报出第一个不合格的参数名。

    ``require_flags(causal="no")`` raises
    ``WrongTypeError: causal must be True or False, but got 'no'`` (a non-empty
    string would silently mean True). NumPy booleans are accepted.
    """
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise WrongTypeError(f"{name} must be True or False, "
                                 f"but got {value!r}")


def require_integers(**values) -> None:
    """检查这些数都是整数（可以是负数，如随机种子），否则报出参数名。

    ``require_integers(seed=1.5)`` raises
    ``WrongTypeError: seed must be an integer, but got 1.5``; so do None, a
    string and a bool. NumPy integers are accepted.
    """
    _require_ints(values, -math.inf, "an integer")


def require_counts(**counts) -> None:
    """检查这些个数都是非负整数（可以为 0），否则报出第一个不合格的参数名。

    ``require_counts(extra=-1)`` raises
    ``ValueError: extra must be an integer >= 0, but got -1``.
    """
    _require_ints(counts, 0, "an integer >= 0")


def _is_real(value) -> bool:
    """A real number (int, float, NumPy scalar), but not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def require_dropout(dropout, name: str = "dropout") -> None:
    """检查 dropout 概率是 [0, 1) 里的数。

    ``require_dropout(1.0)`` raises
    ``ValueError: dropout must be in [0, 1), but got 1.0``; so does a string
    or a bool. ``name`` is the argument's name in the message.
    """
    if not (_is_real(dropout) and 0.0 <= dropout < 1.0):
        raise bad_value(_is_real(dropout),
                        f"{name} must be in [0, 1), but got {dropout!r}")


def require_nonnegative(**values) -> None:
    """检查这些数都是有限的非负数（如束搜索的长度惩罚指数），否则报出参数名。

    ``require_nonnegative(alpha=-1)`` raises
    ``ValueError: alpha must be a finite number >= 0, but got -1``; ``inf``
    and NaN are refused too, and a string or a bool raises
    :class:`WrongTypeError`.
    """
    for name, value in values.items():
        if not (_is_real(value) and 0 <= value < math.inf):
            raise bad_value(_is_real(value), f"{name} must be a finite "
                            f"number >= 0, but got {value!r}")


def require_choice(name: str, value, choices) -> None:
    """检查 ``value`` 是 ``choices`` 里的一个名字（如激活函数 "relu"），否则报出参数名。

    ``require_choice("norm", "rsm", ("layer", "rms"))`` raises ``ValueError:
    norm must be one of ('layer', 'rms'), but got 'rsm'``; a value that is not
    a str (5, None, ["relu"]) raises :class:`WrongTypeError`, with the same
    message.
    """
    if not isinstance(value, str) or value not in choices:
        raise bad_value(isinstance(value, str),
                        f"{name} must be one of {choices}, but got {value!r}")


def require_float_dtype(**dtypes) -> None:
    """检查这些参数都是浮点的 torch.dtype（如位置编码表的类型），否则报出参数名。

    ``require_float_dtype(dtype=torch.int64)`` raises ``WrongTypeError: dtype
    must be a floating-point torch.dtype, but got torch.int64`` (a table of
    sines cast to integers would hold only -1, 0 and 1).
    """
    for name, value in dtypes.items():
        if not (isinstance(value, torch.dtype) and value.is_floating_point):
            raise WrongTypeError(f"{name} must be a floating-point "
                                 f"torch.dtype, but got {value!r}")


def require_finite(**values) -> None:
    """检查这些数都是有限的实数（正负都行，如平移的位置数），否则报出参数名。

    ``require_finite(k=float("nan"))`` raises
    ``ValueError: k must be a finite number, but got nan``; so does an integer
    too large for a float (10**400); a string or a bool raises
    :class:`WrongTypeError`.
    """
    for name, value in values.items():
        try:
            finite = _is_real(value) and math.isfinite(value)
        except OverflowError:                 # 10**400 has no float
            finite = False
        if not finite:
            raise bad_value(_is_real(value), f"{name} must be a finite "
                            f"number, but got {value!r}")


def require_positive(**values) -> None:
    """检查这些数都是正数（如 LayerNorm 的 eps），否则报出第一个不合格的参数名。

    ``require_positive(eps=0)`` raises
    ``ValueError: eps must be positive, but got 0``.
    """
    for name, value in values.items():
        if not (_is_real(value) and value > 0):
            raise bad_value(_is_real(value),
                            f"{name} must be positive, but got {value!r}")


def require_finite_positive(**values) -> None:
    """检查这些数都是正的有限数（``inf`` 也不行），否则报出参数名。

    Like :func:`require_positive`, and also refuses ``inf``:
    ``require_finite_positive(base=float("inf"))`` raises
    ``ValueError: base must be finite, but got inf``.
    """
    require_positive(**values)
    for name, value in values.items():
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, but got {value!r}")


def require_eps(eps) -> None:
    """检查 ε 是正的有限数：``inf`` 会把每个输出都压成 0。

    :func:`require_finite_positive` for the argument ``eps``: ``inf`` would
    press every output to 0.
    """
    require_finite_positive(eps=eps)


_is_compiling = getattr(torch.compiler, "is_compiling", lambda: False)


def broadcast_shape(*shapes) -> tuple | None:
    """几个形状按广播规则合成的形状；不能广播时返回 None。

    What ``torch.broadcast_shapes`` computes, in plain Python: the checks run
    on every attention call, and torch's version (a Python reference
    implementation) took a fifth of the time of a cached decoding step of a
    small model. Under ``torch.compile`` torch's version is used: comparing
    symbolic lengths in Python would fix them as constants, a graph per length.
    """
    if _is_compiling():
        try:
            return tuple(torch.broadcast_shapes(*shapes))
        except RuntimeError:
            return None
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for shape in shapes:
        for i, d in enumerate(shape, n - len(shape)):
            if d != 1:
                if out[i] == 1:
                    out[i] = d
                elif out[i] != d:
                    return None
    return tuple(out)


def require_tensors(**tensors) -> None:
    """检查这些参数都是张量（PyTorch 自己的层也对列表报 TypeError）。

    ``require_tensors(x=[1, 2])`` raises
    ``TypeError: x must be a torch.Tensor, but got list``.
    """
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, "
                            f"but got {type(t).__name__}")


def require_bool_mask(mask, name: str = "mask") -> None:
    """掩码必须是布尔型张量（True 表示可以看），否则报错。

    TypeError unless ``mask`` is a tensor, ValueError unless it is boolean:
    an integer mask would be flipped bit by bit by ``~`` (1 → -2), not
    negated.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a boolean torch.Tensor (True = may "
                        f"attend), but got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"{name} must be boolean (True = may attend), "
                         f"but got dtype {mask.dtype}")


def require_instance(value, kind: type, name: str, hint: str = "") -> None:
    """检查参数 ``name`` 是 ``kind`` 类的对象，否则报 TypeError，说出收到的类型。

    ``require_instance(5, Vocab, "tgt_vocab")`` raises ``TypeError:
    tgt_vocab must be a Vocab, but got int``; ``hint`` is added at the end.
    """
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__}, but got "
                        f"{type(value).__name__}{hint}")


def require_config(config, kind: type, name: str = "config") -> None:
    """检查收到的是配置类（不是字典、字符串之类），否则报 TypeError。

    ``require_config({"d_model": 8}, TransformerConfig)`` raises ``TypeError:
    config must be a TransformerConfig, but got dict (TransformerConfig(**d)
    builds one from a dict)``; ``name`` is the argument's name (``cfg`` for a
    TrainConfig).
    """
    require_instance(config, kind, name,
                     f" ({kind.__name__}(**d) builds one from a dict)"
                     if isinstance(config, dict) else "")


def require_ids(tokens, name: str = "tokens", lead: str = "B, L") -> None:
    """检查 ``tokens`` 是一批词元编号：二维的整数张量，形状 (B, L)。

    ``lead`` names the two dimensions in the message, e.g. "B, S" for a source.
    Raise TypeError for a non-tensor, ValueError naming ``name``, the dtype and
    shape received and the shape expected otherwise.
    """
    require_tensors(**{name: tokens})
    if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
        # an embedding table takes int64 or int32 ids only
        other_ints = tokens.dtype in (torch.int16, torch.int8, torch.uint8)
        raise ValueError(f"{name}: expected token ids of shape ({lead}), "
                         f"but got {tokens.dtype} of shape {tuple(tokens.shape)}"
                         + (" (ids must be int64 or int32)" if other_ints
                            else ""))


def require_fits(name: str, start: int, length: int, max_len: int) -> None:
    """检查从位置 ``start`` 起的 ``length`` 个词元没有超出模型的 max_len。

    ``require_fits("src", 0, 7, 5)`` raises
    ``ValueError: src: 7 tokens exceed the model's max_len=5``; with
    ``start`` > 0 (a KV cache) the message counts the cached tokens too.
    """
    if start + length > max_len:
        where = f"{length} tokens" + (f" after {start} cached ones"
                                      if start else "")
        raise ValueError(f"{name}: {where} exceed the model's "
                         f"max_len={max_len}")


class DtypeMismatchError(ValueError, RuntimeError):
    """输入与层的参数不是同一种浮点类型（例如 float64 的输入进了 float32 的层）。

    A ValueError, like every check here, and a RuntimeError, the class of
    PyTorch's own message for it ("mat1 and mat2 must have the same dtype"),
    which names neither the argument nor the layer.
    """


def require_width(x, d_model: int, name: str = "x",
                  lead: str | None = None, weight=None) -> None:
    """检查 ``x`` 是最后一维为 D 的张量；给出 ``lead``（如 "B, L"）时还检查维数。

    ``lead`` names the leading dimensions: ``require_width(x, 12, lead="B, S")``
    wants (B, S, 12). Raise TypeError for a non-tensor and ValueError naming
    ``name``, the shape received and the one expected otherwise; also for
    integer or bool ``x`` (vectors are floating point: an integer result
    would be silently truncated). ``weight``: the floating-point weight that
    ``x`` meets in a matrix product (an ``nn.Linear``'s); where that product
    would refuse ``x``'s dtype, raise :class:`DtypeMismatchError` (see
    :func:`refuses_dtype`).
    """
    require_tensors(**{name: x})
    if lead is not None:
        if x.dim() != lead.count(",") + 2 or x.shape[-1] != d_model:
            raise ValueError(f"{name}: expected shape ({lead}, {d_model}), "
                             f"but got {tuple(x.shape)}")
    elif x.dim() == 0 or x.shape[-1] != d_model:
        raise ValueError(f"{name}: expected last dimension {d_model}, "
                         f"but got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{name} must be floating point, "
                         f"but got dtype {x.dtype}")
    require_dtype_of(x, weight, name)


def first_weight(module: torch.nn.Module):
    """``module`` 的第一个浮点参数：它的输入要与之同类型（没有就是 None）。

    The dtype an input of ``module`` must have is its weights'; the first
    floating-point parameter stands for them (W^Q in an attention layer,
    whether it keeps W^Q alone or packed with W^K and W^V). None for a
    module without one (a quantized layer), which :func:`require_dtype_of`
    then does not judge.
    """
    return next((p for p in module.parameters() if p.is_floating_point()),
                None)


def require_dtype_of(x: torch.Tensor, weight, name: str = "x") -> None:
    """``x`` 与它要乘的权重 ``weight`` 能相乘吗？不能就报错，点名 ``name``。

    Raise :class:`DtypeMismatchError` naming ``name`` where ``x @ weight``
    would refuse ``x``'s dtype (:func:`refuses_dtype`); a layer checks its
    own inputs this way, so the message names the layer's argument, not one
    of an inner layer.
    """
    if refuses_dtype(x, weight) and not x.is_floating_point():
        raise DtypeMismatchError(f"{name} must be floating point, "
                                 f"but got dtype {x.dtype}")
    if refuses_dtype(x, weight):
        raise DtypeMismatchError(
            f"{name}: dtype {x.dtype} does not match the layer's parameters "
            f"({weight.dtype}); convert one of them, e.g. "
            f"layer.to({x.dtype}) or {name}.to({weight.dtype})")


def refuses_dtype(x: torch.Tensor, weight) -> bool:
    """``x @ weight`` 会因为浮点类型不同而报错吗？

    Only for a floating-point tensor ``weight`` on a real device (a quantized
    layer's ``weight`` is a method, an int8 one is not floating point, and
    ``meta`` tensors compute no numbers: none of them is judged). Under
    ``torch.autocast`` both sides are cast to the autocast dtype, except
    float64, which autocast leaves alone: then only a float64 on one side
    is refused.
    """
    device = x.device.type
    if (not isinstance(weight, torch.Tensor) or not weight.is_floating_point()
            or x.dtype == weight.dtype or device == "meta"):
        return False
    if (torch.amp.is_autocast_available(device)
            and torch.is_autocast_enabled(device)):
        return torch.float64 in (x.dtype, weight.dtype)
    return True
