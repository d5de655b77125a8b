"""The README's "Use from Python" example runs as written and prints a return and a solve rate per seed."""

import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_use_from_python_example_runs():
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Use from Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("return per seed: [") and len(lines[0].split("[")[1].split()) == 3
    assert lines[1].startswith("SixteenRooms solve rate per seed: [")
