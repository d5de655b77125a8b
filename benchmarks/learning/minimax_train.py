"""`python -m minimax.train`, training exactly as it does, with more of its level buffer logged: the learning
comparison (benchmarks/learning/learning_vs_minimax.py) runs minimax through this so both sides log the statistics
its first-divergence table compares.

Run with the Python of the minimax virtual environment; it takes minimax.train's flags. It wraps one function,
`PLRManager.get_metrics`, which minimax calls only to log (`PLRRunner.run`'s `plr_stats`), adding to its
`plr/weighted_ued_score`, `plr/weighted_age`, ... the replay distribution's largest probability
(`plr/top_replay_probability`) and entropy (`plr/replay_entropy`) and the quantiles of the filled slots' scores
(`plr/score_q10`, `_q50`, `_q90`), computed as cleanued's replay scripts log theirs. Nothing it returns reaches the
training state, so parameters, buffer and random streams are minimax's own (checked once: the same checkpoint,
byte for byte, with and without it, after 32 ticks of Robust PLR at 7x7 with a 200-slot buffer, so replays and
evictions happened, 15 gradient updates; benchmarks/README.md).

    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_train.py --train_runner=plr ...
"""

import runpy

import jax.numpy as jnp
from minimax.util.rl import plr

minimax_get_metrics = plr.PLRManager.get_metrics


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


if __name__ == "__main__":
    plr.PLRManager.get_metrics = get_metrics
    runpy.run_module("minimax.train", run_name="__main__", alter_sys=True)
