"""The PAIRED teacher (adversary) env: design one maze, one cell per step (docs/amaze.md, minimax's `UEDMaze`
with `fixed_n_wall_steps=True, replace_wall_pos=True, set_agent_dir=False`).

An episode has `n_walls + 2` steps; the action is a cell index `y * W + x`. Steps 0..n_walls-1 place
walls (repeats allowed), the next step the goal, the last the agent; the goal and the agent clear a
wall under them, and an agent placed on the goal moves to a random free cell. The start direction is
drawn at reset, not chosen. The observation is the map so far with its border wall, the step count and
fresh U(0, 1) noise every step. Rewards come from the UED algorithm, so `step` returns none.
"""

import jax
import jax.numpy as jnp
from flax import struct

from envs.levels import sample_cell
from envs.maze import COLOR_RED, EMPTY_CELL, GOAL_CELL, OBJECT_AGENT, WALL_CELL, Level, make_level


@struct.dataclass
class TeacherParams:
    height: int = struct.field(pytree_node=False, default=13)
    width: int = struct.field(pytree_node=False, default=13)
    n_walls: int = struct.field(pytree_node=False, default=60)
    noise_dim: int = struct.field(pytree_node=False, default=50)
    normalize_obs: bool = struct.field(pytree_node=False, default=True)

    @property
    def num_actions(self) -> int:
        return self.height * self.width

    @property
    def episode_steps(self) -> int:
        return self.n_walls + 2


@struct.dataclass
class TeacherState:
    wall_map: jax.Array  # bool[H, W], walls placed so far (cleared under goal and agent)
    goal_pos: jax.Array  # int32[2]; (W, H), off the grid, until placed
    agent_pos: jax.Array  # int32[2]; (W, H) until placed
    agent_dir: jax.Array  # int32[], drawn at reset
    time: jax.Array  # int32[], design steps taken


@struct.dataclass
class TeacherObservation:
    image: jax.Array  # [H+2, W+2, 3] uint8, or float32 / 10 with normalize_obs
    time: jax.Array  # int32[]
    noise: jax.Array  # float32[noise_dim], U(0, 1), fresh each step


def _image(state: TeacherState, params: TeacherParams) -> jax.Array:
    table = jnp.asarray([EMPTY_CELL, WALL_CELL], dtype=jnp.uint8)
    image = table[state.wall_map.astype(jnp.int32)]
    agent = jnp.stack([OBJECT_AGENT, COLOR_RED, state.agent_dir]).astype(jnp.uint8)
    # Unplaced agent and goal sit at (W, H), off the grid: mode="drop" leaves them out of the picture.
    image = image.at[state.agent_pos[1], state.agent_pos[0]].set(agent, mode="drop")
    image = image.at[state.goal_pos[1], state.goal_pos[0]].set(jnp.asarray(GOAL_CELL, jnp.uint8), mode="drop")
    image = jnp.pad(image, ((1, 1), (1, 1), (0, 0)))
    border = jnp.ones(image.shape[:2], bool).at[1:-1, 1:-1].set(False)
    image = jnp.where(border[..., None], jnp.asarray(WALL_CELL, jnp.uint8), image)
    return image.astype(jnp.float32) / 10.0 if params.normalize_obs else image


def get_obs(rng_noise: jax.Array, state: TeacherState, params: TeacherParams) -> TeacherObservation:
    noise = jax.random.uniform(rng_noise, (params.noise_dim,))
    return TeacherObservation(image=_image(state, params), time=state.time, noise=noise)


def reset(rng: jax.Array, params: TeacherParams) -> tuple[TeacherObservation, TeacherState]:
    rng_noise, rng_dir = jax.random.split(rng)
    off_grid = jnp.array([params.width, params.height], jnp.int32)
    state = TeacherState(
        wall_map=jnp.zeros((params.height, params.width), bool),
        goal_pos=off_grid,
        agent_pos=off_grid,
        agent_dir=jax.random.randint(rng_dir, (), 0, 4),
        time=jnp.int32(0),
    )
    return get_obs(rng_noise, state, params), state


def step(rng: jax.Array, state: TeacherState, action: jax.Array, params: TeacherParams):
    """Place one cell. Returns (obs, state, done); `done` is True after the agent is placed."""
    rng_collision, rng_noise = jax.random.split(rng)
    width = params.width
    cells = jnp.arange(params.height * width)
    goal_cell = state.goal_pos[1] * width + state.goal_pos[0]
    is_wall_step = state.time < params.n_walls
    is_goal_step = state.time == params.n_walls
    is_agent_step = state.time == params.n_walls + 1
    free = ~state.wall_map.reshape(-1) & (cells != goal_cell)
    relocated = sample_cell(rng_collision, free)
    cell = jnp.where(is_agent_step & (action == goal_cell), relocated, action)
    pos = jnp.stack([cell % width, cell // width]).astype(jnp.int32)

    placed_wall = state.wall_map.at[pos[1], pos[0]].set(True)
    cleared = state.wall_map.at[pos[1], pos[0]].set(False)
    next_state = state.replace(
        wall_map=jnp.where(is_wall_step, placed_wall, jnp.where(is_goal_step | is_agent_step, cleared, state.wall_map)),
        goal_pos=jnp.where(is_goal_step, pos, state.goal_pos),
        agent_pos=jnp.where(is_agent_step, pos, state.agent_pos),
        time=state.time + 1,
    )
    done = next_state.time >= params.episode_steps
    return get_obs(rng_noise, next_state, params), next_state, done


def to_level(state: TeacherState) -> Level:
    """The designed level of a finished episode."""
    return make_level(state.wall_map, state.goal_pos, state.agent_pos, state.agent_dir)
