"""各章自己用的小工具，在 HTML 构建、Jupyter 和 Colab 里表现一致。

Helpers for the chapters themselves, working alike in the HTML build, Jupyter
and Colab.
"""
from __future__ import annotations

import math
import os


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def glue(name: str, value, display: bool = False) -> None:
    """把 ``value`` 以 ``name`` 存起来，正文用 {glue:text}`name` 引用它。

    Store ``value`` under ``name`` so the prose can quote it with
    {glue:text}`name`.

    In the book build this is ``myst_nb.glue``; where myst-nb is absent (Colab)
    it does nothing, and the cell's own printed output shows the value instead.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return
    _glue(name, value, display=display)


def sci(value: float, digits: int = 1) -> str:
    """把数写成正文里用的科学计数法，例如 ``2.9×10⁸``。

    Format a number for prose in scientific notation:
    ``sci(2.9e8) == '2.9×10⁸'``.
    """
    if not math.isfinite(value):
        raise ValueError(f"sci() expected a finite number, but got {value!r}")
    mantissa, exponent = f"{value:.{digits}e}".split("e")
    return f"{mantissa}×10{str(int(exponent)).translate(_SUPERSCRIPT)}"


def check(claim: bool, message: str) -> None:
    """章节里的论断不再成立时立即报错，让 nbval 和书的构建都失败。

    Fail loudly when a chapter's claim no longer holds, so nbval and the book
    build fail too.

    Used where prose states a measured fact ("every value lies below the
    bound"): if a change to the code breaks the fact, the chapter stops building
    instead of printing a false sentence.

    ``claim``: True or False (a NumPy bool or a 0-dim bool tensor too); any
    other value is a TypeError, as a non-empty string or a forgotten call
    would otherwise pass.
    """
    import numpy as np
    import torch

    if isinstance(claim, torch.Tensor) and claim.dtype == torch.bool \
            and claim.dim() == 0:
        claim = bool(claim)
    if not isinstance(claim, (bool, np.bool_)):  # "no", a forgotten call() ...
        raise TypeError(f"check() expected the claim to be True or False, "
                        f"but got {type(claim).__name__}: {message}")
    if not claim:
        raise AssertionError(f"the chapter claims: {message}; "
                             "the numbers just computed disagree")


STRICT = "TF_TUTORIAL_STRICT"   # set: check_run raises, as check does
RUN_NOTE = "与正文的一处说法不符"   # in check_run's note; never in a committed page


def check_run(claim: bool, message: str, note: str | None = None) -> None:
    """对“这一次训练出的模型”的论断：网页上那次运行必须成立，读者的机器上不成立时只提示。

    A claim about one training run, which another CPU may not reproduce: a different
    CPU rounds matrix products differently, and over a thousand steps that grows into
    another model (chapter 10.8). The prose describes the run stored with the page.

    With the environment variable ``TF_TUTORIAL_STRICT`` set (``scripts.sync_book``
    sets it when it executes the page that is committed) a false claim raises, as
    :func:`check` does. Elsewhere (Colab, Jupyter, nbval on another machine) it prints
    a note that names the claim (``message``, or ``note`` in the reader's language)
    and the chapter goes on. ``claim`` is checked for type as by :func:`check`.
    Like :func:`check` it returns nothing, so a cell that ends with it shows
    nothing more.
    """
    _check_or_note(claim, message, STRICT,
                   f"注意：这次训练出的模型{RUN_NOTE}（{note or message}）。"
                   "正文描述的是随网页保存的那次运行；换一台机器（不同的 CPU）"
                   "训练，得到的模型会略有不同（第 10 章 10.8 节）。")


TIMING_STRICT = "TF_TUTORIAL_STRICT_TIMING"   # set by scripts.sync_book only


def check_timing(claim: bool, message: str, note: str | None = None) -> None:
    """对“构建网页时那一次计时”的论断：存下的网页必须成立，别处不成立时只提示。

    A claim about a timing measured live in the chapter. Timings change with
    the machine and with what else it is doing, so only ``scripts.sync_book``,
    which sets ``TF_TUTORIAL_STRICT_TIMING`` when it stores a page, raises on a
    false claim. Everywhere else, the test suite included (it runs two
    chapters at a time on two cores: a busy machine must not fail it), a false
    claim prints a note, as :func:`check_run` does for a reader.
    """
    _check_or_note(claim, message, TIMING_STRICT,
                   f"注意：这台机器上的计时{RUN_NOTE}（{note or message}）。"
                   "正文描述的是构建网页时那台机器上的计时；换一台机器，"
                   "或者机器同时在忙别的事，快慢都会不同。")


def _check_or_note(claim, message: str, strict: str, text: str) -> None:
    """check(claim, message); if it fails, raise under the environment
    variable ``strict``, else print ``text``."""
    try:
        check(claim, message)
    except AssertionError:
        if os.environ.get(strict):
            raise
        print(wrap(text))


def display_width(text: str) -> int:
    """一行文字在等宽字体里占几列：汉字等全角字符算两列。

    Columns a line takes in a monospace font: wide (CJK) characters count two.
    """
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def pad(text, width: int) -> str:
    """在右边补空格，让文字在等宽字体里占满 ``width`` 列：汉字算两列。

    Left-align ``text`` (anything ``str()`` takes) in ``width`` display
    columns, the way ``f"{text:<{width}}"`` would if a CJK character were one
    column wide; it is two, so f-string padding misaligns a table that mixes
    Chinese and Latin text. Text already wider than ``width`` is returned
    unchanged.
    """
    text = str(text)
    return text + " " * max(0, width - display_width(text))


def wrap(text: str, width: int = 76, indent: str = "  ") -> str:
    """把一行长文字按显示宽度折成几行，续行缩进 ``indent``；汉字算两列。

    Wrap ``text`` to ``width`` display columns (CJK characters count two),
    breaking at spaces where there are any and inside a run of CJK text where
    there are not; continuation lines start with ``indent``. The book's code
    column holds 80 columns, so a printed model output of any length stays
    readable without sideways scrolling.
    """
    if width < display_width(indent) + 2:
        raise ValueError(f"width={width} leaves no room after "
                         f"indent={indent!r}")
    lines, line = [], ""
    for word in text.split(" "):
        piece = word if not line else " " + word
        if display_width(line + piece) <= width:
            line += piece
            continue
        if line.strip():
            lines.append(line)
            line = indent + word
        else:
            line += piece
        # one word wider than the line: cut it
        while display_width(line) > width:
            cut = len(line)
            while display_width(line[:cut]) > width:
                cut -= 1
            lines.append(line[:cut])
            line = indent + line[cut:]
    lines.append(line)
    return "\n".join(lines)
