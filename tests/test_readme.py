"""The README's quickstart is what CI runs."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Quickstart\s+```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2, "the quickstart is exactly two commands"
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci
