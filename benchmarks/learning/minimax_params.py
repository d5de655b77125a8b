"""minimax's parameters, stored flat under cleanued's names, back into cleanued's nested parameter tree.

benchmarks/learning/minimax_fixtures.py (the parity fixtures) and benchmarks/learning/minimax_checkpoint_params.py (the
checkpoints of benchmarks/learning/learning_vs_minimax.py) run in minimax's venv and write `<prefix><cleanued path>`
arrays; tests/test_minimax_parity.py and the learning comparison's evaluate stage read them with this,
without importing the comparison's harness.
"""

import jax


def parameter_tree(flat: dict, prefix: str = "params/") -> dict:
    """The nested {"params": ...} tree of cleanued's ActorCritic from flat `params/<path>` arrays."""
    params = {}
    for key, value in flat.items():
        if not key.startswith(prefix):
            continue
        node = params
        *path, leaf = key[len(prefix) :].split("/")
        for name in path:
            node = node.setdefault(name, {})
        node[leaf] = jax.numpy.asarray(value)
    return {"params": params}
