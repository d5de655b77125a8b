"""Draw levels from minimax-lib 0.2.0's own DR generator (`Maze.reset_env`) and save them for
benchmarks/learning/generator_comparison.py, which measures them with cleanued's code beside cleanued's own levels.

Run with the Python of the minimax virtual environment (its pinned JAX 0.4.31 stack); it never imports cleanued's
code. The file holds, per level, the wall map (bit-packed rows of the flattened [H, W] map), the agent's and the
goal's (x, y) and the start direction, in minimax's conventions, which are cleanued's (`wall_map[y, x]`, direction 0
facing right, then clockwise).

    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_levels.py --size 7 --n-walls 8 --count 100000 \
        --seed 0 --out /tmp/minimax_7x7.npz
"""

import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from minimax import envs  # noqa: E402

CHUNK = 10_000
"""Levels generated per jitted call (memory stays small at any --count)."""


def draw_levels(size: int, n_walls: int, count: int, seed: int) -> dict:
    env, _ = envs.make("Maze", env_kwargs=dict(height=size, width=size, n_walls=n_walls, replace_wall_pos=True))
    reset = jax.jit(jax.vmap(env.reset))
    keys = jax.random.split(jax.random.PRNGKey(seed), count)
    parts = []
    for start in range(0, count, CHUNK):
        _, states = reset(keys[start : start + CHUNK])
        parts.append(
            {
                "walls": np.packbits(np.asarray(states.wall_map).reshape(len(states.agent_dir_idx), -1), axis=1),
                "agent_pos": np.asarray(states.agent_pos, np.int32),
                "goal_pos": np.asarray(states.goal_pos, np.int32),
                "agent_dir": np.asarray(states.agent_dir_idx, np.int32),
            }
        )
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, required=True, help="interior height and width")
    parser.add_argument("--n-walls", type=int, required=True, help="walls drawn with replacement")
    parser.add_argument("--count", type=int, required=True, help="levels to draw")
    parser.add_argument("--seed", type=int, default=0, help="seed of the levels' keys")
    parser.add_argument("--out", required=True, help=".npz file to write")
    args = parser.parse_args()
    levels = draw_levels(args.size, args.n_walls, args.count, args.seed)
    np.savez_compressed(args.out, size=args.size, **levels)


if __name__ == "__main__":
    main()
