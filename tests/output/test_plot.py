"""The plot reads as a person needs it: a warm-up far above the rest is clipped (and marked)
instead of flattening the steps, only the largest outliers are labelled, a server's phases
have their own medians, and a CPU-only trace has no empty GPU panel."""
from __future__ import annotations

import os

import pytest

pytest.importorskip("matplotlib")

from stream_split.plot import OUTLIER_LABELS, figure, write_plot  # noqa: E402

TRAIN_EVAL = os.path.join(os.path.dirname(__file__), "..", "data", "cuda", "train_eval.json.gz")


def manifest_of(walls_ms: list[float], outliers=(), gpu=False) -> dict:
    iterations = []
    for i, wall in enumerate(walls_ms):
        iterations.append({
            "index": i, "kind": "iteration", "start_ts": 1000.0 * i, "duration_us": wall * 1000,
            "wall_us": wall * 1000, "outlier": i in outliers,
            "outlier_reason": f"{wall / 15:.1f}x median, +{wall - 15:.1f} ms: eval x1"
            if i in outliers else None, "gpu_active_us": 500.0 if gpu else 0.0,
            "breakdown": {"span_us": 800.0, "compute_us": 500.0, "comm_us": 0.0,
                          "memcpy_us": 0.0, "memset_us": 0.0, "idle_us": 300.0}
            if gpu else None})
    return {"input": "t.json.gz", "iterations": iterations,
            "steady_state": {"first": 1, "last": len(walls_ms) - 1}}


def labels_in_red(axis) -> list[str]:
    return [t.get_text() for t in axis.texts if t.get_color() == "tab:red"]


def test_a_warm_up_twenty_times_the_steps_is_clipped_not_flattening_them():
    walls = [494.0] + [13.0 + (k * 7) % 17 for k in range(40)]  # steps of 13-29 ms
    fig = figure(manifest_of(walls, outliers={0}))
    top = fig.axes[0]
    assert top.get_ylim()[1] < 40  # the steps fill the panel
    assert "clipped" in top.get_title()
    assert "494 ms" in [t.get_text() for t in top.texts]  # the warm-up's value, beside it
    assert any(label.startswith("clipped (1)") for label in top.get_legend_handles_labels()[1])


def test_only_the_largest_outliers_are_labelled():
    walls = [15.0 + (40.0 if k % 11 == 0 else 0.0) + k * 0.01 for k in range(1000)]
    outliers = {k for k in range(1000) if k % 11 == 0}
    fig = figure(manifest_of(walls, outliers=outliers))
    labels = labels_in_red(fig.axes[0])
    assert len(labels) == OUTLIER_LABELS
    assert f"outlier ({len(outliers)}, {OUTLIER_LABELS} largest labelled)" in \
        fig.axes[0].get_legend_handles_labels()[1]


def test_a_cpu_only_trace_has_one_panel_and_a_gpu_trace_two():
    assert len(figure(manifest_of([15.0] * 6)).axes) == 1
    fig = figure(manifest_of([15.0] * 6, gpu=True))
    assert len(fig.axes) == 2
    assert fig.axes[1].get_ylabel() == "GPU busy (% of the wall span)"
    heights = [bar.get_height() for bars in fig.axes[1].containers for bar in bars]
    assert heights and all(h == pytest.approx(100 * 0.5 / 15) for h in heights)


@pytest.mark.skipif(not os.path.exists(TRAIN_EVAL), reason="needs tests/data/cuda")
def test_the_recorded_train_eval_png_shows_its_steps_below_a_clipped_warm_up(tmp_path):
    from PIL import Image
    import stream_split
    manifest = stream_split.split(TRAIN_EVAL, tmp_path / "out")
    fig = figure(manifest)
    assert fig.axes[0].get_ylim()[1] < 50  # 494 ms warm-up, 13-30 ms steps
    write_plot(manifest, str(tmp_path / "p.png"))
    image = Image.open(tmp_path / "p.png").convert("RGB")
    assert image.size == (1200, 750)
    # the steps' line (tab:blue) spans the upper panel's height, not a strip at its bottom
    blue = [y for y in range(0, 450) for x in range(100, 1150, 7)
            if (lambda p: abs(p[0] - 31) < 10 and abs(p[1] - 119) < 10 and abs(p[2] - 180) < 10)(
                image.getpixel((x, y)))]
    assert blue and max(blue) - min(blue) > 150
