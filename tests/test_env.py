"""AMaze invariants: generators by distribution, mutator, teacher env, held-out mazes, ASCII levels,
jit/vmap shapes and rendering."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import teacher
from envs.heldout import FIXED_MAZES, HELDOUT_MAZES, get_heldout_maze
from envs.levels import (
    EDIT_FLIP_WALL,
    EDIT_MOVE_GOAL,
    EDIT_NO_OP,
    _mutate_once,
    apply_edit,
    is_solvable,
    level_from_text,
    level_to_text,
    levels_equal,
    mutate_level,
    sample_dr_level,
    sample_empty_level,
    shortest_path_length,
    validate_level,
    wall_count,
)
from envs.maze import (
    EnvParams,
    make_level,
    reset_to_fresh_levels,
    reset_to_level,
    step,
    step_and_next_level,
    step_and_restart,
)
from envs.render import (
    GOAL_RGB,
    MIN_CELL_PIXELS,
    WALL_RGB,
    render_grid,
    render_level,
    render_rollout,
    save_gif,
    save_png,
)
from tests.plain_maze import goal_reward, python_step, python_view

SIMPLE = """
    #..G
    .>..
    ..#.
"""


def assert_dr_distribution(levels, n_walls: int = 60) -> None:
    """13x13 levels (leading axis N, a few thousand) look drawn by DR's generator: the mean number of distinct
    walls, every cell a wall about as often as any other, agent and goal on free distinct cells, the agent and the
    goal each on every cell about equally often (chi-square over 169 cells), and every direction."""
    walls = np.asarray(jax.vmap(wall_count)(levels))
    expected = 169 * (1 - (168 / 169) ** n_walls)  # distinct cells among n_walls draws with replacement
    assert abs(walls.mean() - expected) < 4 * walls.std() / np.sqrt(len(walls)), walls.mean()
    wall_maps = np.asarray(levels.wall_map)
    wall_rate = expected / 169  # the chance that a given cell is a wall, the same for every cell
    deviation = np.abs(wall_maps.mean(axis=0) - wall_rate)  # [13, 13]
    assert deviation.max() < 5 * np.sqrt(wall_rate * (1 - wall_rate) / len(walls)), deviation.max()
    agent, goal = np.asarray(levels.agent_pos), np.asarray(levels.goal_pos)
    index = np.arange(len(walls))
    assert not wall_maps[index, agent[:, 1], agent[:, 0]].any()
    assert not wall_maps[index, goal[:, 1], goal[:, 0]].any()
    assert not (agent == goal).all(axis=1).any()
    for positions in (agent, goal):
        counts = np.bincount(positions[:, 1] * 13 + positions[:, 0], minlength=169)
        chi2 = ((counts - counts.mean()) ** 2 / counts.mean()).sum()
        assert chi2 < 168 + 5 * np.sqrt(2 * 168), chi2
    assert np.bincount(np.asarray(levels.agent_dir), minlength=4).min() > len(walls) / 4 * 0.85


def test_dr_generator_distribution():
    assert_dr_distribution(jax.jit(jax.vmap(sample_dr_level))(jax.random.split(jax.random.key(0), 4000)))


def test_empty_levels_have_no_walls():
    levels = jax.vmap(sample_empty_level)(jax.random.split(jax.random.key(1), 64))
    assert not np.asarray(levels.wall_map).any()
    assert np.asarray(jax.vmap(is_solvable)(levels)).all()


def test_mutator_invariants():
    parents = jax.vmap(sample_dr_level)(jax.random.split(jax.random.key(2), 256))
    children = jax.jit(jax.vmap(mutate_level, (0, 0, None)), static_argnums=2)(
        jax.random.split(jax.random.key(3), 256), parents, 20
    )
    np.testing.assert_array_equal(children.agent_pos, parents.agent_pos)
    np.testing.assert_array_equal(children.agent_dir, parents.agent_dir)
    walls, goal, agent = np.asarray(children.wall_map), np.asarray(children.goal_pos), np.asarray(children.agent_pos)
    index = np.arange(256)
    assert not walls[index, goal[:, 1], goal[:, 0]].any()
    assert not walls[index, agent[:, 1], agent[:, 0]].any()
    assert not (goal == agent).all(axis=1).any()
    changed_walls = (walls != np.asarray(parents.wall_map)).sum(axis=(1, 2))
    assert changed_walls.max() <= 20 and changed_walls.mean() > 3
    assert not np.asarray(jax.vmap(levels_equal)(children, parents)).all()


def test_a_single_edit_is_a_no_op_a_wall_flip_or_a_goal_move_to_a_free_cell():
    """`mutate_level` with one edit on 512 DR levels, each child against its parent: unchanged, or one wall bit
    flipped on a cell that is neither goal nor agent (the goal kept), or the goal moved to a cell that was free in the
    parent and is not the agent (the walls kept); the agent never moves, and each kind comes about a third of the
    time."""
    parents = jax.vmap(sample_dr_level)(jax.random.split(jax.random.key(21), 512))
    children = jax.jit(jax.vmap(mutate_level, (0, 0, None)), static_argnums=2)(
        jax.random.split(jax.random.key(22), 512), parents, 1
    )
    np.testing.assert_array_equal(children.agent_pos, parents.agent_pos)
    parents, children = jax.tree.map(np.asarray, parents), jax.tree.map(np.asarray, children)
    kinds = {"unchanged": 0, "flip": 0, "move": 0}
    for i in range(512):
        parent_walls, child_walls = parents.wall_map[i], children.wall_map[i]
        agent = tuple(parents.agent_pos[i].tolist())
        old_goal, new_goal = tuple(parents.goal_pos[i].tolist()), tuple(children.goal_pos[i].tolist())
        changed = [(int(x), int(y)) for y, x in np.argwhere(parent_walls != child_walls)]
        if not changed and old_goal == new_goal:
            kinds["unchanged"] += 1
        elif old_goal == new_goal:
            assert len(changed) == 1 and changed[0] not in (old_goal, agent), (i, changed)
            kinds["flip"] += 1
        else:
            assert not changed, f"level {i}: a goal move changed walls {changed}"
            assert not parent_walls[new_goal[1], new_goal[0]] and new_goal != agent, (i, new_goal)
            kinds["move"] += 1
    assert min(kinds.values()) > 512 / 3 * 0.75, kinds


def test_levels_equal_ignores_only_the_start_direction():
    """Equal to itself turned another way; unequal once the agent or the goal moves along either axis, or one wall
    differs."""
    level = level_from_text(SIMPLE)  # agent at (1, 1), goal at (3, 0)
    assert bool(levels_equal(level, level.replace(agent_dir=jnp.int32(2))))
    moved_agents = [level.replace(agent_pos=jnp.array(pos, jnp.int32)) for pos in ([0, 1], [1, 2])]
    moved_goals = [level.replace(goal_pos=jnp.array(pos, jnp.int32)) for pos in ([2, 0], [3, 2])]
    added_wall = level.replace(wall_map=level.wall_map.at[2, 3].set(True))
    for changed in (*moved_agents, *moved_goals, added_wall):
        assert not bool(levels_equal(level, changed)) and not bool(levels_equal(changed, level))


def test_an_edit_moves_the_goal_only_to_a_free_cell_and_flips_only_other_cells():
    """A 2 x 2 level, cells numbered y * 2 + x: the agent on cell 0, the goal on cell 1, a wall on cell 2. Over 64
    single edits (`_mutate_once`, which also returns its edit), a goal move always takes cell 3, the only free cell
    that is neither goal nor agent, and a flip only cell 2 or 3; each kind and both flipped cells occur."""
    level = make_level(np.array([[False, False], [True, False]]), (1, 0), (0, 0), 0)
    children, (kinds, cells) = jax.jit(jax.vmap(_mutate_once, (None, 0)))(
        level, jax.random.split(jax.random.key(5), 64)
    )
    kinds, cells = np.asarray(kinds), np.asarray(cells)
    moves, flips = kinds == EDIT_MOVE_GOAL, kinds == EDIT_FLIP_WALL
    assert (cells[moves] == 3).all(), cells[moves]
    np.testing.assert_array_equal(np.asarray(children.goal_pos)[moves], np.broadcast_to([1, 1], (moves.sum(), 2)))
    assert set(cells[flips].tolist()) == {2, 3}
    assert moves.any() and (kinds == EDIT_NO_OP).any()


def test_apply_edit_types():
    level = level_from_text(SIMPLE)
    assert bool(levels_equal(apply_edit(level, jnp.int32(0), jnp.int32(5)), level))
    flipped = apply_edit(level, jnp.int32(1), jnp.int32(0))  # (0, 0) was a wall
    assert not bool(flipped.wall_map[0, 0])
    moved = apply_edit(level, jnp.int32(2), jnp.int32(10))  # (2, 2) was a wall: the goal clears it
    assert moved.goal_pos.tolist() == [2, 2] and not bool(moved.wall_map[2, 2])


def test_teacher_episode_invariants():
    params = teacher.TeacherParams()

    def design(rng):
        rng_reset, rng_actions, rng_steps = jax.random.split(rng, 3)
        obs, state = teacher.reset(rng_reset, params)
        actions = jax.random.randint(rng_actions, (params.episode_steps,), 0, params.num_actions)

        def body(state, inputs):
            action, rng_step = inputs
            obs, state, done = teacher.step(rng_step, state, action, params)
            return state, (obs.noise, obs.time, done)

        keys = jax.random.split(rng_steps, params.episode_steps)
        state, (noise, time, done) = jax.lax.scan(body, state, (actions, keys))
        return teacher.to_level(state), noise, time, done, obs.image

    levels, noise, time, done, first_image = jax.jit(jax.vmap(design))(jax.random.split(jax.random.key(4), 128))
    assert first_image.shape == (128, 15, 15, 3) and first_image.dtype == jnp.float32
    assert noise.shape == (128, 62, 50) and float(noise.min()) >= 0 and float(noise.max()) < 1
    assert float(jnp.abs(noise[:, 0] - noise[:, 1]).mean()) > 0.1, "noise must be fresh every step"
    np.testing.assert_array_equal(time[0], np.arange(1, 63))
    assert done[:, -1].all() and not done[:, :-1].any()
    for i in range(128):
        validate_level(jax.tree.map(lambda x, i=i: x[i], levels))
    assert 40 < float(jax.vmap(wall_count)(levels).mean()) < 55
    assert np.bincount(np.asarray(levels.agent_dir), minlength=4).min() >= 16, "start directions uniform over four"


def test_teacher_moves_agent_off_the_goal():
    params = teacher.TeacherParams(n_walls=2)

    def design(rng):
        _, state = teacher.reset(rng, params)
        for action in (5, 6, 7, 7):  # walls at cells 5 and 6, the goal at 7, then the agent onto the goal
            rng, rng_step = jax.random.split(rng)
            _, state, done = teacher.step(rng_step, state, jnp.int32(action), params)
        return teacher.to_level(state), done

    levels, done = jax.vmap(design)(jax.random.split(jax.random.key(0), 64))
    assert done.all() and (levels.goal_pos == jnp.array([7, 0])).all()
    agent_cells = np.asarray(levels.agent_pos[:, 1] * 13 + levels.agent_pos[:, 0])
    assert not np.isin(agent_cells, [5, 6, 7]).any(), "relocated onto a wall or the goal"
    assert len(set(agent_cells.tolist())) > 20, "relocation must be random"


def test_teacher_relocates_an_agent_on_the_goal_to_the_only_free_cell_and_clears_a_wall_under_it():
    """2 x 2 designs, 64 keys each: walls on cells 0 and 1, the goal on cell 2, then the agent on the goal: cell 3,
    the one cell neither wall nor goal, takes the agent every time. The agent on wall cell 1 instead stays there
    and clears that wall; the goal and the other wall stay as placed."""
    params = teacher.TeacherParams(height=2, width=2, n_walls=2)

    @jax.jit
    @functools.partial(jax.vmap, in_axes=(0, None))
    def design(rng, agent_cell):
        _, state = teacher.reset(rng, params)
        for action in (0, 1, 2, agent_cell):
            rng, rng_step = jax.random.split(rng)
            _, state, _ = teacher.step(rng_step, state, action, params)
        return teacher.to_level(state)

    keys = jax.random.split(jax.random.key(9), 64)
    for agent_cell, walls, agent in [(2, [[1, 1], [0, 0]], [1, 1]), (1, [[1, 0], [0, 0]], [1, 0])]:
        levels = design(keys, jnp.int32(agent_cell))
        np.testing.assert_array_equal(levels.wall_map, np.broadcast_to(np.array(walls, bool), (64, 2, 2)))
        np.testing.assert_array_equal(levels.goal_pos, np.broadcast_to([0, 1], (64, 2)))
        np.testing.assert_array_equal(levels.agent_pos, np.broadcast_to(agent, (64, 2)))


def test_fixed_heldout_mazes_match_reference(heldout_json):
    for name, spec in heldout_json["fixed"].items():
        maze = get_heldout_maze(name)
        level = maze.sample(jax.random.key(0))
        np.testing.assert_array_equal(level.wall_map, np.array([[c == "#" for c in row] for row in spec["rows"]]))
        assert level.agent_pos.tolist() == spec["start"] and level.goal_pos.tolist() == spec["goal"]
        assert int(level.agent_dir) == spec["start_dir"]
        assert maze.max_steps == spec["max_steps"]
        assert int(shortest_path_length(level)) == spec["shortest_path"]
    for name, spec in heldout_json["procedural"].items():
        maze = get_heldout_maze(name)
        assert (maze.height, maze.width, maze.max_steps) == (spec["height"], spec["width"], spec["max_steps"])
    assert set(FIXED_MAZES) == set(heldout_json["fixed"])


@pytest.mark.parametrize("name", [name for name in HELDOUT_MAZES if name not in FIXED_MAZES])
def test_procedural_heldout_mazes_are_valid_and_solvable(name):
    maze = get_heldout_maze(name)
    count = 4 if maze.height > 50 else 16
    levels = jax.jit(jax.vmap(maze.sample))(jax.random.split(jax.random.key(5), count))
    assert levels.wall_map.shape == (count, maze.height, maze.width)
    for i in range(count):
        validate_level(jax.tree.map(lambda x, i=i: x[i], levels))
    assert np.asarray(jax.jit(jax.vmap(is_solvable))(levels)).all()
    if name.startswith("PerfectMaze"):
        cells = (maze.height // 2 + 1) ** 2  # a spanning tree over these cells opens cells - 1 walls between them
        free = maze.height * maze.width - np.asarray(jax.vmap(wall_count)(levels))
        np.testing.assert_array_equal(free, 2 * cells - 1)
        starts = np.asarray(levels.agent_pos)
        assert len({tuple(p) for p in starts}) > count // 2, "start positions must vary"


def test_unknown_heldout_maze_is_one_clear_line():
    with pytest.raises(ValueError, match="unknown held-out maze 'Nope'; choose from SixteenRooms"):
        get_heldout_maze("Nope")


def test_ascii_round_trip_and_errors():
    level = level_from_text(SIMPLE)
    assert level.agent_pos.tolist() == [1, 1] and level.goal_pos.tolist() == [3, 0] and int(level.agent_dir) == 0
    assert level_to_text(level) == "\n".join(line.strip() for line in SIMPLE.strip().splitlines())
    random_levels = jax.vmap(sample_dr_level)(jax.random.split(jax.random.key(6), 8))
    for i in range(8):
        original = jax.tree.map(lambda x, i=i: x[i], random_levels)
        parsed = level_from_text(level_to_text(original))
        assert bool(levels_equal(parsed, original)) and int(parsed.agent_dir) == int(original.agent_dir)
    with pytest.raises(ValueError, match="exactly one agent"):
        level_from_text("..G\n...")
    with pytest.raises(ValueError, match="exactly one goal"):
        level_from_text(">..\n...")
    with pytest.raises(ValueError, match="unknown characters"):
        level_from_text(">.G\n.x.")
    with pytest.raises(ValueError, match="rectangle"):
        level_from_text(">.G\n..")
    with pytest.raises(ValueError, match="agent_pos .* is on a wall"):
        validate_level(make_level(np.eye(3, dtype=bool), (2, 1), (0, 0), 0))
    with pytest.raises(ValueError, match="goal_pos .* is outside the 3x3 grid"):
        validate_level(make_level(np.zeros((3, 3), bool), (3, 1), (0, 0), 0))
    with pytest.raises(ValueError, match=r"agent and goal are both at \(1, 2\)"):
        validate_level(make_level(np.zeros((3, 3), bool), (1, 2), (1, 2), 0))
    with pytest.raises(ValueError, match="agent_dir must be 0..3, got 4"):
        validate_level(make_level(np.zeros((3, 3), bool), (2, 1), (0, 0), 4))
    validate_level(make_level(np.zeros((3, 3), bool), (2, 1), (0, 0), 3))


@pytest.mark.slow
def test_jit_vmap_shapes_and_sizes():
    for size in (5, 13, 101):
        params = EnvParams(max_steps=20)
        levels = jax.vmap(sample_dr_level, (0, None, None, None))(jax.random.split(jax.random.key(7), 3), size, size, 4)
        obs, state = jax.vmap(reset_to_level, (None, 0, None))(jax.random.key(0), levels, params)
        step_fn = jax.jit(jax.vmap(functools.partial(step_and_restart, params=params)))
        obs, state, reward, done, _ = step_fn(jax.random.split(jax.random.key(8), 3), state, jnp.full(3, 2))
        assert obs.image.shape == (3, 5, 5, 3) and obs.image.dtype == jnp.float32
        assert reward.shape == (3,) and done.dtype == jnp.bool_ and state.level.wall_map.shape == (3, size, size)


def test_each_episode_starts_on_the_next_fresh_level():
    """Against a plain-Python account of which level each episode plays: episodes end every 2 steps (max_steps 2),
    each starts on the env's next fresh level with that level's first observation, and an env that has used all
    of its 3 levels starts over at its first, flagging `info["reused_level"]` on exactly the done steps whose next
    episode plays a level played before."""
    params = EnvParams(max_steps=2)
    levels = jax.vmap(functools.partial(sample_dr_level, height=5, width=5, n_walls=4))(
        jax.random.split(jax.random.key(4), 3)
    )
    obs, state = reset_to_fresh_levels(None, levels, params)
    step_env = jax.jit(functools.partial(step_and_next_level, params=params))
    expected_level, episodes, played = 0, 1, {0}
    for step_index in range(9):
        obs, state, _, done, info = step_env(None, state, jnp.int32(0))  # turning never reaches the goal
        assert bool(done) == (step_index % 2 == 1)
        if done:
            expected_level, episodes = episodes % 3, episodes + 1
        assert bool(info["reused_level"]) == (bool(done) and expected_level in played)
        played.add(expected_level)
        level = jax.tree.map(lambda x, i=expected_level: x[i], levels)
        assert bool(levels_equal(state.env.level, level)) and int(state.started) == episodes
        if done:
            first_obs, _ = reset_to_level(None, level, params)
            np.testing.assert_array_equal(obs.image, first_obs.image)
            assert int(state.env.time) == 0 and state.env.agent_pos.tolist() == level.agent_pos.tolist()


def test_auto_reset_plays_fresh_dr_levels():
    """DR's auto-reset as dr.py runs it (levels made up front per env, taken one per episode): the levels that
    episodes start on, over a random-policy rollout where episodes end every 4 steps, are all different and
    distributed as the generator's own."""
    num_envs, num_steps, params = 64, 200, EnvParams(max_steps=4)
    keys = jax.random.split(jax.random.key(11), (num_envs, num_steps // 2))
    fresh = jax.jit(jax.vmap(jax.vmap(sample_dr_level)))(keys)

    @jax.jit
    def rollout(rng):
        obs, state = jax.vmap(reset_to_fresh_levels, (None, 0, None))(None, fresh, params)

        def one_step(state, rng_step):
            actions = jax.random.randint(rng_step, (num_envs,), 0, 3)
            _, state, _, done, _ = jax.vmap(functools.partial(step_and_next_level, params=params))(
                jax.random.split(rng_step, num_envs), state, actions
            )
            return state, (state.env.level, done)

        first = jax.tree.map(lambda x: x[:, 0], fresh)
        end, (played, dones) = jax.lax.scan(one_step, state, jax.random.split(rng, num_steps))
        return first, played, dones, end.started

    first, played, dones, started = rollout(jax.random.key(12))
    started_here = jax.tree.map(lambda x: np.asarray(x)[np.asarray(dones)], played)  # the level after each done
    episode_levels = jax.tree.map(lambda a, b: np.concatenate([np.asarray(a), b]), first, started_here)
    assert len(episode_levels.agent_dir) == int(np.asarray(started).sum()) > 3000
    assert int(np.asarray(started).max()) <= num_steps // 2, "no env runs out of fresh levels here"
    signatures = {
        (walls.tobytes(), tuple(agent), tuple(goal))
        for walls, agent, goal in zip(
            episode_levels.wall_map, episode_levels.agent_pos, episode_levels.goal_pos, strict=True
        )
    }
    assert len(signatures) == len(episode_levels.agent_dir), "every episode plays a level of its own"
    assert_dr_distribution(episode_levels)


def test_see_agent_and_custom_view_size():
    level = level_from_text(SIMPLE)
    obs, _ = reset_to_level(jax.random.key(0), level, EnvParams(agent_view_size=3, see_agent=True, normalize_obs=False))
    assert obs.image.shape == (3, 3, 3)
    assert obs.image[2, 1].tolist() == [10, 0, 0]  # the agent, facing right, at the bottom centre
    assert obs.image[0, 1].tolist() == [1, 0, 0]  # (3, 1), two cells ahead: free
    assert obs.image[1, 2].tolist() == [2, 5, 0]  # (2, 2), ahead and to the right: wall
    assert obs.image[1, 0].tolist() == [1, 0, 0]  # (2, 0), ahead and to the left: free


def test_rendering_colours_and_sizes(tmp_path):
    level = level_from_text(SIMPLE)
    image = render_level(level, tile_size=10)
    assert image.shape == (50, 60, 3) and image.dtype == np.uint8
    assert (image[0:10, 0:10] == WALL_RGB).all()  # border
    goal_tile = image[10:20, 40:50]  # goal (3, 0) -> tile (4, 1) with the border; inside the agent's view
    assert (goal_tile[..., 1] > 200).mean() > 0.8 and (goal_tile[..., 0] < 100).mean() > 0.8

    def red_pixels(tile):  # the agent's triangle, shaded or not
        return (tile[..., 0] > 200) & (tile[..., 1] < 120) & (tile[..., 2] < 120)

    facing_right = red_pixels(image[20:30, 20:30])  # agent (1, 1) -> tile (2, 2)
    assert facing_right.sum() > 10
    assert facing_right[:, :5].sum() > facing_right[:, 5:].sum(), "the triangle's base is behind its tip"
    facing_left = red_pixels(render_level(level, agent_dir=2, tile_size=10)[20:30, 20:30])
    assert facing_left[:, 5:].sum() > facing_left[:, :5].sum()
    unlit = render_level(level.replace(agent_pos=jnp.array([3, 2])), agent_dir=1, tile_size=10)
    assert (unlit[10:20, 40:50] == GOAL_RGB).all(axis=-1).mean() > 0.8  # behind the agent: not shaded
    batch = jax.vmap(sample_dr_level)(jax.random.split(jax.random.key(10), 5))
    grid = render_grid(batch, columns=3, tile_size=4, padding=2)  # 4 is raised to the minimum cell size
    side = 15 * MIN_CELL_PIXELS
    assert grid.shape == (2 * (side + 2) + 2, 3 * (side + 2) + 2, 3)
    frames = list(render_rollout(level, np.array([[1, 1], [2, 1]]), np.array([0, 0]), tile_size=4))
    assert len(frames) == 2 and not np.array_equal(frames[0], frames[1])
    assert save_png(image, tmp_path / "level.png").stat().st_size > 0
    assert save_gif(frames, tmp_path / "rollout.gif").stat().st_size > 0


def test_step_turns_and_blocks():
    level = level_from_text(SIMPLE)
    params = EnvParams(max_steps=10)
    _, state = reset_to_level(jax.random.key(0), level, params)
    for action, pos, direction in [(3, [1, 1], 0), (0, [1, 1], 3), (2, [1, 0], 3), (2, [1, 0], 3), (1, [1, 0], 0)]:
        _, state, reward, done, _ = step(jax.random.key(0), state, jnp.int32(action), params)
        assert state.agent_pos.tolist() == pos and int(state.agent_dir) == direction and not bool(done)
    _, state, _, _, _ = step(jax.random.key(0), state, jnp.int32(2), params)  # to (2, 0)
    _, state, reward, done, info = step(jax.random.key(0), state, jnp.int32(2), params)  # into the goal
    assert bool(done) and bool(info["success"]) and state.agent_pos.tolist() == [2, 0]
    assert float(reward) == pytest.approx(1 - 0.9 * 7 / 10)


def python_step_and_restart(walls, goal, start, state, action: int, max_steps: int):
    """One step of the plain-Python maze, then a restart at `start` on done: ((pos, direction, time), reward, done,
    success)."""
    position, direction, time = state
    position, direction, success = python_step(walls, goal, position, direction, action)
    time += 1
    done = success or time >= max_steps
    reward = goal_reward(time, max_steps) if success else 0.0
    return (start if done else (position, direction, time)), reward, done, success


def test_step_and_restart_match_a_plain_python_maze_on_non_square_levels():
    """16 DR levels of 5 x 8 cells (one side longer, so swapped x and y bounds show), each played for 60 random
    actions (every one of the seven) with restarts on done, step by step against `python_step_and_restart` and
    `python_view`: position, direction, reward, done, success and the (see_agent, uint8) observation, the restarted
    episode's first after a done. The rollouts reach the goal, time out and walk where a 5 x 5 grid has no cells."""
    height, width, max_steps, num_steps = 5, 8, 20, 60
    params = EnvParams(max_steps=max_steps, agent_view_size=5, see_agent=True, normalize_obs=False)
    levels = jax.vmap(lambda rng: sample_dr_level(rng, height, width, 8))(jax.random.split(jax.random.key(13), 16))
    actions = np.random.default_rng(13).choice(7, size=(16, num_steps), p=[0.2, 0.2, 0.44, 0.04, 0.04, 0.04, 0.04])

    def play(level, level_actions):
        first_obs, state = reset_to_level(None, level, params)

        def one_step(state, action):
            obs, state, reward, done, info = step_and_restart(None, state, action, params)
            return state, (obs.image, obs.agent_dir, state.agent_pos, state.agent_dir, reward, done, info["success"])

        return first_obs.image, jax.lax.scan(one_step, state, level_actions)[1]

    first_images, outputs = jax.jit(jax.vmap(play))(levels, jnp.asarray(actions, jnp.int32))
    images, obs_dirs, positions, directions, rewards, dones, successes = map(np.asarray, outputs)
    levels = jax.tree.map(np.asarray, levels)
    visited = set()
    for i in range(16):
        walls, goal = levels.wall_map[i], tuple(levels.goal_pos[i].tolist())
        start = (tuple(levels.agent_pos[i].tolist()), int(levels.agent_dir[i]), 0)
        np.testing.assert_array_equal(first_images[i], python_view(walls, goal, start[0], start[1], 5))
        state = start
        for t in range(num_steps):
            state, reward, done, success = python_step_and_restart(walls, goal, start, state, actions[i, t], max_steps)
            (x, y), direction, _ = state
            visited.add((x, y))
            assert (positions[i, t].tolist(), int(directions[i, t])) == ([x, y], direction), (i, t)
            assert (bool(dones[i, t]), bool(successes[i, t])) == (done, success), (i, t)
            assert float(rewards[i, t]) == pytest.approx(reward, rel=1e-6), (i, t)
            assert int(obs_dirs[i, t]) == direction, (i, t)
            np.testing.assert_array_equal(
                images[i, t], python_view(walls, goal, (x, y), direction, 5), err_msg=f"{i} {t}"
            )
    assert successes.any() and (dones & ~successes).any(), "the rollouts must both reach the goal and time out"
    assert any(x >= height for x, _ in visited), "the rollouts must reach cells a square grid would not have"


def test_pictures_stay_readable():
    levels = jax.vmap(sample_dr_level, (0, None, None, None))(jax.random.split(jax.random.key(0), 5), 13, 13, 60)
    plain = render_grid(levels, tile_size=4)
    assert plain.shape[1] >= 3 * 15 * MIN_CELL_PIXELS, "a small tile size is raised to the minimum cell size"
    labelled = render_grid(levels, labels=[f"score {i}" for i in range(5)])
    assert labelled.shape[0] > plain.shape[0]
    under_first = labelled[4 + 15 * MIN_CELL_PIXELS : 4 + 15 * MIN_CELL_PIXELS + 12, 4 : 4 + 15 * MIN_CELL_PIXELS]
    assert (under_first < 128).any(), "the label is written under its level"
    maze = HELDOUT_MAZES["PerfectMazeXL"]
    level = jax.tree.map(np.asarray, maze.sample(jax.random.key(1)))
    path = np.stack([level.agent_pos + [0, step] for step in range(3)])
    frames = list(render_rollout(level, path, np.zeros(3, np.int32), tile_size=MIN_CELL_PIXELS, window=40))
    for frame in frames:
        assert frame.shape == (40 * MIN_CELL_PIXELS, 40 * MIN_CELL_PIXELS, 3)
        agent = (frame[..., 0] > 200) & (frame[..., 1] < 120) & (frame[..., 2] < 120)  # red, shaded by its view
        assert agent.sum() > MIN_CELL_PIXELS, "the agent is inside every cropped frame"


def test_a_window_is_the_whole_picture_cropped():
    """A window is cut from the cells before they become pixels (a 101x101 maze's 600-frame GIF peaked at 3.6 GB
    of memory when whole frames were drawn and then cropped): the pixels are the same, at corners and edges too."""
    level = jax.tree.map(np.asarray, HELDOUT_MAZES["PerfectMazeLarge"].sample(jax.random.key(2)))
    tile, window, side = MIN_CELL_PIXELS, 20, level.wall_map.shape[0] + 2
    for (x, y), direction in [((0, 0), 0), ((48, 48), 1), ((0, 48), 2), ((24, 0), 3), ((24, 24), 0), ((47, 1), 2)]:
        whole = render_level(level, np.array([x, y]), direction, tile)
        left = min(max(x + 1 - window // 2, 0), side - window)
        top = min(max(y + 1 - window // 2, 0), side - window)
        expected = whole[top * tile : (top + window) * tile, left * tile : (left + window) * tile]
        np.testing.assert_array_equal(render_level(level, np.array([x, y]), direction, tile, window=window), expected)
