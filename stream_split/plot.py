"""Pictures of a split: iteration time per iteration (outliers marked, idle cycles apart,
serving phases in colours of their own, steady state shaded) and GPU busy time beneath. PNG, SVG, or HTML (the SVG inside a page).

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


def figure(manifest: dict):
    """The matplotlib figure of a manifest's iterations."""
    plt = require_pyplot()
    table = build_table(manifest)
    rows = table["rows"]
    footer = table["footer"]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=FIGSIZE, dpi=DPI,
                                      gridspec_kw={"height_ratios": [2, 1]})
    busy = [r for r in rows if r["kind"] != "idle"]
    idle = [r for r in rows if r["kind"] == "idle"]
    outliers = [r for r in busy if r["outlier"]]
    steady = footer.get("steady_state")
    if steady:
        for axis in (top, bottom):
            axis.axvspan(steady["first"] - 0.5, steady["last"] + 0.5, color="tab:green",
                         alpha=0.12, label="steady state" if axis is top else None)
    phases = sorted({r["phase"] for r in busy if r.get("phase")}, key=PHASE_ORDER.index)
    if phases:  # a serving loop: one colour per phase, the line between them plain
        top.plot([r["index"] for r in busy], [r["wall_ms"] for r in busy], "-",
                 color="tab:gray", linewidth=0.6, alpha=0.6)
        for phase in phases:
            mine = [r for r in busy if r.get("phase") == phase]
            top.plot([r["index"] for r in mine], [r["wall_ms"] for r in mine], "o",
                     color=PHASE_COLOURS[phase], markersize=4, linestyle="none",
                     label=f"{phase} ({len(mine)})")
    else:
        top.plot([r["index"] for r in busy], [r["wall_ms"] for r in busy], "o-",
                 color="tab:blue", markersize=4, linewidth=1, label="iteration")
    if idle:
        top.plot([r["index"] for r in idle], [r["wall_ms"] for r in idle], "s",
                 color="tab:gray", markersize=4, linestyle="none", label="idle cycle")
    if outliers:
        top.plot([r["index"] for r in outliers], [r["wall_ms"] for r in outliers], "o",
                 markersize=11, markerfacecolor="none", markeredgecolor="tab:red",
                 markeredgewidth=2, linestyle="none", label="outlier")
        for r in outliers:
            reason = next((f for f in r["flags"] if f.startswith("outlier")), "")
            top.annotate(reason.replace("outlier ", "").strip("()"),
                         (r["index"], r["wall_ms"]),
                         textcoords="offset points", xytext=(6, 6), fontsize=8,
                         color="tab:red")
    if footer.get("median_ms") is not None:
        top.axhline(footer["median_ms"], color="tab:blue", linestyle=":", linewidth=1,
                    label=f"median {footer['median_ms']:.3f} ms")
    top.set_ylabel("iteration time (ms)")
    top.set_title(os.path.basename(str(table.get("input") or "")) or "iterations")
    top.legend(loc="best", fontsize=8, framealpha=0.9)
    top.grid(alpha=0.3)
    bottom.bar([r["index"] for r in rows], [r["gpu_active_ms"] for r in rows],
               color=["tab:gray" if r["kind"] == "idle" else "tab:orange" for r in rows])
    bottom.set_ylabel("GPU busy (ms)")
    bottom.set_xlabel("iteration")
    bottom.grid(alpha=0.3)
    fig.tight_layout()
    return fig


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
