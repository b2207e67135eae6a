"""What the plot of a split shows, decided once for every way of drawing it (matplotlib's PNG,
SVG and PDF in ``plot``, the interactive page in ``plot_page``), so the two never disagree.

The wall span of each iteration (what outliers are judged on): by serving phase when the
records have phases, each with its own median, else one series and the median; idle cycles
apart; every outlier ringed, the ``OUTLIER_LABELS`` largest labelled; the steady state; a
warm-up far above the rest clipped (the y axis ends above the highest point kept, a clipped
point is marked at the top with its value); and, where there is GPU work, the share of each
iteration's wall span its GPU work took, by layer of its breakdown (0-100 %, so no iteration
flattens the others). Pure: it reads the table of ``summary.build_table``, draws nothing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from stream_split.core.serving import DECODE, IDLE, MIXED, PREFILL

#: matplotlib's "tab10" colours, by name, as hex strings both renderers understand.
COLOURS = {"blue": "#1f77b4", "orange": "#ff7f0e", "green": "#2ca02c", "red": "#d62728",
           "purple": "#9467bd", "pink": "#e377c2", "gray": "#7f7f7f", "olive": "#bcbd22",
           "cyan": "#17becf", "black": "#000000"}
#: Marker colour of each serving phase (``core.serving``), in legend order.
PHASE_COLOURS = {PREFILL: COLOURS["purple"], MIXED: COLOURS["olive"],
                 DECODE: COLOURS["blue"], IDLE: COLOURS["gray"]}
PHASE_ORDER = list(PHASE_COLOURS)
#: Points above this many times the median (of the non-idle iterations) are clipped when
#: they would flatten the rest: a 494 ms warm-up over 13-30 ms steps.
CLIP_RATIO = 10.0
#: The y axis then ends this much above the highest point it keeps...
CLIP_HEADROOM = 1.15
#: ...and a clipped point is drawn at this many times the highest point kept (under the top).
CLIPPED_AT = 1.1
#: Outliers whose ratio is written beside them (the largest); the others are ringed only.
OUTLIER_LABELS = 5
#: About the width and height of an outlier's label ("#724: 1.5x"), as shares of the upper
#: panel's width and height: labels are placed so that these boxes do not overlap.
LABEL_WIDTH = 0.08
LABEL_LINE = 0.045
#: How far the axes reach beyond the first and last points (matplotlib's margins: 5 %).
PANEL_MARGIN = 0.05
#: Where a label may go, in lines of text from its point to its bottom, in order of preference:
#: just above, a line higher, just below, ... (the label names its iteration, so a label some
#: lines away from its ring still says whose it is).
LABEL_RISES = (0.5,) + tuple(sign * (lines + 0.5) for lines in range(1, 4 * OUTLIER_LABELS)
                             for sign in (1, -1))
#: Half the width and height of an outlier's ring, in the same shares: no label covers one.
RING = (0.008, 0.025)
#: The layers of the breakdown stacked in the GPU panel (``summary`` row keys), and colours.
GPU_LAYERS = (("compute_ms", "compute", COLOURS["orange"]),
              ("comm_ms", "communication", COLOURS["purple"]),
              ("memcpy_ms", "memcpy", COLOURS["cyan"]), ("memset_ms", "memset", COLOURS["pink"]))
#: Beyond this many iterations points are drawn small and the line between them faint.
MANY_ITERATIONS = 200


@dataclass(frozen=True)
class Series:
    """Iterations drawn alike: one serving phase, or every busy iteration of a loop."""
    label: str
    colour: str
    rows: tuple


@dataclass(frozen=True)
class Median:
    label: str
    colour: str
    ms: float


@dataclass(frozen=True)
class Label:
    """The text beside a labelled outlier: on its ``side`` of the point ("right" or "left"),
    its bottom ``rise`` lines of text above the point (below it when negative)."""
    row: dict
    text: str
    side: str = "right"
    rise: float = 0.5


@dataclass(frozen=True)
class Layer:
    """One layer of the GPU panel: its share of each iteration's wall span, in %."""
    label: str
    colour: str
    shares: tuple


@dataclass(frozen=True)
class Picture:
    title: str
    rows: tuple             # every row of the table, in order
    series: tuple           # Series of the busy iterations (one per phase, or one)
    phased: bool            # the series are serving phases
    idle: tuple             # rows of idle cycles
    medians: tuple          # Median lines
    outliers: tuple         # rows of every outlier (ringed)
    labels: tuple           # Label of the largest outliers
    clipped: tuple          # rows drawn at the top, clipped
    limit_ms: float | None  # the top of the y axis when some are clipped, else None
    steady: tuple | None    # (first, last) iteration of the steady state
    layers: tuple           # Layer of the GPU panel; empty for a CPU-only trace
    gpu_active_ms: tuple    # each row's GPU active time: the panel when there is no breakdown

    @property
    def gpu(self) -> bool:
        """Whether there is a GPU panel (a CPU-only trace has none)."""
        return any(self.gpu_active_ms)

    @property
    def many(self) -> bool:
        return len(self.rows) > MANY_ITERATIONS

    def shown_ms(self, row: dict) -> float:
        """Where the wall span of ``row`` is drawn: at the top when it is clipped."""
        return drawn_at(row["wall_ms"], self.limit_ms)

    def clip_note(self) -> str:
        """What the title adds when the y axis is clipped."""
        if self.limit_ms is None:
            return ""
        return (f" (y axis clipped at {self.limit_ms:.1f} ms: higher points at the top, "
                "value beside)")


def clip_limit(values: list[float], median: float | None) -> float | None:
    """The top of the y axis when some of ``values`` are more than ``CLIP_RATIO`` times the
    ``median`` above it (they are drawn at the top, marked), else None (nothing clipped)."""
    if not values or not median or max(values) <= CLIP_RATIO * median:
        return None
    kept = [v for v in values if v <= CLIP_RATIO * median]
    return CLIP_HEADROOM * max(kept)


def drawn_at(wall_ms: float, limit_ms: float | None) -> float:
    """Where a wall span is drawn when the y axis ends at ``limit_ms`` (None: not clipped):
    a clipped one just under the top."""
    return wall_ms if limit_ms is None else min(wall_ms, limit_ms / CLIP_HEADROOM * CLIPPED_AT)


def picture(table: dict) -> Picture:
    """What to draw for ``table`` (``summary.build_table``)."""
    rows, footer = table["rows"], table["footer"]
    drawn = [r for r in rows if r["wall_ms"] is not None]
    busy = [r for r in drawn if r["kind"] != "idle"]
    idle = [r for r in drawn if r["kind"] == "idle"]
    series, medians = _series(busy, footer)
    limit = clip_limit([r["wall_ms"] for r in drawn], footer.get("median_ms"))
    outliers = [r for r in busy if r["outlier"]]
    steady = footer.get("steady_state")
    return Picture(
        title=os.path.basename(str(table.get("input") or "")) or "iterations",
        rows=tuple(rows), series=tuple(series),
        phased=any(r.get("phase") for r in busy), idle=tuple(idle), medians=tuple(medians),
        outliers=tuple(outliers), labels=tuple(_labels(outliers, drawn, limit)),
        clipped=tuple(r for r in drawn if limit is not None and r["wall_ms"] > limit),
        limit_ms=limit, steady=(steady["first"], steady["last"]) if steady else None,
        layers=tuple(_layers(rows)), gpu_active_ms=tuple(r["gpu_active_ms"] for r in rows))


def _series(busy: list, footer: dict) -> tuple[list, list]:
    """The series of the busy iterations and their medians: per serving phase (the phases of
    the records, each with its own median), else one series and the overall median."""
    phases = sorted({r["phase"] for r in busy if r.get("phase")}, key=PHASE_ORDER.index)
    if not phases:
        median = footer.get("median_ms")
        return ([Series("iteration", COLOURS["blue"], tuple(busy))],
                [] if median is None else [Median(f"median {median:.3f} ms", COLOURS["blue"],
                                                  median)])
    series, medians = [], []
    for phase in phases:
        mine = tuple(r for r in busy if r.get("phase") == phase)
        series.append(Series(f"{phase} ({len(mine)})", PHASE_COLOURS[phase], mine))
        median = (footer.get("phases") or {}).get(phase, {}).get("median_ms")
        if median is not None:
            medians.append(Median(f"{phase} median {median:.3f} ms", PHASE_COLOURS[phase],
                                  median))
    return series, medians


def outlier_ratio(row: dict) -> str:
    """The ratio of an outlier's reason (``"7.1x median"``)."""
    return str(row.get("reason") or "").split(", ")[0]


def _labels(outliers: list, drawn: list, limit_ms: float | None) -> list[Label]:
    """The ``OUTLIER_LABELS`` largest outliers' labels (``#index: ratio``), each where it
    covers no other label and no other outlier's ring and stays in the panel: on the right of
    its point, else on its left (near the axis' right end: left first), at the first height of
    ``LABEL_RISES`` that has room. ``drawn``: the rows drawn; ``limit_ms``: where the y axis
    is clipped, if it is."""
    largest = sorted(outliers, key=lambda r: -r["wall_ms"])[:OUTLIER_LABELS]
    xs = [r["index"] for r in drawn]
    ys = [drawn_at(r["wall_ms"], limit_ms) for r in drawn]
    where = {r["index"]: (_share(r["index"], min(xs), max(xs)),
                          _share(drawn_at(r["wall_ms"], limit_ms), min(ys), max(ys)))
             for r in outliers}
    rings = {i: (x - RING[0], y - RING[1], x + RING[0], y + RING[1])
             for i, (x, y) in where.items()}
    placed: list[tuple] = []
    labels = []
    for r in sorted(largest, key=lambda r: r["index"]):
        x, y = where[r["index"]]
        others = placed + [box for i, box in rings.items() if i != r["index"]]
        sides = ("left", "right") if _label_box(x, y, "right", 0.5)[2] > 1 else ("right", "left")
        places = [(side, rise) for rise in LABEL_RISES for side in sides]
        side, rise = next((place for place in places if _fits(
            _label_box(x, y, *place), others)), places[0])
        placed.append(_label_box(x, y, side, rise))
        labels.append(Label(r, f"#{r['index']}: {outlier_ratio(r).split()[0]}", side, rise))
    return labels


def _fits(box: tuple, others: list) -> bool:
    """Whether a label's ``box`` stays inside the panel (its margins: the axes reach a little
    beyond the points) and covers none of ``others``."""
    inside = (-PANEL_MARGIN < box[0] and box[2] < 1 + PANEL_MARGIN
              and -LABEL_LINE < box[1] and box[3] < 1 + 2 * LABEL_LINE)
    return inside and not any(_overlap(box, other) for other in others)


def _share(value: float, lo: float, hi: float) -> float:
    """Where ``value`` lies between ``lo`` (0) and ``hi`` (1)."""
    return (value - lo) / (hi - lo) if hi > lo else 0.0


def _label_box(x: float, y: float, side: str, rise: float) -> tuple:
    """(left, bottom, right, top) of a label beside the point (x, y), in shares of the axes."""
    left = x if side == "right" else x - LABEL_WIDTH
    bottom = y + LABEL_LINE * rise
    return left, bottom, left + LABEL_WIDTH, bottom + LABEL_LINE


def _overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def outlier_legend(pic: Picture) -> str:
    """The legend entry of the rings: how many outliers, and how many are labelled."""
    n = len(pic.outliers)
    return f"outlier ({n}" + (f", {OUTLIER_LABELS} largest labelled)" if n > OUTLIER_LABELS
                              else ")")


def _layers(rows: list) -> list[Layer]:
    """Each layer of the breakdown as a share of each iteration's wall span (%); layers no
    iteration has are left out, and so is everything for a manifest without breakdown."""
    if not any(r.get("compute_ms") is not None for r in rows):
        return []
    layers = []
    for key, label, colour in GPU_LAYERS:
        shares = tuple(share_of_wall(r, key) for r in rows)
        if any(shares):
            layers.append(Layer(label, colour, shares))
    return layers


def share_of_wall(row: dict, key: str) -> float:
    """The share of ``row``'s wall span (%) that its ``key`` (a layer in ms) takes."""
    return 100 * (row.get(key) or 0.0) / row["wall_ms"] if row["wall_ms"] else 0.0
