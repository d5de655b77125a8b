"""Random-policy throughput of JaxUED's Maze (the PyPI wheel, jaxued 0.0.1), the protocol of bench_env.py; run by
`bench_jaxued.py` with the Python of the JaxUED virtual environment, or by `gpu_suite.py` with its own (the project's
jax, jaxued installed beside it), never imported by our code.

The env is `jaxued.environments.Maze` as JaxUED's examples build it (13x13, agent view 5, normalized
observations, 250-step episodes). `--wrapper resample` is `AutoResetWrapper` with `make_level_generator(13, 13,
n_walls)`, what examples/maze_dr.py trains on (a fresh random level wherever an episode ends); `--wrapper restart`
is `AutoReplayWrapper` (the same level again), what examples/maze_plr.py and maze_paired.py train on. Random
actions over the env's action space (7, MiniGrid's set); each step's observation enters the result. Prints one
JSON line per env count.

    <jaxued venv>/bin/python benchmarks/peers/jaxued_env_worker.py --num-envs 32 1024 --wrapper resample
"""

import argparse
import json
import sys
from pathlib import Path

# SCAFFOLDING: the env timing protocol lives with AMaze's own env benchmark, benchmarks/speed/env_timing.py (jax and
# the standard library only), which this worker shares with a peer's Python.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "speed"))

import jax
import jax.numpy as jnp
from env_timing import describe_peer, time_rollout
from jaxued.environments import Maze
from jaxued.environments.maze import make_level_generator
from jaxued.wrappers import AutoReplayWrapper, AutoResetWrapper
from jaxued_worker import alias_tree_map

SIZE = 13
"""examples/maze_*.py: Maze(max_height=13, max_width=13, ...)."""


def make_rollout(num_envs: int, num_steps: int, n_walls: int, restart: bool):
    base = Maze(max_height=SIZE, max_width=SIZE, agent_view_size=5, normalize_obs=True)
    sample_level = make_level_generator(SIZE, SIZE, n_walls)
    env = AutoReplayWrapper(base) if restart else AutoResetWrapper(base, sample_level)
    params = env.default_params
    num_actions = env.action_space(params).n

    def rollout(rng):
        rng_levels, rng_reset, rng_steps = jax.random.split(rng, 3)
        levels = jax.vmap(sample_level)(jax.random.split(rng_levels, num_envs))
        _, state = jax.vmap(env.reset_to_level, (0, 0, None))(jax.random.split(rng_reset, num_envs), levels, params)

        def body(carry, rng_step):
            state, total = carry
            rng_action, rng_env = jax.random.split(rng_step)
            actions = jax.random.randint(rng_action, (num_envs,), 0, num_actions)
            obs, state, reward, _, _ = jax.vmap(env.step, (0, 0, 0, None))(
                jax.random.split(rng_env, num_envs), state, actions, params
            )
            return (state, total + reward.sum() + obs.image.sum()), None

        (_, total), _ = jax.lax.scan(body, (state, jnp.float32(0)), jax.random.split(rng_steps, num_steps))
        return total

    return jax.jit(rollout)


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("--num-envs", type=int, nargs="+", default=[32, 1024])
    cli.add_argument("--num-steps", type=int, default=256)
    cli.add_argument("--repeats", type=int, default=5)
    cli.add_argument("--n-walls", type=int, default=60)
    cli.add_argument("--wrapper", choices=["resample", "restart"], default="resample")
    options = cli.parse_args()
    alias_tree_map(jax)
    for num_envs in options.num_envs:
        rollout = make_rollout(num_envs, options.num_steps, options.n_walls, options.wrapper == "restart")
        timing = time_rollout(rollout, jax.random.PRNGKey, options.repeats)
        result = {
            "bench": "env",
            "impl": "jaxued",
            "wrapper": options.wrapper,
            "size": SIZE,
            "n_walls": options.n_walls,
            **timing.report(num_envs, options.num_steps),
            **describe_peer("jaxued"),
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
