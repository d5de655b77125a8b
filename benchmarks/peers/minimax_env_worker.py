"""Random-policy throughput of minimax-lib 0.2.0's AMaze, the protocol of bench_env.py; run by
`bench_env.py --minimax` with the Python of the minimax virtual environment, never imported by our code.

The env is minimax's `Maze` with the shipped DR settings (13x13, 60 walls, replace_wall_pos, 250-step
episodes, normalized observations). `--wrapper resample` is its default auto-reset (a fresh random level
wherever an episode ends, as DR trains); `--wrapper restart` passes each env's first state as the reset
state (as level replay does). Prints one JSON line per env count.

    <minimax venv>/bin/python benchmarks/peers/minimax_env_worker.py --num-envs 32 1024 --wrapper resample
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
from minimax import envs

MAZE_KWARGS = {
    "height": 13,
    "width": 13,
    "n_walls": 60,
    "replace_wall_pos": True,
    "see_agent": False,
    "normalize_obs": True,
    "max_episode_steps": 250,
}


def make_rollout(env, num_envs: int, num_steps: int, restart: bool):
    num_actions = env.action_space().n

    def rollout(rng):
        rng_reset, rng_steps = jax.random.split(rng)
        _, start = jax.vmap(env.reset)(jax.random.split(rng_reset, num_envs))
        reset_state = start if restart else None

        def body(carry, rng_step):
            state, total_reward = carry
            rng_action, rng_env = jax.random.split(rng_step)
            actions = jax.random.randint(rng_action, (num_envs,), 0, num_actions)
            obs, state, reward, _, _ = jax.vmap(env.step, (0, 0, 0, None, 0 if restart else None))(
                jax.random.split(rng_env, num_envs), state, actions, True, reset_state
            )
            return (state, total_reward + reward.sum() + obs["image"].sum()), None

        (_, total_reward), _ = jax.lax.scan(body, (start, jnp.float32(0)), jax.random.split(rng_steps, num_steps))
        return total_reward

    return jax.jit(rollout)


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("--num-envs", type=int, nargs="+", default=[32, 1024])
    cli.add_argument("--num-steps", type=int, default=256)
    cli.add_argument("--repeats", type=int, default=5)
    cli.add_argument("--wrapper", choices=["resample", "restart"], default="resample")
    options = cli.parse_args()
    env, _ = envs.make("Maze", env_kwargs=MAZE_KWARGS, wrappers=[])
    for num_envs in options.num_envs:
        rollout = make_rollout(env, num_envs, options.num_steps, options.wrapper == "restart")
        timing = time_rollout(rollout, jax.random.PRNGKey, options.repeats)
        result = {
            "bench": "env",
            "impl": "minimax",
            "wrapper": options.wrapper,
            "size": MAZE_KWARGS["height"],
            **timing.report(num_envs, options.num_steps),
            **describe_peer("minimax-lib"),
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
