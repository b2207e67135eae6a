"""The interactive page (`plot OUT -o x.html`) opened in a real headless browser (Chromium,
driven by Playwright), as a person sees it: its screenshot, the axes plotly drew, the labels
in the page, and what hovering over an iteration shows (index, step, phase, times, GPU
breakdown, the piece's file name). Skipped when Playwright or a Chromium is missing
(`.ci/run` installs both: Debian's chromium, the `test` extra's playwright)."""
from __future__ import annotations

import io
import json
import os
import shutil

import pytest

pytest.importorskip("plotly")
sync_api = pytest.importorskip("playwright.sync_api")

from PIL import Image  # noqa: E402

from conftest import pixels_of, run_cli  # noqa: E402
from stream_split.picture import COLOURS, OUTLIER_LABELS, PHASE_COLOURS  # noqa: E402
from stream_split.plot_page import FIGURE_ID  # noqa: E402

#: Chromium's own executables, where a distribution installs them (Debian: chromium).
CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: As the machine's browser tests start it: root needs --no-sandbox, and no network is there.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1200, "height": 800}
#: Where plotly draws the point (x, y) of the first subplot, in the page's pixels.
POINT_ON_PAGE = """([x, y]) => {
    const gd = document.getElementById(%r), box = gd.getBoundingClientRect();
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    return [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)];
}""" % FIGURE_ID


@pytest.fixture(scope="module")
def browser():
    executable = os.environ.get("STREAM_SPLIT_CHROMIUM") or next(
        filter(None, map(shutil.which, CHROMIUMS)), None)
    with sync_api.sync_playwright() as playwright:
        try:  # without a Chromium of the system's, Playwright's own, if it was installed
            chromium = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        except sync_api.Error as e:
            pytest.skip(f"no headless Chromium to open the page in: {str(e).splitlines()[0]}")
        yield chromium
        chromium.close()


def open_page(browser, folder, tmp_path):
    """The page `plot` writes for ``folder``, open in ``browser``, drawn."""
    run_cli("plot", folder, "-o", tmp_path / "p.html")
    page = browser.new_page(viewport=VIEWPORT)
    page.goto((tmp_path / "p.html").as_uri())
    page.wait_for_selector(f"#{FIGURE_ID} .main-svg")
    return page


def screenshot(page):
    return Image.open(io.BytesIO(page.screenshot())).convert("RGB")


def hover(page, x, y) -> str:
    """Move the mouse over the point (x, y) of the upper panel; the hover label's text."""
    px, py = page.evaluate(POINT_ON_PAGE, [x, y])
    page.mouse.move(px, py)
    label = page.wait_for_selector(".hoverlayer .hovertext", timeout=5000)
    return " | ".join(t.text_content() for t in label.query_selector_all("tspan.line")) or \
        label.text_content()


def texts(page, selector) -> list[str]:
    return [e.text_content() for e in page.query_selector_all(selector)]


def manifest_in(folder) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_hovering_over_a_servers_decode_step_shows_its_numbers_and_file(
        browser, plot_folder, tmp_path):
    folder = plot_folder("server")
    manifest = manifest_in(folder)
    it = next(it for it in manifest["iterations"][10:] if it.get("phase") == "decode")
    page = open_page(browser, folder, tmp_path)
    shown = hover(page, it["index"], it["wall_us"] / 1000)
    assert f"iteration {it['index']}" in shown and "(decode)" in shown
    assert f"file: {it['file']}" in shown
    assert f"wall {it['wall_us'] / 1000:.3f} ms" in shown
    assert f"compute {it['breakdown']['compute_us'] / 1000:.3f} ms" in shown
    busy = sum(it["breakdown"][f"{layer}_us"] for layer in ("compute", "comm", "memcpy", "memset"))
    assert f"GPU busy {100 * busy / it['wall_us']:.0f} % of the wall span" in shown
    legend = texts(page, ".legendtext")
    for phase in ("prefill", "mixed", "decode"):
        assert any(t.startswith(f"{phase} (") for t in legend), legend
        assert any(t.startswith(f"{phase} median ") for t in legend), legend
    image = screenshot(page)
    for phase in ("prefill", "mixed", "decode"):
        assert pixels_of(image, PHASE_COLOURS[phase]) > 30, phase


def test_a_20x_warm_up_is_clipped_in_the_page_and_hover_gives_its_real_time(
        browser, plot_folder, tmp_path):
    manifest = manifest_in(plot_folder("warm_up"))
    walls = [it["wall_us"] / 1000 for it in manifest["iterations"]]
    page = open_page(browser, plot_folder("warm_up"), tmp_path)
    top = page.evaluate(f"document.getElementById('{FIGURE_ID}')._fullLayout.yaxis.range[1]")
    assert top < 3 * max(walls[1:]) < walls[0]  # the steps fill the panel
    assert f"{walls[0]:.0f} ms" in texts(page, ".annotation-text")
    assert "clipped" in page.text_content(".gtitle")
    drawn_at = top / 1.15 * 1.1
    x, y = page.evaluate(POINT_ON_PAGE, [0, drawn_at])
    image = screenshot(page)
    assert pixels_of(image, COLOURS["black"], (round(x) - 4, round(y) - 2, round(x) + 5,
                                                round(y) + 6)) > 20  # the triangle
    assert f"wall {walls[0]:.3f} ms" in hover(page, 0, drawn_at)


def test_a_thousand_iterations_page_labels_the_five_largest_outliers(
        browser, plot_folder, tmp_path):
    manifest = manifest_in(plot_folder("thousand"))
    outliers = sorted((it for it in manifest["iterations"] if it["outlier"]),
                      key=lambda it: -it["wall_us"])
    page = open_page(browser, plot_folder("thousand"), tmp_path)
    labels = [t for t in texts(page, ".annotation-text") if t.startswith("#")]
    assert len(outliers) > OUTLIER_LABELS == len(labels)
    assert sorted(t.split(":")[0] for t in labels) == sorted(
        f"#{it['index']}" for it in outliers[:OUTLIER_LABELS])
    boxes = [e.bounding_box() for e in page.query_selector_all(".annotation")
             if e.text_content().startswith("#")]
    assert not any(a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
                   and a["y"] < b["y"] + b["height"] and b["y"] < a["y"] + a["height"]
                   for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert pixels_of(screenshot(page), COLOURS["red"]) > 200
    it = manifest["iterations"][500]
    assert f"iteration {it['index']}" in hover(page, it["index"], it["wall_us"] / 1000)


def test_a_cpu_only_page_has_one_panel_and_no_gpu_colour(browser, plot_folder, tmp_path):
    page = open_page(browser, plot_folder("cpu_only"), tmp_path)
    assert page.evaluate(f"document.getElementById('{FIGURE_ID}')._fullLayout.yaxis2") is None
    assert not any(t in ("compute", "memcpy") for t in texts(page, ".legendtext"))
    image = screenshot(page)
    assert pixels_of(image, COLOURS["blue"]) > 100
    assert pixels_of(image, COLOURS["orange"]) == 0
