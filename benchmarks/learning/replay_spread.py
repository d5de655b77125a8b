"""How much a replay score informs, and how widely replay spreads: one run of a replay script, its buffer read
after every chunk.

    python benchmarks/learning/replay_spread.py --algo plr --score-function learnability --total-updates 300

Trains one seed at the script's defaults (the papers' mazes, 32 envs x 256 steps, 250-step episodes) with the
given score, buffer size and length, and after each chunk of --log-interval updates prints a JSON line:
the share of filled slots whose score is non-zero, the replay probability on those slots (the expected share of
replayed levels with a non-zero score), the largest slot probability, the effective number of levels replay
draws from (1 / sum p^2), how many slots share the top score, and of one replay batch drawn from the buffer
(--num-envs draws, as the script draws them) the distinct levels and the share with a non-zero score. The last
line adds the device, versions and commit. Reads only what every version of the buffer has (scores, filled, the
replay distribution, `sample_replay`), so the same file measures an earlier commit.

With --lag-levels N, the end of the run also measures how far the outcome counts a slot accumulates over every
play lag behind the policy as it is now: N filled slots are played --lag-attempts times each with the final policy
(first episode of each attempt, as held-out evaluation counts), and their success rate now is set against the
stored one (successes / (successes + failures), learnability's p); a second fresh estimate of the same policy,
set against the first, shows how much of the difference sampling alone makes.

    python benchmarks/learning/replay_spread.py --algo plr --score-function learnability --total-updates 400 \
        --lag-levels 500
"""

import importlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jax
import numpy as np
import tyro

# SCAFFOLDING: make `algos` and `common` importable when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from common import heldout_eval, level_buffer  # noqa: E402
from common.config import with_flags  # noqa: E402
from common.provenance import describe_environment  # noqa: E402


@dataclass(frozen=True)
class Args:
    algo: Literal["plr", "accel", "plr_parallel", "accel_parallel"] = "plr"
    """The replay script."""
    score_function: str = "learnability"
    """Its --score-function."""
    prioritization: Literal["rank", "proportional"] = "rank"
    """Its --prioritization."""
    total_updates: int = 400
    """Updates to train."""
    log_interval: int = 25
    """Updates per chunk: the buffer is read after each."""
    buffer_size: int = 1000
    """Level buffer capacity (the papers' 4000 takes 4x the updates to warm up)."""
    maze_size: int = 13
    """Interior size of training mazes."""
    n_walls: int = 60
    """Walls per training level."""
    lstm_size: int = 256
    """LSTM units of the student."""
    learnability_decay: float = 1.0
    """The script's --learnability-decay (1: every play counts alike)."""
    seed: int = 0
    """Random seed."""
    lag_levels: int = 0
    """Filled slots to replay with the final policy, to set their stored success rate against today's (0: none)."""
    lag_attempts: int = 16
    """Attempts per slot for --lag-levels."""


def replay_spread(buffer, settings: dict, batch: int, rng) -> dict:
    """The buffer's score and replay figures (one seed's buffer), and one replay batch of `batch` draws."""
    probs = np.asarray(level_buffer.replay_probabilities(buffer, **settings))
    filled = np.asarray(buffer.filled)
    scores = np.asarray(buffer.scores)
    nonzero = filled & (scores != 0)
    _, drawn = level_buffer.sample_replay(rng, buffer, batch, **settings)
    drawn = np.asarray(drawn)
    return {
        "fill": float(filled.mean()),
        "nonzero_score_share": float(nonzero.sum() / max(filled.sum(), 1)),
        "replay_on_nonzero": float(probs[nonzero].sum()),
        "largest_probability": float(probs.max()),
        "effective_levels": float(1.0 / max((probs**2).sum(), 1e-12)),
        "top_score_ties": int((filled & (scores == scores[filled].max())).sum()) if filled.any() else 0,
        "batch_distinct_levels": len(set(drawn.tolist())),
        "batch_nonzero_draws": float(nonzero[drawn].mean()),
    }


def outcome_lag(module, config, functions, runner, args: Args) -> dict:
    """The stored success rate p of up to --lag-levels filled slots (the first ones) against the final policy's over
    --lag-attempts fresh attempts, and what that does to learnability p (1 - p). Two independent fresh estimates set
    against each other give the ceiling: how far apart two estimates of the same policy land from sampling alone."""
    buffer = jax.device_get(jax.tree.map(lambda x: x[0], runner.buffer))
    slots = np.flatnonzero(buffer.filled)[: args.lag_levels]
    counted = buffer.successes[slots] + buffer.failures[slots]
    stored = buffer.successes[slots] / np.maximum(counted, 1e-30)
    levels = jax.tree.map(lambda x: np.repeat(x[slots], args.lag_attempts, axis=0), buffer.levels)
    params = jax.tree.map(lambda x: x[0], functions.policies["student"](runner))
    carry = module.initial_carry(len(slots) * args.lag_attempts, config.ppo.lstm_size)
    play = jax.jit(
        lambda rng, params, levels: (
            heldout_eval.play_levels(
                rng, module.ActorCritic().apply, params, carry, levels, config.env_params, config.env.max_steps
            ).returns
        )
    )

    def success_now(stream: int) -> np.ndarray:
        returns = play(jax.random.fold_in(jax.random.key(args.seed), stream), params, levels)
        return (np.asarray(returns) > 0).reshape(len(slots), -1).mean(1)

    now, again = success_now(0), success_now(1)
    return {
        "lag_levels": len(slots),
        "lag_attempts": args.lag_attempts,
        "mean_episodes_counted": float(counted.mean()),
        "p_stored_mean": float(stored.mean()),
        "p_now_mean": float(now.mean()),
        "stored_vs_now": estimate_agreement(stored, now),
        "now_vs_now_again": estimate_agreement(again, now),
    }


def estimate_agreement(first: np.ndarray, second: np.ndarray) -> dict:
    """How two per-slot success-rate estimates agree: in p, in learnability p (1 - p), and whether the most learnable
    tenth by `first` is still learnable by `second`."""
    learnable_first, learnable_second = first * (1 - first), second * (1 - second)
    top = learnable_first >= np.quantile(learnable_first, 0.9)
    return {
        "mean_abs_p_difference": float(np.abs(second - first).mean()),
        "mean_abs_learnability_difference": float(np.abs(learnable_second - learnable_first).mean()),
        "learnability_correlation": float(np.corrcoef(learnable_first, learnable_second)[0, 1]),
        "top_decile_by_first_mastered_or_failed_by_second": float(((second >= 0.9) | (second <= 0.1))[top].mean()),
    }


def main(args: Args) -> None:
    module = importlib.import_module(f"algos.{args.algo}")
    config = with_flags(
        module.Config(),
        score_function=args.score_function,
        prioritization=args.prioritization,
        buffer_size=args.buffer_size,
        maze_size=args.maze_size,
        n_walls=args.n_walls,
        lstm_size=args.lstm_size,
        learnability_decay=args.learnability_decay,
        total_updates=args.total_updates,
        log_interval=args.log_interval,
        seed=args.seed,
        num_seeds=1,
        eval_interval=0,
        checkpoint_interval=args.log_interval,
        screenshot_interval=0,
        total_student_updates=None,
    )
    functions = module.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(args.seed), 1))
    step = jax.jit(functions.step)
    started = time.perf_counter()
    for chunk in range(args.total_updates // args.log_interval):
        runner, metrics = step(runner)
        buffer = jax.device_get(jax.tree.map(lambda x: x[0], runner.buffer))
        rng = jax.random.fold_in(jax.random.key(args.seed), chunk)
        spread = replay_spread(buffer, config.buffer_settings, config.ppo.num_envs, rng)
        row = {"update": (chunk + 1) * args.log_interval, **spread}
        if "buffer/replay_fraction" in metrics:
            row["replay_fraction"] = float(np.nanmean(metrics["buffer/replay_fraction"]))
        print(json.dumps(row), flush=True)
    if args.lag_levels:
        print(json.dumps(outcome_lag(module, config, functions, runner, args)), flush=True)
    summary = {"args": vars(args), "seconds": round(time.perf_counter() - started, 1), **describe_environment()}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main(tyro.cli(Args))
