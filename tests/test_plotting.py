import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from tf_tutorial.book import plotting  # noqa: E402

TEXT = "我爱中国：狗咬人，人咬狗"


def draw_and_collect_warnings(family):
    with matplotlib.rc_context({"font.family": "sans-serif", "font.sans-serif": [family]}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig, ax = plt.subplots()
            ax.set_title(TEXT)
            ax.set_xlabel("序列长度 $L$（词）")
            ax.text(0.5, 0.5, "注意力 −1.5")
            fig.canvas.draw()
            plt.close(fig)
    return [str(w.message) for w in caught if "Glyph" in str(w.message)
            or "does not have a glyph" in str(w.message)]


def test_default_font_really_misses_the_glyphs():
    # the negative control: without our font the check below would catch the boxes
    assert draw_and_collect_warnings("DejaVu Sans"), "DejaVu Sans unexpectedly has CJK glyphs"


def test_book_font_draws_chinese_without_missing_glyphs():
    family = plotting.cjk_font()
    assert draw_and_collect_warnings(family) == []


def test_book_font_comes_from_the_requirements_and_is_open():
    assert plotting._packaged_font() is not None, "paperang-p2-fonts-cjk is not installed"
    assert plotting.cjk_font() == "WenQuanYi Micro Hei"
    assert "SimHei" not in plotting._SYSTEM_FAMILIES


def test_use_book_style_sets_the_font_first():
    with matplotlib.rc_context():
        family = plotting.use_book_style()
        assert matplotlib.rcParams["font.sans-serif"][0] == family
        assert matplotlib.rcParams["figure.constrained_layout.use"]


def test_missing_font_is_a_clear_error(monkeypatch):
    plotting.cjk_font.cache_clear()
    monkeypatch.setattr(plotting, "_packaged_font", lambda: None)
    monkeypatch.setattr(plotting, "_SYSTEM_FAMILIES", ("No Such Font CJK",))
    try:
        with pytest.raises(RuntimeError, match="no open-licence CJK font found.*paperang-p2-fonts-cjk"):
            plotting.cjk_font()
    finally:
        plotting.cjk_font.cache_clear()


def test_heatmap_has_colour_bar_and_token_ticks():
    import torch

    fig, ax = plt.subplots()
    plotting.heatmap(ax, torch.rand(2, 3), title="注意力", cbar_label="权重",
                     x_labels=["狗", "咬", "人"], y_labels=["人", "狗"])
    assert len(fig.axes) == 2  # the heatmap and its colour bar
    assert [t.get_text() for t in ax.get_xticklabels()] == ["狗", "咬", "人"]
    with pytest.raises(ValueError, match="x_labels has 2 entries but the matrix has 3"):
        plotting.heatmap(ax, torch.rand(2, 3), title="t", cbar_label="c", x_labels=["a", "b"])
    with pytest.raises(ValueError, match=r"2-D matrix, but got shape \(2, 3, 4\)"):
        plotting.heatmap(ax, torch.rand(2, 3, 4), title="t", cbar_label="c")
    plt.close(fig)


def test_heatmap_draws_a_bfloat16_matrix_as_its_float32_values():
    import torch

    weights = torch.rand(3, 4).to(torch.bfloat16)   # attention maps under bf16 autocast
    fig, ax = plt.subplots()
    image = plotting.heatmap(ax, weights, title="注意力", cbar_label="权重")
    assert (image.get_array() == weights.float().numpy()).all()
    plt.close(fig)


def test_layer_diagram_draws_every_box_without_missing_glyphs():
    from matplotlib.patches import FancyBboxPatch

    family = plotting.cjk_font()
    with matplotlib.rc_context({"font.family": "sans-serif", "font.sans-serif": [family]}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig, ax = plt.subplots()
            boxes = [("多头自注意力", "(B, S, D)", "w"), ("Add & Norm", "(B, S, D)", "w"),
                     ("交叉注意力", "(B, T, D)", "w")]
            plotting.layer_diagram(ax, boxes, title="编码器层", residuals=[(0, 1)],
                                   side_inputs=[(2, "memory")], input_label="输入")
            fig.canvas.draw()
    assert sum(isinstance(p, FancyBboxPatch) for p in ax.patches) == 3
    assert not [w for w in caught if "Glyph" in str(w.message)]
    plt.close(fig)


@pytest.mark.parametrize("norm_first", [False, True])
def test_model_diagram_draws_the_configured_model(norm_first):
    from tf_tutorial.model import TransformerConfig

    cfg = TransformerConfig(1043, 1187, d_model=96, n_heads=3, n_layers=5,
                            d_ff=200, norm_first=norm_first)
    family = plotting.cjk_font()
    with matplotlib.rc_context({"font.family": "sans-serif", "font.sans-serif": [family]}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fig, ax = plt.subplots(figsize=(7.6, 8.2))
            drawn = plotting.model_diagram(ax, cfg, title="完整的模型")
            fig.canvas.draw()
    assert not [w for w in caught if "Glyph" in str(w.message)]
    texts = [t.get_text() for t in ax.texts]
    # the configuration's own numbers, not the paper's defaults
    assert texts.count("× 5 层") == 2
    assert "(B, S, 96)" in texts and "(B, T, 1187)" in texts
    assert any("1043" in t for t in texts)
    assert any("96→200→96" in t for t in drawn["encoder"])
    assert any("3 头" in t for t in drawn["encoder"])
    # the decoder alone has cross-attention; the output layer is tied by default
    assert sum("交叉注意力" in t for t in drawn["decoder"]) == 1
    assert not any("交叉注意力" in t for t in drawn["encoder"])
    assert "线性层 W_out（= E_y）" in drawn["decoder"]
    # Post-LN: add & norm after each sub-layer; Pre-LN: a norm before it, and a final one
    for side, n_sub in (("encoder", 2), ("decoder", 3)):
        norms = [t for t in drawn[side] if "归一化" in t]
        assert len(norms) == n_sub + norm_first
        assert ("最后的层归一化" in norms) == norm_first
    plt.close(fig)


def test_notebook_figures_are_stored_at_twice_their_display_size():
    """Retina PNGs: sharp on a high-density screen, same size on the page (110 dpi's)."""
    import base64
    import struct

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        with matplotlib.rc_context():
            plotting.use_book_style()
            fig, ax = plt.subplots()
            ax.plot([0, 1], [1, 0])
            ax.set_title(TEXT)
            data, metadata = shell.display_formatter.format(fig)
            plt.close(fig)
    finally:
        InteractiveShell.clear_instance()
    png = data["image/png"]
    png = base64.b64decode(png) if isinstance(png, str) else png
    width, height = struct.unpack(">II", png[16:24])          # the IHDR chunk
    shown = metadata["image/png"]
    assert abs(width - 2 * shown["width"]) <= 1 and abs(height - 2 * shown["height"]) <= 1, \
        (width, height, shown)                                 # IPython halves with //
    # 6.4 × 3.6 inches at 110 dpi on the page (bbox "tight" may trim a little)
    assert 0.8 * 6.4 * plotting.DISPLAY_DPI <= shown["width"] <= 1.05 * 6.4 * plotting.DISPLAY_DPI


def test_a_notebook_figure_carries_its_titles_as_alt_text():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        with matplotlib.rc_context():
            plotting.use_book_style()
            plotting.use_book_style()              # twice (a chapter re-run): wrapped once, not twice
            fig, (a, b) = plt.subplots(1, 2)
            a.set_title("缩放前")
            b.set_title(r"除以 $\sqrt{d_k}$ 之后")
            _, metadata = shell.display_formatter.format(fig)
            plt.close(fig)
            empty = plt.figure()
            data, _ = shell.display_formatter.format(empty)
            plt.close(empty)
    finally:
        InteractiveShell.clear_instance()
    assert metadata["image/png"]["alt"] == "图：缩放前；除以 √d_k 之后"
    assert "width" in metadata["image/png"]                 # the retina size is kept
    assert "image/png" not in data                           # a figure with no axes: no image, no error


def test_describe_figure_falls_back_to_suptitle_and_axis_labels():
    fig, (a, b) = plt.subplots(1, 2)
    fig.suptitle("两种归一化")
    a.set_title("LayerNorm")
    b.set_title("LayerNorm")                                 # said once
    assert plotting.describe_figure(fig) == "图：两种归一化；LayerNorm"
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.set(xlabel="距离 $L - t$", ylabel="梯度范数")
    assert plotting.describe_figure(fig) == "图：梯度范数（纵轴）随距离 L - t（横轴）的变化"
    ax.set_title(r"梯度随距离的变化：$\Vert W_{hh} \Vert_2 = g$，$\tau = 0.5$")
    assert plotting.describe_figure(fig) == "图：梯度随距离的变化：‖W_hh‖_2 = g，τ = 0.5"
    plt.close(fig)
    fig, ax = plt.subplots()
    assert plotting.describe_figure(fig) == ""
    plt.close(fig)


def test_style_outside_ipython_leaves_the_backend_alone():
    with matplotlib.rc_context():
        plotting.use_book_style()
        assert plotting.sharp_inline_figures() is False
        assert matplotlib.get_backend().lower() == "agg"
        assert matplotlib.rcParams["savefig.dpi"] == plotting.DISPLAY_DPI * plotting.PIXEL_SCALE


def test_layer_diagram_marks_a_repeated_layer_left_of_every_box():
    fig, ax = plt.subplots()
    boxes = [("a", "(B, S, D)", "w"), ("b", "(B, S, D)", "w")]
    plotting.layer_diagram(ax, boxes, title="x", residuals=[(0, 1)])
    assert not [t for t in ax.texts if t.get_text() == "× N"]
    plotting.layer_diagram(ax, boxes, title="x", residuals=[(0, 1)], repeat="× N")
    fig.canvas.draw()
    label, = [t for t in ax.texts if t.get_text() == "× N"]
    inv = ax.transData.inverted()
    box_left = min(p.get_extents().x0 for p in ax.patches)
    label_right = label.get_window_extent().x1
    assert label_right < box_left                       # left of the boxes
    x_min = inv.transform((label.get_window_extent().x0, 0))[0]
    assert x_min > ax.get_xlim()[0]                     # inside the axes
    plt.close(fig)


def test_plain_log_ticks_write_plain_numbers():
    fig, (a, b) = plt.subplots(1, 2)
    a.plot([1, 50, 100], [7.0, 2.5, 1.4])
    a.set_yscale("log")
    b.loglog([1, 1000], [0.06, 0.3])
    fig.canvas.draw()
    before = [t.get_text() for t in a.get_yticklabels(minor=True) if t.get_text()]
    assert any("times" in t for t in before)            # matplotlib's own: $2\\times10^{0}$ ...
    for ax in (a, b):
        plotting.plain_log_ticks(ax)
    fig.canvas.draw()
    labels = {ax: [t.get_text() for t in ax.get_yticklabels(minor=True) + ax.get_yticklabels()
                   if t.get_text()] for ax in (a, b)}
    assert {"2", "3", "4", "6"} <= set(labels[a])
    assert not [t for t in labels[a] + labels[b] if "$" in t or "times" in t]
    assert {"0.06", "0.2", "0.3"} <= set(labels[b])
    with pytest.raises(ValueError, match="axis must be 'x' or 'y', but got 'z'"):
        plotting.plain_log_ticks(a, "z")
    plt.close(fig)
    fig, c = plt.subplots()            # below 1e-4, where :g would write 1e-05
    c.set(yscale="log", ylim=(1e-6, 2))
    plotting.plain_log_ticks(c)
    fig.canvas.draw()
    small = [t.get_text() for t in c.get_yticklabels() if t.get_text()]
    assert {"0.000001", "0.00001", "0.0001", "1"} <= set(small) and not [t for t in small if "e" in t]
    plt.close(fig)


def test_layer_diagram_names_a_bad_box_list():
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="^layer_diagram needs at least one box, but got none$"):
        plotting.layer_diagram(ax, [], title="x")
    boxes = [("a", "(B, S, D)", "w"), ("b", "(B, S, D)", "w")]
    with pytest.raises(ValueError, match=r"^residuals: \(0, 2\) names a box outside 0\.\.1$"):
        plotting.layer_diagram(ax, boxes, title="x", residuals=[(0, 2)])
    plt.close(fig)


def test_a_mask_heatmap_names_its_two_values_on_the_colour_bar():
    # chapter 9's 0/1 mask had a continuous colour bar ticked 0.0, 0.2, ..., 1.0, as if values in
    # between occurred
    import torch

    family = plotting.cjk_font()
    with matplotlib.rc_context({"font.family": "sans-serif", "font.sans-serif": [family]}):
        fig, ax = plt.subplots()
        image = plotting.heatmap(ax, torch.ones(3, 3).tril().int(), title="掩码", cbar_label="",
                                 levels=["0 禁止", "1 允许"])
        fig.canvas.draw()
    assert list(fig.axes[1].get_yticks()) == [0, 1]
    assert [t.get_text() for t in fig.axes[1].get_yticklabels()] == ["0 禁止", "1 允许"]
    assert image.cmap.N == 2 and image.norm(0) < 0.5 < image.norm(1)   # one colour each
    with pytest.raises(ValueError, match=r"^levels names 2 values, but the matrix holds \[2\] as well$"):
        plotting.heatmap(ax, torch.tensor([[0, 2]]), title="t", cbar_label="", levels=["a", "b"])
    plt.close(fig)


def test_distinct_lines_keep_coinciding_curves_visible():
    styles = plotting.distinct_lines(3)
    assert [st["ms"] for st in styles] == sorted((st["ms"] for st in styles), reverse=True)
    assert len({st["ls"] for st in styles}) == len({st["marker"] for st in styles}) == 3
    assert all(st["mfc"] == "none" for st in styles)        # hollow: the smaller shows inside
    fig, ax = plt.subplots()
    for st in styles:
        ax.plot([1, 2], [1, 1], **st)                     # three equal curves, all drawn
    assert [line.get_marker() for line in ax.lines] == ["o", "^", "s"]
    plt.close(fig)
    for bad in (0, 5, 2.0, True):
        with pytest.raises(ValueError, match=rf"^n must be an integer from 1 to 4, but got {bad!r}$"):
            plotting.distinct_lines(bad)
