"""Every algos/ script: `--help` works and documents every Config field."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO_ROOT / "algos").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_help_documents_every_field(script):
    result = subprocess.run([sys.executable, str(script), "--help"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    tree = ast.parse(script.read_text())
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Config").body
    fields = [(index, node) for index, node in enumerate(body) if isinstance(node, ast.AnnAssign)]
    assert fields
    for index, node in fields:
        following = body[index + 1] if index + 1 < len(body) else None
        assert isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant), (
            f"{node.target.id} undocumented"
        )
        assert "--" + node.target.id.replace("_", "-") in result.stdout
