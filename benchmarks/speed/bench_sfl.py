"""Seconds per SFL refresh: the scoring of fresh levels that opens every --refresh-interval updates.

    python benchmarks/speed/bench_sfl.py --score-batch-size 5000 --score-steps 2000 --score-batches 1

Builds `algos/sfl.py`'s functions at the given sizes and compiles one chunk of one update. The chunk refreshes
when it starts on a multiple of --refresh-interval: the scoring time is the chunk's time from update 0 (with
a refresh) minus its time from update 1 (without), each the fastest of three calls. Prints a JSON line with the
environment (device, versions, commit) and the env steps per second of scoring.
"""

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import tyro

# SCAFFOLDING: make `algos` and `common` importable when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

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
    max_steps: int = 250
    """Episode length limit (at most --score-steps)."""


def main(args: Args) -> None:
    flags = dict(
        score_batches=args.score_batches, score_batch_size=args.score_batch_size, score_steps=args.score_steps,
        buffer_size=min(1000, args.score_batches * args.score_batch_size), lstm_size=args.lstm_size,
        maze_size=args.maze_size, n_walls=args.n_walls, max_steps=args.max_steps, num_envs=8, num_steps=8,
        num_minibatches=1, log_interval=1, refresh_interval=2, total_updates=2, eval_interval=0,
        checkpoint_interval=1, screenshot_interval=0,
    )  # fmt: skip
    config = with_flags(sfl.Config(), **flags)
    functions = sfl.make_train(config)
    with_refresh = jax.jit(functions.init)(jax.random.split(jax.random.key(0), 1))
    without_refresh = with_refresh.replace(update=with_refresh.update + 1)  # a chunk start off the refresh grid
    started = time.perf_counter()
    step = jax.jit(functions.step).lower(with_refresh).compile()
    compile_s = time.perf_counter() - started

    def seconds(runner) -> float:
        """The fastest of three calls of the compiled chunk from `runner`."""
        times = []
        for _ in range(3):
            started = time.perf_counter()
            jax.block_until_ready(step(runner))
            times.append(time.perf_counter() - started)
        return min(times)

    scoring_seconds = seconds(with_refresh) - seconds(without_refresh)
    env_steps = args.score_batches * args.score_batch_size * args.score_steps
    print(
        json.dumps(
            {
                "bench": "sfl_refresh",
                **{key: value for key, value in vars(args).items()},
                "scoring_env_steps": env_steps,
                "scoring_seconds": round(scoring_seconds, 2),
                "scoring_env_steps_per_s": round(env_steps / max(scoring_seconds, 1e-9)),
                "compile_s": round(compile_s, 2),
                **describe_environment(),
            }
        )
    )


if __name__ == "__main__":
    main(tyro.cli(Args))
