"""The measurements that decide the GPU settings, in one command: every method's throughput and compile time, seeds
vmapped in one process, the env alone at growing batch sizes, the unroll of the scans, XLA command buffers on loops,
a --sweep against seeds alone, and the peers side by side on the same GPU.

    python benchmarks/speed/gpu_suite.py --out gpu_results --jaxued-repo /tmp/jaxued  # GPU: about 26 min (planned)
    python benchmarks/speed/gpu_suite.py --out /tmp/smoke --smoke  # every stage at tiny sizes, on a CPU

Stages, in order, each a list of settings measured by the benchmark that owns them, with the planned minutes of the
full suite on one H100. The plan is built from the first H100 measurements (commit 90da373, benchmarks/README.md):
compiles of 13-26 s per method at unroll 1 and 2.5-4x that at unroll 8 (DR: 14 s -> 37-57 s), which the scripts
now use on a GPU by default, plus about 10 s per setting to build, fill the buffer and warm up; the timed updates
themselves take seconds.
1. `methods` (7 min): every algos/ script at the paper configuration (32 envs x 256 steps, LSTM-256, one seed),
   `benchmarks/speed/bench_algos.py:measure` (AOT compile timed apart, replay buffers full, median of timed calls).
2. `seeds` (4 min): DR and ACCEL at 1, 8 and 64 vmapped seeds, the same measure.
3. `env` (1 min): AMaze alone with DR's fresh levels and a random policy reading every observation, 1,024 to
   65,536 envs, `benchmarks/speed/bench_env.py:measure`, with dr.py's levels per env (one per 4 steps, for trained
   agents) and with the few a random policy uses (the peers stage's setting).
4. `unroll` (4.5 min): DR and ACCEL, one seed, with the rollout and LSTM scans unrolled 1, 4, 8 and 16 steps per
   loop iteration (`--unroll`); every record has its compile time, which unrolling lengthens. 64 seeds at unroll 1
   and 8 would add about 4 minutes and are left out of the 25 (the seeds stage's 64 is unroll 8 on a GPU;
   `python benchmarks/speed/bench_algos.py --algos dr accel --num-seeds 64 --set unroll=1` measures the other).
5. `command_buffers` (3 min): DR and ACCEL, one seed, each in a fresh process (XLA reads XLA_FLAGS once per
   process): XLA's defaults; `--xla_gpu_enable_command_buffer=+WHILE` (loops run as CUDA graphs, no launch per
   iteration); and that plus `--xla_gpu_command_buffer_unroll_loops=true`. At unroll 1: command buffers cut the
   launch cost per loop iteration that unrolling cuts, so that is where they have the most to win, and the unroll
   stage's rows at 1 and 8 bracket them. jaxlib's CPU build parses every XLA flag and accepts these (it ignores
   them), so the smoke preset runs all three processes.
6. `sweep` (2 min): DR and ACCEL with `--sweep lr=...` at 8 points x 8 seeds in one program
   (`bench_algos.py --sweep`), beside the same 64 entries as 64 seeds (the seeds stage's x64): what a sweep's
   traced hyperparameters (a batched learning rate and optimizer) cost against seeds alone.
7. `peers` (5 min): the peers on this interpreter's own jax, each beside the AMaze setting it compares with
   (ratio ours / theirs of env steps/s). Env-only at 65,536 envs (the issue's target batch): JaxUED's Maze
   (benchmarks/peers/jaxued_env_worker.py) against AMaze resampling and restarting with 60 walls; NAVIX and
   XLand-MiniGrid (benchmarks/peers/gridworlds_env_worker.py) against an empty AMaze room. Training: JaxUED's
   maze_dr.py and maze_plr.py (Robust PLR, ACCEL) from the checkout `--jaxued-repo` names
   (benchmarks/peers/jaxued_worker.py) against our DR, Robust PLR and ACCEL at one seed. The workers run with this
   interpreter, so the peers' packages must import here: on a machine without a package index, install their wheels
   with `pip install --no-deps --target DIR` and put DIR on PYTHONPATH. A peer that is not installed, or the scripts
   without a checkout, is skipped: a line says why, and the skip is recorded.
A setting that another stage of the same run already measured (the methods stage's DR is the seeds stage's DR x1,
and on a GPU the unroll stage's unroll 8) is measured once: its record is written again with `same_as` naming the
first. Every result is one JSON line (device, versions, commit and config included) appended to `<out>/<stage>.jsonl`
as soon as it is measured, so a session cut short keeps what it measured; a setting that fails (out of memory, say)
is recorded with its error and the suite goes on. After each stage the suite prints its markdown table for
benchmarks/README.md. `--stages`, `--methods` and `--sweep-methods` pick what runs; `--smoke` shrinks every size so
the suite runs on a CPU (tests/test_gpu_suite.py runs it there; the CUDA export of every method is
tests/test_cuda_lowering.py).
"""

import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
import tyro

# SCAFFOLDING: make `benchmarks`, `envs` and `common` importable when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.speed import bench_algos, bench_env  # noqa: E402
from benchmarks.speed.tables import markdown_table, ratio  # noqa: E402
from common.config import Devices  # noqa: E402
from common.devices import scan_unroll  # noqa: E402
from common.provenance import describe_environment  # noqa: E402

Stage = Literal["methods", "seeds", "env", "unroll", "command_buffers", "sweep", "peers"]
STAGES: tuple[Stage, ...] = ("methods", "seeds", "env", "unroll", "command_buffers", "sweep", "peers")
METHODS = ("dr", "paired", "plr", "accel", "plr_parallel", "accel_parallel", "sfl")
PEER_WORKERS = Path(__file__).resolve().parents[1] / "peers"
"""The folder of the peers' worker scripts."""
COMMAND_BUFFERS = {
    "default": "",
    "while": "--xla_gpu_enable_command_buffer=+WHILE",
    "while+unroll_loops": "--xla_gpu_enable_command_buffer=+WHILE --xla_gpu_command_buffer_unroll_loops=true",
}
"""Setting name -> the XLA flags its fresh process adds to XLA_FLAGS."""
COMMAND_BUFFER_UNROLL = 1
"""The command-buffer settings' --unroll: one loop iteration per step, where their launches cost most (stage 5)."""
PEER_MAZE_SIZE = 13
"""JaxUED's examples' maze (jaxued_env_worker.py: SIZE); NAVIX's and XLand-MiniGrid's rooms have the same free cells."""
PEER_WALLS = 60
"""DR's walls, JaxUED's rows; NAVIX and XLand-MiniGrid are empty rooms, so their AMaze rows have none."""
JAXUED_METHODS = ("dr", "plr", "accel")
"""Methods JaxUED's maze examples train (ACCEL is maze_plr.py --use_accel); PAIRED is left out of the 25 minutes."""


@dataclass(frozen=True)
class Args:
    out: str
    """Folder for the JSON lines (created; existing files are appended to)."""
    stages: tuple[Stage, ...] = STAGES
    """Stages to run, in this order."""
    methods: tuple[str, ...] = METHODS
    """Methods of the `methods` stage (algos/<name>.py)."""
    sweep_methods: tuple[str, ...] = ("dr", "accel")
    """Methods of the `seeds`, `unroll`, `command_buffers` and `sweep` stages."""
    jaxued_repo: str | None = None
    """A checkout of github.com/DramaCow/jaxued for the `peers` stage's training rows (its examples/ are not in the
    wheel); unset: those rows are skipped."""
    smoke: bool = False
    """Tiny sizes everywhere: checks the suite end to end on a CPU."""


@dataclass(frozen=True)
class Sizes:
    """What each stage measures."""

    num_envs: int | None = None  # None: each script's own (32; SFL's 256)
    num_steps: int = 256
    updates_per_call: int = 4  # even: JaxUED's ACCEL pairs each replay update with a mutation update
    repeats: int = 3
    seed_counts: tuple[int, ...] = (1, 8, 64)
    env_counts: tuple[int, ...] = (1024, 4096, 16384, 65536)
    env_steps: int = 256
    maze_size: int = 13
    n_walls: int = 60
    unrolls: tuple[int, ...] = (1, 4, 8, 16)
    peer_env_counts: tuple[int, ...] = (65536,)
    jaxued_flags: tuple[str, ...] = ()  # flags for JaxUED's example scripts (jaxued_worker.py --flags)
    overrides: tuple[str, ...] = ()  # key=value config overrides for every method (bench_algos --set)
    sweep_points: int = 8  # the sweep stage's --lr values, at seed_counts[-1] // sweep_points seeds each


PAPER = Sizes()
SMOKE = Sizes(
    num_envs=4,
    num_steps=8,
    updates_per_call=2,
    repeats=1,
    seed_counts=(1, 2),
    sweep_points=2,
    env_counts=(8,),
    env_steps=8,
    maze_size=5,
    n_walls=3,
    unrolls=(1, 2),
    peer_env_counts=(8,),
    jaxued_flags=("--num_steps", "8", "--num_train_envs", "4"),
    overrides=(
        "lstm_size=8",
        "maze_size=5",
        "n_walls=3",
        "max_steps=8",
        "buffer_size=16",
        "teacher_lstm_size=8",
        "teacher_conv_filters=4",
        "score_batches=1",
        "score_batch_size=16",
        "score_steps=8",
    ),
)


@dataclass(frozen=True)
class Setting:
    """One measurement of a stage."""

    label: str
    measure: Callable[[], dict] | None = None
    key: tuple | None = None
    """What program it measures: settings with equal keys are measured once per suite run."""
    versus: str | None = None
    """Peers: the label of the AMaze setting this one is compared with."""
    skipped: str | None = None
    """Why it is not measured."""


def known_overrides(sizes: Sizes, name: str) -> tuple[str, ...]:
    """The size overrides algos/<name>.py has a field for."""
    config = bench_algos.load_algo(name).Config()
    return tuple(item for item in sizes.overrides if has_flag(config, item.split("=", 1)[0]))


def algo_args(sizes: Sizes, name: str, unroll: int | None = None) -> bench_algos.Args:
    """bench_algos' settings for `name`; overrides the script has no field for are left out."""
    return bench_algos.Args(
        algos=(name,),
        num_steps=sizes.num_steps,
        updates_per_call=sizes.updates_per_call,
        repeats=sizes.repeats,
        set=known_overrides(sizes, name) + (() if unroll is None else (f"unroll={unroll}",)),
    )


def has_flag(config, name: str) -> bool:
    """Whether the (nested) config has a field `name` at any depth."""
    for field in fields(config):
        value = getattr(config, field.name)
        if field.name == name or (is_dataclass(value) and has_flag(value, name)):
            return True
    return False


def script_num_envs(sizes: Sizes, name: str) -> int:
    return sizes.num_envs or bench_algos.load_algo(name).Config().ppo.num_envs


def measure_algo(
    sizes: Sizes, name: str, num_seeds: int, unroll: int | None = None, sweep: tuple[str, ...] = ()
) -> dict:
    args = replace(algo_args(sizes, name, unroll), sweep=sweep)
    result = bench_algos.measure(name, args, script_num_envs(sizes, name), num_seeds)
    return {**result, "unroll": scan_unroll(Devices(unroll=unroll))}


def sweep_settings(sizes: Sizes, name: str) -> list[Setting]:
    """`name` with --sweep over sizes.sweep_points learning rates, beside the same number of entries as seeds."""
    entries = sizes.seed_counts[-1]
    num_seeds = entries // sizes.sweep_points
    lrs = ",".join(f"{lr:.3g}" for lr in np.geomspace(1e-4, 1e-3, sizes.sweep_points))
    sweep = (f"lr={lrs}",)
    swept = Setting(
        f"{name} sweep {sizes.sweep_points} points x {num_seeds} seeds",
        lambda: measure_algo(sizes, name, num_seeds, sweep=sweep),
        key=("sweep", name, num_seeds, sweep),
    )
    return [algo_setting(f"{name} x{entries}", sizes, name, entries), swept]


def algo_setting(label: str, sizes: Sizes, name: str, num_seeds: int, unroll: int | None = None) -> Setting:
    return Setting(
        label,
        lambda: measure_algo(sizes, name, num_seeds, unroll),
        key=("algo", name, num_seeds, scan_unroll(Devices(unroll=unroll))),
    )


RANDOM_POLICY_LEVELS = 4
"""Fresh levels per env a random policy's 256-step rollout needs (it ends about 1.3 episodes per env; the JSON line
counts episodes that reused a level), against dr.py's default of one per 4 steps, made for trained agents."""


def env_setting(
    label: str, sizes: Sizes, num_envs: int, wrapper: str, size: int, n_walls: int, levels_per_env: int | None = None
) -> Setting:
    env_args = bench_env.Args(
        num_envs=(num_envs,),
        num_steps=sizes.env_steps,
        repeats=sizes.repeats,
        size=size,
        n_walls=n_walls,
        wrapper=wrapper,
        levels_per_env=levels_per_env,
    )
    key = ("env", wrapper, size, n_walls, num_envs, levels_per_env)
    return Setting(label, lambda: bench_env.measure(env_args, num_envs), key=key)


def run_worker(command: list[str], env: dict[str, str] | None = None) -> dict:
    """The one JSON line a worker process prints; a failed worker raises with its last line of stderr."""
    result = subprocess.run([sys.executable, *command], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        last_line = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{Path(command[0]).name} exited with {result.returncode}: {last_line}")
    (line,) = [json.loads(text) for text in result.stdout.splitlines() if text.startswith("{")]
    return line


def measure_with_xla_flags(sizes: Sizes, name: str, xla_flags: str) -> dict:
    """bench_algos.py in a fresh process with `xla_flags` added to XLA_FLAGS, at unroll COMMAND_BUFFER_UNROLL."""
    flags = " ".join(part for part in (os.environ.get("XLA_FLAGS", ""), xla_flags) if part)
    command = [bench_algos.__file__, "--algos", name, "--num-envs", str(script_num_envs(sizes, name))]
    command += ["--num-steps", str(sizes.num_steps), "--updates-per-call", str(sizes.updates_per_call)]
    command += ["--repeats", str(sizes.repeats), "--set", *known_overrides(sizes, name)]
    command += [f"unroll={COMMAND_BUFFER_UNROLL}"]
    result = run_worker(command, env={**os.environ, "XLA_FLAGS": flags})
    return {**result, "unroll": COMMAND_BUFFER_UNROLL, "xla_flags": flags}


PEER_IMPORTS = {
    "jaxued": "import jaxued_env_worker",
    "navix": "import gridworlds_env_worker as worker; worker.make_navix()",
    "xminigrid": "import gridworlds_env_worker as worker; worker.make_xminigrid()",
}
"""Peer package -> what its worker imports and builds, run in a fresh process to see whether it can run here."""


def import_problem(package: str) -> str | None:
    """Why `package`'s worker cannot run with this interpreter (the error its imports raised), or None."""
    result = subprocess.run(
        [sys.executable, "-c", PEER_IMPORTS[package]], cwd=PEER_WORKERS, capture_output=True, text=True
    )
    if result.returncode == 0:
        return None
    last_line = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
    return f"{package} does not import with {sys.executable}: {last_line}"


def peer_settings(sizes: Sizes, args: Args) -> list[Setting]:
    """Each peer's settings after the AMaze settings they are compared with; one skipped setting per missing peer."""
    settings: list[Setting] = []

    def compare(ours: Setting, theirs: Setting) -> None:
        if ours.label not in {setting.label for setting in settings}:
            settings.append(ours)
        settings.append(theirs)

    env_flags = ["--num-steps", str(sizes.env_steps), "--repeats", str(sizes.repeats)]
    jaxued_problem = import_problem("jaxued")
    if problem := jaxued_problem:
        settings.append(Setting("JaxUED env", skipped=problem))
    else:
        for count in sizes.peer_env_counts:
            for wrapper in ("resample", "restart"):
                command = [str(PEER_WORKERS / "jaxued_env_worker.py"), "--num-envs", str(count), *env_flags]
                command += ["--wrapper", wrapper, "--n-walls", str(PEER_WALLS)]
                ours = env_setting(
                    f"ours {wrapper} {count}", sizes, count, wrapper, PEER_MAZE_SIZE, PEER_WALLS, RANDOM_POLICY_LEVELS
                )
                compare(ours, Setting(f"JaxUED {wrapper} {count}", lambda c=command: run_worker(c), versus=ours.label))
    for package, name in (("navix", "NAVIX"), ("xminigrid", "XLand-MiniGrid")):
        if problem := import_problem(package):
            settings.append(Setting(f"{name} env", skipped=problem))
            continue
        for count in sizes.peer_env_counts:
            command = [str(PEER_WORKERS / "gridworlds_env_worker.py"), "--peer", package, "--num-envs", str(count)]
            ours = env_setting(f"ours empty {count}", sizes, count, "resample", PEER_MAZE_SIZE, 0, RANDOM_POLICY_LEVELS)
            compare(ours, Setting(f"{name} {count}", lambda c=command + env_flags: run_worker(c), versus=ours.label))
    problem = jaxued_problem or (
        None if args.jaxued_repo else "no --jaxued-repo (a checkout of github.com/DramaCow/jaxued)"
    )
    if problem:
        settings.append(Setting("JaxUED scripts", skipped=problem))
        return settings
    shrink = ["--flags", *sizes.jaxued_flags] if sizes.jaxued_flags else []
    for method in JAXUED_METHODS:
        command = [str(PEER_WORKERS / "jaxued_worker.py"), "--repo", args.jaxued_repo, "--method", method]
        command += ["--updates-per-call", str(sizes.updates_per_call), "--repeats", str(sizes.repeats), *shrink]
        ours = algo_setting(f"ours {method}", sizes, method, 1)
        compare(ours, Setting(f"JaxUED {method}", lambda c=command: run_worker(c), versus=ours.label))
    return settings


def settings(stage: Stage, sizes: Sizes, args: Args) -> list[Setting]:
    """Every setting of `stage`."""
    if stage == "methods":
        return [algo_setting(name, sizes, name, 1) for name in args.methods]
    if stage == "seeds":
        return [
            algo_setting(f"{name} x{seeds}", sizes, name, seeds)
            for name in args.sweep_methods
            for seeds in sizes.seed_counts
        ]
    if stage == "env":
        return [
            env_setting(f"env {count}{suffix}", sizes, count, "resample", sizes.maze_size, sizes.n_walls, levels)
            for count in sizes.env_counts
            for suffix, levels in (("", None), (f", {RANDOM_POLICY_LEVELS} levels per env", RANDOM_POLICY_LEVELS))
        ]
    if stage == "unroll":
        return [
            algo_setting(f"{name} unroll {unroll}", sizes, name, 1, unroll)
            for name in args.sweep_methods
            for unroll in sizes.unrolls
        ]
    if stage == "sweep":
        return [setting for name in args.sweep_methods for setting in sweep_settings(sizes, name)]
    if stage == "command_buffers":
        return [
            Setting(f"{name} {setting}", lambda name=name, flags=flags: measure_with_xla_flags(sizes, name, flags))
            for name in args.sweep_methods
            for setting, flags in COMMAND_BUFFERS.items()
        ]
    return peer_settings(sizes, args)


def run_stage(stage: Stage, stage_settings: list[Setting], out: Path, measured: dict[tuple, dict]) -> list[dict]:
    """Measure each setting (or reuse what this run measured for its key), appending its JSON line at once."""
    results = []
    for setting in stage_settings:
        started = time.perf_counter()
        head = {"stage": stage, "setting": setting.label}
        if setting.versus:
            head["versus"] = setting.versus
        earlier = measured.get(setting.key) if setting.key else None
        if setting.skipped:
            result = {**head, "skipped": setting.skipped}
        elif earlier:
            result = {**earlier, **head, "same_as": f"{earlier['stage']} {earlier['setting']}"}
        else:
            try:
                result = {**head, **setting.measure()}
            except Exception as error:  # noqa: BLE001 a failed setting (out of memory) must not end the session
                result = {**head, "error": f"{type(error).__name__}: {error}"}
                traceback.print_exc()
            if setting.key and "error" not in result:
                measured[setting.key] = result
        result["wall_s"] = round(time.perf_counter() - started, 1)
        with open(out / f"{stage}.jsonl", "a") as file:
            file.write(json.dumps(result) + "\n")
        outcome = result.get("env_steps_per_s", result.get("error"))
        if "skipped" in result:
            outcome = f"skipped: {result['skipped']}"
        print(f"{stage} {setting.label}: {outcome}", file=sys.stderr, flush=True)
        results.append(result)
    return results


def seconds(result: dict):
    """Seconds per update (training) or per scan (env-only)."""
    return result.get("steady_s_per_update", result.get("steady_s"))


def seeds_column(result: dict) -> str:
    """Seeds, or points x seeds for a sweep."""
    seeds, points = result.get("num_seeds", 1), result.get("points", 1)
    return str(seeds) if points == 1 else f"{points} x {seeds}"


def table(results: list[dict]) -> str:
    """The markdown table of one stage's results."""
    lines = [
        "| setting | envs x steps | seeds | unroll | compile s | s per update (env: per scan) | env steps/s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        problem = result.get("error") or (f"skipped: {result['skipped']}" if "skipped" in result else None)
        if problem:
            lines.append(f"| {result['setting']} | - | - | - | - | - | {problem} |")
            continue
        row = [
            result["setting"],
            f"{result['num_envs']} x {result['num_steps']}",
            seeds_column(result),
            result.get("unroll", "-"),
            result["compile_s"],
            seconds(result),
            f"{result['env_steps_per_s']:,}",
        ]
        lines.append("| " + " | ".join(map(str, row)) + " |")
    return "\n".join(lines)


def side_by_side(results: list[dict]) -> str:
    """Each peer setting beside the AMaze setting it is compared with: env steps/s, ours / theirs, seconds, compile."""
    by_label = {result["setting"]: result for result in results}
    header = ["peer", "ours", "envs x steps", "peer env steps/s", "ours env steps/s", "ours / theirs"]
    header += ["peer s (update or scan)", "ours s", "peer compile s", "ours compile s"]
    rows = []
    for result in results:
        if "skipped" in result:
            rows.append([result["setting"], f"skipped: {result['skipped']}", *[None] * (len(header) - 2)])
        if "versus" not in result:
            continue
        theirs, ours = result, by_label[result["versus"]]
        if "error" in theirs or "error" in ours:
            rows.append([theirs["setting"], ours["setting"], theirs.get("error") or ours["error"]])
            rows[-1] += [None] * (len(header) - 3)
            continue
        rows.append(
            [theirs["setting"], ours["setting"], f"{theirs['num_envs']} x {theirs['num_steps']}"]
            + [theirs["env_steps_per_s"], ours["env_steps_per_s"]]
            + [ratio(ours["env_steps_per_s"], theirs["env_steps_per_s"]), seconds(theirs), seconds(ours)]
            + [theirs["compile_s"], ours["compile_s"]]
        )
    return markdown_table(header, rows)


def main(args: Args) -> None:
    unknown = sorted(set(args.methods + args.sweep_methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"error: no algos/ script for {', '.join(unknown)} (methods: {', '.join(METHODS)})")
    if args.jaxued_repo and not (Path(args.jaxued_repo) / "examples" / "maze_dr.py").exists():
        raise SystemExit(f"error: --jaxued-repo {args.jaxued_repo} has no examples/maze_dr.py (a jaxued checkout)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sizes = SMOKE if args.smoke else PAPER
    environment = describe_environment()
    print(json.dumps({"suite": "gpu", "smoke": args.smoke, **environment}), flush=True)
    measured: dict[tuple, dict] = {}
    for stage in args.stages:
        results = run_stage(stage, settings(stage, sizes, args), out, measured)
        print(f"\n### {stage} ({environment['device']})\n\n{table(results)}", flush=True)
        if stage == "peers":
            print(f"\n{side_by_side(results)}", flush=True)


if __name__ == "__main__":
    main(tyro.cli(Args))
