"""全书统一的图表样式，以及一种处处可离线使用的中文字体。

One figure style for the whole book, with a CJK font that works offline everywhere.

Matplotlib's default font (DejaVu Sans) has no Chinese glyphs: titles such as “我爱中国” turn
into empty boxes and matplotlib warns ``Glyph 25105 ... missing``. We register WenQuanYi Micro
Hei (文泉驿微米黑; Apache-2.0 or GPLv3), which a small PyPI package ships, so a fresh machine, CI
and Colab get the same font from ``pip`` alone; open CJK fonts installed on the system (Noto
Sans CJK, Source Han Sans) are the fallback. Proprietary fonts such as SimHei are never chosen.

Figures in a notebook are stored as "retina" PNGs: twice the pixels of their display size, so
that they stay sharp on a high-density screen (the page still shows them at 110 dpi's size).
"""
from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import matplotlib
from matplotlib import font_manager

# Open-licence CJK families we accept from the system when the packaged font is missing.
_SYSTEM_FAMILIES = ("WenQuanYi Micro Hei", "Noto Sans CJK SC", "Noto Sans SC",
                    "Source Han Sans SC", "WenQuanYi Zen Hei")

DISPLAY_DPI = 110        # the size a figure takes on the page
PIXEL_SCALE = 2          # pixels per display pixel in the stored image ("retina")

BOOK_STYLE = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": DISPLAY_DPI,
    "savefig.dpi": DISPLAY_DPI * PIXEL_SCALE,
    "figure.constrained_layout.use": True,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 12,
    "image.cmap": "viridis",
}


def _packaged_font() -> Path | None:
    spec = importlib.util.find_spec("paperang_p2_fonts_cjk")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "fonts" / "wqy-microhei.ttc"
    return path if path.is_file() else None


@functools.lru_cache(maxsize=None)
def cjk_font() -> str:
    """向 matplotlib 注册一种开源许可的中文字体，并返回它的字体族名。

    Register an open-licence CJK font with matplotlib and return its family name.

    Raises:
        RuntimeError: no usable CJK font was found (the requirements were not installed).
    """
    path = _packaged_font()
    if path is not None:
        font_manager.fontManager.addfont(str(path))
        return font_manager.FontProperties(fname=str(path)).get_name()
    installed = {f.name for f in font_manager.fontManager.ttflist}
    for family in _SYSTEM_FAMILIES:
        if family in installed:
            return family
    raise RuntimeError("no open-licence CJK font found for matplotlib: expected the package "
                       "'paperang-p2-fonts-cjk' (pip install -r requirements.txt) or one of "
                       f"{', '.join(_SYSTEM_FAMILIES)} installed on the system")


def use_book_style() -> str:
    """应用本书的图表样式和中文字体；返回所用的字体族。

    Apply the book's figure style and CJK font to matplotlib. Inside IPython (a notebook, the
    book build, Colab) inline figures also become retina PNGs, see ``sharp_inline_figures``.
    """
    family = cjk_font()
    matplotlib.rcParams.update(BOOK_STYLE)
    matplotlib.rcParams["font.family"] = "sans-serif"
    matplotlib.rcParams["font.sans-serif"] = [family, "DejaVu Sans"]
    sharp_inline_figures()
    return family


_TEX_WORDS = {r"\Vert": "‖", r"\|": "‖", r"\sqrt": "√", r"\tau": "τ", r"\times": "×", r"\cdot": "·",
              r"\ell": "ℓ", r"\alpha": "α", r"\epsilon": "ε", r"\sigma": "σ", r"\mu": "μ"}


def _plain_tex(text: str) -> str:
    """Inline TeX of a title as plain text for a screen reader: $\\sqrt{d_k}$ → √d_k."""
    def plain(match):
        tex = match.group(1)
        for command, char in _TEX_WORDS.items():
            word_end = r"(?![A-Za-z])" if command[-1].isalpha() else ""     # \tau, not \taux
            tex = re.sub(re.escape(command) + word_end, char, tex)
        return re.sub(r"\s*‖\s*", "‖", tex).replace("{", "").replace("}", "")
    return re.sub(r"\$([^$]*)\$", plain, text)


def describe_figure(fig) -> str:
    """图的文字说明（网页上 ``<img>`` 的 alt）：总标题和各子图的标题；没有标题时用坐标轴的名字。

    The text that stands for a figure where it cannot be seen (a screen reader, a broken image):
    its suptitle and every axes' title, or the axes' labels when nothing is titled. Empty for a
    figure with neither. Inline TeX is read out plainly: ``$\\Vert W \\Vert_2$`` becomes ``‖W‖_2``.
    """
    parts = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) else []
    for ax in fig.axes:
        parts += [ax.get_title(loc) for loc in ("left", "center", "right")]
    if not any(p.strip() for p in parts):
        for ax in fig.axes:
            x, y = ax.get_xlabel(), ax.get_ylabel()
            parts.append(f"{y}（纵轴）随{x}（横轴）的变化" if x and y else x or y)
    parts = [_plain_tex(p).replace("\n", " ").strip() for p in parts]
    return "图：" + "；".join(dict.fromkeys(p for p in parts if p)) if any(parts) else ""


def sharp_inline_figures() -> bool:
    """让笔记本里的图以双倍像素（retina PNG）保存、带上文字说明；不在 IPython 里时什么也不做。

    The PNG carries its display size (width, height) as metadata, which Jupyter and MyST-NB
    use for the ``<img>``, so a figure keeps its size on the page and gains sharpness. It also
    carries ``alt``, from :func:`describe_figure`; the book build (``_ext/reader_tools.py``)
    puts it on the page's ``<img>``. Returns whether the inline backend was switched.
    """
    try:
        from IPython import get_ipython
        from matplotlib.figure import Figure
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    set_matplotlib_formats("retina")
    png = shell.display_formatter.formatters["image/png"]
    retina = png.lookup_by_type(Figure)

    def described(fig):
        out = retina(fig)
        if out is None:                      # a figure with nothing drawn: no image at all
            return None
        data, metadata = out if isinstance(out, tuple) else (out, {})
        alt = describe_figure(fig)
        return data, ({**metadata, "alt": alt} if alt else metadata)

    png.for_type(Figure, described)
    return True


def plain_log_ticks(ax, axis: str = "y") -> None:
    """对数轴的刻度写成普通的数（0.06、3、1000），不写 6×10⁻²、3×10⁰。

    Matplotlib labels the minor ticks of a log axis that spans less than a
    decade or two ("6×10⁰ 4×10⁰ 3×10⁰"); this keeps its choice of which ticks
    to label and writes each as a plain number.
    """
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def _num_to_string(self, x, vmin, vmax):
            # :g writes 1e-05 below 1e-4; a plain decimal stays plain
            return f"{x:g}" if x >= 1e-4 else f"{x:.12f}".rstrip("0")

    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', but got {axis!r}")
    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_major_formatter(Plain())
    a.set_minor_formatter(Plain(minor_thresholds=(2, 0.5)))


_OVERLAP_STYLES = [dict(marker="o", ms=11, ls="-"), dict(marker="^", ms=8, ls="--"),
                   dict(marker="s", ms=5, ls=":"), dict(marker="D", ms=3, ls="-.")]


def distinct_lines(n: int) -> list[dict]:
    """几条可能重合的曲线的样式：空心标记由大到小、线型各不相同，重合处每一条都看得见。

    Styles for ``n`` (at most 4) series that may lie on one another: hollow markers from
    large to small and a different line style each, so where the curves coincide every one
    stays visible. Pass each as ``ax.plot(x, y, **style, label=...)``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(_OVERLAP_STYLES):
        raise ValueError(f"n must be an integer from 1 to {len(_OVERLAP_STYLES)}, but got {n!r}")
    return [dict(style, mfc="none", mew=1.5) for style in _OVERLAP_STYLES[:n]]


_LEVEL_COLOURS = ["#e8e8e8", "#3b75af"]   # a two-valued matrix: off pale grey, on blue


def heatmap(ax, matrix, *, title: str, cbar_label: str, x_labels=None, y_labels=None,
            xlabel: str | None = None, ylabel: str | None = None, levels=None,
            **imshow_kwargs):
    """在 ``ax`` 上画带色条的热力图（全书唯一的热力图画法）。

    Draw ``matrix`` (rows × columns) on ``ax`` with a colour bar, the book's one heatmap.

    Token lists given as ``x_labels`` / ``y_labels`` become tick labels (attention maps).
    ``levels`` names the values of a matrix that holds only 0, 1, …, n − 1 (a mask:
    ``["0 禁止", "1 允许"]``): each value gets one colour and the colour bar names it, instead of
    a continuous scale that suggests values in between. Returns the image, so callers can share a
    colour scale.
    """
    import numpy as np

    if hasattr(matrix, "detach"):      # a tensor; NumPy has no bfloat16
        import torch

        matrix = matrix.detach().cpu()
        matrix = matrix.float() if matrix.dtype == torch.bfloat16 else matrix
    data = np.asarray(matrix)
    if data.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D matrix, but got shape {data.shape}")
    for name, labels, n in (("x_labels", x_labels, data.shape[1]), ("y_labels", y_labels, data.shape[0])):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} entries but the matrix has {n}")
    ticks = None
    if levels is not None:
        from matplotlib.colors import ListedColormap

        n = len(levels)
        if not np.isin(data, np.arange(n)).all():
            raise ValueError(f"levels names {n} values, but the matrix holds "
                             f"{sorted(set(np.unique(data).tolist()) - set(range(n)))[:5]} as well")
        imshow_kwargs.setdefault("cmap", ListedColormap(_LEVEL_COLOURS) if n == 2
                                 else matplotlib.colormaps["viridis"].resampled(n))
        imshow_kwargs.update(vmin=-0.5, vmax=n - 0.5)
        ticks = range(n)
    image = ax.imshow(data, aspect="auto", interpolation="nearest", **imshow_kwargs)
    bar = ax.figure.colorbar(image, ax=ax, label=cbar_label, ticks=ticks)
    if levels is not None:
        bar.set_ticklabels(levels)
    ax.grid(False)
    if x_labels is not None:
        ax.set_xticks(range(len(x_labels)), x_labels)
    if y_labels is not None:
        ax.set_yticks(range(len(y_labels)), y_labels)
    ax.set_title(title)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    return image


def layer_diagram(ax, boxes, *, title: str, residuals=(), side_inputs=(), input_label: str = "",
                  repeat: str = ""):
    """自下而上画出一层的数据流：每一步一个方框，旁边标出它输出的形状。

    Draw a layer's data flow bottom to top: one box per step, its output shape beside it.

    Args:
        boxes: ``[(label, shape_text, colour), ...]`` from input side to output side.
        residuals: ``[(i, j), ...]``: a shortcut from the input of box i to box j (Add & Norm).
        side_inputs: ``[(i, text), ...]``: an arrow entering box i from the right (e.g. memory).
        input_label: text under the first box (what flows in).
        repeat: if given (e.g. ``"× N"``), a bracket left of all the boxes with
            this text: the layer is stacked that many times.
    """
    from matplotlib.patches import FancyBboxPatch

    if not boxes:
        raise ValueError("layer_diagram needs at least one box, but got none")
    n = len(boxes)
    for name, pairs in (("residuals", residuals), ("side_inputs", side_inputs)):
        for pair in pairs:
            ends = pair if name == "residuals" else pair[:1]
            if not all(isinstance(i, int) and 0 <= i < n for i in ends):
                raise ValueError(f"{name}: {pair!r} names a box outside 0..{n - 1}")
    width, height, gap = 3.2, 0.62, 0.5
    y = [i * (height + gap) for i in range(len(boxes))]
    for (label, shape, colour), yi in zip(boxes, y):
        ax.add_patch(FancyBboxPatch((-width / 2, yi), width, height, boxstyle="round,pad=0.05",
                                    fc=colour, ec="0.3"))
        ax.text(0, yi + height / 2, label, ha="center", va="center", fontsize=10)
        ax.text(width / 2 + 0.25, yi + height / 2, shape, ha="left", va="center", fontsize=8,
                color="0.35")
    for yi in y[:-1]:
        ax.annotate("", xy=(0, yi + height + gap), xytext=(0, yi + height),
                    arrowprops=dict(arrowstyle="->", color="0.3"))
    ax.annotate("", xy=(0, 0), xytext=(0, -gap), arrowprops=dict(arrowstyle="->", color="0.3"))
    ax.text(0, -gap - 0.12, input_label, ha="center", va="top", fontsize=9)
    ax.annotate("", xy=(0, y[-1] + height + gap), xytext=(0, y[-1] + height),
                arrowprops=dict(arrowstyle="->", color="0.3"))
    for k, (i, j) in enumerate(residuals):
        x_left = -width / 2 - 0.35 - 0.25 * (k % 2)
        start = y[i] - gap / 2
        ax.plot([0, x_left, x_left], [start, start, y[j] + height / 2], color="C3", lw=1.2)
        ax.annotate("", xy=(-width / 2, y[j] + height / 2), xytext=(x_left, y[j] + height / 2),
                    arrowprops=dict(arrowstyle="->", color="C3", lw=1.2))
    for i, text in side_inputs:
        ax.annotate(text, xy=(width / 2, y[i] + height * 0.3), xytext=(width / 2 + 1.6, y[i] - 0.55),
                    fontsize=8, ha="left", arrowprops=dict(arrowstyle="->", color="C0"))
    left = -width / 2 - 1.2
    if repeat:
        x_b = -width / 2 - 1.0
        bottom, top = y[0] - gap / 2 - 0.1, y[-1] + height + 0.1
        ax.plot([x_b + 0.12, x_b, x_b, x_b + 0.12], [bottom, bottom, top, top],
                color="0.3", lw=1.2)
        ax.text(x_b - 0.1, (bottom + top) / 2, repeat, ha="right", va="center",
                fontsize=11)
        left -= 1.1
    ax.set_xlim(left, width / 2 + 3.2)
    ax.set_ylim(-gap - 0.6, y[-1] + height + gap + 0.2)
    ax.axis("off")
    ax.set_title(title)


_SUBLAYER_COLOURS = {"self": "#dbe9f6", "cross": "#e5dbf6", "ffn": "#dff0d8"}
_NORM_COLOUR = "#fde2cf"
_EDGE_COLOUR = "#f3f3f3"


def model_diagram(ax, config, *, title: str):
    """画出整个编码器–解码器：两列层叠、记忆 Z 通往交叉注意力、形状用配置里的数。

    Draw the whole encoder–decoder of a ``TransformerConfig`` (or anything with
    its fields): the encoder column on the left, the decoder column on the
    right, the memory Z entering every decoder layer's cross-attention, and
    each step's output shape with the configuration's own numbers (D, H, N,
    d_ff, vocabulary sizes). Post-LN draws "sub-layer, then add & norm" as in
    the paper's figure 1; Pre-LN draws "norm, then sub-layer" and the stack's
    final LayerNorm.

    Returns the labels drawn, bottom to top, as ``{"encoder": [...],
    "decoder": [...]}`` (the tests read them).
    """
    from matplotlib.patches import FancyBboxPatch, Rectangle

    c = config
    d, h, n, ff = c.d_model, c.n_heads, c.n_layers, c.d_ff
    pre = bool(c.norm_first)
    width, tall, short, gap = 3.0, 0.52, 0.34, 0.22
    x_of = {"encoder": -2.1, "decoder": 2.1}
    drawn = {"encoder": [], "decoder": []}
    spans = {"encoder": [], "decoder": []}   # (bottom, top) of each box

    def box(col, y, label, colour, height=tall, size=10):
        x = x_of[col]
        ax.add_patch(FancyBboxPatch((x - width / 2, y), width, height,
                                    boxstyle="round,pad=0.03", fc=colour,
                                    ec="0.35", lw=0.8))
        ax.text(x, y + height / 2, label, ha="center", va="center",
                fontsize=size)
        drawn[col].append(label)
        spans[col].append((y, y + height))
        return y + height

    def up(col, y0, y1, colour="0.3"):
        ax.annotate("", xy=(x_of[col], y1), xytext=(x_of[col], y0),
                    arrowprops=dict(arrowstyle="->", color=colour, lw=0.9))

    def note(col, y, text):
        side = -1 if col == "encoder" else 1
        ax.text(x_of[col] + side * (width / 2 + 0.5), y, text,
                ha="right" if side < 0 else "left", va="center",
                fontsize=9, color="0.25")

    def sublayer(col, y, label, kind, shape):
        """One sub-layer with its residual: returns (top, y of its centre)."""
        start = y
        if pre:
            y = box(col, y, "层归一化", _NORM_COLOUR, short, 9)
            y += gap / 2
            centre = y + tall / 2
            y = box(col, y, label + "，相加", _SUBLAYER_COLOURS[kind])
        else:
            centre = y + tall / 2
            y = box(col, y, label, _SUBLAYER_COLOURS[kind])
            y += gap / 2
            y = box(col, y, "相加并归一化", _NORM_COLOUR, short, 9)
        note(col, centre, shape)
        side = -1 if col == "encoder" else 1
        xr = x_of[col] - side * (width / 2 + 0.18)   # residual on the inside
        ax.plot([x_of[col], xr, xr], [start - gap / 2] * 2 + [y - short / 2],
                color="C3", lw=0.9)
        ax.annotate("", xy=(x_of[col] - side * width / 2, y - short / 2),
                    xytext=(xr, y - short / 2),
                    arrowprops=dict(arrowstyle="->", color="C3", lw=0.9))
        return y + gap, centre

    def stack(col, y, parts):
        bottom = y - gap / 2
        y += gap / 2
        centres = {}
        for label, kind, shape in parts:
            y, centres[kind] = sublayer(col, y, label, kind, shape)
        top = y - gap / 2
        x = x_of[col]
        ax.add_patch(Rectangle((x - width / 2 - 0.42, bottom), width + 0.84,
                               top - bottom, fc=_EDGE_COLOUR, ec="0.5",
                               lw=0.9, ls="--", zorder=-1))
        side = -1 if col == "encoder" else 1
        ax.text(x + side * (width / 2 + 0.42), top + 0.05, f"× {n} 层",
                ha="right" if side < 0 else "left", va="bottom", fontsize=9)
        if pre:
            y = box(col, y + gap / 2, "最后的层归一化", _NORM_COLOUR, short, 9)
            y += gap
        else:
            y = top + gap
        return y, centres

    # the encoder, bottom to top
    ax.text(x_of["encoder"], -0.1, f"源句子 x：(B, S) 个编号，词表 "
            f"{c.src_vocab_size}", ha="center", va="top", fontsize=9)
    y = box("encoder", 0.3, "词向量 ×√D ＋ 位置编码", "#eeeeee")
    up("encoder", 0.0, 0.3)
    note("encoder", 0.3 + tall / 2, f"(B, S, {d})")
    y, _ = stack("encoder", y + 0.55, [
        (f"多头自注意力（{h} 头）", "self", f"(B, S, {d})"),
        (f"前馈网络（{d}→{ff}→{d}）", "ffn", f"(B, S, {d})")])
    enc_top = y - gap
    ax.text((x_of["encoder"] - width / 2), enc_top + 0.85,
            f"记忆 Z：(B, S, {d})", ha="left", va="bottom", fontsize=9,
            color="C0")

    # the decoder, bottom to top
    ax.text(x_of["decoder"], -0.1, "右移的目标句 y_in：(B, T) 个编号，"
            f"词表 {c.tgt_vocab_size}",
            ha="center", va="top", fontsize=9)
    y = box("decoder", 0.3, "词向量 ×√D ＋ 位置编码", "#eeeeee")
    up("decoder", 0.0, 0.3)
    note("decoder", 0.3 + tall / 2, f"(B, T, {d})")
    y, centres = stack("decoder", y + 0.55, [
        ("带掩码的多头自注意力", "self", f"(B, T, {d})"),
        ("交叉注意力（Q 来自下方）", "cross", "K、V 来自 Z"),
        (f"前馈网络（{d}→{ff}→{d}）", "ffn", f"(B, T, {d})")])
    tied = c.share_embeddings or c.tie_output
    y = box("decoder", y, "线性层 W_out" + ("（= E_y）" if tied else ""),
            "#eeeeee")
    note("decoder", y - tall / 2, f"(B, T, {c.tgt_vocab_size})")
    y = box("decoder", y + gap, "softmax：下一个词元的分布", "#eeeeee")
    top = y

    # the data flow: an arrow from each box to the next one up
    for col, extent in spans.items():
        extent.sort()
        for (_, low_top), (high_bottom, _) in zip(extent, extent[1:]):
            up(col, low_top, high_bottom)

    # the memory Z reaches the cross-attention of every decoder layer
    zx, bend, zy = x_of["encoder"], 0.0, enc_top + 0.75
    ax.plot([zx, zx, bend, bend], [enc_top, zy, zy, centres["cross"]],
            color="C0", lw=1.2)
    ax.annotate("", xy=(x_of["decoder"] - width / 2, centres["cross"]),
                xytext=(bend, centres["cross"]),
                arrowprops=dict(arrowstyle="->", color="C0", lw=1.2))
    ax.set_xlim(-5.3, 5.6)
    ax.set_ylim(-0.5, max(top, enc_top + 1.0) + 0.2)
    ax.axis("off")
    ax.set_title(title)
    return drawn
