"""Env-only throughput of AMaze against the fastest JAX gridworlds, NAVIX and XLand-MiniGrid, on the same machine in one
command: random policy reading every observation, bench_env.py's protocol (a jitted 256-step `lax.scan`, compile
timed apart, median of `--repeats` after `block_until_ready`).

AMaze runs in this process, 13x13 with DR's resampling (`step_and_resample_batch`), with 60 walls (the task) and
with none (an empty room with a random agent and goal: the closest match to the peers' rooms). The peers run in
benchmarks/peers/gridworlds_env_worker.py (its docstring lists their settings) from a virtual environment this script
creates on first use: navix and xminigrid from PyPI on top of this interpreter's own packages (a .pth file), so
all three run on the same JAX and jaxlib.

    python benchmarks/peers/bench_gridworlds.py --num-envs 32 1024 4096
"""

import json
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import tyro

# SCAFFOLDING: make `benchmarks`, `envs` and `common` importable when run as a script.
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from benchmarks.speed import bench_env  # noqa: E402
from benchmarks.speed.tables import json_lines, markdown_table, ratio  # noqa: E402

PEERS = {"navix": "NAVIX", "xminigrid": "XLand-MiniGrid"}
"""Package -> name in the table."""
PEER_PACKAGES = ("navix==0.7.4", "xminigrid==0.9.3")
"""Installed without their dependencies: navix lists its developer tools (black, pylint, pytest, wandb) as such."""
PEER_DEPENDENCIES = ("chex", "tqdm", "imageio", "imageio-ffmpeg", "distrax", "rlax")
"""What importing them needs beyond this project's packages (navix imports its PPO agent, hence distrax and rlax)."""
SHARED = ("jax", "jaxlib", "flax", "optax", "numpy", "ml_dtypes")
"""Held at this interpreter's versions in the peers' environment."""


@dataclass(frozen=True)
class Args:
    num_envs: tuple[int, ...] = (32, 1024, 4096)
    """Parallel env counts."""
    num_steps: int = 256
    """Steps per measured scan."""
    repeats: int = 3
    """Timed calls per setting; the median is reported."""
    peers: tuple[str, ...] = tuple(PEERS)
    """Peers to run: navix, xminigrid."""
    venv: str = str(REPO_ROOT / "benchmarks" / ".gridworlds-venv")
    """Virtual environment for the peers; created with the running Python if missing."""


def gridworlds_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # The peers see this interpreter's packages, so they run on the same JAX as AMaze.
        Path(site, "_project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        constraints = venv / "constraints.txt"
        constraints.write_text("".join(f"{name}=={metadata.version(name)}\n" for name in SHARED))
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "--no-deps", *PEER_PACKAGES], check=True)
        subprocess.run([*pip, "-c", str(constraints), *PEER_DEPENDENCIES], check=True)
    return python


def main(args: Args) -> None:
    python = gridworlds_python(Path(args.venv))
    amaze = {}
    for n_walls in (60, 0):
        env_args = bench_env.Args(
            num_envs=args.num_envs, num_steps=args.num_steps, repeats=args.repeats, n_walls=n_walls
        )
        amaze[n_walls] = [bench_env.measure(env_args, num_envs) for num_envs in args.num_envs]
    peers = {}
    for peer in args.peers:
        command = [str(python), str(Path(__file__).resolve().parent / "gridworlds_env_worker.py"), "--peer", peer]
        command += ["--num-envs", *map(str, args.num_envs), "--num-steps", str(args.num_steps)]
        command += ["--repeats", str(args.repeats)]
        peers[peer] = json_lines(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    for line in [*amaze[60], *amaze[0], *(line for lines in peers.values() for line in lines)]:
        print(json.dumps(line), flush=True)
    header = ["envs", "AMaze 60 walls steps/s", "AMaze empty steps/s"]
    header += [f"{PEERS[peer]} steps/s" for peer in args.peers]
    header += [f"AMaze empty / {PEERS[peer]}" for peer in args.peers]
    header += ["AMaze compile s (60, empty)", *(f"{PEERS[peer]} compile s" for peer in args.peers)]
    rows = []
    for i, num_envs in enumerate(args.num_envs):
        walls, empty = amaze[60][i], amaze[0][i]
        rates = [peers[peer][i]["env_steps_per_s"] for peer in args.peers]
        rows.append(
            [num_envs, walls["env_steps_per_s"], empty["env_steps_per_s"], *rates]
            + [ratio(empty["env_steps_per_s"], rate) for rate in rates]
            + [f"{walls['compile_s']}, {empty['compile_s']}", *(peers[peer][i]["compile_s"] for peer in args.peers)]
        )
    print("\n" + markdown_table(header, rows))


if __name__ == "__main__":
    main(tyro.cli(Args))
