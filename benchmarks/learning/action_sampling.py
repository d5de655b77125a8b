"""cleanued's action sampling beside minimax-lib 0.2.0's: the same distribution of moves from the same logits?

A rollout draws each env's move from the policy's logits: cleanued with distrax's Categorical, minimax with
TensorFlow Probability's (its `PPOAgent.get_action_dist`, run in its venv by benchmarks/learning/minimax_actions.py).
Their random streams differ, so only distributions can be compared, and the place they could part is where a policy
has nearly settled: a move of probability 1e-5 or 1e-7 drawn too rarely (or too often) by one library changes how a
low-entropy seed explores. Each row of `LOGITS` (uniform, then one move ahead of the other six by 2 to 16 nats) is
sampled `--samples` times per library; per row, the two histograms are compared by a chi-square test of homogeneity,
and each library's histogram against the exact softmax probabilities by a chi-square goodness-of-fit test (moves
expected fewer than 10 times pooled). A test is flagged where p is below 0.01 divided by the number of tests.

    python benchmarks/learning/action_sampling.py --samples 20000000
"""

import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro
from scipy import stats

# SCAFFOLDING: put the repo root on sys.path so the script runs as `python benchmarks/learning/action_sampling.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import distrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from benchmarks.learning.generator_comparison import MIN_BIN, counts_homogeneity_p, write_results  # noqa: E402
from common.config import AT_LEAST_ONE  # noqa: E402
from common.errors import ConfigError  # noqa: E402
from common.runs import one_line_errors  # noqa: E402
from envs.maze import NUM_ACTIONS  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
FAMILY_ALPHA = 0.01
"""Chance of one false flag over all the tests when the samplers draw from the same distribution."""
CHUNK = 100_000
"""Actions drawn per key, as a rollout step draws one per env from one key."""
LOGITS = ((0.0,) * NUM_ACTIONS,) + tuple(
    (0.0, *(-gap - 0.5 * i for i in range(NUM_ACTIONS - 1))) for gap in (2.0, 5.0, 10.0, 14.0, 16.0)
)
"""Policies from uniform to nearly settled: one move ahead of the others by 2, 5, 10, 14 and 16 nats."""


@dataclass(frozen=True)
class Args:
    samples: Annotated[int, AT_LEAST_ONE] = 20_000_000
    """Actions drawn per logits row and library (a multiple of 100,000)."""
    seed: int = 0
    """Seed of both libraries' draws."""
    out: Path | None = None
    """Also write the table (.md) and one JSON line per row (.jsonl) here, with versions and commit."""
    minimax_venv: Path = REPO_ROOT / "benchmarks" / ".minimax-venv"
    """Virtual environment with minimax-lib 0.2.0 (benchmarks/speed/bench_algos.py creates it)."""


def distrax_sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    return distrax.Categorical(logits=logits).sample(seed=key)


@functools.partial(jax.jit, static_argnames="sample")
@functools.partial(jax.vmap, in_axes=(0, None, None))
def count_actions(key: jax.Array, logits: jax.Array, sample) -> jax.Array:
    """[actions]: how often each action is drawn from the rows of `logits` (the logits an argument, not a constant
    XLA would fold)."""
    return jnp.bincount(sample(key, logits), length=logits.shape[-1])


def cleanued_counts(rows, samples: int, seed: int, sample=distrax_sample) -> list[list[int]]:
    """Per logits row, the count of each action among `samples` draws of `sample` (cleanued's rollout's by default)."""
    counts = []
    for index, row in enumerate(rows):
        logits = jnp.broadcast_to(jnp.asarray(row, jnp.float32), (CHUNK, len(row)))
        keys = jax.random.split(jax.random.key(seed + index), samples // CHUNK)
        counts.append(np.asarray(count_actions(keys, logits, sample)).sum(0).tolist())
    return counts


def minimax_counts(rows, samples: int, seed: int, venv: Path) -> list[list[int]]:
    python = venv / "bin" / "python"
    if not python.exists():
        raise ConfigError(f"no minimax venv at {venv} (create it with benchmarks/speed/bench_algos.py --minimax)")
    worker = REPO_ROOT / "benchmarks" / "learning" / "minimax_actions.py"
    flags = ["--logits", json.dumps([list(row) for row in rows]), "--samples", str(samples), "--seed", str(seed)]
    result = subprocess.run([str(python), str(worker), *flags], check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])["counts"]


def softmax(row) -> np.ndarray:
    exponents = np.exp(np.asarray(row, np.float64) - max(row))
    return exponents / exponents.sum()


def fit_p(counts: list[int], probabilities: np.ndarray) -> float:
    """Chi-square goodness of fit of `counts` to `probabilities`: p-value. Moves expected fewer than `MIN_BIN` times
    share one bin."""
    counts, expected = np.asarray(counts, np.float64), probabilities * sum(counts)
    common = expected >= MIN_BIN
    observed = np.r_[counts[common], counts[~common].sum()] if (~common).any() else counts
    expected = np.r_[expected[common], expected[~common].sum()] if (~common).any() else expected
    if len(observed) < 2:
        return 1.0
    return float(stats.chisquare(observed, expected).pvalue)


def compare(rows, cleanued: list[list[int]], minimax: list[list[int]]) -> list[dict]:
    """Per logits row: the leading move's probability, each side's share of the other moves against the exact one,
    and the p of the homogeneity test and of each side's fit, flagged at `FAMILY_ALPHA` / all the tests."""
    tests = 3 * len(rows)
    results = []
    for row, ours, theirs in zip(rows, cleanued, minimax, strict=True):
        probabilities = softmax(row)
        ps = {
            "p_same": counts_homogeneity_p([list(pair) for pair in zip(ours, theirs, strict=True)]),
            "p_cleanued_fit": fit_p(ours, probabilities),
            "p_minimax_fit": fit_p(theirs, probabilities),
        }
        results.append(
            {
                "gap": float(row[0] - row[1]),
                "others_exact": float(1 - probabilities[0]),
                "others_cleanued": 1 - ours[0] / sum(ours),
                "others_minimax": 1 - theirs[0] / sum(theirs),
                **ps,
                "flagged": [name for name, p in ps.items() if p < FAMILY_ALPHA / tests],
            }
        )
    return results


def markdown(results: list[dict], samples: int) -> str:
    lines = [
        f"{samples:,} actions a side per row; chi-square p, flagged (**) below {FAMILY_ALPHA} / {3 * len(results)} "
        "tests",
        "",
        "| lead (nats) | other moves, exact | cleanued | minimax | p same | p cleanued fits | p minimax fits |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results:
        names = ("p_same", "p_cleanued_fit", "p_minimax_fit")
        ps = [f"**{row[name]:.3g}**" if name in row["flagged"] else f"{row[name]:.3g}" for name in names]
        shares = [f"{row[name]:.3e}" for name in ("others_exact", "others_cleanued", "others_minimax")]
        lines.append(f"| {row['gap']:g} | " + " | ".join(shares + ps) + " |")
    return "\n".join(lines)


def main(args: Args) -> None:
    if args.samples % CHUNK:
        raise ConfigError(f"--samples {args.samples}: give a multiple of {CHUNK:,}")
    rows = [list(row) for row in LOGITS]
    results = compare(
        rows,
        cleanued_counts(rows, args.samples, args.seed),
        minimax_counts(rows, args.samples, args.seed, args.minimax_venv),
    )
    table = markdown(results, args.samples)
    print(table)
    if args.out is not None:
        write_results(args.out, "action_sampling", table, [{"samples": args.samples, **row} for row in results])
    if any(row["flagged"] for row in results):
        print("flagged: the samplers' distributions differ where marked", file=sys.stderr)


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args, description=__doc__))
