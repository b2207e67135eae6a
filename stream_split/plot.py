"""Pictures of a split: the wall span of each iteration (outliers ringed, the largest few
labelled, idle cycles apart, serving phases in colours of their own with their medians, the
steady state shaded, a warm-up far above the rest clipped and marked) and, where there is GPU
work, the share of each iteration's wall span its GPU work took, by layer, beneath. PNG, SVG, or HTML (the SVG inside a page).

Draws from the table of ``summary.build_table`` (one source of the numbers); needs
matplotlib (``pip install 'stream-split[plot]'``), imported only here.
"""
from __future__ import annotations

import html
import io
import os

from stream_split.core.serving import DECODE, IDLE, MIXED, PREFILL
from stream_split.errors import OptionError, PlotUnavailable
from stream_split.explain import shown
from stream_split.summary import build_table

#: Marker colour of each serving phase (``core.serving``), in legend order.
PHASE_COLOURS = {PREFILL: "tab:purple", MIXED: "tab:olive", DECODE: "tab:blue",
                 IDLE: "tab:gray"}
PHASE_ORDER = list(PHASE_COLOURS)
#: Size of the figure in inches, and its resolution: 1200 x 750 pixels as PNG.
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


#: Points above this many times the median (of the non-idle iterations) are clipped when
#: they would flatten the rest: a 494 ms warm-up over 13-30 ms steps.
CLIP_RATIO = 10.0
#: The y axis then ends this much above the highest point it keeps.
CLIP_HEADROOM = 1.15
#: Outliers whose ratio is written beside them (the largest); the others are ringed only.
OUTLIER_LABELS = 5
#: The layers of the breakdown stacked in the GPU panel (``summary`` row keys), and colours.
GPU_LAYERS = (("compute_ms", "compute", "tab:orange"), ("comm_ms", "communication", "tab:purple"),
              ("memcpy_ms", "memcpy", "tab:cyan"), ("memset_ms", "memset", "tab:pink"))


def clip_limit(values: list[float], median: float | None) -> float | None:
    """The top of the y axis when some of ``values`` are more than ``CLIP_RATIO`` times the
    ``median`` above it (they are drawn at the top, marked), else None (nothing clipped)."""
    if not values or not median or max(values) <= CLIP_RATIO * median:
        return None
    kept = [v for v in values if v <= CLIP_RATIO * median]
    return CLIP_HEADROOM * max(kept)


def figure(manifest: dict):
    """The matplotlib figure of a manifest's iterations: the wall span of each (what outliers
    are judged on), and beneath, where there is GPU work, each one's GPU span by layer."""
    plt = require_pyplot()
    from matplotlib.ticker import MaxNLocator  # the [plot] extra, like pyplot
    table = build_table(manifest)
    rows, footer = table["rows"], table["footer"]
    gpu = any(r["gpu_active_ms"] for r in rows)
    if gpu:
        fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=FIGSIZE, dpi=DPI,
                                          gridspec_kw={"height_ratios": [2, 1]})
    else:  # a CPU-only trace: no empty GPU panel
        fig, top = plt.subplots(1, 1, figsize=(FIGSIZE[0], FIGSIZE[1] * 2 / 3), dpi=DPI)
        bottom = None
    steady = footer.get("steady_state")
    if steady:
        for axis in (top, bottom) if bottom else (top,):
            axis.axvspan(steady["first"] - 0.5, steady["last"] + 0.5, color="tab:green",
                         alpha=0.12, label="steady state" if axis is top else None)
    limit = _draw_times(top, rows, footer)
    top.set_ylabel("wall span per iteration (ms)")
    title = os.path.basename(str(table.get("input") or "")) or "iterations"
    if limit is not None:
        title += f" (y axis clipped at {limit:.1f} ms: higher points at the top, value beside)"
    top.set_title(title)
    top.legend(loc="best", fontsize=8, framealpha=0.9)
    top.grid(alpha=0.3)
    if bottom is not None:
        _draw_gpu(bottom, rows)
    (bottom or top).set_xlabel("iteration")
    (bottom or top).xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return fig


def _draw_times(top, rows: list, footer: dict) -> float | None:
    """The wall span of each iteration (by phase for a server), idle cycles, the outliers
    (the largest labelled), the medians; returns where the y axis was clipped, if it was."""
    busy = [r for r in rows if r["kind"] != "idle" and r["wall_ms"] is not None]
    idle = [r for r in rows if r["kind"] == "idle" and r["wall_ms"] is not None]
    limit = clip_limit([r["wall_ms"] for r in busy + idle], footer.get("median_ms"))
    shown_ms = (lambda v: v) if limit is None else (lambda v: min(v, limit / CLIP_HEADROOM * 1.1))
    x = lambda group: [r["index"] for r in group]
    y = lambda group: [shown_ms(r["wall_ms"]) for r in group]
    phases = sorted({r["phase"] for r in busy if r.get("phase")}, key=PHASE_ORDER.index)
    if phases:  # a serving loop: one colour per phase, the line between them plain
        top.plot(x(busy), y(busy), "-", color="tab:gray", linewidth=0.6, alpha=0.6)
        for phase in phases:
            mine = [r for r in busy if r.get("phase") == phase]
            top.plot(x(mine), y(mine), "o", color=PHASE_COLOURS[phase], markersize=4,
                     linestyle="none", label=f"{phase} ({len(mine)})")
            median = (footer.get("phases") or {}).get(phase, {}).get("median_ms")
            if median is not None:
                top.axhline(median, color=PHASE_COLOURS[phase], linestyle=":", linewidth=1,
                            label=f"{phase} median {median:.3f} ms")
    else:
        top.plot(x(busy), y(busy), "o-", color="tab:blue", markersize=4, linewidth=1,
                 label="iteration")
        if footer.get("median_ms") is not None:
            top.axhline(footer["median_ms"], color="tab:blue", linestyle=":", linewidth=1,
                        label=f"median {footer['median_ms']:.3f} ms")
    if idle:
        top.plot(x(idle), y(idle), "s", color="tab:gray", markersize=4, linestyle="none",
                 label="idle cycle")
    _draw_outliers(top, busy, y)
    if limit is not None:
        clipped = [r for r in busy + idle if r["wall_ms"] > limit]
        top.plot(x(clipped), y(clipped), "^", color="black", markersize=8, linestyle="none",
                 label=f"clipped ({len(clipped)})")
        for r in clipped:
            top.annotate(f"{r['wall_ms']:.0f} ms", (r["index"], shown_ms(r["wall_ms"])),
                         textcoords="offset points", xytext=(6, -12), fontsize=8)
        top.set_ylim(0, limit)
    return limit


def _draw_outliers(top, busy: list, y) -> None:
    """Ring every outlier; write the ratio beside the ``OUTLIER_LABELS`` largest only."""
    outliers = [r for r in busy if r["outlier"]]
    if not outliers:
        return
    top.plot([r["index"] for r in outliers], y(outliers), "o", markersize=11,
             markerfacecolor="none", markeredgecolor="tab:red", markeredgewidth=2,
             linestyle="none", label=f"outlier ({len(outliers)}"
             + (f", {OUTLIER_LABELS} largest labelled)" if len(outliers) > OUTLIER_LABELS
                else ")"))
    ratio = lambda r: str(r.get("reason") or "").split(", ")[0]
    for r in sorted(outliers, key=lambda r: -r["wall_ms"])[:OUTLIER_LABELS]:
        top.annotate(ratio(r), (r["index"], y([r])[0]), textcoords="offset points",
                     xytext=(6, 6), fontsize=8, color="tab:red")


def _draw_gpu(bottom, rows: list) -> None:
    """What share of each iteration's wall span its GPU work took, stacked by layer (its
    breakdown; the rest is GPU idle or before / after its GPU work): 0-100 %, so no
    iteration flattens the others. A manifest without breakdown: its GPU active time."""
    x = [r["index"] for r in rows]
    if not any(r.get("compute_ms") is not None for r in rows):
        bottom.bar(x, [r["gpu_active_ms"] for r in rows], color="tab:orange")
        bottom.set_ylabel("GPU active (ms)")
    else:
        base = [0.0] * len(rows)
        for key, label, colour in GPU_LAYERS:
            heights = [100 * (r.get(key) or 0.0) / r["wall_ms"] if r["wall_ms"] else 0.0
                       for r in rows]
            if any(heights):
                bottom.bar(x, heights, bottom=base, color=colour, label=label)
                base = [b + h for b, h in zip(base, heights)]
        bottom.set_ylim(0, 100)
        bottom.set_ylabel("GPU busy (% of the wall span)")
        bottom.legend(loc="best", fontsize=8, framealpha=0.9)
    bottom.grid(alpha=0.3)


def write_plot(manifest: dict, path: str) -> str:
    """Write the picture to ``path``, in the format its suffix names (``PLOT_FORMATS``: an
    ``OptionError`` for any other); ``.html`` is an SVG inside a page. A path that cannot be
    written (a folder, a full device) is an ``OSError``. Returns ``path``."""
    form = plot_format(path)
    plt = require_pyplot()
    fig = figure(manifest)
    try:
        if form == "html":
            svg = io.StringIO()
            fig.savefig(svg, format="svg")
            title = html.escape(str(manifest.get("input") or "iterations"))
            with open(path, "w", encoding="utf-8") as f:
                f.write(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                        f"<title>{title}</title></head><body>\n{svg.getvalue()}\n"
                        f"</body></html>\n")
        else:  # opened here: matplotlib would add a suffix to a path without one
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
