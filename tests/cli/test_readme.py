"""The README's quickstart is what CI runs."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def quickstart_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Quickstart\s+```bash\n(.*?)```", readme, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_test_command():
    commands = quickstart_commands()
    assert len(commands) == 2, "the quickstart is exactly two commands"
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci


def test_the_readme_test_command_installs_every_extra_the_tests_use():
    # The Beam and Dask tests skip without their extras: CI would pass without running them.
    extras = re.search(r"'\.\[([a-z,]+)\]'", quickstart_commands()[1]).group(1).split(",")
    assert {"test", "beam", "dask"} <= set(extras)


def test_the_test_extra_brings_plot_and_hta_so_ci_runs_their_checks():
    import tomllib
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    included = {name for dep in extras["test"] if dep.startswith("stream-split[")
                for name in dep[len("stream-split["):-1].split(",")}
    assert {"plot", "hta"} <= included
    assert any(dep.startswith("holistictraceanalysis") for dep in extras["hta"])
    assert any(dep.startswith("matplotlib") for dep in extras["plot"])
    assert any(dep.startswith("plotly") for dep in extras["plot"])  # the interactive page


def test_ci_installs_the_browser_and_its_driver_that_check_the_plot_page():
    import tomllib
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(dep.startswith("playwright") for dep in extras["test"])
    ci = (REPO / ".ci" / "run").read_text()
    install = ci.index("apt-get install")
    assert "chromium" in ci[install:ci.index("\n", install)]
    assert install < ci.index("python -m pytest")
