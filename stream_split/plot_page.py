"""The interactive page of a split's plot (``plot OUT -o x.html``): the picture ``picture``
decides on (the same as the PNG's), drawn with plotly, each iteration's numbers on hover
(index, step, phase, start, CPU and wall times, GPU breakdown, its piece's file name, why it
is an outlier), zoom and pan in the browser. One self-contained file: plotly.js is inside
(about 5 MB), so the page opens where the trace is, offline too.

Needs plotly (the ``[plot]`` extra), imported only when a page is written.
"""
from __future__ import annotations

import html

from stream_split.errors import PlotUnavailable
from stream_split.picture import COLOURS, GPU_LAYERS, Picture, outlier_legend, share_of_wall

#: Height of the page's figure in pixels, with and without a GPU panel (its width follows
#: the window).
PAGE_HEIGHT = 750
PAGE_HEIGHT_CPU = 500
#: The id of the figure's element in the page.
FIGURE_ID = "iterations"
#: The layers of a row's breakdown shown on hover, in ms (``summary`` row keys).
HOVER_LAYERS = (("compute_ms", "compute"), ("comm_ms", "comm"), ("memcpy_ms", "memcpy"),
                ("memset_ms", "memset"), ("idle_ms", "GPU idle"))


def require_plotly():
    """plotly's ``graph_objects`` and ``make_subplots``; ``PlotUnavailable`` without it."""
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots
    except ImportError:
        raise PlotUnavailable(
            "the interactive page needs plotly: pip install 'stream-split[plot]'") from None
    return go, make_subplots


def hover_text(row: dict) -> str:
    """What hovering over an iteration shows (plotly's hover labels take ``<br>``)."""
    head = f"iteration {row['index']}"
    if row.get("step") is not None:
        head += f", step {row['step']}"
    if row.get("phase"):
        head += f" ({row['phase']})"
    lines = [head, f"file: {row.get('file') or '(not written)'}",
             f"start {_ms(row['start_ms'])}, CPU {_ms(row['duration_ms'])}, "
             f"wall {_ms(row['wall_ms'])}"]
    if row.get("compute_ms") is not None:
        busy = sum(share_of_wall(row, key) for key, _, _ in GPU_LAYERS)
        lines.append(f"GPU busy {busy:.0f} % of the wall span: " + ", ".join(
            f"{name} {_ms(row[key])}" for key, name in HOVER_LAYERS if row.get(key) is not None))
    elif row.get("gpu_active_ms"):
        lines.append(f"GPU active {_ms(row['gpu_active_ms'])}")
    if row.get("outlier"):
        lines.append(f"outlier: {html.escape(str(row.get('reason')))}")
    others = [flag for flag in row.get("flags") or () if not flag.startswith("outlier")]
    if others:  # warm-up, incomplete
        lines.append(", ".join(others))
    return "<br>".join(lines)


def _ms(value) -> str:
    return "?" if value is None else f"{value:.3f} ms"


def page_figure(pic: Picture):
    """The plotly figure of ``pic``: the wall spans above, the GPU panel beneath when there
    is GPU work; the same series, colours and legend entries as the PNG."""
    go, make_subplots = require_plotly()
    rows = 2 if pic.gpu else 1
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.06,
                        row_heights=[2, 1] if pic.gpu else None)
    if pic.steady:
        for row in range(1, rows + 1):
            fig.add_vrect(x0=pic.steady[0] - 0.5, x1=pic.steady[1] + 0.5, row=row, col=1,
                          fillcolor=COLOURS["green"], opacity=0.12, line_width=0, layer="below",
                          name="steady state", showlegend=row == 1,
                          exclude_empty_subplots=False)
    for trace in _time_traces(go, pic):
        fig.add_trace(trace, row=1, col=1)
    _annotate(fig, pic)
    if pic.gpu:
        for trace in _gpu_traces(go, pic):
            fig.add_trace(trace, row=2, col=1)
        fig.update_yaxes(title_text="GPU busy (% of the wall span)" if pic.layers
                         else "GPU active (ms)", range=[0, 100] if pic.layers else None,
                         row=2, col=1)
    fig.update_yaxes(title_text="wall span per iteration (ms)", row=1, col=1,
                     range=[0, pic.limit_ms] if pic.limit_ms is not None else None)
    fig.update_xaxes(title_text="iteration", row=rows, col=1)
    fig.update_layout(title_text=html.escape(pic.title + pic.clip_note()),
                      height=PAGE_HEIGHT if pic.gpu else PAGE_HEIGHT_CPU,
                      template="plotly_white", hovermode="closest", barmode="stack",
                      legend={"traceorder": "normal"},
                      bargap=0 if pic.many else 0.2, margin={"t": 60, "r": 20})
    return fig


def _time_traces(go, pic: Picture) -> list:
    """The upper panel's traces: the series (hover: each iteration's numbers), medians, idle
    cycles, outlier rings and clipped markers (no hover of their own: the point beneath has)."""
    size = 4 if pic.many else 7
    traces = []
    if pic.phased:
        everyone = sorted((r for s in pic.series for r in s.rows), key=lambda r: r["index"])
        traces.append(go.Scatter(x=[r["index"] for r in everyone],
                                 y=[pic.shown_ms(r) for r in everyone], mode="lines",
                                 line={"color": COLOURS["gray"], "width": 0.6}, opacity=0.6,
                                 hoverinfo="skip", showlegend=False))
    for series in pic.series:
        traces.append(_points(go, pic, series.rows, series.label, series.colour, size,
                              lines=not pic.phased))
    lo = min((r["index"] for r in pic.rows), default=0) - 0.5
    hi = max((r["index"] for r in pic.rows), default=0) + 0.5
    for median in pic.medians:
        traces.append(go.Scatter(x=[lo, hi], y=[median.ms, median.ms], mode="lines",
                                 name=median.label, hoverinfo="skip",
                                 line={"color": median.colour, "dash": "dot", "width": 1}))
    if pic.idle:
        traces.append(_points(go, pic, pic.idle, "idle cycle", COLOURS["gray"], size,
                              symbol="square"))
    if pic.outliers:
        traces.append(_marks(go, pic, pic.outliers, outlier_legend(pic), {
            "symbol": "circle-open", "size": 15, "color": COLOURS["red"],
            "line": {"width": 2.5}}))
    if pic.clipped:
        traces.append(_marks(go, pic, pic.clipped, f"clipped ({len(pic.clipped)})", {
            "symbol": "triangle-up", "size": 13, "color": COLOURS["black"]}))
    return traces


def _points(go, pic: Picture, rows, name: str, colour: str, size: float, lines=False,
            symbol="circle"):
    """Iterations as points that show their numbers on hover."""
    return go.Scatter(x=[r["index"] for r in rows], y=[pic.shown_ms(r) for r in rows],
                      mode="lines+markers" if lines else "markers", name=name,
                      marker={"color": colour, "size": size, "symbol": symbol},
                      line={"color": colour, "width": 0.6 if pic.many else 1},
                      hovertext=[hover_text(r) for r in rows], hoverinfo="text")


def _marks(go, pic: Picture, rows, name: str, marker: dict):
    """Marks drawn over iterations' points (rings, clipped triangles), without hover."""
    return go.Scatter(x=[r["index"] for r in rows], y=[pic.shown_ms(r) for r in rows],
                      mode="markers", name=name, marker=marker, hoverinfo="skip")


def _annotate(fig, pic: Picture) -> None:
    """The largest outliers' labels (red, one above a close neighbour's) and each clipped
    point's value, beside it."""
    for label in pic.labels:
        left = label.side == "left"
        fig.add_annotation(x=label.row["index"], y=pic.shown_ms(label.row), text=label.text,
                           showarrow=False, xanchor="right" if left else "left",
                           yanchor="bottom", xshift=-7 if left else 7, yshift=15 * label.rise,
                           font={"color": COLOURS["red"], "size": 11}, row=1, col=1)
    for r in pic.clipped:
        fig.add_annotation(x=r["index"], y=pic.shown_ms(r), text=f"{r['wall_ms']:.0f} ms",
                           showarrow=False, xanchor="left", yanchor="top", xshift=9, yshift=-4,
                           font={"color": COLOURS["black"], "size": 11}, row=1, col=1)


def _gpu_traces(go, pic: Picture) -> list:
    """The GPU panel: each layer's share of each iteration's wall span, stacked; without a
    breakdown, its GPU active time. Hover: the iteration's numbers, as above."""
    x = [r["index"] for r in pic.rows]
    hover = [hover_text(r) for r in pic.rows]
    if not pic.layers:
        return [go.Bar(x=x, y=pic.gpu_active_ms, name="GPU active",
                       marker={"color": COLOURS["orange"], "line": {"width": 0}},
                       hovertext=hover, hoverinfo="text")]
    return [go.Bar(x=x, y=layer.shares, name=layer.label,
                   marker={"color": layer.colour, "line": {"width": 0}},
                   hovertext=hover, hoverinfo="text") for layer in pic.layers]


def write_page(pic: Picture, path: str) -> str:
    """Write the page of ``pic`` to ``path`` (plotly.js inside). A path that cannot be
    written is an ``OSError``. Returns ``path``."""
    figure = page_figure(pic).to_html(full_html=False, include_plotlyjs=True,
                                      div_id=FIGURE_ID, config={"displaylogo": False})
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                f"<title>{html.escape(pic.title)}</title></head><body>\n{figure}\n"
                f"</body></html>\n")
    return path
