"""Sample actions with minimax-lib 0.2.0's own policy distribution (`PPOAgent.get_action_dist`: TensorFlow
Probability's Categorical on JAX, as its runners sample the student's moves) and print the counts per action, for
benchmarks/learning/action_sampling.py, which compares them with cleanued's.

Run with the Python of the minimax virtual environment (its pinned JAX 0.4.31 stack); it never imports cleanued's
code. Prints one JSON object: per logits row (in the order given), the count of each action.

    benchmarks/.minimax-venv/bin/python benchmarks/learning/minimax_actions.py --logits '[[0, -5, -6]]' \
        --samples 1000000 --seed 0
"""

import argparse
import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from minimax.agents.ppo import PPOAgent  # noqa: E402

CHUNK = 100_000
"""Actions drawn per key (one rollout step draws one per env from one key)."""


def action_counts(logits: list[float], samples: int, seed: int) -> list[int]:
    row = jnp.asarray(logits, jnp.float32)

    def draw(key):
        policy = PPOAgent.get_action_dist(None, jnp.broadcast_to(row, (CHUNK, len(logits))), dtype=jnp.uint32)
        return jnp.bincount(policy.sample(seed=key).astype(jnp.int32), length=len(logits))

    keys = jax.random.split(jax.random.PRNGKey(seed), samples // CHUNK)
    return np.asarray(jax.jit(jax.vmap(draw))(keys)).sum(0).tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logits", required=True, help="JSON list of logits rows")
    parser.add_argument("--samples", type=int, required=True, help="actions per row (a multiple of 100,000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws")
    args = parser.parse_args()
    rows = json.loads(args.logits)
    print(json.dumps({"counts": [action_counts(row, args.samples, args.seed + i) for i, row in enumerate(rows)]}))


if __name__ == "__main__":
    main()
