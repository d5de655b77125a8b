"""Step-for-step parity with the recorded reference maze (minimax-lib 0.2.0), fixture format in
tests/fixtures/README.md."""

import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import teacher
from envs.heldout import HELDOUT_MAZES
from envs.levels import (
    EDIT_FLIP_WALL,
    EDIT_MOVE_GOAL,
    apply_edit,
    is_solvable,
    levels_equal,
    shortest_path_length,
    wall_count,
)
from envs.maze import EnvParams, make_level, reset_to_level, step, step_and_restart

STEP_FIELDS = ("image", "obs_dir", "reward", "done", "pos_t", "dir_t", "time_t", "image_autoreset", "obs_dir_autoreset")


def recorded_level(data, prefix):
    return make_level(
        data[prefix + "wall_map"], data[prefix + "goal_pos"], data[prefix + "agent_pos"], data[prefix + "agent_dir"]
    )


def replay(level, actions, params):
    """First observation, then per step the base step's outputs and the restarting wrapper's observation."""

    def run(level, actions):
        first_obs, state = reset_to_level(jax.random.key(0), level, params)

        def body(state, action):
            obs, reached, reward, done, _ = step(jax.random.key(0), state, action, params)
            obs_after, state_after, _, _, _ = step_and_restart(jax.random.key(0), state, action, params)
            outputs = (obs.image, obs.agent_dir, reward, done, reached.agent_pos, reached.agent_dir, reached.time)
            return state_after, outputs + (obs_after.image, obs_after.agent_dir)

        return first_obs, jax.lax.scan(body, state, actions)[1]

    if level.wall_map.ndim == 3:
        run = jax.vmap(run)
    first_obs, outputs = jax.jit(run)(level, jnp.asarray(actions))
    return np.asarray(first_obs.image), dict(zip(STEP_FIELDS, map(np.asarray, outputs), strict=True))


def assert_trajectory_matches(data, level_prefix, rollout_prefix, max_steps):
    params = EnvParams(max_steps=max_steps, normalize_obs=False)
    first_image, outputs = replay(recorded_level(data, level_prefix), data[rollout_prefix + "actions"], params)
    np.testing.assert_array_equal(first_image, data[level_prefix + "init_image"])
    for name in STEP_FIELDS:
        reference = data[rollout_prefix + name]
        np.testing.assert_array_equal(
            outputs[name].astype(reference.dtype), reference, err_msg=f"{rollout_prefix}{name}"
        )
    return outputs


@pytest.mark.parametrize("prefix", ["dr_", "tch_"])
def test_random_rollouts_match_reference(amaze_fixture, prefix):
    outputs = assert_trajectory_matches(amaze_fixture, prefix, prefix, max_steps=250)
    assert outputs["done"].any(axis=1).all(), "every rollout should reach a time-limit ending"


def test_goal_reaching_rollouts_match_reference(amaze_fixture):
    outputs = assert_trajectory_matches(amaze_fixture, "dr_", "drsolve_", max_steps=250)
    solved = amaze_fixture["drsolve_solution_len"] >= 0
    assert (outputs["reward"] > 0).any(axis=1)[solved].all(), "every solvable level's solution must reach the goal"


def test_normalized_observation_is_image_over_ten(amaze_fixture):
    level = recorded_level(amaze_fixture, "dr_")
    obs, _ = jax.vmap(reset_to_level, (None, 0, None))(jax.random.key(0), level, EnvParams(normalize_obs=True))
    assert obs.image.dtype == jnp.float32
    np.testing.assert_array_equal(obs.image, amaze_fixture["dr_init_image"].astype(np.float32) / 10.0)


def test_heldout_rollouts_match_reference(amaze_fixture):
    # Memory, also recorded, is no AMaze held-out maze: it has objects beyond walls and goal.
    names = [name for name in HELDOUT_MAZES if f"ood__{name}__actions" in amaze_fixture]
    assert len(names) == len(HELDOUT_MAZES) - 1, "all but dcd's PerfectMazeLarge are recorded"
    for name in names:
        prefix = f"ood__{name}__"
        assert_trajectory_matches(amaze_fixture, prefix, prefix, int(amaze_fixture[prefix + "max_episode_steps"]))


def python_bfs(walls, start, goal, moves):
    """Plain-Python breadth-first search over (dx, dy) `moves`; -1 when the goal is unreachable."""
    height, width = walls.shape
    start, goal = tuple(int(v) for v in start), tuple(int(v) for v in goal)
    frontier, dist = [start], {start: 0}
    while frontier:
        x, y = frontier.pop(0)
        for dx, dy in moves:
            nx, ny = x + dx, y + dy
            if 0 <= nx < width and 0 <= ny < height and not walls[ny, nx] and (nx, ny) not in dist:
                dist[nx, ny] = dist[x, y] + 1
                frontier.append((nx, ny))
    return dist.get(goal, -1)


GRID_MOVES = [(1, 0), (0, 1), (-1, 0), (0, -1)]


@pytest.mark.parametrize(("prefix", "solution_prefix"), [("dr_", "drsolve_"), ("tch_", "tch_")])
def test_level_metrics(amaze_fixture, prefix, solution_prefix):
    """Wall counts match the reference; solvability matches the recorder's own BFS solutions. Path lengths
    are the agent's grid moves, checked against a plain-Python BFS. minimax's `shortest_path_length` and
    `passable` (Seidel all-pairs over a graph that links every wall to one dummy node) are not copied:
    they can fall below the Manhattan distance and call an unsolvable level passable (tch_ level 0)."""
    data = amaze_fixture
    level = recorded_level(data, prefix)
    np.testing.assert_array_equal(jax.vmap(wall_count)(level), data[prefix + "n_walls"])
    np.testing.assert_array_equal(jax.vmap(is_solvable)(level), data[solution_prefix + "solution_len"] >= 0)
    lengths = np.asarray(jax.vmap(shortest_path_length)(level))
    for i, length in enumerate(lengths):
        walls, start, goal = data[prefix + "wall_map"][i], data[prefix + "agent_pos"][i], data[prefix + "goal_pos"][i]
        assert length == python_bfs(walls, start, goal, GRID_MOVES)
        if length >= 0:
            assert length >= np.abs(start.astype(int) - goal.astype(int)).sum()


def test_teacher_episodes_match_reference(amaze_fixture):
    params = teacher.TeacherParams(normalize_obs=False)
    actions = amaze_fixture["teacher_actions"]
    for episode in range(actions.shape[0]):
        obs, state = teacher.reset(jax.random.key(episode), params)
        np.testing.assert_array_equal(obs.image, amaze_fixture["teacher_reset_image"][episode])
        assert int(obs.time) == amaze_fixture["teacher_reset_time"][episode]
        # The reference draws the start direction at random at reset; adopt the recorded one.
        state = state.replace(agent_dir=jnp.int32(amaze_fixture["teacher_instance_agent_dir"][episode]))
        for t, action in enumerate(actions[episode]):
            obs, state, done = teacher.step(jax.random.key(t), state, jnp.int32(action), params)
            np.testing.assert_array_equal(obs.image, amaze_fixture["teacher_image"][episode, t])
            assert int(obs.time) == amaze_fixture["teacher_time"][episode, t]
            assert bool(done) == amaze_fixture["teacher_done"][episode, t]
            assert obs.noise.shape == amaze_fixture["teacher_noise"].shape[2:]
        level = teacher.to_level(state)
        np.testing.assert_array_equal(level.wall_map, amaze_fixture["teacher_instance_wall_map"][episode])
        np.testing.assert_array_equal(level.goal_pos, amaze_fixture["teacher_instance_goal_pos"][episode])
        np.testing.assert_array_equal(level.agent_pos, amaze_fixture["teacher_instance_agent_pos"][episode])
        assert int(level.agent_dir) == amaze_fixture["teacher_instance_agent_dir"][episode]


@pytest.mark.parametrize("prefix", ["mut_dr_", "mut_empty_"])
def test_mutation_traces_match_reference(amaze_fixture, prefix):
    data = amaze_fixture
    width = data[prefix + "parent_wall_map"].shape[-1]
    parents, finals = recorded_level(data, prefix + "parent_"), recorded_level(data, prefix)
    for index in range(data[prefix + "mutations"].shape[0]):
        level = jax.tree.map(operator.itemgetter(index), parents)
        previous_walls = np.asarray(level.wall_map)
        for k, edit in enumerate(data[prefix + "mutations"][index]):
            walls, goal = data[prefix + "trace_wall_map"][index, k], data[prefix + "trace_goal_pos"][index, k]
            cell = 0
            if edit == EDIT_FLIP_WALL:
                ((y, x),) = np.argwhere(walls != previous_walls)
                cell = y * width + x
            elif edit == EDIT_MOVE_GOAL:
                cell = int(goal[1]) * width + int(goal[0])
            level = apply_edit(level, jnp.int32(edit), jnp.int32(cell))
            np.testing.assert_array_equal(level.wall_map, walls)
            np.testing.assert_array_equal(level.goal_pos, goal)
            previous_walls = walls
        assert bool(levels_equal(level, jax.tree.map(operator.itemgetter(index), finals)))
        np.testing.assert_array_equal(level.agent_pos, data[prefix + "parent_agent_pos"][index])


def test_level_equality_matches_reference(amaze_fixture):
    levels = recorded_level(amaze_fixture, "dr_")
    matrix = jax.vmap(lambda a: jax.vmap(lambda b: levels_equal(a, b))(levels))(levels)
    np.testing.assert_array_equal(matrix, amaze_fixture["cmp_dr_matrix"])
    turned = levels.replace(agent_dir=(levels.agent_dir + 1) % 4)
    np.testing.assert_array_equal(jax.vmap(levels_equal)(levels, turned), amaze_fixture["cmp_dir_only_change"])
    mutants, parents = recorded_level(amaze_fixture, "mut_dr_"), recorded_level(amaze_fixture, "mut_dr_parent_")
    np.testing.assert_array_equal(jax.vmap(levels_equal)(mutants, parents), amaze_fixture["cmp_mutated_vs_parent"])
