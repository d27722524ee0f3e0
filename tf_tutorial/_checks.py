"""各模块共用的参数检查：错误信息说出参数名、收到的值和期望的值。

Argument checks shared by the modules, so that every constructor says which
argument was wrong, what it got and what it expected.
"""
from __future__ import annotations


def require_sizes(**sizes) -> None:
    """检查这些尺寸都是正整数，否则报出第一个不合格的参数名。

    ``require_sizes(d_model=0)`` raises
    ``ValueError: d_model must be a positive integer, but got 0``.
    """
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, "
                             f"but got {value!r}")
