"""The secondary figure of preregistered.md: this folder's cleanued seeds (started from minimax's seeds 19-30) against
cleanued's 128 H100 seeds from their own starts and against minimax's 28 seeds of the five 13x13 sets, unpaired
(Mann-Whitney), at 400-600 rollouts and on SixteenRooms averaged over checkpoints 500-1000. Run from the repo root:

    .venv/bin/python benchmarks/results/learning_vs_minimax_13x13_plr_256_steps_same_init/against_own_starts.py
"""

import json
from pathlib import Path

import numpy as np
from scipy import stats

RESULTS = Path("benchmarks/results")
SAME_INIT = RESULTS / "learning_vs_minimax_13x13_plr_256_steps_same_init"
H100 = [RESULTS / "plr_13x13_many_seeds_h100_1410c13" / run for run in ("plr_13x13_8000", "plr_13x13_9000")]
SETS = [
    RESULTS / f"learning_vs_minimax_13x13_plr_256_steps{suffix}"
    for suffix in ("", "_set6", "_set12", "_set18", "_set24")
]


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def comparison_side(folder: Path, side: str, maze: str | None) -> dict:
    """{seed: {checkpoint: solve rate}} of one side of a comparison folder, training levels or one held-out maze."""
    rates = {}
    for record in records(folder / "evaluations.jsonl"):
        if record["side"] == side and record["maze"] == maze:
            rates.setdefault(record["seed"], {})[record["grid"]] = record["solve_rate"]
    return rates


def h100_seeds(maze: str | None) -> list[dict]:
    rates = {}
    for run in H100:
        for record in records(run / "evaluations.jsonl"):
            if record["maze"] == maze:
                rates.setdefault((run.name, record["seed"]), {})[record["update"]] = record["solve_rate"]
    return list(rates.values())


def minimax_seeds(maze: str | None) -> list[dict]:
    return [curve for folder in SETS for curve in comparison_side(folder, "minimax", maze).values()]


def compare(label: str, same_init: list[float], others: list[float]) -> None:
    p = stats.mannwhitneyu(same_init, others, alternative="two-sided").pvalue
    difference = np.mean(same_init) - np.mean(others)
    print(
        f"| {label} | {np.mean(same_init):.3f} ({len(same_init)}) | {np.mean(others):.3f} ({len(others)}) | "
        f"{difference:+.3f} | {p:.2f} |"
    )


def held_out_mean(curve: dict) -> float:
    return float(np.mean([rate for checkpoint, rate in curve.items() if checkpoint >= 500]))


def main() -> None:
    print("| quantity | same-init cleanued (seeds) | other side (seeds) | difference | Mann-Whitney p |")
    print("|---|---|---|---|---|")
    same = list(comparison_side(SAME_INIT, "cleanued", None).values())
    for name, others in (("128 H100 cleanued", h100_seeds(None)), ("minimax's 28", minimax_seeds(None))):
        for checkpoint in (400, 500, 600):
            compare(
                f"training distribution, {checkpoint}, vs {name}",
                [c[checkpoint] for c in same],
                [c[checkpoint] for c in others],
            )
    same = list(comparison_side(SAME_INIT, "cleanued", "SixteenRooms").values())
    for name, others in (
        ("128 H100 cleanued", h100_seeds("SixteenRooms")),
        ("minimax's 28", minimax_seeds("SixteenRooms")),
    ):
        compare(
            f"SixteenRooms 500-1000, vs {name}", [held_out_mean(c) for c in same], [held_out_mean(c) for c in others]
        )


if __name__ == "__main__":
    main()
