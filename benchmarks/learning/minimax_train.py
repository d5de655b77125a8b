"""`python -m minimax.train`, training exactly as it does, with more of its level buffer logged, and optionally from
given initial parameters: the learning comparison (benchmarks/learning/learning_vs_minimax.py) runs minimax through
this so both sides log the statistics its first-divergence table compares.

Run with the Python of the minimax virtual environment; it takes minimax.train's flags, and two of its own:
`--init_params=PATH`, an .npz of `params/<cleanued path>` arrays (what cleanued's --init-from and `fork_run.py params`
read and write) that every student starts from instead of minimax's initialisation, one seed's or, with
`--init_params_index=I`, item I of arrays stacked over seeds (for arrays of one seed the index is not used). minimax
still draws its initialisation's keys as usual, so the rest of the run's random stream is the seed's own
(`AgentPop.init_params` is wrapped: its result is replaced, shape by shape; minimax_params.py maps the names). Checked
once at 11x11 with LSTM 64: the initial checkpoint (`--archive_init_checkpoint=True`), converted back, holds the given
arrays bit for bit, one seed's and item 1 of a stack of two; another LSTM size is refused in one line.

It wraps one more function, `PLRManager.get_metrics`, which minimax calls only to log (`PLRRunner.run`'s
`plr_stats`), adding to its `plr/weighted_ued_score`, `plr/weighted_age`, ... the replay distribution's largest
probability (`plr/top_replay_probability`) and entropy (`plr/replay_entropy`) and the quantiles of the filled slots'
scores (`plr/score_q10`, `_q50`, `_q90`), computed as cleanued's replay scripts log theirs. Nothing it returns
reaches the training state, so parameters, buffer and random streams are minimax's own (checked once: the same
checkpoint, byte for byte, with and without it, after 32 ticks of Robust PLR at 7x7 with a 200-slot buffer, so
replays and evictions happened, 15 gradient updates; benchmarks/README.md).

    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_train.py --train_runner=plr ...
"""

import runpy
import sys

import jax.numpy as jnp
import numpy as np
from minimax.util.rl import agent_pop, plr
from minimax_params import minimax_tree

INIT_PARAMS_FLAG = "--init_params="
INIT_INDEX_FLAG = "--init_params_index="

minimax_get_metrics = plr.PLRManager.get_metrics
minimax_init_params = agent_pop.AgentPop.init_params


def get_metrics(self, plr_buffer):
    metrics = minimax_get_metrics(self, plr_buffer)
    probabilities = self._get_replay_dist(plr_buffer.scores, plr_buffer.ages, plr_buffer.filled)
    filled_scores = jnp.where(plr_buffer.filled, plr_buffer.scores, jnp.nan)
    quantiles = jnp.nanquantile(filled_scores, jnp.array([0.1, 0.5, 0.9]))
    entropy = -jnp.sum(jnp.where(probabilities > 0, probabilities * jnp.log(probabilities), 0.0))
    return metrics | {
        "top_replay_probability": probabilities.max(),
        "replay_entropy": entropy,
        **{f"score_q{q}": value for q, value in zip((10, 50, 90), quantiles, strict=True)},
    }


def refuse(message: str):
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(2)


def starting_from(path: str, index: int | None):
    """`AgentPop.init_params` that returns the parameters in `path` (item `index` of stacked ones) for every student
    (one line and exit 2 when the file cannot be read or they are not this student's)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            flat = {key: data[key] for key in data.files}
    except (OSError, ValueError) as error:
        refuse(f"{INIT_PARAMS_FLAG}{path}: cannot read it as an .npz ({error})")

    def init_params(self, rng, obs):
        params = minimax_init_params(self, rng, obs)
        try:
            return minimax_tree(params, flat, index)
        except ValueError as error:
            refuse(f"{INIT_PARAMS_FLAG}{path}: {error}")

    return init_params


def take_flag(argv: list[str], flag: str) -> str | None:
    """Remove this script's own `flag` from `argv` (minimax.train's parser refuses it); returns its last value."""
    given = [item[len(flag) :] for item in argv if item.startswith(flag)]
    argv[:] = [item for item in argv if not item.startswith(flag)]
    return given[-1] if given else None


if __name__ == "__main__":
    plr.PLRManager.get_metrics = get_metrics
    init_params, init_index = take_flag(sys.argv, INIT_PARAMS_FLAG), take_flag(sys.argv, INIT_INDEX_FLAG)
    if init_index is not None and (init_params is None or not init_index.isdigit()):
        refuse(f"{INIT_INDEX_FLAG}{init_index}: a seed's index (0, 1, ...) into the stack --init_params= gives")
    if init_params is not None:
        agent_pop.AgentPop.init_params = starting_from(init_params, None if init_index is None else int(init_index))
    runpy.run_module("minimax.train", run_name="__main__", alter_sys=True)
