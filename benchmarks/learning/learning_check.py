"""Learning check: a run's training return and solve rate against a uniformly random policy's.

Reads `<run-dir>/logs.csv` (mean over seeds per logged update), measures the random policy on the run's
own training-level distribution (same maze size, walls and episode length), draws the curves to a PNG
with Pillow and prints a markdown summary. A benchmark, not a test.

    python benchmarks/learning/learning_check.py --run-dir runs/quickstart --out benchmarks/dr_quickstart_curve.png
"""

import csv
import functools
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import tyro
from PIL import Image, ImageDraw

# SCAFFOLDING: make `envs` and `common` importable when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from common.provenance import describe_environment  # noqa: E402
from envs.levels import sample_dr_level  # noqa: E402
from envs.maze import NUM_ACTIONS, EnvParams, reset_to_fresh_levels, step_and_next_level  # noqa: E402


@dataclass(frozen=True)
class Args:
    run_dir: Path
    """Run folder with logs.csv and config.json."""
    out: Path = Path("benchmarks/learning_curve.png")
    """Where to write the curve."""
    random_envs: int = 2048
    """Parallel envs for the random-policy baseline."""
    random_steps: int = 1024
    """Steps per env for the random-policy baseline."""


def random_policy_baseline(config: dict, num_envs: int, num_steps: int) -> tuple[float, float]:
    """(mean return, solve rate) of uniformly random actions over finished episodes, each on a fresh level (as
    dr.py plays them, levels made up front per env, at its default of one per 4 steps)."""
    params = EnvParams(max_steps=config["max_steps"], agent_view_size=config["agent_view_size"])
    size = config["maze_size"]
    sample = functools.partial(sample_dr_level, height=size, width=size, n_walls=config["n_walls"])
    step_env = jax.vmap(functools.partial(step_and_next_level, params=params))

    def run(rng):
        rng_levels, rng_steps = jax.random.split(rng)
        levels = jax.vmap(jax.vmap(sample))(jax.random.split(rng_levels, (num_envs, -(-num_steps // 4))))
        _, state = jax.vmap(reset_to_fresh_levels, (None, 0, None))(rng, levels, params)

        def body(state, rng_step):
            rng_action, rng_env = jax.random.split(rng_step)
            action = jax.random.randint(rng_action, (num_envs,), 0, NUM_ACTIONS)
            _, state, reward, done, _ = step_env(jax.random.split(rng_env, num_envs), state, action)
            return state, (reward, done)

        return jax.lax.scan(body, state, jax.random.split(rng_steps, num_steps))[1]

    reward, done = map(np.asarray, jax.jit(run)(jax.random.key(0)))
    return float(reward[done].mean()), float((reward[done] > 0).mean())


def read_curves(run_dir: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{metric: (updates, mean over seeds)} for the training and evaluation columns of logs.csv."""
    by_update = defaultdict(lambda: defaultdict(list))
    with open(run_dir / "logs.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            for key, value in row.items():
                plotted = key in ("train/return", "train/solve_rate") or key.startswith("eval/solve_rate")
                if plotted and value:
                    by_update[key][int(row["update"])].append(float(value))
    return {
        key: (np.array(sorted(values)), np.array([np.mean(values[u]) for u in sorted(values)]))
        for key, values in by_update.items()
    }


def plot(curves: dict, baseline: dict[str, float], path: Path, width: int = 720, height: int = 400) -> None:
    colours = {"train/return": (31, 119, 180), "train/solve_rate": (44, 160, 44)}
    extra = [(214, 39, 40), (148, 103, 189), (140, 86, 75)]
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    left, right, top, bottom = 50, width - 190, 20, height - 40
    max_update = max(updates.max() for updates, _ in curves.values())
    to_xy = lambda u, v: (left + (right - left) * u / max_update, bottom - (bottom - top) * v)  # noqa: E731
    draw.rectangle([left, top, right, bottom], outline="black")
    for tick in np.linspace(0, 1, 6):
        x, y = to_xy(0, tick)
        draw.line([left - 4, y, left, y], fill="black")
        draw.text((8, y - 6), f"{tick:.1f}", fill="black")
    for tick in np.linspace(0, max_update, 5):
        x, _ = to_xy(tick, 0)
        draw.text((x - 10, bottom + 6), f"{int(tick)}", fill="black")
    draw.text(((left + right) / 2 - 20, bottom + 22), "update", fill="black")
    legend_y = top
    for index, (key, (updates, values)) in enumerate(sorted(curves.items())):
        colour = colours.get(key) or extra[index % len(extra)]
        points = [to_xy(u, v) for u, v in zip(updates, values, strict=True) if np.isfinite(v)]
        if len(points) > 1:
            draw.line(points, fill=colour, width=2)
        draw.line([right + 10, legend_y + 6, right + 30, legend_y + 6], fill=colour, width=3)
        draw.text((right + 36, legend_y), key, fill="black")
        legend_y += 18
    for key, value in baseline.items():
        y = to_xy(0, value)[1]
        draw.line([left, y, right, y], fill=colours[key], width=1)
        draw.text((right + 36, legend_y), f"random {key.split('/')[1]}: {value:.3f}", fill=colours[key])
        legend_y += 18
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


def main(args: Args) -> None:
    config = json.loads((args.run_dir / "config.json").read_text())["config"]
    random_return, random_solve = random_policy_baseline(config, args.random_envs, args.random_steps)
    curves = read_curves(args.run_dir)
    plot(curves, {"train/return": random_return, "train/solve_rate": random_solve}, args.out)
    print(json.dumps({"bench": "learning", "run_dir": str(args.run_dir), **describe_environment()}))
    print(f"\nrandom policy: return {random_return:.3f}, solve rate {random_solve:.3f}\n")
    print("| update | " + " | ".join(sorted(curves)) + " |\n|---:|" + "---:|" * len(curves))
    updates = sorted({int(u) for values in curves.values() for u in values[0]})
    for update in updates[:: max(1, len(updates) // 10)] + ([updates[-1]] if len(updates) % 10 != 1 else []):
        cells = []
        for key in sorted(curves):
            found = np.flatnonzero(curves[key][0] == update)
            cells.append(f"{curves[key][1][found[0]]:.3f}" if found.size else "")
        print(f"| {update} | " + " | ".join(cells) + " |")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main(tyro.cli(Args))
