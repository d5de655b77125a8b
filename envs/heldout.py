"""Held-out test mazes for zero-shot evaluation, by name (docs/amaze.md).

Eight fixed 13x13 layouts (SixteenRooms ... StandardMaze3, start directions as in dcd and
tests/fixtures/heldout_mazes.json) and procedural families as jittable generators: corridors with
a random goal among fixed choices, FourRooms with random doors, Crossing, and perfect mazes up to
101x101. Deviations from minimax-lib 0.2.0, on purpose: FourRooms never puts the agent on the goal,
and perfect mazes draw the start's x and y from independent keys.
"""

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from envs.levels import level_from_text, sample_cell
from envs.maze import DIR_TO_VEC, EnvParams, Level, make_level

FIXED_MAZES = {
    "SixteenRooms": """
        ...#..#..#...
        .>.......#...
        ...#..#......
        #.###.##.###.
        ...#.........
        ......#..#...
        ##.#.##.###.#
        ...#.....#...
        ...#..#......
        .####.##.#.##
        ...#..#..#...
        ......#....G.
        ...#.....#...
    """,
    "SixteenRooms2": """
        ...#.....#...
        .>....#..#...
        ...#..#..#...
        ####.##.###.#
        ...#..#......
        ......#..#...
        #.#####.#####
        ...#..#..#...
        ...#.........
        ##.##.##.####
        ...#..#..#...
        ......#....G.
        ...#..#..#...
    """,
    "Labyrinth": """
        .............
        .###########.
        .#.........#.
        .#.#######.#.
        .#.#.....#.#.
        .#.#.###.#.#.
        .#.#.#G#.#.#.
        .#.#.#.#.#.#.
        .#...#...#.#.
        .#########.#.
        .....#.....#.
        ####.#.#####.
        >....#.......
    """,
    "Labyrinth2": """
        >#...........
        .#.#########.
        .#.#.......#.
        .#.#.#####.#.
        .#.#.#...#.#.
        ...#.#.#.#.#.
        ####.#G#.#.#.
        ...#.###.#.#.
        .#.#.....#.#.
        .#.#######.#.
        .#.........#.
        .###########.
        .............
    """,
    "LabyrinthFlipped": """
        .............
        .###########.
        .#.........#.
        .#.#######.#.
        .#.#.....#.#.
        .#.#.###.#.#.
        .#.#.#G#.#.#.
        .#.#.#.#.#.#.
        .#.#...#...#.
        .#.#########.
        .#.....#.....
        .#####.#.####
        .......#....<
    """,
    "StandardMaze": """
        .....#>...#..
        .###.####.##.
        .#...........
        .########.###
        ........#....
        ######.#####.
        ....#..#.....
        .##...##.####
        ..#.#..#...#.
        #.#.##.###.#.
        #.#..#...#...
        #.##.###.###.
        ...#..G#.#...
    """,
    "StandardMaze2": """
        ...#.#....#..
        .#.#.####...#
        .#........#..
        .########.###
        ...#..#.#.#.G
        ##.#.##.#.#..
        >#.#....#.##.
        .#.##.###..#.
        .#..#..###.#.
        .##.##.#.#.#.
        .#...#.#.#.#.
        .#.#.#.#.#.#.
        ...#...#.....
    """,
    "StandardMaze3": """
        ...>#.#......
        .####.#.####.
        .#....#.#....
        ...####.#.#.#
        ##.#....#.#..
        ...#.##.#.##.
        .#.#.#..#..#G
        .#.#.#.###.##
        .#...#.#.#...
        .###.#.#.###.
        .#...#.#...#.
        .#.###.#.#.#.
        .#...#...#...
    """,
}


@dataclass(frozen=True)
class HeldoutMaze:
    """A held-out maze family: its interior size, episode length, and a jittable `sample(rng) -> Level`."""

    height: int
    width: int
    max_steps: int
    sample: Callable[[jax.Array], Level]

    def env_params(self, params: EnvParams) -> EnvParams:
        """`params` with this maze's episode length."""
        return params.replace(max_steps=self.max_steps)


def _eval_max_steps(height: int, width: int) -> int:
    """dcd's evaluation horizon: twice the cells of the bordered grid (450 for 13x13)."""
    return 2 * (height + 2) * (width + 2)


def _fixed_maze(text: str) -> HeldoutMaze:
    # Parsed when sampled, not at import: building arrays at import would start the XLA backend before a
    # multi-host run can call jax.distributed.initialize.
    rows = text.strip().splitlines()
    height, width = len(rows), len(rows[0].strip())
    return HeldoutMaze(height, width, _eval_max_steps(height, width), lambda rng: level_from_text(text))


def _random_free_start_and_goal(rng: jax.Array, wall_map: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Goal on a free cell, agent on another free cell, uniform direction."""
    height, width = wall_map.shape
    rng_goal, rng_agent, rng_dir = jax.random.split(rng, 3)
    free = ~wall_map.reshape(-1)
    goal = sample_cell(rng_goal, free)
    agent = sample_cell(rng_agent, free & (jnp.arange(height * width) != goal))
    to_pos = lambda cell: jnp.stack([cell % width, cell // width])  # noqa: E731
    return to_pos(goal), to_pos(agent), jax.random.randint(rng_dir, (), 0, 4)


def _corridor(size: int) -> HeldoutMaze:
    """Comb-shaped corridors: teeth of length size//2 - 1 above and below a central wall, the agent at the
    left end of the middle row facing right, the goal at the inner end of a random tooth."""
    middle = size // 2
    walls = np.zeros((size, size), bool)
    walls[1:-1, 1:-1:2] = True
    walls[middle, 1:-1] = True
    tooth_xs = np.arange(2, size - 1, 2)
    goal_choices = np.asarray([(x, middle - 1) for x in tooth_xs] + [(x, middle + 1) for x in tooth_xs], dtype=np.int32)

    def sample(rng: jax.Array) -> Level:
        goal = jnp.asarray(goal_choices)[jax.random.randint(rng, (), 0, len(goal_choices))]
        return make_level(walls, goal, (0, middle), 0)

    return HeldoutMaze(size, size, _eval_max_steps(size, size), sample)


def _four_rooms(size: int = 17, max_steps: int = 250) -> HeldoutMaze:
    """Four rooms split by a wall cross at the centre, one random door in each of the four wall arms."""
    middle = size // 2
    cross = np.zeros((size, size), bool)
    cross[middle, :] = True
    cross[:, middle] = True

    def sample(rng: jax.Array) -> Level:
        rng_doors, rng_start = jax.random.split(rng)
        doors = jax.random.randint(rng_doors, (4,), 0, middle) + jnp.array([0, middle + 1, 0, middle + 1])
        wall_map = jnp.asarray(cross).at[middle, doors[:2]].set(False).at[doors[2:], middle].set(False)
        goal, agent, agent_dir = _random_free_start_and_goal(rng_start, wall_map)
        return make_level(wall_map, goal, agent, agent_dir)

    return HeldoutMaze(size, size, max_steps, sample)


def _crossing(size: int = 9, num_crossings: int = 5) -> HeldoutMaze:
    """MiniGrid's SimpleCrossing: `num_crossings` full wall lines on odd rows/columns, opened by one
    monotone right/down path from the agent (top left, facing right) to the goal (bottom right) that
    crosses each wall straight through."""
    lines = np.arange(1, size - 1, 2)
    num_lines = len(lines)

    def carve(carry, rng):
        wall_map, pos, direction, crossing = carry
        choice = jax.random.randint(rng, (), 0, 2)  # 0 right, 1 down (DIR_TO_VEC order)
        direction = jnp.where(crossing, direction, choice)
        blocked = jnp.any(pos + jnp.asarray(DIR_TO_VEC)[direction] >= size)
        direction = jnp.where(blocked, 1 - direction, direction)
        pos = pos + jnp.asarray(DIR_TO_VEC)[direction]
        crossing = wall_map[pos[1], pos[0]]
        return (wall_map.at[pos[1], pos[0]].set(False), pos, direction, crossing), None

    def sample(rng: jax.Array) -> Level:
        rng_lines, rng_path = jax.random.split(rng)
        chosen = jax.random.permutation(rng_lines, 2 * num_lines)[:num_crossings]
        is_row = jnp.zeros(2 * num_lines, bool).at[chosen].set(True)
        rows = jnp.zeros(size, bool).at[lines].set(is_row[:num_lines])
        cols = jnp.zeros(size, bool).at[lines].set(is_row[num_lines:])
        wall_map = rows[:, None] | cols[None, :]
        start = (wall_map, jnp.zeros(2, jnp.int32), jnp.int32(0), jnp.bool_(False))
        (wall_map, _, _, _), _ = jax.lax.scan(carve, start, jax.random.split(rng_path, 2 * (size - 1)))
        return make_level(wall_map, (size - 1, size - 1), (0, 0), 0)

    return HeldoutMaze(size, size, 4 * (size + 2) * (size + 2), sample)


def _perfect_maze(size: int) -> HeldoutMaze:
    """A perfect maze (exactly one path between any two free cells) by randomized depth-first search over
    the cells at even coordinates, then a random start and goal on distinct free cells."""
    if size % 2 == 0:
        raise ValueError(f"perfect mazes need an odd size, got {size}")
    cells = size // 2 + 1

    def visit(carry, rng):
        wall_map, visited, stack, depth = carry
        steps = jnp.asarray(DIR_TO_VEC)
        top = stack[jnp.maximum(depth - 1, 0)]
        neighbours = top + steps  # [4, 2] in cell coordinates
        inside = jnp.all((neighbours >= 0) & (neighbours < cells), axis=1)
        clipped = jnp.clip(neighbours, 0, cells - 1)
        open_neighbours = inside & ~visited[clipped[:, 1], clipped[:, 0]] & (depth > 0)
        pick = jax.random.categorical(rng, jnp.where(open_neighbours, 0.0, -jnp.inf))
        advance = jnp.any(open_neighbours)
        nxt = clipped[pick]
        between = top + nxt  # twice the midpoint = the wall cell between them in grid coordinates
        carved = wall_map.at[2 * nxt[1], 2 * nxt[0]].set(False).at[between[1], between[0]].set(False)
        return (
            jnp.where(advance, carved, wall_map),
            visited.at[nxt[1], nxt[0]].set(visited[nxt[1], nxt[0]] | advance),
            stack.at[depth].set(jnp.where(advance, nxt, stack[depth])),
            jnp.where(advance, depth + 1, jnp.maximum(depth - 1, 0)),
        ), None

    def sample(rng: jax.Array) -> Level:
        rng_x, rng_y, rng_search, rng_start = jax.random.split(rng, 4)
        first = jnp.stack([jax.random.randint(rng_x, (), 0, cells), jax.random.randint(rng_y, (), 0, cells)])
        wall_map = jnp.ones((size, size), bool).at[2 * first[1], 2 * first[0]].set(False)
        visited = jnp.zeros((cells, cells), bool).at[first[1], first[0]].set(True)
        stack = jnp.zeros((cells * cells + 1, 2), jnp.int32).at[0].set(first)
        # Each cell is pushed once and popped once.
        carry = (wall_map, visited, stack, jnp.int32(1))
        (wall_map, _, _, _), _ = jax.lax.scan(visit, carry, jax.random.split(rng_search, 2 * cells * cells))
        goal, agent, agent_dir = _random_free_start_and_goal(rng_start, wall_map)
        return make_level(wall_map, goal, agent, agent_dir)

    return HeldoutMaze(size, size, _eval_max_steps(size, size), sample)


HELDOUT_MAZES: dict[str, HeldoutMaze] = {
    **{name: _fixed_maze(text) for name, text in FIXED_MAZES.items()},
    "SmallCorridor": _corridor(13),
    "LargeCorridor": _corridor(19),
    "FourRooms": _four_rooms(),
    "Crossing": _crossing(),
    "PerfectMaze": _perfect_maze(13),
    "PerfectMazeMedium": _perfect_maze(19),
    "PerfectMazeLarge": _perfect_maze(49),
    "PerfectMazeXL": _perfect_maze(101),
}


def get_heldout_maze(name: str) -> HeldoutMaze:
    if name not in HELDOUT_MAZES:
        raise ValueError(f"unknown held-out maze {name!r}; choose from {', '.join(HELDOUT_MAZES)}")
    return HELDOUT_MAZES[name]
