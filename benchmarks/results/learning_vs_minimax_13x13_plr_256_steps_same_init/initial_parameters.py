"""The starts of this folder's run: minimax's seeds 19-30 (init/minimax_plr.npz, converted to cleanued's names) beside
24 of cleanued's own (algos/plr.py's init at this experiment's settings), leaf by leaf: the standard deviation, excess
kurtosis, largest magnitude and the two-sample Kolmogorov-Smirnov p of the entries; the singular values of each kernel
(orthogonal ones are all equal); and the mean absolute correlation between the LSTM's gate kernels and between the two
hidden layers within a seed (independent draws: near 0). Run from the repo root:

    WANDB_MODE=disabled .venv/bin/python \
        benchmarks/results/learning_vs_minimax_13x13_plr_256_steps_same_init/initial_parameters.py
"""

import sys
from pathlib import Path

import jax
import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from algos import plr  # noqa: E402
from common.config import with_flags  # noqa: E402

FOLDER = Path(__file__).parent
CELL = "params/ScannedLSTM_0/OptimizedLSTMCell_0"
GROUPS = {
    "LSTM input gates": [f"{CELL}/{gate}/kernel" for gate in ("ii", "if", "ig", "io")],
    "LSTM hidden gates": [f"{CELL}/{gate}/kernel" for gate in ("hi", "hf", "hg", "ho")],
    "hidden layers": ["params/Dense_0/kernel", "params/Dense_2/kernel"],
}


def cleanued_starts(count: int) -> dict[str, np.ndarray]:
    config = with_flags(plr.Config(), maze_size=13, n_walls=60, lstm_size=64, max_steps=250, num_steps=256)
    state = jax.jit(plr.make_train(config).init)(jax.random.split(jax.random.key(1234), count))
    leaves = jax.tree_util.tree_flatten_with_path(state.train_state.params["params"])[0]
    return {"params/" + "/".join(part.key for part in path): np.asarray(leaf) for path, leaf in leaves}


def singular_values(kernel: np.ndarray) -> str:
    values = np.linalg.svd(kernel.reshape(-1, kernel.shape[-1]), compute_uv=False)
    return f"{values.min():.3f}-{values.max():.3f}"


def gate_correlation(starts: dict, names: list[str]) -> float:
    return float(
        np.mean(
            [
                abs(np.corrcoef(starts[a][seed].ravel(), starts[b][seed].ravel())[0, 1])
                for seed in range(len(starts[names[0]]))
                for i, a in enumerate(names)
                for b in names[i + 1 :]
            ]
        )
    )


def main() -> None:
    with np.load(FOLDER / "init" / "minimax_plr.npz") as data:
        minimax = {key: data[key] for key in data.files if key.startswith("params/")}
    cleanued = cleanued_starts(24)
    print("| leaf | shape | std (minimax / cleanued) | excess kurtosis | largest | KS p | singular values |")
    print("|---|---|---|---|---|---|---|")
    for key in sorted(minimax):
        theirs, ours = minimax[key], cleanued[key]
        if np.all(theirs == theirs.flat[0]) and np.all(ours == ours.flat[0]):
            print(f"| {key} | {theirs.shape[1:]} | constant {theirs.flat[0]:g} / {ours.flat[0]:g} | | | | |")
            continue
        kurtosis = f"{stats.kurtosis(theirs.ravel()):+.2f} / {stats.kurtosis(ours.ravel()):+.2f}"
        largest = f"{np.abs(theirs).max():.2f} / {np.abs(ours).max():.2f}"
        p = stats.ks_2samp(theirs.ravel(), ours.ravel()).pvalue
        spectrum = f"{singular_values(theirs[0])} / {singular_values(ours[0])}"
        print(
            f"| {key} | {theirs.shape[1:]} | {theirs.std():.4f} / {ours.std():.4f} | {kurtosis} | {largest} | {p:.2f} "
            f"| {spectrum} |"
        )
    print()
    print("| within a seed | mean abs correlation (minimax / cleanued) |")
    print("|---|---|")
    for label, names in GROUPS.items():
        print(f"| {label} | {gate_correlation(minimax, names):.4f} / {gate_correlation(cleanued, names):.4f} |")


if __name__ == "__main__":
    main()
