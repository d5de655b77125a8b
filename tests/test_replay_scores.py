"""Every replay script trains with the scores that need a level's history or its layout: learnability from the
outcome counts its buffer slot accumulates over every play, and exact regret from the optimal return. After a
chunk of tiny updates each filled slot's score is what its definition says of that slot."""

import jax
import numpy as np
import pytest

from algos import accel, accel_parallel, plr, plr_parallel
from common.config import with_flags
from envs.levels import optimal_return

TINY = dict(
    num_seeds=1,
    num_envs=4,
    num_steps=24,
    max_steps=8,
    maze_size=4,
    n_walls=2,
    lstm_size=8,
    buffer_size=12,
    min_fill_ratio=0.3,
    total_updates=10,
    log_interval=10,
    eval_interval=0,
    checkpoint_interval=10,
    screenshot_interval=0,
)
CASES = [
    (plr, "true_regret"),
    (accel, "true_regret"),
    (plr_parallel, "true_regret"),
    (accel_parallel, "true_regret"),
    (plr, "learnability"),
    (accel_parallel, "learnability"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("module", "score_function"), CASES, ids=lambda x: getattr(x, "__name__", x).split(".")[-1])
def test_buffer_scores_follow_their_definition(module, score_function, tmp_path):
    config = with_flags(module.Config(), **TINY, score_function=score_function, runs_dir=str(tmp_path))
    functions = module.make_train(config)
    runner = jax.jit(functions.init)(jax.random.split(jax.random.key(0), 1))
    runner, metrics = jax.jit(functions.step)(runner)
    assert np.asarray(metrics["health/finite"]).all()
    buffer = jax.device_get(jax.tree.map(lambda x: x[0], runner.buffer))
    filled = np.flatnonzero(buffer.filled)
    assert len(filled) >= 4
    scores, episodes, successes = buffer.scores[filled], buffer.episodes[filled], buffer.successes[filled]
    assert (episodes >= 1).all() and (successes <= episodes).all(), "only levels with a finished episode enter"
    if score_function == "learnability":
        p = successes / episodes
        np.testing.assert_allclose(scores, p * (1 - p), atol=1e-6)
        assert (episodes > 4).any(), "replayed levels add their episodes to the slot's"
    else:
        levels = jax.tree.map(lambda x: x[filled], buffer.levels)
        optimal = np.asarray(jax.vmap(optimal_return, (0, None))(levels, TINY["max_steps"]))
        # Exactly never negative; the optimal return computed here may round 1 ulp apart from the script's.
        assert (scores >= 0.0).all() and (scores <= optimal + 1e-6).all(), "0 <= regret <= optimal return"
        assert (optimal > 0).any()
