"""Level generation, ACCEL mutations, level equality, level metrics and ASCII levels.

Everything here except the ASCII helpers is jittable and vmappable; shapes are fixed by `height`
and `width` (static Python ints).
"""

import jax
import jax.numpy as jnp
import numpy as np

from envs.maze import DIR_TO_VEC, Level, goal_reward, make_level

EDIT_NO_OP, EDIT_FLIP_WALL, EDIT_MOVE_GOAL = 0, 1, 2
NUM_EDIT_TYPES = 3


def _cell_to_pos(cell: jax.Array, width: int) -> jax.Array:
    return jnp.stack([cell % width, cell // width]).astype(jnp.int32)


def _pos_to_cell(pos: jax.Array, width: int) -> jax.Array:
    return pos[1] * width + pos[0]


def sample_cell(rng: jax.Array, allowed: jax.Array) -> jax.Array:
    """A uniform cell index among the True entries of the flat mask `allowed` (at least one).

    One random integer and a search of the running count: exact, and ~100x cheaper on CPU than a
    Gumbel categorical, which draws a random number per cell."""
    running_count = jnp.cumsum(allowed, dtype=jnp.int32)
    rank = jax.random.randint(rng, (), 0, running_count[-1])
    return jnp.searchsorted(running_count, rank, side="right").astype(jnp.int32)


def sample_dr_level(rng: jax.Array, height: int = 13, width: int = 13, n_walls: int = 60) -> Level:
    """The DR generator (docs/amaze.md): `n_walls` cells uniform *with replacement* (about 50.6 distinct for
    60 on 13x13), then the agent on a free cell, a uniform direction, the goal on another free cell.
    Levels are not checked for solvability. `n_walls=0` gives ACCEL's empty starting mazes."""
    rng_walls, rng_agent, rng_dir, rng_goal = jax.random.split(rng, 4)
    wall_cells = jax.random.randint(rng_walls, (n_walls,), 0, height * width)
    walls = jnp.zeros(height * width, dtype=bool).at[wall_cells].set(True)
    agent_cell = sample_cell(rng_agent, ~walls)
    agent_dir = jax.random.randint(rng_dir, (), 0, 4)
    goal_cell = sample_cell(rng_goal, ~walls & (jnp.arange(height * width) != agent_cell))
    return make_level(
        walls.reshape(height, width), _cell_to_pos(goal_cell, width), _cell_to_pos(agent_cell, width), agent_dir
    )


def sample_empty_level(rng: jax.Array, height: int = 13, width: int = 13) -> Level:
    """An empty maze with random agent, direction and goal (ACCEL's starting point)."""
    return sample_dr_level(rng, height, width, n_walls=0)


def apply_edit(level: Level, edit_type: jax.Array, cell: jax.Array) -> Level:
    """One mutation edit at flat cell index `cell` (y * W + x): no-op, flip that cell's wall bit, or move
    the goal there (clearing a wall under it). The agent never moves."""
    width = level.width
    flat_walls = level.wall_map.reshape(-1)
    flipped = flat_walls.at[cell].set(~flat_walls[cell]).reshape(level.wall_map.shape)
    cleared = flat_walls.at[cell].set(False).reshape(level.wall_map.shape)
    wall_map = jnp.where(
        edit_type == EDIT_FLIP_WALL, flipped, jnp.where(edit_type == EDIT_MOVE_GOAL, cleared, level.wall_map)
    )
    goal_pos = jnp.where(edit_type == EDIT_MOVE_GOAL, _cell_to_pos(cell, width), level.goal_pos)
    return level.replace(wall_map=wall_map, goal_pos=goal_pos)


def _mutate_once(level: Level, rng: jax.Array) -> tuple[Level, tuple[jax.Array, jax.Array]]:
    rng_type, rng_flip, rng_goal = jax.random.split(rng, 3)
    width = level.width
    cells = jnp.arange(level.height * width)
    goal_cell = _pos_to_cell(level.goal_pos, width)
    agent_cell = _pos_to_cell(level.agent_pos, width)
    not_goal_or_agent = (cells != goal_cell) & (cells != agent_cell)
    edit_type = jax.random.randint(rng_type, (), 0, NUM_EDIT_TYPES)
    flip_cell = sample_cell(rng_flip, not_goal_or_agent)
    goal_target = sample_cell(rng_goal, not_goal_or_agent & ~level.wall_map.reshape(-1))
    cell = jnp.where(edit_type == EDIT_MOVE_GOAL, goal_target, flip_cell)
    return apply_edit(level, edit_type, cell), (edit_type, cell)


def mutate_level(rng: jax.Array, level: Level, num_edits: int = 20) -> Level:
    """ACCEL's mutator (docs/amaze.md): `num_edits` edits, each uniformly a no-op, a wall flip on a cell other
    than goal and agent, or a goal move to a free cell that is not the goal or the agent."""
    level, _ = jax.lax.scan(_mutate_once, level, jax.random.split(rng, num_edits))
    return level


def levels_equal(a: Level, b: Level) -> jax.Array:
    """Equal walls, goal and agent position (the direction is ignored, as in minimax's comparator)."""
    return jnp.all(a.wall_map == b.wall_map) & jnp.all(a.goal_pos == b.goal_pos) & jnp.all(a.agent_pos == b.agent_pos)


def wall_count(level: Level) -> jax.Array:
    return jnp.sum(level.wall_map, dtype=jnp.int32)


def _layers_before(found, expand, start: jax.Array, limit: int) -> tuple[jax.Array, jax.Array]:
    """Breadth-first search from `start`, `limit` layers of `expand` at most: (the states reached, how many layers
    were grown before `found(reached)` first held, which stays true once it does; that count is only read when the
    goal is found, and then equals the fixed search's count).

    On a GPU, all `limit` layers: a `fori_loop` whose trip count XLA knows (a loop that decides on the device
    whether to go on makes the host wait for that answer at every layer). On a CPU, that decision costs nothing and
    the bound (H x W layers and more) is many times the layers a search needs, so there it stops at the first layer
    where the goal is found or nothing new is reached: whether the goal is found, and in how many layers, is then
    final, the same as after all `limit` layers (the states reached may be fewer; nothing else is read from them)."""

    def all_layers(start):
        def layer(_, carry):
            reached, before = carry
            return expand(reached), before + ~found(reached)

        return jax.lax.fori_loop(0, limit, layer, (start, jnp.int32(0)), unroll=8)

    def until_settled(start):
        # Stopped at the first state where `found` holds, every layer it grew came before: their count is the answer.
        def unsettled(state):
            grown, reached, changed = state
            return (grown < limit) & changed & ~found(reached)

        def grow(state):
            grown, reached, _ = state
            after = expand(reached)
            return grown + 1, after, jnp.any(after != reached)

        grown, reached, _ = jax.lax.while_loop(unsettled, grow, (jnp.int32(0), start, jnp.bool_(True)))
        return reached, grown

    return jax.lax.platform_dependent(start, cpu=until_settled, default=all_layers)


def shortest_path_length(level: Level) -> jax.Array:
    """Grid moves from agent to goal around walls (turns not counted), or -1 when unreachable.

    Breadth-first search of up to H x W - 1 layers of 4-neighbour growth of the reached cells (no path in an H x W
    maze is longer), counting the layers before the goal is reached: on a GPU all of them, O(H^2 W^2) work, a
    fixed amount (`_layers_before`)."""
    height, width = level.wall_map.shape
    free = ~level.wall_map
    goal_x, goal_y = level.goal_pos[0], level.goal_pos[1]
    start = jnp.zeros((height, width), bool).at[level.agent_pos[1], level.agent_pos[0]].set(True)

    def grow(reached):
        padded = jnp.pad(reached, 1)
        neighbours = padded[:-2, 1:-1] | padded[2:, 1:-1] | padded[1:-1, :-2] | padded[1:-1, 2:]
        return reached | (neighbours & free)

    reached, steps = _layers_before(lambda reached: reached[goal_y, goal_x], grow, start, height * width - 1)
    return jnp.where(reached[goal_y, goal_x], steps, -1)


def optimal_steps(level: Level, limit: int | None = None) -> jax.Array:
    """The fewest steps from the start to the goal with AMaze's moves (turn left, turn right, forward; the
    episode ends on the forward step into the goal), or -1 when the goal cannot be reached (in at most `limit`
    steps, when given: a static int, which bounds the search).

    Breadth-first search over (direction, y, x) states: a turn keeps the cell and a forward step moves one cell
    along the facing direction onto a free cell other than the goal. A shortest way never enters a cell twice
    and turns at most twice in a cell, so it takes at most 3 H W steps: that many layers (or `limit`), all of them
    on a GPU, a fixed amount of work (`_layers_before`)."""
    height, width = level.wall_map.shape
    bound = 3 * height * width if limit is None else min(limit, 3 * height * width)
    goal_x, goal_y = level.goal_pos[0], level.goal_pos[1]
    open_cells = ~level.wall_map & ~jnp.zeros_like(level.wall_map).at[goal_y, goal_x].set(True)
    start = jnp.zeros((4, height, width), bool).at[level.agent_dir, level.agent_pos[1], level.agent_pos[0]].set(True)

    def from_behind(reached):
        """[4, H, W]: the state one forward step behind each state is reached (per facing direction)."""
        padded = jnp.pad(reached, ((0, 0), (1, 1), (1, 1)))
        return jnp.stack(
            [padded[d, 1 - dy : 1 - dy + height, 1 - dx : 1 - dx + width] for d, (dx, dy) in enumerate(DIR_TO_VEC)]
        )

    # The state facing the goal from the cell behind it, per direction (outside the maze for some).
    behind_x, behind_y = goal_x - jnp.asarray(DIR_TO_VEC)[:, 0], goal_y - jnp.asarray(DIR_TO_VEC)[:, 1]
    inside = (behind_x >= 0) & (behind_x < width) & (behind_y >= 0) & (behind_y < height)
    facing_goal = (jnp.arange(4), jnp.clip(behind_y, 0, height - 1), jnp.clip(behind_x, 0, width - 1))

    def enters_goal(reached):
        """A reached state faces the goal from the cell next to it: one forward step ends the episode."""
        return (reached[facing_goal] & inside).any()

    def grow(reached):
        turned = jnp.roll(reached, 1, axis=0) | jnp.roll(reached, -1, axis=0)
        return reached | turned | (from_behind(reached) & open_cells)

    reached, layers = _layers_before(enters_goal, grow, start, bound)
    # `bound` layers of growth; the forward step into the goal adds one, so a way needing bound + 1 steps is out.
    return jnp.where(enters_goal(reached) & (layers < bound), layers + 1, -1)


def optimal_return(level: Level, max_steps: int) -> jax.Array:
    """The best return any policy gets on `level`: the reward for reaching the goal at step `optimal_steps`, by the
    env's own formula (`envs.maze.goal_reward`), or 0 when the goal is unreachable or needs more than `max_steps`
    (a static int, which bounds the search). Equal to the env's reward to within float32 rounding, not always
    bitwise: XLA may round the same formula differently in another program (jitted and vmapped it can be 1 ulp
    apart), so `common.ued_scores.true_regret` tells optimal play by the episode's length, not by comparing
    rewards."""
    steps = optimal_steps(level, limit=max_steps)
    return jnp.where(steps >= 0, goal_reward(steps, max_steps), 0.0)


def is_solvable(level: Level) -> jax.Array:
    return shortest_path_length(level) >= 0


AGENT_CHARS = ">v<^"  # indexed by direction


def level_to_text(level: Level) -> str:
    """ASCII map, one row per line: `#` wall, `.` free, `G` goal, `>v<^` the agent facing its way."""
    walls = np.asarray(level.wall_map)
    rows = [["#" if wall else "." for wall in row] for row in walls]
    goal_x, goal_y = np.asarray(level.goal_pos).tolist()
    agent_x, agent_y = np.asarray(level.agent_pos).tolist()
    rows[goal_y][goal_x] = "G"
    rows[agent_y][agent_x] = AGENT_CHARS[int(level.agent_dir)]
    return "\n".join("".join(row) for row in rows)


def level_from_text(text: str) -> Level:
    """Parse `level_to_text`'s format (surrounding blank lines and indentation ignored)."""
    rows = [line.strip() for line in text.strip().splitlines()]
    if not rows or any(len(row) != len(rows[0]) for row in rows):
        raise ValueError("level text must be a non-empty rectangle of '#', '.', 'G' and one of '>v<^'")
    bad = sorted({char for row in rows for char in row} - set("#.G" + AGENT_CHARS))
    if bad:
        raise ValueError(f"level text has unknown characters {bad}; use '#', '.', 'G' and one of '>v<^'")
    agents = [(x, y, AGENT_CHARS.index(c)) for y, row in enumerate(rows) for x, c in enumerate(row) if c in AGENT_CHARS]
    goals = [(x, y) for y, row in enumerate(rows) for x, c in enumerate(row) if c == "G"]
    if len(agents) != 1:
        raise ValueError(f"level text needs exactly one agent ('>v<^'), found {len(agents)}")
    if len(goals) != 1:
        raise ValueError(f"level text needs exactly one goal 'G', found {len(goals)}")
    wall_map = np.array([[c == "#" for c in row] for row in rows])
    agent_x, agent_y, agent_dir = agents[0]
    return make_level(wall_map, goals[0], (agent_x, agent_y), agent_dir)


def validate_level(level: Level) -> None:
    """Raise a one-line ValueError for a level the env cannot play (host-side check for user levels)."""
    walls = np.asarray(level.wall_map)
    if walls.ndim != 2:
        raise ValueError(f"wall_map must be 2-D [H, W], got shape {walls.shape}")
    height, width = walls.shape
    for name in ("agent_pos", "goal_pos"):
        x, y = np.asarray(getattr(level, name)).tolist()
        if not (0 <= x < width and 0 <= y < height):
            raise ValueError(f"{name} {(x, y)} is outside the {width}x{height} grid")
        if walls[y, x]:
            raise ValueError(f"{name} {(x, y)} is on a wall")
    if np.array_equal(np.asarray(level.agent_pos), np.asarray(level.goal_pos)):
        raise ValueError(f"agent and goal are both at {tuple(np.asarray(level.goal_pos).tolist())}")
    if int(level.agent_dir) not in range(len(DIR_TO_VEC)):
        raise ValueError(f"agent_dir must be 0..3, got {int(level.agent_dir)}")
