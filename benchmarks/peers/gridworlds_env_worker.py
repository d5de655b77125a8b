"""Random-policy throughput of NAVIX and XLand-MiniGrid, the protocol of bench_env.py; run by `bench_gridworlds.py`
with the Python of the gridworlds virtual environment (navix and xminigrid from PyPI on the project's own JAX), or by
`gpu_suite.py` with its own (the peers installed beside the project's packages), never imported by our code.

Both run their closest env to AMaze: an empty room with a random start, at AMaze's grid (13x13 free cells inside a
wall border, 15x15 in all), 250-step episodes, a 5x5 view where the peer lets it be set, auto-reset as the peer
ships it, random actions over the peer's own action set, and each step's observation entering the result.

- navix: `Room` as Navix-Empty-Random-*-v0 registers it (random agent, direction and goal), height = width = 15,
  `symbolic_first_person` observations with `set_radius(2)` (5x5, centred on the agent, rotated), 7 actions. Its
  `step` resets in place of the step after an episode ends (a `lax.cond`).
- xminigrid: MiniGrid-EmptyRandom (random agent and direction, goal in the bottom-right corner), height = width =
  15, `view_size=5` (MiniGrid's forward view), 6 actions, `GymAutoResetWrapper` (reset on the ending step).

    <gridworlds venv>/bin/python benchmarks/peers/gridworlds_env_worker.py --peer navix --num-envs 32 1024
"""

import argparse
import json
import sys
import types
from pathlib import Path

# SCAFFOLDING: the env timing protocol lives with AMaze's own env benchmark, benchmarks/speed/env_timing.py (jax and
# the standard library only), which this worker shares with a peer's Python.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "speed"))

import jax
import jax.numpy as jnp
from env_timing import describe_peer, time_rollout

GRID = 15
"""Cells per side, border walls included: AMaze's 13x13 interior plus its wall border."""
MAX_STEPS = 250
VIEW = 5


def make_navix():
    try:
        import wandb.util  # noqa: F401 navix imports both at the top, for its experiments' logging only
    except ImportError:  # a GPU machine may run without wandb: stand-ins that nothing here calls
        sys.modules["wandb"] = types.ModuleType("wandb")
        sys.modules["wandb.util"] = sys.modules["wandb"].util = types.ModuleType("wandb.util")
    import navix as nx

    nx.observations.set_radius(VIEW // 2)
    env = nx.environments.Room.create(
        height=GRID,
        width=GRID,
        max_steps=MAX_STEPS,
        random_start=True,
        observation_fn=nx.observations.symbolic_first_person,
        reward_fn=nx.rewards.on_goal_reached,
        termination_fn=nx.terminations.on_goal_reached,
    )
    num_actions = len(env.action_set)

    def reset(key):
        return env.reset(key)

    def step(timestep, action):
        timestep = env.step(timestep, action)
        return timestep, timestep.reward, timestep.observation

    return reset, step, num_actions


def make_xminigrid():
    import xminigrid
    from xminigrid.wrappers import GymAutoResetWrapper

    env, params = xminigrid.make("MiniGrid-EmptyRandom-16x16")
    params = params.replace(height=GRID, width=GRID, view_size=VIEW, max_steps=MAX_STEPS)
    env = GymAutoResetWrapper(env)
    num_actions = env.num_actions(params)

    def reset(key):
        return env.reset(params, key)

    def step(timestep, action):
        timestep = env.step(params, timestep, action)
        return timestep, timestep.reward, timestep.observation

    return reset, step, num_actions


PEERS = {"navix": make_navix, "xminigrid": make_xminigrid}


def make_rollout(peer: str, num_envs: int, num_steps: int):
    reset, step, num_actions = PEERS[peer]()

    def rollout(rng):
        rng_reset, rng_steps = jax.random.split(rng)
        timestep = jax.vmap(reset)(jax.random.split(rng_reset, num_envs))

        def body(carry, rng_step):
            timestep, total = carry
            actions = jax.random.randint(rng_step, (num_envs,), 0, num_actions)
            timestep, reward, obs = jax.vmap(step)(timestep, actions)
            return (timestep, total + reward.sum() + obs.sum()), None

        (_, total), _ = jax.lax.scan(body, (timestep, jnp.float32(0)), jax.random.split(rng_steps, num_steps))
        return total

    return jax.jit(rollout)


def main() -> None:
    cli = argparse.ArgumentParser()
    cli.add_argument("--peer", choices=sorted(PEERS), required=True)
    cli.add_argument("--num-envs", type=int, nargs="+", default=[32, 1024])
    cli.add_argument("--num-steps", type=int, default=256)
    cli.add_argument("--repeats", type=int, default=5)
    options = cli.parse_args()
    for num_envs in options.num_envs:
        timing = time_rollout(make_rollout(options.peer, num_envs, options.num_steps), jax.random.key, options.repeats)
        result = {
            "bench": "env",
            "impl": options.peer,
            "grid": GRID,
            "view": VIEW,
            "max_steps": MAX_STEPS,
            **timing.report(num_envs, options.num_steps),
            **describe_peer(options.peer),
        }
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
