"""minimax-lib 0.2.0 on cleanued's own JAX stack: one library's code tells the two stacks' float behaviour apart.

minimax-lib 0.2.0 runs on JAX 0.4.31 (`MINIMAX_STACK` in benchmarks/speed/bench_algos.py) and cleanued needs JAX 0.10
or later, so the learning comparison trains the two libraries under two XLA versions. minimax's training needs only
two names newer JAX removed (`jax.jax` and `jax.tree_map`), and its random stream is the old one once the
pre-0.5 default `jax_threefry_partitionable=False` is set again: the same seed then draws the same levels, actions and
replays on both stacks until float rounding makes two runs part (checked once: Robust PLR's seed 1 at 7x7 logs the
same levels for the 67 ticks before its first update, their scores equal to float32 rounding, and that update's loss
to 2e-4 relative). `build` makes such a virtual environment: requirements.txt's pins, minimax-lib without its own
pins (and the few packages its training imports), and a .pth file that calls `restore_minimax_names` at every
interpreter start. The learning comparison runs it as its minimax with `--minimax-venv`:

    .venv/bin/python benchmarks/learning/minimax_on_our_jax.py --venv benchmarks/.minimax-our-jax-venv
    .venv/bin/python benchmarks/learning/learning_vs_minimax.py --methods plr --seeds 12 --rollouts 600 \
        --minimax-venv benchmarks/.minimax-our-jax-venv --out /tmp/minimax_on_our_jax
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
MINIMAX = "minimax-lib==0.2.0"
"""Installed without its dependencies: it pins JAX 0.4.31 and numpy 1.25."""
MINIMAX_IMPORTS = ("GitPython==3.2.1", "pandas==3.1.1", "tqdm==4.70.1")
"""What minimax's training imports beyond requirements.txt (its logger, and `minimax.evaluate` from its __init__)."""
PTH_NAME = "minimax_on_our_jax.pth"


def restore_minimax_names() -> None:
    """Give the running JAX what minimax-lib 0.2.0 calls and newer JAX dropped, and JAX 0.4.31's random stream."""
    import jax
    import jax.tree_util

    jax.jax = jax
    jax.tree_map = jax.tree_util.tree_map
    jax.config.update("jax_threefry_partitionable", False)


def site_packages(python: Path) -> Path:
    command = [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    return Path(subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip())


def build(venv: Path) -> Path:
    """Create `venv` (refused if it exists) and return its Python."""
    if venv.exists():
        raise SystemExit(f"--venv {venv}: exists already; give a new folder (or delete this one to rebuild it)")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "-r", str(REPO_ROOT / "requirements.txt")], check=True)
    subprocess.run([*pip, "--no-deps", MINIMAX], check=True)
    subprocess.run([*pip, *MINIMAX_IMPORTS], check=True)
    target = site_packages(python)
    shutil.copy(Path(__file__), target / Path(__file__).name)
    # Written last: before JAX is installed, the line would fail at every start of pip.
    (target / PTH_NAME).write_text(f"import {Path(__file__).stem}; {Path(__file__).stem}.restore_minimax_names()\n")
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, required=True, help="virtual environment to create")
    args = parser.parse_args()
    print(f"minimax-lib 0.2.0 on requirements.txt's JAX: {build(args.venv)}")


if __name__ == "__main__":
    main()
