"""Host-side pictures of levels and rollouts in the MiniGrid look (numpy + Pillow; never inside `jit`).

Grey walls (the border included), a green goal, a red triangle for the agent pointing its way, and the
agent's V x V view shaded lighter. Levels and states may be jax or numpy arrays.
"""

import operator
from collections.abc import Iterable, Iterator
from pathlib import Path

import jax
import numpy as np
from PIL import Image, ImageDraw

from envs.maze import view_offsets

WALL_RGB = np.array([100, 100, 100], np.uint8)
GOAL_RGB = np.array([0, 255, 0], np.uint8)
AGENT_RGB = np.array([255, 0, 0], np.uint8)
GRID_LINE_RGB = np.array([100, 100, 100], np.uint8)
VIEW_HIGHLIGHT = 0.3  # MiniGrid blends the visible cells 30% toward white
MIN_CELL_PIXELS = 12  # below this the agent's triangle and the grid lines blur together
LABEL_PIXELS = 12  # a line of Pillow's default font under each level of a grid


def _triangle_mask(tile_size: int) -> np.ndarray:
    """bool[tile, tile]: a triangle pointing right (+x), MiniGrid's agent glyph."""
    coords = (np.arange(tile_size) + 0.5) / tile_size
    y, x = np.meshgrid(coords, coords, indexing="ij")
    # Tip at (0.88, 0.5), base from (0.12, 0.19) to (0.12, 0.81), as in MiniGrid.
    slope = (0.5 - 0.19) / (0.88 - 0.12)
    return (x >= 0.12) & (x <= 0.88) & (np.abs(y - 0.5) <= slope * (0.88 - x))


def render_level(
    level, agent_pos=None, agent_dir=None, tile_size: int = 16, agent_view_size: int = 5, window: int | None = None
) -> np.ndarray:
    """uint8[(H+2) * tile, (W+2) * tile, 3]: the level with its border; the agent at `agent_pos`/`agent_dir`
    (default: the level's start) with its view shaded. With `window`, only `window` x `window` cells around the
    agent (kept inside the bordered maze) are drawn: cropped before the cells become pixels, so a 101x101 maze
    costs a window's memory, not the whole maze's."""
    walls = np.asarray(level.wall_map, bool)
    height, width = walls.shape
    agent_x, agent_y = np.asarray(level.agent_pos if agent_pos is None else agent_pos).tolist()
    direction = int(level.agent_dir if agent_dir is None else agent_dir)
    goal_x, goal_y = np.asarray(level.goal_pos).tolist()

    cells = np.zeros((height + 2, width + 2, 3), np.uint8)
    bordered_walls = np.ones((height + 2, width + 2), bool)
    bordered_walls[1:-1, 1:-1] = walls
    cells[bordered_walls] = WALL_RGB
    cells[goal_y + 1, goal_x + 1] = GOAL_RGB

    visible = np.zeros((height + 2, width + 2), bool)
    view = view_offsets(agent_view_size)[direction].reshape(-1, 2) + np.array([agent_x, agent_y]) + 1
    inside = (view >= 0).all(axis=1) & (view[:, 0] < width + 2) & (view[:, 1] < height + 2)
    visible[view[inside, 1], view[inside, 0]] = True

    agent_col, agent_row = agent_x + 1, agent_y + 1
    if window is not None:
        left = int(np.clip(agent_col - window // 2, 0, max(width + 2 - window, 0)))
        top = int(np.clip(agent_row - window // 2, 0, max(height + 2 - window, 0)))
        crop = np.s_[top : top + window, left : left + window]
        cells, bordered_walls, visible = cells[crop], bordered_walls[crop], visible[crop]
        agent_col, agent_row = agent_col - left, agent_row - top

    image = np.repeat(np.repeat(cells, tile_size, axis=0), tile_size, axis=1)
    floor = np.repeat(np.repeat(~bordered_walls, tile_size, axis=0), tile_size, axis=1)
    grid_lines = np.zeros_like(floor)
    grid_lines[::tile_size, :] = True
    grid_lines[:, ::tile_size] = True
    image[floor & grid_lines] = GRID_LINE_RGB
    tile_y, tile_x = agent_row * tile_size, agent_col * tile_size
    agent_tile = image[tile_y : tile_y + tile_size, tile_x : tile_x + tile_size]
    # np.rot90 turns counter-clockwise in array (y-down) coordinates, so k = -direction.
    agent_tile[np.rot90(_triangle_mask(tile_size), k=-direction)] = AGENT_RGB
    shade = np.repeat(np.repeat(visible, tile_size, axis=0), tile_size, axis=1)
    image[shade] = (image[shade] + (255 - image[shade].astype(np.float32)) * VIEW_HIGHLIGHT).astype(np.uint8)
    return image


def render_grid(
    levels, columns: int | None = None, tile_size: int = MIN_CELL_PIXELS, padding: int = 4, labels=None
) -> np.ndarray:
    """One image of a batch of levels (leading axis), `columns` per row (default: about square), cells at least
    MIN_CELL_PIXELS wide; `labels` (one short string per level) are written under the levels."""
    levels = jax.tree.map(np.asarray, levels)
    count = levels.wall_map.shape[0]
    columns = columns or int(np.ceil(np.sqrt(count)))
    rows = int(np.ceil(count / columns))
    tile_size = max(tile_size, MIN_CELL_PIXELS)
    tiles = [render_level(jax.tree.map(operator.itemgetter(i), levels), tile_size=tile_size) for i in range(count)]
    tile_h, tile_w, _ = tiles[0].shape
    label_h = LABEL_PIXELS if labels is not None else 0
    cell_h = tile_h + label_h + padding
    canvas = np.full((rows * cell_h + padding, columns * (tile_w + padding) + padding, 3), 255, np.uint8)
    for i, tile in enumerate(tiles):
        row, col = divmod(i, columns)
        top, left = padding + row * cell_h, padding + col * (tile_w + padding)
        canvas[top : top + tile_h, left : left + tile_w] = tile
    if labels is None:
        return canvas
    image = Image.fromarray(canvas)
    draw = ImageDraw.Draw(image)
    for i, label in enumerate(labels):
        row, col = divmod(i, columns)
        draw.text((padding + col * (tile_w + padding), padding + row * cell_h + tile_h + 1), label, fill=(0, 0, 0))
    return np.asarray(image)


def render_rollout(
    level, agent_positions, agent_dirs, tile_size: int = 16, window: int | None = None
) -> Iterator[np.ndarray]:
    """One frame per recorded state: `agent_positions` [T, 2] and `agent_dirs` [T], made as they are read (a GIF
    of 600 frames then never holds them all as RGB). With `window`, each frame shows only `window` x `window`
    cells around the agent (kept inside the maze), so big mazes stay readable."""
    positions, directions = np.asarray(agent_positions), np.asarray(agent_dirs)
    return (render_level(level, positions[t], directions[t], tile_size, window=window) for t in range(len(positions)))


def save_png(image: np.ndarray, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path)
    return path


def save_gif(frames: Iterable[np.ndarray], path, frame_ms: int = 100) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = (Image.fromarray(frame) for frame in frames)
    next(images).save(path, save_all=True, append_images=images, duration=frame_ms, loop=0)
    return path
