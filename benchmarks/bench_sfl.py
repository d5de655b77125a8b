"""Seconds per SFL refresh: the scoring of fresh levels that opens every --refresh-interval updates.

    python benchmarks/bench_sfl.py --score-batch-size 5000 --score-steps 2000 --score-batches 1

Builds `algos/sfl.py`'s functions at the given sizes, compiles one chunk, and runs it twice from the
initial state (update 0, so the chunk starts with a refresh); the run's own `time/scoring_seconds` metric
(the host clock read before and after the refresh) gives the scoring time of the second call. Prints a JSON
line with the environment (device, versions, commit) and the env steps per second of scoring.
"""

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import tyro

# SCAFFOLDING: make `algos` and `common` importable when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from algos import sfl  # noqa: E402
from common.config import with_flags  # noqa: E402
from common.provenance import describe_environment  # noqa: E402


@dataclass(frozen=True)
class Args:
    score_batches: int = 1
    """Scoring batches per refresh (the paper configuration has 5; time scales linearly)."""
    score_batch_size: int = 5000
    """Levels played at once."""
    score_steps: int = 2000
    """Steps per scored level."""
    lstm_size: int = 256
    """LSTM units of the student."""
    maze_size: int = 13
    """Interior size of the scored levels."""
    n_walls: int = 60
    """Walls per scored level."""


def main(args: Args) -> None:
    flags = dict(
        score_batches=args.score_batches, score_batch_size=args.score_batch_size, score_steps=args.score_steps,
        buffer_size=min(1000, args.score_batches * args.score_batch_size), lstm_size=args.lstm_size,
        maze_size=args.maze_size, n_walls=args.n_walls, num_envs=8, num_steps=8, num_minibatches=1,
        log_interval=1, refresh_interval=1, total_updates=1, eval_interval=0, checkpoint_interval=1,
        screenshot_interval=0,
    )  # fmt: skip
    config = with_flags(sfl.Config(), **flags)
    functions = sfl.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), 1))
    started = time.perf_counter()
    step = jax.jit(functions.step).lower(runner).compile()
    compile_s = time.perf_counter() - started
    jax.block_until_ready(step(runner))
    _, metrics = jax.block_until_ready(step(runner))
    seconds = float(np.asarray(metrics["time/scoring_seconds"]).ravel()[0])
    env_steps = args.score_batches * args.score_batch_size * args.score_steps
    print(
        json.dumps(
            {
                "bench": "sfl_refresh",
                **{key: value for key, value in vars(args).items()},
                "scoring_env_steps": env_steps,
                "scoring_seconds": round(seconds, 2),
                "scoring_env_steps_per_s": round(env_steps / seconds),
                "compile_s": round(compile_s, 2),
                **describe_environment(),
            }
        )
    )


if __name__ == "__main__":
    main(tyro.cli(Args))
