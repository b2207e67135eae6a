"""The plot reads as a person needs it: a warm-up far above the rest is clipped (and marked)
instead of flattening the steps, only the largest outliers are labelled (and their labels do
not overlap), a server's phases have their own colours and medians, the GPU panel shows GPU
busy as a share of each iteration's span, and a CPU-only trace has no empty GPU panel. Checked
on the figure and on the PNG's pixels, for loops made by the generator and split by the real
command (``plot_folder``), and on hand-made manifests for the exact numbers."""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("matplotlib")

from PIL import Image  # noqa: E402  (matplotlib brings pillow)

from conftest import near, pixels_of, run_cli  # noqa: E402
from stream_split.picture import COLOURS, OUTLIER_LABELS, PHASE_COLOURS  # noqa: E402
from stream_split.plot import figure, write_plot  # noqa: E402
from stream_split.summary import build_table  # noqa: E402

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


def manifest_in(folder) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def labels_in_red(axis) -> list:
    return [t for t in axis.texts if t.get_color() == COLOURS["red"]]


def on_image(fig, axis, x, y) -> tuple[int, int]:
    """The pixel of the PNG (top-left origin) where ``axis`` draws the point (x, y)."""
    px, py = axis.transData.transform((x, y))
    return round(px), round(fig.bbox.height - py)


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
    labels = [t.get_text() for t in labels_in_red(fig.axes[0])]
    assert labels == [f"#{k}: {walls[k] / 15:.1f}x" for k in (946, 957, 968, 979, 990)]
    assert f"outlier ({len(outliers)}, {OUTLIER_LABELS} largest labelled)" in \
        fig.axes[0].get_legend_handles_labels()[1]


def test_labels_of_five_outliers_in_a_row_at_the_end_neither_overlap_nor_leave_the_figure():
    walls = [15.0 + (k % 3) for k in range(95)] + [60.0, 61.0, 62.0, 63.0, 64.0]
    fig = figure(manifest_of(walls, outliers=set(range(95, 100))))
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in labels_in_red(fig.axes[0])]
    assert len(boxes) == OUTLIER_LABELS
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert all(fig.bbox.x0 <= b.x0 and b.x1 <= fig.bbox.x1 and fig.bbox.y0 <= b.y0
               and b.y1 <= fig.bbox.y1 for b in boxes)


def test_a_cpu_only_trace_has_one_panel_and_a_gpu_trace_two():
    assert len(figure(manifest_of([15.0] * 6)).axes) == 1
    fig = figure(manifest_of([15.0] * 6, gpu=True))
    assert len(fig.axes) == 2
    assert fig.axes[1].get_ylabel() == "GPU busy (% of the wall span)"
    heights = [bar.get_height() for bars in fig.axes[1].containers for bar in bars]
    assert heights and all(h == pytest.approx(100 * 0.5 / 15) for h in heights)


def test_a_generated_20x_warm_up_is_a_black_triangle_at_the_top_with_its_value(
        plot_folder, tmp_path):
    manifest = manifest_in(plot_folder("warm_up"))
    walls = [it["wall_us"] / 1000 for it in manifest["iterations"]]
    assert walls[0] > 15 * sorted(walls)[len(walls) // 2]  # the loop is what it should be
    fig = figure(manifest)
    top = fig.axes[0]
    assert top.get_ylim()[1] < 3 * max(walls[1:])  # the steps fill the panel
    assert f"{walls[0]:.0f} ms" in [t.get_text() for t in top.texts]
    run_cli("plot", plot_folder("warm_up"), "-o", tmp_path / "p.png")
    image = Image.open(tmp_path / "p.png").convert("RGB")
    x, y = on_image(fig, top, 0, top.get_ylim()[1] / 1.15 * 1.1)
    assert pixels_of(image, COLOURS["black"], (x - 5, y - 5, x + 6, y + 6)) > 40
    # the other steps are spread over the panel, not a line at its bottom
    _, bottom_of_steps = on_image(fig, top, 0, min(walls))
    _, top_of_steps = on_image(fig, top, 0, max(walls[1:]))
    assert bottom_of_steps - top_of_steps > 100


def test_a_thousand_iterations_label_five_outliers_whose_labels_do_not_overlap(
        plot_folder, tmp_path):
    manifest = manifest_in(plot_folder("thousand"))
    outliers = [it for it in manifest["iterations"] if it["outlier"]]
    assert len(manifest["iterations"]) == 1000 and len(outliers) > OUTLIER_LABELS
    fig = figure(manifest)
    fig.canvas.draw()
    labels = labels_in_red(fig.axes[0])
    largest = sorted(outliers, key=lambda it: -it["wall_us"])[:OUTLIER_LABELS]
    assert sorted(t.get_text().split(":")[0] for t in labels) == sorted(
        f"#{it['index']}" for it in largest)
    boxes = [t.get_window_extent() for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    write_plot(manifest, str(tmp_path / "p.png"))
    image = Image.open(tmp_path / "p.png").convert("RGB")
    assert image.size == (1200, 750)
    assert pixels_of(image, COLOURS["red"]) > 200  # rings and labels
    # the GPU panel: bars of each layer, touching (no white stripes between 1,000 bars)
    gpu = fig.axes[1]
    x0, y_mid = on_image(fig, gpu, 100, 15)  # between grid lines
    x1, _ = on_image(fig, gpu, 900, 15)
    assert pixels_of(image, COLOURS["orange"], (x0, y_mid, x1, y_mid + 1)) > 0.95 * (x1 - x0)


def test_a_cpu_only_loop_has_no_gpu_panel_and_no_gpu_colour(plot_folder, tmp_path):
    run_cli("plot", plot_folder("cpu_only"), "-o", tmp_path / "p.png")
    image = Image.open(tmp_path / "p.png").convert("RGB")
    assert image.size == (1200, 500)
    assert pixels_of(image, COLOURS["blue"]) > 200
    assert pixels_of(image, COLOURS["orange"]) == 0


def test_a_server_has_a_colour_and_a_median_per_phase_from_its_records(plot_folder, tmp_path):
    manifest = manifest_in(plot_folder("server"))
    phases = build_table(manifest)["footer"]["phases"]
    assert {"prefill", "decode", "mixed"} <= set(phases)
    top = figure(manifest).axes[0]
    medians = {line.get_label(): line.get_ydata()[0] for line in top.lines
               if line.get_label().endswith(" ms") and "median" in line.get_label()}
    for phase in ("prefill", "decode", "mixed"):
        assert medians[f"{phase} median {phases[phase]['median_ms']:.3f} ms"] == \
            pytest.approx(phases[phase]["median_ms"])
    run_cli("plot", plot_folder("server"), "-o", tmp_path / "p.png")
    image = Image.open(tmp_path / "p.png").convert("RGB")
    for phase in ("prefill", "decode", "mixed"):
        assert pixels_of(image, PHASE_COLOURS[phase]) > 30, phase


@pytest.mark.skipif(not os.path.exists(TRAIN_EVAL), reason="needs tests/data/cuda")
def test_the_recorded_train_eval_png_shows_its_steps_below_a_clipped_warm_up(tmp_path):
    import stream_split
    manifest = stream_split.split(TRAIN_EVAL, tmp_path / "out")
    fig = figure(manifest)
    assert fig.axes[0].get_ylim()[1] < 50  # 494 ms warm-up, 13-30 ms steps
    write_plot(manifest, str(tmp_path / "p.png"))
    image = Image.open(tmp_path / "p.png").convert("RGB")
    assert image.size == (1200, 750)
    # the steps' line (tab:blue) spans the upper panel's height, not a strip at its bottom
    blue = [y for y in range(0, 450) for x in range(100, 1150, 7)
            if near(image.getpixel((x, y)), COLOURS["blue"], 10)]
    assert blue and max(blue) - min(blue) > 150
