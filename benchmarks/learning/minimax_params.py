"""The student's parameters between minimax's tree and cleanued's names, both ways.

minimax's side (benchmarks/learning/minimax_fixtures.py, minimax_checkpoint_params.py, minimax_train.py, run in
minimax's venv) stores minimax's parameters flat as `<prefix><cleanued path>` arrays (`flat_params`) and puts
cleanued's into minimax's tree (`minimax_tree`); cleanued's side (tests/test_minimax_parity.py, the learning
comparison) reads the flat arrays back into cleanued's tree (`parameter_tree`). It imports only JAX and NumPy, so
both venvs import it.
"""

import jax
import numpy as np

PARAM_NAMES = {
    "cnn": "Conv3x3_0",
    "fc_scalar": "Embed_0",
    "rnn/OptimizedLSTMCell_0": "ScannedLSTM_0/OptimizedLSTMCell_0",
    "fc_pi_1": "Dense_0",
    "fc_pi_final": "Dense_1",
    "v_head/Dense_0": "Dense_2",
    "v_head/fc_value_final": "Dense_3",
}
"""minimax's GridWorldACStudentModel parameter path -> cleanued's ActorCritic path (algos/dr.py)."""


def cleanued_path(minimax_path: str) -> str:
    """cleanued's name of the parameter at `minimax_path` (e.g. `cnn/kernel` -> `Conv3x3_0/kernel`)."""
    for theirs, ours in sorted(PARAM_NAMES.items(), key=lambda item: -len(item[0])):
        if minimax_path.startswith(theirs + "/"):
            return ours + minimax_path[len(theirs) :]
    raise KeyError(minimax_path)


def _leaves(node, path=()):
    """(minimax path, leaf) of a nested mapping, in its own order."""
    if isinstance(node, dict) or hasattr(node, "items"):
        for key, child in node.items():
            yield from _leaves(child, (*path, key))
        return
    yield "/".join(path), node


def flat_params(prefix: str, tree) -> dict:
    """{prefix + cleanued path: array} from a minimax parameter tree of one student (leading axis dropped)."""
    return {prefix + cleanued_path(path): np.asarray(leaf[0]) for path, leaf in _leaves(tree["params"])}


def minimax_tree(template, flat: dict, index: int | None = None, prefix: str = "params/"):
    """`template` (a minimax parameter tree {"params": ...}, leaves led by the student axis) with every leaf taken from
    flat `prefix + <cleanued path>` arrays, repeated for each student of the template: one seed's arrays (also as a
    stack of one, as cleanued's --init-from reads them), or item `index` of arrays stacked over seeds. Raises
    ValueError (one line) when a parameter is missing, left over or of another shape."""
    given = {key[len(prefix) :]: value for key, value in flat.items() if key.startswith(prefix)}
    wanted = {cleanued_path(path): leaf for path, leaf in _leaves(template["params"])}
    if missing := sorted(wanted.keys() - given.keys()):
        raise ValueError(f"the parameters lack {missing[0]} (another network's?)")
    if extra := sorted(given.keys() - wanted.keys()):
        raise ValueError(f"the parameters hold {extra[0]}, which minimax's student has not (another network's?)")
    for name, leaf in wanted.items():
        shape, expected = np.shape(given[name]), np.shape(leaf)[1:]
        if shape == (1, *expected):
            given[name], shape = given[name][0], expected
        if index is not None and shape[1:] == expected:
            if not 0 <= index < shape[0]:
                raise ValueError(f"{name} holds {shape[0]} seeds, so it has no seed {index}")
            given[name] = given[name][index]
        elif shape != expected:
            raise ValueError(f"{name} is {shape} there and {expected} in minimax's student")

    def fill(node, path=()):
        if isinstance(node, dict) or hasattr(node, "items"):
            return type(node)({key: fill(child, (*path, key)) for key, child in node.items()})  # FrozenDict stays one
        value = np.asarray(given[cleanued_path("/".join(path))], dtype=node.dtype)
        return jax.numpy.asarray(np.broadcast_to(value, np.shape(node)))

    return type(template)({"params": fill(template["params"])})


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
