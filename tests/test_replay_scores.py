"""Every replay script trains with the scores that need a level's history or its layout: learnability from the
outcome counts its buffer slot keeps over its plays (earlier plays decayed), and exact regret from the optimal
return. After a chunk of tiny updates each filled slot's score is what its definition says of that slot; on rollouts
the env plays, each script's scores equal plain-Python versions."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import accel, accel_parallel, plr, plr_parallel
from common import level_buffer
from common.config import with_flags
from envs.levels import level_from_text, optimal_return
from envs.maze import ACTION_FORWARD, EnvParams, reset_to_level, step_and_restart

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
    scores, successes, failures = buffer.scores[filled], buffer.successes[filled], buffer.failures[filled]
    assert (successes + failures > 0).all(), "only levels with a finished episode enter"
    if score_function == "learnability":
        p = successes / (successes + failures)
        np.testing.assert_allclose(scores, p * (1 - p), atol=1e-6)
    else:
        levels = jax.tree.map(lambda x: x[filled], buffer.levels)
        optimal = np.asarray(jax.vmap(optimal_return, (0, None))(levels, TINY["max_steps"]))
        # Exactly never negative; the optimal return computed here may round 1 ulp apart from the script's.
        assert (scores >= 0.0).all() and (scores <= optimal + 1e-6).all(), "0 <= regret <= optimal return"
        assert (optimal > 0).any()


class Rollout(NamedTuple):
    reward: jax.Array  # [T, B]
    done: jax.Array
    value: jax.Array


@pytest.mark.parametrize("module", [plr, accel, plr_parallel, accel_parallel], ids=lambda m: m.__name__.split(".")[-1])
@pytest.mark.parametrize("decay", [1.0, 0.5, 0.0])
def test_learnability_adds_this_play_to_the_slots_decayed_counts(module, decay):
    # Two envs over 6 steps: env 0 finishes a success and a time-out, env 1 one success (its last step runs on).
    done = np.array([[0, 0], [1, 0], [0, 1], [0, 0], [1, 0], [0, 0]], bool)
    reward = np.where(done & np.array([[1, 1], [1, 1], [1, 1], [0, 0], [0, 0], [0, 0]], bool), 0.9, 0.0)
    rollout = Rollout(jnp.asarray(reward, jnp.float32), jnp.asarray(done), jnp.zeros((6, 2)))
    before = level_buffer.LevelHistory(
        max_return=jnp.zeros(2), successes=jnp.array([3.0, 0.0]), failures=jnp.array([1.0, 2.5])
    )
    scores, history = module.level_scores(
        rollout, jnp.zeros((6, 2)), None, before, "learnability", True, decay, max_steps=8
    )
    successes = np.float32([3.0 * decay + 1, 0.0 * decay + 1])
    failures = np.float32([1.0 * decay + 1, 2.5 * decay + 0])
    np.testing.assert_array_equal(history.successes, successes)
    np.testing.assert_array_equal(history.failures, failures)
    total = successes + failures
    np.testing.assert_array_equal(scores, successes * failures / (total * total))


# 4x4 levels and their fewest steps to the goal, counted by hand (None: unreachable).
HAND_MADE = {
    "straight ahead": ([">..G", "....", "....", "...."], 3),
    "facing away": (["<..G", "....", "....", "...."], 5),  # two turns, three steps
    "walled in": (["v#G.", "##..", "....", "...."], None),
    "too far": (["G...", "###.", "....", "^..."], 12),  # more than the episode limit: optimal return 0
}


def regret_by_hand(rewards, dones, fewest: int | None, max_steps: int) -> float:
    """Plain-Python exact regret of one env's rollout: over its finished episodes, the mean of the optimal return
    (1 - 0.9 t* / T, or 0 when the goal is unreachable within T steps) less the episode's return, 0 for an episode
    that reached the goal in t* steps."""
    optimal = 1.0 - 0.9 * fewest / max_steps if fewest is not None and fewest <= max_steps else 0.0
    regrets, total, length = [], 0.0, 0
    for reward, done in zip(rewards.tolist(), dones.tolist(), strict=True):
        total, length = total + reward, length + 1
        if done:
            regrets.append(0.0 if total > 0 and length == fewest else optimal - total)
            total, length = 0.0, 0
    return float(np.mean(regrets)) if regrets else 0.0


@pytest.mark.parametrize("module", [plr, accel, plr_parallel, accel_parallel], ids=lambda m: m.__name__.split(".")[-1])
def test_true_regret_is_the_optimal_return_less_each_finished_episodes_return(module):
    """Hand-made levels played by the env for 32 steps, episodes of at most 8: one always forward (every episode
    optimal), the others by random actions. Each env's score equals the regret computed here from the rewards and
    dones and the fewest steps counted by hand. Mutation checked by hand: multiplying the true_regret scores by 0
    in algos/plr.py:level_scores fails this test."""
    max_steps, num_steps = 8, 32
    names = ["straight ahead", "straight ahead", "facing away", "walled in", "too far"]
    levels = jax.tree.map(
        lambda *leaves: jnp.stack(leaves), *(level_from_text("\n".join(HAND_MADE[name][0])) for name in names)
    )
    actions = np.random.default_rng(0).choice(3, (len(names), num_steps), p=[0.2, 0.2, 0.6])
    actions[0] = ACTION_FORWARD
    params = EnvParams(max_steps=max_steps)

    def play(level, level_actions):
        _, state = reset_to_level(None, level, params)

        def one_step(state, action):
            _, state, reward, done, _ = step_and_restart(None, state, action, params)
            return state, (reward, done)

        return jax.lax.scan(one_step, state, level_actions)[1]

    rewards, dones = jax.jit(jax.vmap(play))(levels, jnp.asarray(actions, jnp.int32))  # [B, T]
    rewards, dones = np.asarray(rewards), np.asarray(dones)
    assert dones.any(1).all(), "every env finishes an episode"
    rollout = Rollout(jnp.asarray(rewards.T), jnp.asarray(dones.T), jnp.zeros((num_steps, len(names))))
    before = level_buffer.LevelHistory(*(jnp.zeros(len(names)) for _ in range(3)))
    scores, _ = module.level_scores(
        rollout, jnp.zeros((num_steps, len(names))), levels, before, "true_regret", True, 1.0, max_steps=max_steps
    )
    expected = [regret_by_hand(rewards[i], dones[i], HAND_MADE[name][1], max_steps) for i, name in enumerate(names)]
    assert expected[1] > 0 and expected[2] > 0, "the random plays are not all optimal"
    np.testing.assert_allclose(np.asarray(scores), expected, rtol=1e-6, atol=1e-7)
    assert float(scores[0]) == 0.0, "optimal play scores 0.0 exactly"
