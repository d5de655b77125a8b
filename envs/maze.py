"""AMaze: the partially observable MiniGrid maze of the UED papers, as pure JAX functions.

Semantics follow docs/amaze.md (minimax-lib 0.2.0 `minimax.envs.maze`, itself a port of the
MiniGrid mazes of facebookresearch/dcd). Positions are (x, y); `wall_map[y, x]`; directions
0 = +x (right), 1 = +y (down), 2 = -x (left), 3 = -y (up). The 1-tile border wall of MiniGrid is
implicit: moves off the interior are blocked and cells outside it look like walls.

API (gymnax-like, explicit params, UED reset):
    obs, state = reset_to_level(rng, level, params)
    obs, state, reward, done, info = step(rng, state, action, params)
The base `step` never resets; `step_and_restart` replays the same level on done (PLR replay,
PAIRED students, evaluation) and `step_and_next_level` starts the next of the fresh levels made for the env
in advance (DR's auto-reset, with no level generation and no data-dependent loop inside the step).
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

NUM_ACTIONS = 7
"""MiniGrid's action set: 0 left, 1 right, 2 forward, 3..6 (pickup, drop, toggle, done) do nothing."""
ACTION_LEFT, ACTION_RIGHT, ACTION_FORWARD = 0, 1, 2

OBJECT_EMPTY, OBJECT_WALL, OBJECT_GOAL, OBJECT_AGENT = 1, 2, 8, 10
COLOR_RED, COLOR_GREEN, COLOR_GREY = 0, 1, 5
EMPTY_CELL = (OBJECT_EMPTY, 0, 0)
WALL_CELL = (OBJECT_WALL, COLOR_GREY, 0)
GOAL_CELL = (OBJECT_GOAL, COLOR_GREEN, 0)

DIR_TO_VEC = np.array([(1, 0), (0, 1), (-1, 0), (0, -1)], dtype=np.int32)


@struct.dataclass
class Level:
    """One maze: walls, goal, and the agent's start. Shapes fix the interior size (static)."""

    wall_map: jax.Array  # bool[H, W], indexed [y, x]
    goal_pos: jax.Array  # int32[2], (x, y)
    agent_pos: jax.Array  # int32[2], (x, y)
    agent_dir: jax.Array  # int32[], 0..3

    @property
    def height(self) -> int:
        return self.wall_map.shape[-2]

    @property
    def width(self) -> int:
        return self.wall_map.shape[-1]


@struct.dataclass
class EnvParams:
    """Episode length is data (a traced leaf); view size and observation format fix shapes (static)."""

    max_steps: int = 250
    agent_view_size: int = struct.field(pytree_node=False, default=5)
    see_agent: bool = struct.field(pytree_node=False, default=False)
    normalize_obs: bool = struct.field(pytree_node=False, default=True)


@struct.dataclass
class EnvState:
    level: Level  # the start state, kept so an episode can be restarted
    agent_pos: jax.Array  # int32[2]
    agent_dir: jax.Array  # int32[]
    time: jax.Array  # int32[], steps taken in this episode


@struct.dataclass
class Observation:
    image: jax.Array  # [V, V, 3]: uint8 MiniGrid encoding, or float32 image / 10 with normalize_obs
    agent_dir: jax.Array  # int32[]


def make_level(wall_map, goal_pos, agent_pos, agent_dir) -> Level:
    """A `Level` with the canonical dtypes from any array-likes."""
    return Level(
        wall_map=jnp.asarray(wall_map, dtype=bool),
        goal_pos=jnp.asarray(goal_pos, dtype=jnp.int32),
        agent_pos=jnp.asarray(agent_pos, dtype=jnp.int32),
        agent_dir=jnp.asarray(agent_dir, dtype=jnp.int32),
    )


def view_offsets(agent_view_size: int) -> np.ndarray:
    """int32[4, V, V, 2]: (dx, dy) from the agent to each view cell, per facing direction.

    `image[r, c]` is `V-1-r` cells ahead and `c - V//2` cells to the right, so the agent stands at the
    bottom centre looking toward row 0 (MiniGrid's egocentric layout).
    """
    size = agent_view_size
    ahead = (size - 1 - np.arange(size))[:, None]  # [V, 1]
    right = (np.arange(size) - size // 2)[None, :]  # [1, V]
    offsets = np.zeros((4, size, size, 2), dtype=np.int32)
    for direction, forward in enumerate(DIR_TO_VEC):
        right_vec = DIR_TO_VEC[(direction + 1) % 4]
        offsets[direction] = ahead[..., None] * forward + right[..., None] * right_vec
    return offsets


def get_obs(state: EnvState, params: EnvParams) -> Observation:
    """The agent's V x V view, gathered cell by cell so its cost does not depend on the maze size."""
    level = state.level
    height, width = level.wall_map.shape
    size = params.agent_view_size
    cells = state.agent_pos + jnp.asarray(view_offsets(size))[state.agent_dir]  # [V, V, 2]
    x, y = cells[..., 0], cells[..., 1]
    inside = (x >= 0) & (x < width) & (y >= 0) & (y < height)
    # Walls do not block sight (see_through_walls=True in every shipped config); outside reads as wall.
    wall = jnp.where(inside, level.wall_map[jnp.clip(y, 0, height - 1), jnp.clip(x, 0, width - 1)], True)
    goal = (x == level.goal_pos[0]) & (y == level.goal_pos[1])
    table = jnp.asarray([EMPTY_CELL, WALL_CELL, GOAL_CELL], dtype=jnp.uint8)
    image = table[jnp.where(goal, 2, wall.astype(jnp.int32))]  # [V, V, 3]
    if params.see_agent:
        agent = jnp.stack([OBJECT_AGENT, COLOR_RED, state.agent_dir]).astype(jnp.uint8)
        image = image.at[size - 1, size // 2].set(agent)
    if params.normalize_obs:
        image = image.astype(jnp.float32) / 10.0
    return Observation(image=image, agent_dir=state.agent_dir)


def reset_to_level(rng: jax.Array, level: Level, params: EnvParams) -> tuple[Observation, EnvState]:
    """Start an episode at `level`'s start state. `rng` is unused: resets are deterministic."""
    del rng
    state = EnvState(level=level, agent_pos=level.agent_pos, agent_dir=level.agent_dir, time=jnp.int32(0))
    return get_obs(state, params), state


def goal_reward(time: jax.Array, max_steps: jax.Array | int) -> jax.Array:
    """float32 reward for reaching the goal at step `time` (1-based) of an episode of at most `max_steps`."""
    return (1.0 - 0.9 * (jnp.asarray(time, jnp.int32) / max_steps)).astype(jnp.float32)


def step(rng: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
    """One MiniGrid step; never resets. Returns (obs, state, reward, done, info).

    Reward on reaching the goal at step count t (this step included) is `1 - 0.9 * t / max_steps`;
    the agent stays in front of the goal (minimax) and the episode ends. Time-limit endings are
    terminal too (no bootstrap), as in minimax.
    """
    del rng
    level = state.level
    height, width = level.wall_map.shape
    turned_dir = jnp.where(
        action == ACTION_LEFT,
        (state.agent_dir - 1) % 4,
        jnp.where(action == ACTION_RIGHT, (state.agent_dir + 1) % 4, state.agent_dir),
    )
    target = state.agent_pos + jnp.asarray(DIR_TO_VEC)[state.agent_dir]
    target = jnp.clip(target, 0, jnp.array([width - 1, height - 1]))
    forward = action == ACTION_FORWARD
    hits_goal = jnp.all(target == level.goal_pos)
    hits_wall = level.wall_map[target[1], target[0]]
    moves = forward & ~hits_goal & ~hits_wall
    success = forward & hits_goal

    time = state.time + 1
    reward = jnp.where(success, goal_reward(time, params.max_steps), 0.0)
    done = success | (time >= params.max_steps)
    state = state.replace(agent_pos=jnp.where(moves, target, state.agent_pos), agent_dir=turned_dir, time=time)
    return get_obs(state, params), state, reward, done, {"success": success}


def _select(done: jax.Array, on_done, otherwise):
    return jax.tree.map(lambda a, b: jnp.where(done, a, b), on_done, otherwise)


def step_and_restart(rng: jax.Array, state: EnvState, action: jax.Array, params: EnvParams):
    """`step`, then on done restart the same level; the returned obs is the restarted level's first.

    Only the episode fields are selected, never the level, so the cost does not grow with the maze."""
    obs, next_state, reward, done, info = step(rng, state, action, params)
    obs_reset, state_reset = reset_to_level(rng, state.level, params)
    obs = _select(done, obs_reset, obs)
    episode = _select(
        done,
        (state_reset.agent_pos, state_reset.agent_dir, state_reset.time),
        (next_state.agent_pos, next_state.agent_dir, next_state.time),
    )
    next_state = next_state.replace(agent_pos=episode[0], agent_dir=episode[1], time=episode[2])
    return obs, next_state, reward, done, info


@struct.dataclass
class FreshLevelsState:
    """An env that starts each new episode on the next of the fresh levels made for it in advance (DR)."""

    env: EnvState
    levels: Level  # leaves [L, ...]: the levels of its episodes, in order
    started: jax.Array  # int32[], episodes started so far (the one running included)


def reset_to_fresh_levels(rng: jax.Array, levels: Level, params: EnvParams) -> tuple[Observation, FreshLevelsState]:
    """Start the first episode on `levels[0]`; `levels` (leading axis L) are the levels of this and later episodes."""
    obs, state = reset_to_level(rng, jax.tree.map(lambda x: x[0], levels), params)
    return obs, FreshLevelsState(env=state, levels=levels, started=jnp.int32(1))


def step_and_next_level(rng: jax.Array, state: FreshLevelsState, action: jax.Array, params: EnvParams):
    """`step`, then on done start the next of the env's fresh levels, so every episode plays a level of its own,
    as auto-resetting to a level generated on the spot would, with no generation inside the step: the levels are
    made in advance, all at once. An env that ends more episodes than it has levels starts over at its first;
    `info["reused_level"]` flags such a reset. The returned obs is the new episode's first."""
    obs, next_env, reward, done, info = step(rng, state.env, action, params)
    num_levels = jax.tree.leaves(state.levels)[0].shape[0]
    next_level = jax.tree.map(lambda x: x[state.started % num_levels], state.levels)
    obs_reset, env_reset = reset_to_level(rng, next_level, params)
    obs, next_env = _select(done, (obs_reset, env_reset), (obs, next_env))
    info = {**info, "reused_level": done & (state.started >= num_levels)}
    return obs, state.replace(env=next_env, started=state.started + done), reward, done, info
