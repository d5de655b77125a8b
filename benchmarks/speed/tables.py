"""Tables of benchmark results, shared by the speed benchmarks and the peers' side-by-side benchmarks (which import
them from here, a floor below)."""

import json


def json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def ratio(ours: float, theirs: float | None) -> str:
    return "-" if not theirs else f"{ours / theirs:.2f}x"


def markdown_table(header: list[str], rows: list[list]) -> str:
    """A markdown table: text columns left-aligned, the rest right-aligned; integers above 999 with thousands commas,
    other numbers as Python prints them."""

    def cell(value) -> str:
        if isinstance(value, bool) or value is None:
            return "-" if value is None else str(value)
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    numeric = [all(isinstance(row[i], (int, float)) or row[i] is None for row in rows) for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)
