"""The README's "Use from Python" example runs as written and prints a return and a solve rate per seed; every
training command in the READMEs parses."""

import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from common.config import parse_command_line

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


def training_commands(markdown: str) -> list[list[str]]:
    """Every `.venv/bin/python algos/<script>.py ...` line of the markdown's bash blocks, continuation lines
    joined and the block's `NAME="..."` assignments substituted, as argv lists."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", markdown, re.DOTALL):
        text = block.replace("\\\n", " ")
        variables = dict(re.findall(r'^(\w+)="([^"]*)"', text, re.MULTILINE))
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith(".venv/bin/python algos/"):
                for name, value in variables.items():
                    line = line.replace(f"${name}", value)
                commands.append(shlex.split(line)[1:])
    return commands


@pytest.mark.parametrize("document", ["README.md", "benchmarks/README.md"])
def test_documented_training_commands_parse(document):
    """Each documented training command names real flags with valid values (parsing runs every range and
    cross-field check, before anything would compile)."""
    commands = training_commands((REPO_ROOT / document).read_text())
    assert len(commands) >= 2
    for argv in commands:
        script, args = argv[0], argv[1:]
        module = importlib.import_module(f"algos.{Path(script).stem}")
        config = parse_command_line(module.Config, "", args)
        assert config.run.run_name, argv
