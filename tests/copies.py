"""The checker behind STYLE.md rule 9: a top-level def or class preceded by `# copied from algos/X.py:name`
must equal `name` in algos/X.py (apart from the marker). Used by tests/test_copies.py."""

import ast
import re
from pathlib import Path

MARKER = re.compile(r"#\s*copied from (?P<path>[\w/.]+\.py):(?P<name>\w+)\s*$")


def top_level_sources(path: Path) -> dict[str, str]:
    source = path.read_text()
    tree = ast.parse(source)
    return {
        node.name: ast.get_source_segment(source, node, padded=False)
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }


def marked_copies(path: Path) -> list[tuple[str, str, str]]:
    """(name here, source file, source name) for every marker in `path`; the marker sits on the line
    right above the def/class (or its first decorator)."""
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines))
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.ClassDef):
            continue
        first_line = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        if first_line >= 2 and (match := MARKER.search(lines[first_line - 2])):
            found.append((node.name, match.group("path"), match.group("name")))
    return found


def drifted_copies(path: Path, repo_root: Path) -> list[str]:
    """Messages for marked copies in `path` that differ from their source."""
    here = top_level_sources(path)
    problems = []
    for name, source_path, source_name in marked_copies(path):
        source_file = repo_root / source_path
        if not source_file.exists():
            problems.append(f"{path.name}:{name} is marked as copied from missing {source_path}")
            continue
        original = top_level_sources(source_file).get(source_name)
        if original is None:
            problems.append(
                f"{path.name}:{name} is marked as copied from {source_path}:{source_name}, which does not exist"
            )
        elif original != here[name]:
            problems.append(
                f"{path.name}:{name} differs from {source_path}:{source_name}; re-copy it or drop the marker"
            )
    return problems
