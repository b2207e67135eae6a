"""Pictures of a split, drawn from what ``picture`` decides they show (the wall span of each
iteration, outliers, medians per serving phase, the steady state, a clipped warm-up, GPU busy
as a share of the span): matplotlib draws PNG, SVG and PDF; ``.html`` is the interactive page
of ``plot_page`` (plotly), with each iteration's numbers on hover.

``iteration_table`` is the one place the plot reads the iteration records. Needs the
``[plot]`` extra (``pip install 'stream-split[plot]'``): matplotlib and plotly, imported only
when a picture is drawn.
"""
from __future__ import annotations

import os

from stream_split.errors import OptionError, PlotUnavailable
from stream_split.explain import shown
from stream_split.picture import COLOURS, Picture, outlier_legend, picture
from stream_split.plot_page import write_page
from stream_split.summary import build_table

#: Size of the figure in inches, and its resolution: 1200 x 750 pixels as PNG (1200 x 500
#: without a GPU panel).
FIGSIZE = (12, 7.5)
DPI = 100
#: The format of a picture for each suffix its name may end in.
PLOT_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf", ".html": "html", ".htm": "html"}


def require_pyplot():
    """matplotlib's pyplot, drawing into files only; ``PlotUnavailable`` without it."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(
            "plots need matplotlib: pip install 'stream-split[plot]'") from None
    return plt


def iteration_table(manifest: dict) -> dict:
    """The table the plot draws (``summary.build_table``): the one place it reads the
    iteration records of a manifest."""
    return build_table(manifest)


def figure(manifest: dict):
    """The matplotlib figure of a manifest's iterations: the wall span of each (what outliers
    are judged on), and beneath, where there is GPU work, its share of each one's span."""
    return draw(picture(iteration_table(manifest)))


def draw(pic: Picture):
    """The matplotlib figure of ``pic``: one panel for a CPU-only trace, two with GPU work."""
    plt = require_pyplot()
    from matplotlib.ticker import MaxNLocator  # the [plot] extra, like pyplot
    if pic.gpu:
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=FIGSIZE, dpi=DPI,
                                          gridspec_kw={"height_ratios": [2, 1]})
    else:  # a CPU-only trace: no empty GPU panel
        fig, top = plt.subplots(1, 1, figsize=(FIGSIZE[0], FIGSIZE[1] * 2 / 3), dpi=DPI)
        bottom = None
    if pic.steady:
        for axis in (top, bottom) if bottom else (top,):
            axis.axvspan(pic.steady[0] - 0.5, pic.steady[1] + 0.5, color=COLOURS["green"],
                         alpha=0.12, label="steady state" if axis is top else None)
    _draw_times(top, pic)
    top.set_ylabel("wall span per iteration (ms)")
    top.set_title(pic.title + pic.clip_note())
    top.legend(loc="best", fontsize=8, framealpha=0.9)
    top.grid(alpha=0.3)
    if bottom is not None:
        _draw_gpu(bottom, pic)
    (bottom or top).set_xlabel("iteration")
    (bottom or top).xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return fig


def _xy(pic: Picture, rows) -> tuple[list, list]:
    return [r["index"] for r in rows], [pic.shown_ms(r) for r in rows]


def _draw_times(top, pic: Picture) -> None:
    """The wall span of each iteration (by phase for a server), idle cycles, the medians,
    the outliers (the largest labelled), the clipped points at the top with their value."""
    size = 2.5 if pic.many else 4
    if pic.phased:  # a serving loop: one colour per phase, the line between them plain
        everyone = sorted((r for s in pic.series for r in s.rows), key=lambda r: r["index"])
        top.plot(*_xy(pic, everyone), "-", color=COLOURS["gray"], linewidth=0.6, alpha=0.6)
    for series in pic.series:
        line = "none" if pic.phased else "-"
        top.plot(*_xy(pic, series.rows), "o", color=series.colour, markersize=size,
                 linestyle=line, linewidth=0.5 if pic.many else 1, label=series.label)
    for median in pic.medians:
        top.axhline(median.ms, color=median.colour, linestyle=":", linewidth=1,
                    label=median.label)
    if pic.idle:
        top.plot(*_xy(pic, pic.idle), "s", color=COLOURS["gray"], markersize=size,
                 linestyle="none", label="idle cycle")
    if pic.outliers:
        top.plot(*_xy(pic, pic.outliers), "o", markersize=11, markerfacecolor="none",
                 markeredgecolor=COLOURS["red"], markeredgewidth=2, linestyle="none",
                 label=outlier_legend(pic))
    for label in pic.labels:
        left = label.side == "left"
        top.annotate(label.text, (label.row["index"], pic.shown_ms(label.row)),
                     textcoords="offset points", xytext=(-6 if left else 6, 12 * label.rise),
                     ha="right" if left else "left", va="bottom", fontsize=8,
                     color=COLOURS["red"])
    if pic.limit_ms is not None:
        top.plot(*_xy(pic, pic.clipped), "^", color=COLOURS["black"], markersize=8,
                 linestyle="none", label=f"clipped ({len(pic.clipped)})")
        for r in pic.clipped:
            top.annotate(f"{r['wall_ms']:.0f} ms", (r["index"], pic.shown_ms(r)),
                         textcoords="offset points", xytext=(6, -12), fontsize=8)
        top.set_ylim(0, pic.limit_ms)


def _draw_gpu(bottom, pic: Picture) -> None:
    """What share of each iteration's wall span its GPU work took, stacked by layer (the rest
    is GPU idle or before / after its GPU work): 0-100 %. A manifest without breakdown: its
    GPU active time. Bars touch when there are many, so no stripes come between them."""
    x = [r["index"] for r in pic.rows]
    width = 1.0 if pic.many else 0.8
    if not pic.layers:
        bottom.bar(x, pic.gpu_active_ms, color=COLOURS["orange"], width=width, linewidth=0)
        bottom.set_ylabel("GPU active (ms)")
    else:
        base = [0.0] * len(x)
        for layer in pic.layers:
            bottom.bar(x, layer.shares, bottom=base, color=layer.colour, label=layer.label,
                       width=width, linewidth=0)
            base = [b + h for b, h in zip(base, layer.shares)]
        bottom.set_ylim(0, 100)
        bottom.set_ylabel("GPU busy (% of the wall span)")
        bottom.legend(loc="best", fontsize=8, framealpha=0.9)
    bottom.grid(alpha=0.3)


def write_plot(manifest: dict, path: str) -> str:
    """Write the picture to ``path``, in the format its suffix names (``PLOT_FORMATS``: an
    ``OptionError`` for any other); ``.html`` is the interactive page. A path that cannot be
    written (a folder, a full device) is an ``OSError``. Returns ``path``."""
    form = plot_format(path)
    pic = picture(iteration_table(manifest))
    if form == "html":
        write_page(pic, path)
        return path
    plt = require_pyplot()
    fig = draw(pic)
    try:  # opened here: matplotlib would add a suffix to a path without one
        with open(path, "wb") as f:
            fig.savefig(f, format=form, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def plot_format(path: str) -> str:
    """The format of a picture at ``path``, from its suffix; an ``OptionError`` naming the
    suffixes that work when it has none of them."""
    suffix = os.path.splitext(str(path))[1].lower()
    if suffix not in PLOT_FORMATS:
        raise OptionError(f"cannot draw a picture as {shown(path)}: its name must end in "
                          + ", ".join(PLOT_FORMATS))
    return PLOT_FORMATS[suffix]
