"""The procedural held-out mazes (envs/heldout.py) against their layout rules, and the agent's glyph and view
shading in pictures (envs/render.py) against plain-Python geometry and the env's view offsets.

Each family is checked against what its docstring promises, re-derived here in plain Python over many keys:
corridor goals at the inner end of every tooth, one door per arm of FourRooms, exactly `num_crossings` wall lines
in Crossing, perfect mazes that are random spanning trees, a start never on the goal. A small table of levels
recorded at commit c2c6e20 (JAX 0.10.2) pins how each family spends its keys.
"""

import functools
import hashlib
from collections import deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.heldout import HELDOUT_MAZES, _random_free_start_and_goal
from envs.maze import DIR_TO_VEC, make_level, view_offsets
from envs.render import render_level


@functools.cache
def sample_levels(name: str, count: int, seed: int = 0):
    """`count` levels of held-out maze `name` from keys split off `key(seed)`, as numpy arrays (cached: each family
    and count compiles once per file)."""
    maze = HELDOUT_MAZES[name]
    levels = jax.jit(jax.vmap(maze.sample))(jax.random.split(jax.random.key(seed), count))
    return jax.tree.map(np.asarray, levels)


def test_start_and_goal_take_different_cells_when_only_two_are_free():
    # With two free cells a start allowed onto the goal would share it about half of the time.
    wall_map = jnp.ones((3, 4), bool).at[0, 1].set(False).at[2, 3].set(False)
    goals, agents, _ = jax.jit(jax.vmap(_random_free_start_and_goal, (0, None)))(
        jax.random.split(jax.random.key(0), 64), wall_map
    )
    pairs = set(zip(map(tuple, np.asarray(goals).tolist()), map(tuple, np.asarray(agents).tolist()), strict=True))
    assert pairs == {((1, 0), (3, 2)), ((3, 2), (1, 0))}


@pytest.mark.parametrize("name", ["FourRooms", "PerfectMaze"])
def test_random_starts_face_every_direction(name):
    directions = sample_levels(name, 64).agent_dir
    assert set(directions.tolist()) == {0, 1, 2, 3}


@pytest.mark.parametrize("name", ["SmallCorridor", "LargeCorridor"])
def test_corridor_goals_are_the_inner_ends_of_every_tooth(name):
    levels = sample_levels(name, 500)
    size = HELDOUT_MAZES[name].height
    middle = size // 2
    # The comb: wall columns at odd x inside the border columns, a wall row across the middle; the teeth are the
    # free even columns x = 2, 4, ..., size - 3 between them, cut in two by the middle row. A tooth's inner end
    # touches the middle wall, one cell above or below it.
    expected_walls = np.zeros((size, size), bool)
    for y in range(1, size - 1):
        for x in range(1, size - 1):
            expected_walls[y, x] = x % 2 == 1 or y == middle
    teeth = range(2, size - 2, 2)
    inner_ends = {(x, middle + side) for x in teeth for side in (-1, 1)}
    assert (levels.wall_map == expected_walls).all()
    goals = {tuple(goal) for goal in levels.goal_pos.tolist()}
    assert goals == inner_ends, "every inner end is drawn, and nothing else"
    # Start fixed at the left end of the middle row, facing right (+x).
    assert (levels.agent_pos == [0, middle]).all() and (levels.agent_dir == 0).all()


def test_four_rooms_have_one_door_in_each_arm_of_the_cross():
    levels = sample_levels("FourRooms", 256)
    size = HELDOUT_MAZES["FourRooms"].height
    middle = size // 2
    walls = levels.wall_map
    off_cross = np.ones((size, size), bool)
    off_cross[middle, :] = off_cross[:, middle] = False
    assert not walls[:, off_cross].any(), "the rooms are empty"
    assert walls[:, middle, middle].all(), "the centre of the cross is no door"
    arms = {
        "left": walls[:, middle, :middle],
        "right": walls[:, middle, middle + 1 :],
        "top": walls[:, :middle, middle],
        "bottom": walls[:, middle + 1 :, middle],
    }
    for arm, cells in arms.items():
        np.testing.assert_array_equal((~cells).sum(axis=1), 1, err_msg=f"{arm} arm")
        # A door anywhere along the arm, not only at one end.
        assert len(set(np.argmin(cells, axis=1).tolist())) == middle, f"{arm} arm"


def test_crossing_has_the_configured_wall_lines_each_crossed_once():
    levels = sample_levels("Crossing", 128)
    size, num_crossings = HELDOUT_MAZES["Crossing"].height, 5  # _crossing()'s default number of wall lines
    for walls in levels.wall_map:
        # A full wall line (an odd row or column) is crossed once by the monotone path, so it keeps size - 1
        # walls; any other row or column holds only where the wall lines across it cut it (at most 4 cells).
        row_lines = [y for y in range(size) if walls[y].sum() >= size - 1]
        col_lines = [x for x in range(size) if walls[:, x].sum() >= size - 1]
        assert len(row_lines) + len(col_lines) == num_crossings
        assert all(line % 2 == 1 for line in row_lines + col_lines)
        for y in row_lines:
            assert walls[y].sum() == size - 1
        for x in col_lines:
            assert walls[:, x].sum() == size - 1
        line_cells = np.zeros((size, size), bool)
        line_cells[row_lines, :] = True
        line_cells[:, col_lines] = True
        assert not (walls & ~line_cells).any(), "every wall belongs to a wall line"
        assert (size - 1, size - 1) in free_graph(walls)[2], "the goal is reachable from the start"
    # Start fixed at the top left facing right (+x), goal at the bottom right.
    assert (levels.agent_pos == [0, 0]).all() and (levels.agent_dir == 0).all()
    assert (levels.goal_pos == [size - 1, size - 1]).all()


def free_graph(walls: np.ndarray) -> tuple[int, int, set]:
    """(free cells, edges between 4-adjacent free cells, cells reachable from the first free cell) by BFS."""
    height, width = walls.shape
    free = {(x, y) for y in range(height) for x in range(width) if not walls[y, x]}
    edges = sum((x + 1, y) in free for x, y in free) + sum((x, y + 1) in free for x, y in free)
    start = min(free)
    reached, queue = {start}, deque([start])
    while queue:
        x, y = queue.popleft()
        for dx, dy in DIR_TO_VEC.tolist():
            cell = (x + dx, y + dy)
            if cell in free and cell not in reached:
                reached.add(cell)
                queue.append(cell)
    return len(free), edges, reached


@pytest.mark.parametrize("name", ["PerfectMaze", "PerfectMazeMedium"])
def test_perfect_mazes_are_spanning_trees(name):
    levels = sample_levels(name, 16)
    for walls, agent, goal in zip(levels.wall_map, levels.agent_pos, levels.goal_pos, strict=True):
        cells, edges, reached = free_graph(walls)
        assert len(reached) == cells, "every free cell is reachable"
        assert edges == cells - 1, "no loops: the free cells form a tree"
        assert tuple(agent) in reached and tuple(goal) in reached and tuple(agent) != tuple(goal)


def test_perfect_mazes_are_random_beyond_their_first_cell():
    # The search starts from one of 7 x 7 cells of PerfectMaze; a search whose only randomness was that cell
    # would give at most 49 mazes, so 64 keys would repeat one.
    walls = sample_levels("PerfectMaze", 64).wall_map
    assert len({maze.tobytes() for maze in walls}) == 64


GOLDEN_LEVELS = [
    # (family, key, agent (x, y), agent_dir, goal (x, y), sha256 of np.packbits(wall_map), first 12 hex digits)
    ("SmallCorridor", 0, (0, 6), 0, (10, 7), "83bd1dc246b0"),
    ("SmallCorridor", 1, (0, 6), 0, (4, 7), "83bd1dc246b0"),
    ("SmallCorridor", 2, (0, 6), 0, (10, 7), "83bd1dc246b0"),
    ("SmallCorridor", 3, (0, 6), 0, (2, 7), "83bd1dc246b0"),
    ("FourRooms", 0, (3, 1), 2, (5, 14), "1e16ba41d57d"),
    ("FourRooms", 1, (12, 3), 0, (15, 14), "70e96fd86168"),
    ("FourRooms", 2, (4, 9), 2, (11, 13), "11de7a161000"),
    ("FourRooms", 3, (7, 0), 0, (11, 11), "422a5d66a1c9"),
    ("Crossing", 0, (0, 0), 0, (8, 8), "034317ace22a"),
    ("Crossing", 1, (0, 0), 0, (8, 8), "a1e32fe23e61"),
    ("Crossing", 2, (0, 0), 0, (8, 8), "9cfac8a42ae8"),
    ("Crossing", 3, (0, 0), 0, (8, 8), "31914e5fcca7"),
    ("PerfectMaze", 0, (8, 4), 0, (0, 1), "cae11d981d00"),
    ("PerfectMaze", 1, (7, 12), 2, (11, 12), "9e932d169eb6"),
    ("PerfectMaze", 2, (4, 11), 2, (8, 11), "0bed9c3f1934"),
    ("PerfectMaze", 3, (7, 12), 1, (0, 8), "2e5c185d2b6b"),
]


@pytest.mark.parametrize("name", sorted({row[0] for row in GOLDEN_LEVELS}))
def test_procedural_levels_match_the_recorded_table(name):
    """A regression fixture, recorded at commit c2c6e20 with JAX 0.10.2 from `key(0)` .. `key(3)`: it pins which
    key draws what (the goal, the start, its direction, the search's first cell), which the invariants above cannot
    see: a draw made with another draw's key (the start's y with its x's key, the agent with the goal's) still gives
    levels of the right kind, only correlated ones. Re-record it only for a deliberate change of the generators or of
    JAX's random bits."""
    maze = HELDOUT_MAZES[name]
    levels = jax.tree.map(np.asarray, jax.jit(jax.vmap(maze.sample))(jax.vmap(jax.random.key)(jnp.arange(4))))
    for family, key, agent, agent_dir, goal, wall_hash in GOLDEN_LEVELS:
        if family != name:
            continue
        assert tuple(levels.agent_pos[key].tolist()) == agent, key
        assert int(levels.agent_dir[key]) == agent_dir, key
        assert tuple(levels.goal_pos[key].tolist()) == goal, key
        assert hashlib.sha256(np.packbits(levels.wall_map[key]).tobytes()).hexdigest()[:12] == wall_hash, key


def reference_triangle(tile_size: int, direction: int) -> np.ndarray:
    """bool[tile, tile]: pixel centres inside MiniGrid's agent triangle (tip 0.38 of a tile ahead of the centre,
    base 0.38 behind it, 0.31 to either side) turned to face `direction`, by the signs of three cross products."""
    forward, right = DIR_TO_VEC[direction], DIR_TO_VEC[(direction + 1) % 4]
    corners = [0.5 + ahead * forward + side * right for ahead, side in [(0.38, 0.0), (-0.38, -0.31), (-0.38, 0.31)]]
    mask = np.zeros((tile_size, tile_size), bool)
    for row in range(tile_size):
        for col in range(tile_size):
            px, py = (col + 0.5) / tile_size, (row + 0.5) / tile_size
            signs = []
            for (ax, ay), (bx, by) in zip(corners, corners[1:] + corners[:1], strict=True):
                signs.append((bx - ax) * (py - ay) - (by - ay) * (px - ax))
            mask[row, col] = all(s >= 0 for s in signs) or all(s <= 0 for s in signs)
    return mask


@pytest.mark.parametrize("direction", [0, 1, 2, 3])
def test_agent_triangle_points_its_way(direction):
    level = make_level(np.zeros((5, 5), bool), (4, 4), (2, 2), direction)
    tile = 16
    image = render_level(level, tile_size=tile)
    agent_tile = image[3 * tile : 4 * tile, 3 * tile : 4 * tile]  # (2, 2) -> tile (3, 3) with the border
    red = (agent_tile[..., 0] == 255) & (agent_tile[..., 1] < 120)
    np.testing.assert_array_equal(red, reference_triangle(tile, direction))


@pytest.mark.parametrize(
    ("agent", "direction", "view_size"), [((3, 3), 0, 5), ((6, 2), 1, 5), ((1, 5), 2, 3), ((0, 0), 3, 5)]
)
def test_view_shading_covers_exactly_the_agents_view(agent, direction, view_size):
    size, tile = 7, 12
    walls = np.zeros((size, size), bool)
    walls[4, 2] = True
    level = make_level(walls, (size - 1, size - 1), agent, direction)
    image = render_level(level, tile_size=tile, agent_view_size=view_size)
    # The view in picture cells: the env's offsets from the agent, moved one cell by the border, clipped to the picture.
    view = view_offsets(view_size)[direction].reshape(-1, 2) + np.array(agent) + 1
    expected = {(x, y) for x, y in view.tolist() if 0 <= x < size + 2 and 0 <= y < size + 2}
    # MiniGrid blends visible cells 30% toward white: floor 0 -> 76, wall 100 -> 146 (truncated), goal red 0 -> 76.
    # Pixel (1, 1) of a tile is off the grid lines and the agent's glyph.
    corner = image[1::tile, 1::tile, 0]
    shaded = {(x, y) for y, x in zip(*np.nonzero(np.isin(corner, [76, 146])), strict=True)}
    assert shaded == expected
    assert np.isin(corner, [0, 76, 100, 146]).all()
    for x, y in expected:
        if (x, y) == (size, size):
            colour = [76, 255, 76]  # the goal
        elif x in (0, size + 1) or y in (0, size + 1) or walls[y - 1, x - 1]:
            colour = [146, 146, 146]
        else:
            colour = [76, 76, 76]
        assert image[y * tile + 1, x * tile + 1].tolist() == colour, (x, y)
