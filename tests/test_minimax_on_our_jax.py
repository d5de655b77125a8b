"""benchmarks/learning/minimax_on_our_jax.py: with its names restored, this stack's JAX draws JAX 0.4.31's random
stream (what minimax-lib's seeds drew in its own stack), and it keeps the names minimax calls. The check runs in a
subprocess: the restored setting is global and would change every other test's random draws."""

import json
import subprocess
import sys

import pytest

from benchmarks.learning.minimax_on_our_jax import build
from tests.states import REPO_ROOT

# Recorded with benchmarks/.minimax-venv's JAX 0.4.31 (MINIMAX_STACK in benchmarks/speed/bench_algos.py).
SPLIT_OF_KEY_7 = [[276534068, 861967409], [1905761346, 1641862660], [2900896126, 1402713516]]
RANDINT_OF_KEY_7_FOLDED_1 = [[266, 228, 698], [936, 889, 887]]

DRAWS = """
import json
import jax, numpy as np
from benchmarks.learning.minimax_on_our_jax import restore_minimax_names

def draws():
    key = jax.random.PRNGKey(7)
    return {
        "split": np.asarray(jax.random.split(key, 3)).tolist(),
        "randint": np.asarray(jax.random.randint(jax.random.fold_in(key, 1), (2, 3), 0, 1000)).tolist(),
    }

plain = draws()
restore_minimax_names()
restored = draws() | {
    "jax.jax": jax.jax is jax,
    "tree_map": jax.tree_map(lambda leaf: leaf + 1, {"a": 1, "b": (2,)}),
}
print(json.dumps({"plain": plain, "restored": restored}))
"""


def test_restored_names_draw_jax_0_4_31s_random_stream_and_keep_minimaxs_calls():
    done = subprocess.run([sys.executable, "-c", DRAWS], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    plain, restored = json.loads(done.stdout).values()
    assert plain["split"] != SPLIT_OF_KEY_7  # this stack's own stream differs, so the checks below can fail
    assert restored["split"] == SPLIT_OF_KEY_7
    assert restored["randint"] == RANDINT_OF_KEY_7_FOLDED_1
    assert restored["jax.jax"] is True
    assert restored["tree_map"] == {"a": 2, "b": [3]}


def test_build_refuses_an_existing_folder_before_installing(tmp_path):
    (tmp_path / "venv").mkdir()
    with pytest.raises(SystemExit, match="exists already"):
        build(tmp_path / "venv")
