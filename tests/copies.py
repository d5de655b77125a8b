"""The checker behind STYLE.md rule 9: a top-level def or class preceded by `# copied from algos/X.py:name`
must equal `name` in algos/X.py (apart from the marker); and the check that a method file differs from its
base only where the method does (`diff algos/plr.py algos/accel.py`). Used by tests/test_copies.py."""

import ast
import difflib
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


def unexplained_hunks(base: Path, variant: Path, topic: re.Pattern) -> list[str]:
    """Hunks of `diff base variant` that are not about `topic`: a hunk passes when it lies in the module
    docstring or the Config class of both files, or when one of its changed lines matches `topic`.
    Copy markers are ignored (they differ between a source and its copy by design)."""
    base_lines, variant_lines = (
        [line for line in path.read_text().splitlines() if not MARKER.search(line)] for path in (base, variant)
    )

    def allowed_lines(lines: list[str]) -> set[int]:
        tree = ast.parse("\n".join(lines))
        spans = [(node.lineno, node.end_lineno) for node in tree.body[:1] if isinstance(node, ast.Expr)]
        spans += [(n.lineno, n.end_lineno) for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Config"]
        return {index for start, end in spans for index in range(start - 1, end)}

    base_allowed, variant_allowed = allowed_lines(base_lines), allowed_lines(variant_lines)
    problems = []
    matcher = difflib.SequenceMatcher(a=base_lines, b=variant_lines, autojunk=False)
    for tag, base_start, base_end, variant_start, variant_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        removed, added = base_lines[base_start:base_end], variant_lines[variant_start:variant_end]
        in_allowed = set(range(base_start, base_end)) <= base_allowed and (
            set(range(variant_start, variant_end)) <= variant_allowed
        )
        if not in_allowed and not any(topic.search(line) for line in removed + added):
            problems.append(f"{variant.name} line {variant_start + 1}: {(added or removed)[0].strip()}")
    return problems
