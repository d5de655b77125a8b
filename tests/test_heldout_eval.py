"""common/heldout_eval.py, the zero-shot protocol every method's numbers come from, against plain Python:
- scripted attempts on a small level give the trajectories, first-episode lengths and returns a plain-Python walk
  of the same actions gives (the recurrent state carried through the attempt, the episode's later steps ignored);
- actions are sampled from the policy, not taken greedily;
- the maze's own episode length applies, whatever the run trained with;
- the metrics are the solve rate (return above 0) and mean return of each maze's attempts, each maze and each
  evaluation with its own key, as many attempts as --eval-episodes."""

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos import dr
from common import heldout_eval
from common.config import with_flags
from envs.heldout import HELDOUT_MAZES, HeldoutMaze
from envs.levels import level_from_text
from envs.maze import ACTION_FORWARD, ACTION_LEFT, ACTION_RIGHT, NUM_ACTIONS, EnvParams
from tests.plain_maze import goal_reward, python_step

CORRIDOR = """
    >..G
    ....
"""
NOOP = 3
F, L, R = ACTION_FORWARD, ACTION_LEFT, ACTION_RIGHT
SCRIPTS = [
    [F, F, F, F, F, F, F, F],  # reaches the goal at step 3, then keeps walking into it
    [L, R, F, F, F, F, F, F],  # turns away and back: the goal at step 5
    [L, L, L, L, L, L, L, L],  # never: times out at 8
    [F, F, NOOP, F, F, F, F, F],  # a step that does nothing: the goal at step 4
    [R, F, L, F, F, F, F, F],  # the row below the goal, into the east wall: never
    [F, F, F, L, R, F, F, F],  # the goal at step 3; two turns (steps that end nothing), then the goal again
]
MAX_STEPS = len(SCRIPTS[0])


class Scripted:
    """A stand-in recurrent policy: its carry counts the steps since the last reset and attempt e takes action
    params[e, count], with logits 50 apart (the sampled action is that one)."""

    def apply(self, params, carry, obs, reset):
        count = jnp.where(reset[0], 0, carry)
        action = params[jnp.arange(params.shape[0]), count]
        logits = jnp.where(jax.nn.one_hot(action, NUM_ACTIONS) > 0, 50.0, 0.0)
        return count + 1, logits[None], jnp.zeros(reset.shape)


def walk(level, actions: list[int]) -> tuple[list, list, int, float]:
    """Plain Python: positions and directions after each step (the base env never resets: a success leaves the
    agent in front of the goal), and the first episode's length and return."""
    walls = np.asarray(level.wall_map)
    position, direction = tuple(int(v) for v in level.agent_pos), int(level.agent_dir)
    goal = tuple(int(v) for v in level.goal_pos)
    positions, directions, length, episode_return = [], [], None, 0.0
    for t, action in enumerate(actions, start=1):
        position, direction, reached = python_step(walls, goal, position, direction, action)
        if reached and length is None:
            length, episode_return = t, goal_reward(t, MAX_STEPS)
        positions.append(position)
        directions.append(direction)
    return positions, directions, length or MAX_STEPS, episode_return


def play(apply_params, levels, network, carry, max_steps=MAX_STEPS):
    return heldout_eval.play_levels(
        jax.random.key(0), network.apply, apply_params, carry, levels, EnvParams(max_steps=max_steps), max_steps
    )


def test_scripted_attempts_give_plain_python_s_trajectories_lengths_and_first_episode_returns():
    level = level_from_text(CORRIDOR)
    levels = jax.tree.map(lambda x: jnp.stack([x] * len(SCRIPTS)), level)
    result = play(jnp.asarray(SCRIPTS), levels, Scripted(), jnp.zeros(len(SCRIPTS), jnp.int32))
    assert result.agent_pos.shape == (MAX_STEPS, len(SCRIPTS), 2)
    assert result.agent_dir.shape == (MAX_STEPS, len(SCRIPTS))
    for attempt, actions in enumerate(SCRIPTS):
        positions, directions, length, episode_return = walk(level, actions)
        assert [tuple(p) for p in np.asarray(result.agent_pos[:, attempt]).tolist()] == positions, attempt
        assert np.asarray(result.agent_dir[:, attempt]).tolist() == directions, attempt
        assert int(result.episode_length[attempt]) == length, attempt
        assert float(result.returns[attempt]) == pytest.approx(episode_return, abs=1e-6), attempt
    assert sorted(int(length) for length in result.episode_length) == [3, 3, 4, 5, 8, 8], "every case is there"


def count_restarting(level, actions: list[int], max_steps: int, window: int) -> tuple[int, int]:
    """Plain Python: (successes, episodes ended) in `window` steps, the level restarted after each episode and the
    script taken from its start again."""
    walls, goal = np.asarray(level.wall_map), tuple(int(v) for v in level.goal_pos)
    start = tuple(int(v) for v in level.agent_pos), int(level.agent_dir)
    (position, direction), since_start, successes, episodes = start, 0, 0, 0
    for _ in range(window):
        position, direction, reached = python_step(walls, goal, position, direction, actions[since_start])
        since_start += 1
        if reached or since_start == max_steps:
            successes, episodes = successes + reached, episodes + 1
            (position, direction), since_start = start, 0
    return successes, episodes


@pytest.mark.parametrize("window", [MAX_STEPS, 3 * MAX_STEPS - 1])
def test_restarting_attempts_count_every_episode_their_window_ends_as_plain_python(window):
    """SFL's count: each script restarts with the level (the stand-in policy's carry is zeroed at the restart), and
    a window longer than the episode limit ends time-outs again."""
    level = level_from_text(CORRIDOR)
    levels = jax.tree.map(lambda x: jnp.stack([x] * len(SCRIPTS)), level)
    counts = heldout_eval.play_levels_restarting(
        jax.random.key(0),
        Scripted().apply,
        jnp.asarray(SCRIPTS),
        jnp.zeros(len(SCRIPTS), jnp.int32),
        levels,
        EnvParams(max_steps=MAX_STEPS),
        window,
    )
    expected = [count_restarting(level, actions, MAX_STEPS, window) for actions in SCRIPTS]
    assert list(zip(counts.successes.tolist(), counts.episodes.tolist(), strict=True)) == expected
    assert max(successes for successes, _ in expected) >= 2, "a fast solver counts several successes"
    assert (0, window // MAX_STEPS) in expected, "a policy that never solves ends one episode per time limit"


class FixedLogits:
    """Left with probability 0.6, right with 0.4, nothing else."""

    def apply(self, params, carry, obs, reset):
        logits = jnp.full((*reset.shape, NUM_ACTIONS), -1e9)
        logits = logits.at[..., ACTION_LEFT].set(jnp.log(0.6)).at[..., ACTION_RIGHT].set(jnp.log(0.4))
        return carry, logits, jnp.zeros(reset.shape)


def test_actions_are_sampled_from_the_policy():
    attempts = 4000
    levels = jax.tree.map(lambda x: jnp.repeat(x[None], attempts, axis=0), level_from_text(CORRIDOR))
    result = play(None, levels, FixedLogits(), None, max_steps=1)
    turned_left = float((np.asarray(result.agent_dir[0]) == 3).mean())  # facing right (0), a left turn faces up
    assert 0.56 < turned_left < 0.64, turned_left  # 0.6 within about five standard deviations


def test_a_maze_is_played_for_its_own_episode_length_whatever_the_run_trained_with():
    level = level_from_text(CORRIDOR)
    maze = HeldoutMaze(2, 4, 12, lambda rng: level)
    turning = jnp.full((2, 12), ACTION_LEFT)
    result = heldout_eval.evaluate_policy(
        jax.random.key(0), Scripted().apply, turning, jnp.zeros(2, jnp.int32), maze, EnvParams(max_steps=5), 2
    )
    assert result.agent_pos.shape[0] == 12
    np.testing.assert_array_equal(result.episode_length, [12, 12])


def test_metrics_are_each_maze_s_solve_rate_and_mean_return_with_a_key_per_maze_and_evaluation(monkeypatch):
    known = {"SixteenRooms": np.array([0.0, 0.5, 0.9, 0.0]), "Labyrinth": np.array([0.2, 0.0, 0.0, 0.0])}
    calls = []

    def recorded(rng, apply, params, carry, maze, env_params, num_episodes, unroll):
        calls.append((tuple(np.asarray(jax.random.key_data(rng)).tolist()), num_episodes))
        (name,) = [name for name in known if HELDOUT_MAZES[name] is maze]
        return types.SimpleNamespace(returns=jnp.asarray(known[name]))

    monkeypatch.setattr(heldout_eval, "evaluate_policy", recorded)
    run = with_flags(dr.Config(), eval_mazes=("SixteenRooms", "Labyrinth"), eval_episodes=4).run
    evaluate = heldout_eval.heldout_evaluator(None, lambda runner: None, None, run, EnvParams())
    runners = [types.SimpleNamespace(rng_eval=jax.random.key(7), update=jnp.int32(update)) for update in (0, 10)]
    metrics = [evaluate(runner) for runner in runners]
    assert metrics[0] == pytest.approx(
        {
            "eval/solve_rate/SixteenRooms": 0.5,
            "eval/return/SixteenRooms": 0.35,
            "eval/solve_rate/Labyrinth": 0.25,
            "eval/return/Labyrinth": 0.05,
        }
    )
    keys = [key for key, _ in calls]
    assert len(set(keys)) == 4, "each maze and each evaluation its own key"
    assert {episodes for _, episodes in calls} == {4}
