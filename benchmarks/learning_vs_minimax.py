"""Learning side by side with minimax-lib 0.2.0: train both libraries at one equal configuration and compare
how they learn, with one evaluator for both.

Methods: DR, Robust PLR, ACCEL and PAIRED, at a small configuration a CPU can train (7x7 mazes with 8 walls,
ACCEL from empty mazes; 64-step episodes; 32 envs x 128 steps; LSTM 64; lr 3e-4; the rest of PPO and every
method setting as minimax's shipped `minimax/config/configs/maze/<method>.json`, whose values cleanued's
flags are derived from, so the two sides cannot drift apart; `settings.json` lists each setting with
cleanued's default and minimax's shipped value and the run prints every mismatch).

Stages (`--stage`, each resumable: it skips what is already done, so a long job can simply be restarted):

- run: cleanued trains one process per method with `--num-seeds N` (`algos/<method>.py`, archives every
  `--checkpoint-every` updates); minimax trains one process per seed (`python -m minimax.train`, unmodified,
  in its own venv, with the shipped config's flags plus the overrides; `--seed=1..N`), stopped at the same
  number of rollouts: a tick is one rollout for DR, PLR and PAIRED (archives every `--checkpoint-every`
  ticks), and an ACCEL replay tick also plays the mutants, so an ACCEL run (archives every
  `--accel-archive-ticks` ticks) stops at the first archive where tick + replay ticks reaches `--rollouts`.
  `--jobs` processes run at once. An interrupted cleanued run resumes exactly (`--resume`); an interrupted
  minimax run starts over, because its checkpoints do not hold the PLR buffer.
- evaluate: every minimax checkpoint on the grid of `--checkpoint-every` rollouts is converted to cleanued's
  parameter tree (benchmarks/minimax_checkpoint_params.py in minimax's venv; PAIRED: the protagonist), and
  every checkpoint of both sides is evaluated with cleanued's code (`common/heldout_eval.py`, sampled
  actions, first episode): (a) on one fixed set of `--train-levels` fresh DR levels of the training size
  (the training-distribution curve); (b) at the final checkpoint, on the held-out mazes.
- report: final solve rates and returns as mean [95% bootstrap interval over seeds] per side, gradient
  updates, the curriculum from both sides' logs in windows of `--window` rollouts, time per job, and a PNG
  of the training-distribution solve rate against rollouts.

    python benchmarks/learning_vs_minimax.py --methods dr plr accel paired --seeds 4 --rollouts 600 --jobs 2
    python benchmarks/learning_vs_minimax.py --stage report   # again after any stage, or to re-read the results

Output under `--out`: `invocations.jsonl` (argv, device, versions of both stacks), `settings.json`,
`jobs.jsonl` (every training command exactly, with its environment, wall and CPU seconds), `logs/`,
`runs/` (cleanued's run folders), `minimax/` (minimax's log dirs, checkpoints and converted parameters),
`evaluations.jsonl`, and the report: `report.md`, `report.jsonl`, `curriculum.jsonl`,
`training_solve_rate.png`. `runs/` and `minimax/` are bulky (a PAIRED checkpoint holds the teacher: about 83 MB
per seed, some 5 GB for the full comparison) and listed in a `.gitignore` the run writes.
"""

import csv
import dataclasses
import json
import math
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

# A GPU shared by several training processes and this one: allocate on demand instead of grabbing 75% each.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import tyro  # noqa: E402
from scipy import stats  # noqa: E402

# SCAFFOLDING: make `algos`, `common` and `envs` importable when run as a script.
REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from algos import dr  # noqa: E402
from benchmarks.minimax_params import parameter_tree  # noqa: E402
from common import checkpoint as checkpoints  # noqa: E402
from common.config import (  # noqa: E402
    AT_LEAST_ONE,
    NON_NEGATIVE,
    Range,
    flags_of,
    raise_first,
    range_problems,
    read_saved_config,
)
from common.errors import ConfigError  # noqa: E402
from common.evaluate import load_run, load_script  # noqa: E402
from common.heldout_eval import evaluate_policy, play_levels  # noqa: E402
from common.provenance import describe_environment  # noqa: E402
from common.runs import one_line_errors  # noqa: E402
from envs.heldout import HELDOUT_MAZES, get_heldout_maze  # noqa: E402
from envs.levels import sample_dr_level, shortest_path_length  # noqa: E402
from envs.maze import EnvParams  # noqa: E402

METHODS = ("dr", "plr", "accel", "paired")
SIDES = ("cleanued", "minimax")
LOG_INTERVAL = 10
"""cleanued's --log-interval: logs.csv rows, stop checks and checkpoints fall on multiples of it."""

SHARED = {
    "maze_height": 7,
    "maze_width": 7,
    "maze_n_walls": 8,
    "maze_max_episode_steps": 64,
    "n_parallel": 32,
    "n_rollout_steps": 128,
    "student_recurrent_hidden_dim": 64,
    "lr": 3e-4,
    "adam_eps": 1e-5,
    "student_gae_lambda": 0.98,
    "student_ppo_n_epochs": 5,
    "student_ppo_n_minibatches": 1,
    "student_ppo_clip_eps": 0.2,
    "student_value_loss_coef": 0.5,
    "max_grad_norm": 0.5,
}
"""The equal configuration, as minimax's flags; everything not here is each method's shipped value."""
METHOD_SHARED = {"accel": {"maze_n_walls": 0}, "paired": {"maze_ued_n_walls": 8}}
"""Per method: ACCEL starts from empty mazes; PAIRED's teacher places the 8 walls."""


class Setting(NamedTuple):
    """One cleanued flag and the minimax flag it is derived from."""

    flag: str  # cleanued's field name (its flag without dashes)
    minimax: str  # minimax's flag name
    to_cleanued: object = None  # minimax's value -> cleanued's (None: the same value)


SCORE_FUNCTIONS = {"max_mc": "max_mc", "positive_value_loss": "pvl", "l1_value_loss": "l1_value_loss"}
STUDENT_SETTINGS = (
    Setting("maze_size", "maze_height"),
    Setting("max_steps", "maze_max_episode_steps"),
    Setting("num_envs", "n_parallel"),
    Setting("num_steps", "n_rollout_steps"),
    Setting("lstm_size", "student_recurrent_hidden_dim"),
    Setting("lr", "lr"),
    Setting("anneal_lr", "lr_anneal_steps", lambda steps: steps > 0),
    Setting("adam_eps", "adam_eps"),
    Setting("gamma", "discount"),
    Setting("gae_lambda", "student_gae_lambda"),
    Setting("num_epochs", "student_ppo_n_epochs"),
    Setting("num_minibatches", "student_ppo_n_minibatches"),
    Setting("clip_eps", "student_ppo_clip_eps"),
    Setting("ent_coef", "student_entropy_coef"),
    Setting("vf_coef", "student_value_loss_coef"),
    Setting("max_grad_norm", "max_grad_norm"),
)
REPLAY_SETTINGS = (
    Setting("n_walls", "maze_n_walls"),
    Setting("replay_prob", "plr_replay_prob"),
    Setting("buffer_size", "plr_buffer_size"),
    Setting("min_fill_ratio", "plr_min_fill_ratio"),
    Setting("score_function", "ued_score", SCORE_FUNCTIONS.get),
    Setting("prioritization", "plr_use_score_ranks", lambda ranks: "rank" if ranks else "proportional"),
    Setting("temperature", "plr_temp"),
    Setting("staleness_coef", "plr_staleness_coef"),
    Setting("exploratory_grad_updates", "plr_use_robust_plr", lambda robust: not robust),
)
METHOD_SETTINGS = {
    "dr": (Setting("n_walls", "maze_n_walls"),),
    "plr": REPLAY_SETTINGS,
    "accel": (
        *REPLAY_SETTINGS,
        Setting("num_edits", "plr_n_mutations"),
        Setting("mutation_criterion", "plr_mutation_criterion"),
        Setting("mutation_subsample_size", "plr_mutation_subsample_size"),
    ),
    "paired": (
        Setting("n_walls", "maze_ued_n_walls"),
        Setting("ued_score", "ued_score"),
        Setting("num_students", "n_students"),
        Setting("teacher_anneal_lr", "teacher_lr_anneal_steps", lambda steps: steps > 0),
        Setting("teacher_ent_coef", "teacher_entropy_coef"),
        Setting("teacher_gamma", "teacher_discount"),
        Setting("teacher_gae_lambda", "teacher_gae_lambda"),
        Setting("teacher_lstm_size", "teacher_recurrent_hidden_dim"),
        Setting("teacher_conv_filters", "teacher_n_conv_filters"),
        Setting("noise_dim", "maze_ued_noise_dim"),
    ),
}
"""Per method, the cleanued flags that take minimax's value (the student settings apply to every method)."""

MINIMAX_BEHAVIOUR = {
    "dr": (Setting("carry_across_updates", "(dr_runner.py keeps the last rollout's LSTM carry)", lambda _: True),),
    "plr": (
        Setting("maxmc_running_max", "(plr.py stores the last rollout's best return)", lambda _: False),
        Setting("rank_ties", "(plr.py ranks equal scores by slot: a stable argsort)", lambda _: "slot_order"),
    ),
    "accel": (
        Setting("maxmc_running_max", "(plr.py stores the last rollout's best return)", lambda _: False),
        Setting("rank_ties", "(plr.py ranks equal scores by slot: a stable argsort)", lambda _: "slot_order"),
    ),
    "paired": (Setting("teacher_lr", "lr", None),),  # paired_runner.py: `teacher_lr = lr if ... else lr`
}
"""Where cleanued deviates from minimax on purpose behind a flag (docs/deviations.md): the flag value that
reproduces minimax, set with --match-deviations. The minimax "flag" is what the value comes from."""

FIXED_IN_CLEANUED = {
    "student_ppo_clip_value_loss": True,
    "student_recurrent_arch": "lstm",
    "student_hidden_dim": 32,
    "student_n_hidden_layers": 1,
    "student_n_conv_filters": 16,
    "student_n_scalar_embeddings": 4,
    "student_scalar_embed_dim": 5,
    "maze_see_agent": False,
    "maze_normalize_obs": True,
    "maze_obs_agent_pos": False,
    "maze_sample_n_walls": False,
}
"""minimax settings that cleanued hard-codes (docs/methods.md): checked, since no flag could follow them."""
FIXED_PER_METHOD = {
    "dr": {"maze_replace_wall_pos": True},
    "plr": {"maze_replace_wall_pos": True, "plr_force_unique": True, "plr_use_parallel_eval": False},
    "accel": {
        "maze_replace_wall_pos": True,
        "plr_force_unique": True,
        "plr_use_parallel_eval": False,
        "plr_mutation_fn": "default",
    },
    "paired": {
        "maze_ued_replace_wall_pos": True,
        "maze_ued_fixed_n_wall_steps": True,
        "maze_ued_first_wall_pos_sets_budget": False,
        "maze_ued_set_agent_dir": False,
        "teacher_recurrent_arch": "lstm",
        "teacher_hidden_dim": 32,
        "teacher_n_hidden_layers": 1,
        "teacher_scalar_embed_dim": 10,
    },
}

KNOWN_DIFFERENCES = (
    (
        METHODS,
        "Random streams differ (cleanued seeds are split(key(0), N)[i], minimax's --seed=i+1), so the sides are "
        "compared as distributions over seeds, never seed by seed.",
    ),
    (
        METHODS,
        "The logged training returns are defined differently: cleanued pools the episodes an update finished "
        "(each episode weighs the same), minimax averages per env its last <= 10 episodes of the tick (each env "
        "weighs the same); the evaluation gives both sides the same definition.",
    ),
    (
        ("plr", "accel"),
        "minimax's level metrics (plr/n_walls, plr/shortest_path_length, env/n_walls) average over the levels its "
        "Seidel test calls passable; cleanued's walls average over all levels, its shortest path over solvable ones.",
    ),
    (
        ("accel",),
        "minimax plays the mutants inside the replay tick, cleanued in the next update, so the sides stop at the "
        "same number of rollouts only to within --accel-archive-ticks ticks (the rollout counts are reported).",
    ),
    (("accel",), "minimax does not log the mutants' levels (walls of mutants: cleanued only)."),
    (
        ("paired",),
        "minimax's PAIRED keeps the students' and the teacher's LSTM carry from one update to the next; "
        "cleanued's paired.py starts each update from zeros and has no flag to carry it.",
    ),
    (
        ("paired",),
        "minimax logs the maximum shortest path of the designed levels (env/shortest_path_length), cleanued "
        "the mean; only walls and the solvable share are compared.",
    ),
)
"""What no flag can make equal; printed with the report."""


@dataclass(frozen=True)
class Args:
    methods: tuple[Literal["dr", "plr", "accel", "paired"], ...] = METHODS
    """Methods to compare (algos/<method>.py against minimax's <method>.json)."""
    seeds: Annotated[int, AT_LEAST_ONE] = 4
    """Seeds per side: one cleanued process vmaps them, minimax runs one process per seed."""
    rollouts: Annotated[int, AT_LEAST_ONE] = 600
    """Rollouts (of 32 envs x 128 steps) per run: cleanued updates; minimax ticks (ACCEL: ticks + replay ticks)."""
    out: Path = REPO_ROOT / "benchmarks" / "results" / "learning_vs_minimax"
    """Output folder (stages read and write here; rerunning skips what is done)."""
    jobs: Annotated[int, AT_LEAST_ONE] = 2
    """Training processes at once."""
    stage: Literal["run", "evaluate", "report", "all"] = "all"
    """run: train both sides; evaluate: evaluate every checkpoint; report: tables and figure; all: in turn."""
    checkpoint_every: Annotated[int, AT_LEAST_ONE] = 100
    """Rollouts between evaluated checkpoints (cleanued's --checkpoint-interval and --archive-interval)."""
    accel_archive_ticks: Annotated[int, AT_LEAST_ONE] = 10
    """Ticks between minimax ACCEL's archives, the grain of its stop (others archive every --checkpoint-every)."""
    train_levels: Annotated[int, AT_LEAST_ONE] = 512
    """Fresh training-distribution levels (one attempt each) per checkpoint and seed for the learning curve."""
    heldout_mazes: tuple[str, ...] = ("SixteenRooms", "Labyrinth", "StandardMaze")
    """Held-out mazes evaluated at the final checkpoint (each with its own episode length)."""
    heldout_episodes: Annotated[int, AT_LEAST_ONE] = 100
    """Episodes per held-out maze and seed."""
    eval_seed: Annotated[int, Range(0, 2**31 - 1)] = 0
    """Seed of the evaluation levels and actions (the same for both sides)."""
    window: Annotated[int, AT_LEAST_ONE] = 50
    """Rollouts per window of the curriculum statistics and the logged training return."""
    match_deviations: bool = True
    """Run cleanued's flagged deviations as minimax: --carry-across-updates, --no-maxmc-running-max, --teacher-lr=lr."""
    bootstrap_resamples: Annotated[int, AT_LEAST_ONE] = 10_000
    """Resamples of the bootstrap intervals over seeds."""
    minimax_venv: Path = REPO_ROOT / "benchmarks" / ".minimax-venv"
    """Virtual environment with minimax-lib 0.2.0 (benchmarks/bench_algos.py creates it)."""
    poll_seconds: Annotated[float, NON_NEGATIVE] = 2.0
    """How often running jobs are checked (minimax's stop condition is read from its logs.csv)."""

    def __post_init__(self):
        raise_first(range_problems(self))
        raise_first(
            [
                (not self.methods, "--methods: give at least one method"),
                (
                    self.rollouts % self.checkpoint_every != 0,
                    f"--rollouts ({self.rollouts}) must be a multiple of --checkpoint-every ({self.checkpoint_every})",
                ),
                (
                    self.checkpoint_every % LOG_INTERVAL != 0,
                    f"--checkpoint-every ({self.checkpoint_every}) must be a multiple of {LOG_INTERVAL} (cleanued's "
                    "--log-interval)",
                ),
                *[(name not in HELDOUT_MAZES, f"unknown held-out maze {name!r}") for name in self.heldout_mazes],
            ]
        )


# ---------------------------------------------------------------------------------------------------------
# The equal configuration


def minimax_shipped(method: str, venv: Path) -> dict:
    """minimax's shipped maze config for `method`, {flag: value}, read as a file from its venv."""
    found = sorted(venv.glob(f"lib/python*/site-packages/minimax/config/configs/maze/{method}.json"))
    if not found:
        raise ConfigError(f"no minimax-lib in {venv} (create it with benchmarks/bench_algos.py --minimax)")
    grid = json.loads(found[0].read_text())["args"]
    # A shipped config is a grid of one point: every value is a one-item list.
    return {key: value[0] if isinstance(value, list) else value for key, value in grid.items()}


def minimax_settings(method: str, shipped: dict) -> dict:
    """minimax's training flags for `method`: the shipped values with the equal configuration on top."""
    return {**shipped, **SHARED, **METHOD_SHARED.get(method, {})}


def derived(setting: Setting, values: dict):
    convert = setting.to_cleanued or (lambda value: value)
    return convert(values.get(setting.minimax))


def cleanued_settings(method: str, minimax: dict, match_deviations: bool) -> dict:
    """cleanued's method, environment and PPO flags, {field: value}, derived from minimax's `minimax` flags."""
    values = {setting.flag: derived(setting, minimax) for setting in STUDENT_SETTINGS + METHOD_SETTINGS[method]}
    if match_deviations:
        values.update({setting.flag: derived(setting, minimax) for setting in MINIMAX_BEHAVIOUR[method]})
    return values


def same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def settings_table(method: str, defaults: dict, shipped: dict, minimax: dict, cleanued: dict) -> list[dict]:
    """Every setting of `method` with cleanued's default, minimax's shipped value and the values each side trains
    with; `problem` names what is not as it should be (None where all is well)."""
    rows = []
    for kind, settings in (
        ("shared", STUDENT_SETTINGS),
        ("method", METHOD_SETTINGS[method]),
        ("deviation", MINIMAX_BEHAVIOUR[method]),
    ):
        for setting in settings:
            shipped_value, used_minimax = derived(setting, shipped), derived(setting, minimax)
            row = {"kind": kind, "cleanued_flag": setting.flag, "minimax_flag": setting.minimax}
            row |= {"cleanued_default": defaults.get(setting.flag), "minimax_shipped": shipped_value}
            row |= {
                "cleanued_used": cleanued.get(setting.flag, defaults.get(setting.flag)),
                "minimax_used": used_minimax,
            }
            problem = None
            if not same(row["cleanued_used"], used_minimax):
                problem = "the sides train with different values"
            elif kind == "method" and not same(row["cleanued_default"], shipped_value):
                problem = "cleanued's default differs from minimax's shipped value"
            elif kind == "deviation" and not same(row["cleanued_default"], used_minimax):
                problem = "a deliberate deviation, set to minimax's behaviour here"
            rows.append(row | {"problem": problem})
    for key, value in {**FIXED_IN_CLEANUED, **FIXED_PER_METHOD[method]}.items():
        used = minimax.get(key)
        problem = None if same(used, value) else "minimax uses a value cleanued cannot take"
        rows.append({"kind": "fixed", "cleanued_flag": "(fixed)", "minimax_flag": key, "cleanued_default": value})
        rows[-1] |= {"minimax_shipped": shipped.get(key), "cleanued_used": value, "minimax_used": used}
        rows[-1] |= {"problem": problem}
    return rows


def cli_flags(values: dict) -> list[str]:
    """cleanued command-line flags for {field: value}."""
    flags = []
    for name, value in values.items():
        flag = name.replace("_", "-")
        if isinstance(value, bool):
            flags.append(f"--{flag}" if value else f"--no-{flag}")
        else:
            flags += [f"--{flag}", str(value)]
    return flags


# ---------------------------------------------------------------------------------------------------------
# Training jobs


def cleanued_run_dir(out: Path, method: str) -> Path:
    return out / "runs" / f"cleanued_{method}"


def minimax_xpid(method: str, seed: int) -> str:
    return f"{method}_{seed}"


def minimax_dir(out: Path, method: str, seed: int) -> Path:
    return out / "minimax" / minimax_xpid(method, seed)


def cleanued_command(args: Args, method: str, settings: dict) -> list[str]:
    run = {
        "runs_dir": args.out / "runs",
        "run_name": f"cleanued_{method}",
        "num_seeds": args.seeds,
        "seed": 0,
        "total_updates": args.rollouts,
        "log_interval": LOG_INTERVAL,
        "eval_interval": 0,
        "screenshot_interval": 0,
        "checkpoint_interval": args.checkpoint_every,
        "archive_interval": args.checkpoint_every,
    }
    return [sys.executable, f"algos/{method}.py", *cli_flags(run), *cli_flags(settings)]


def minimax_archive_ticks(args: Args, method: str) -> int:
    """Ticks between a minimax run's archives (which are never overwritten, so each is one tick's policy). DR,
    PLR and PAIRED play one rollout per tick and archive on the evaluation grid; ACCEL's rollout count runs
    ahead of its ticks, so it archives more often to stop near the target and to match the grid closely."""
    return args.accel_archive_ticks if method == "accel" else args.checkpoint_every


def minimax_command(args: Args, method: str, seed: int, settings: dict) -> list[str]:
    run = {
        "seed": seed,
        "xpid": minimax_xpid(method, seed),
        "log_dir": args.out / "minimax",
        "log_interval": 1,
        "verbose": False,
        "from_last_checkpoint": False,  # a rerun never resumes: the checkpoint lacks the PLR buffer
        "checkpoint_interval": minimax_archive_ticks(args, method),
        "archive_interval": minimax_archive_ticks(args, method),
        "archive_init_checkpoint": False,
        # Never more gradient updates than rollouts; DR and PAIRED (one update per tick) stop here themselves.
        "n_total_updates": args.rollouts,
        "test_env_names": None,  # no in-training evaluation: the evaluate stage evaluates both sides alike
        "test_interval": 0,
    }
    flags = [f"--{key}={value}" for key, value in {**settings, **run}.items() if value is not None]
    return [str(args.minimax_venv / "bin" / "python"), "-m", "minimax.train", *flags]


ENVIRONMENT_SET = {"WANDB_MODE": "disabled", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
"""Set for every training process: no wandb; GPU memory on demand, as several processes may share one GPU."""
MINIMAX_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")
MINIMAX_ENVIRONMENT_PREFIXES = ("JAX_", "XLA_", "CUDA_", "NVIDIA_", "TF_CPP_")


def job_environment(side: str) -> dict:
    """The environment of a training process. minimax writes its whole environment into meta.json, so it gets
    only what running needs, never the caller's tokens or credentials."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if side == "cleanued" or key in MINIMAX_ENVIRONMENT or key.startswith(MINIMAX_ENVIRONMENT_PREFIXES)
    }
    return environment | ENVIRONMENT_SET


def minimax_rollouts(method: str, tick: int, n_updates: int) -> int:
    """Rollouts a minimax run has played after `tick` ticks: one per tick, and an ACCEL replay tick (the ticks
    whose gradient update raised n_updates) plays the mutants as a second rollout."""
    return tick + n_updates if method == "accel" else tick


def read_minimax_log(path: Path) -> list[dict]:
    """minimax's logs.csv (header line `# a,b,...`, one row per tick) as dicts of floats, NaN where a value is
    empty (minimax writes -inf, "not played this tick", as an empty cell). A torn last row is dropped."""
    if not path.is_file():
        return []
    lines = path.read_text().splitlines()
    if not lines:
        return []
    header = lines[0].removeprefix("# ").split(",")
    rows = []
    for values in csv.reader(lines[1:]):
        if len(values) != len(header):
            continue
        try:
            rows.append({key: float(value) if value else math.nan for key, value in zip(header, values, strict=True)})
        except ValueError:
            continue
    return rows


def stop_tick(rows: list[dict], method: str, target: int, archive_ticks: int) -> int | None:
    """The first archived tick at which a minimax run has played `target` rollouts, or None."""
    for row in rows:
        tick = int(row["_tick"])
        if tick % archive_ticks == 0 and minimax_rollouts(method, tick, int(row["n_updates"])) >= target:
            return tick
    return None


def minimax_archive(directory: Path, tick: int) -> Path:
    return directory / f"checkpoint_{tick}.pkl"


@dataclass
class Job:
    side: str
    method: str
    seeds: tuple[int, ...]  # cleanued: the vmapped seed indices; minimax: its one --seed
    command: list[str]
    log: Path
    process: subprocess.Popen | None = None
    started: float = 0.0
    stop: int | None = None  # minimax: the tick it is stopped at
    terminated: float | None = None  # minimax: when it was sent SIGTERM

    @property
    def name(self) -> str:
        return f"{self.side}_{self.method}" + (f"_{self.seeds[0]}" if self.side == "minimax" else "")


def cleanued_done(args: Args, method: str) -> bool:
    return checkpoints.checkpoint_path(
        cleanued_run_dir(args.out, method) / "checkpoints" / "archive", args.rollouts
    ).exists()


def minimax_done(args: Args, method: str, seed: int) -> bool:
    stopped = minimax_dir(args.out, method, seed) / "stopped.json"
    return stopped.is_file() and json.loads(stopped.read_text()).get("target") == args.rollouts


def prepare_job(args: Args, job: Job) -> None:
    """Make the job start from where it can: cleanued resumes its newest checkpoint; minimax starts over."""
    if job.side == "cleanued":
        run_dir = cleanued_run_dir(args.out, job.method)
        if checkpoints.list_checkpoints(run_dir / "checkpoints"):
            job.command = [*job.command, "--resume"]
        elif run_dir.exists():
            job.command = [*job.command, "--overwrite"]  # a folder without a checkpoint holds nothing to keep
        return
    directory = minimax_dir(args.out, job.method, job.seeds[0])
    if directory.exists():
        if not (directory / "meta.json").is_file() and any(directory.iterdir()):
            raise ConfigError(f"{directory} is not a minimax log dir of this benchmark; refusing to delete it")
        shutil.rmtree(directory)


def signal_job(job: Job, signum: int) -> None:
    """Signal a child that `reap` has not reaped yet (so its pid is still its own). Not Popen.send_signal: that
    polls first and may reap the child, losing its CPU time."""
    try:
        os.kill(job.process.pid, signum)
    except ProcessLookupError:
        pass


def reap(process: subprocess.Popen) -> float | None:
    """CPU seconds (user + system) of a finished child, reaping it; None while it runs."""
    pid, status, usage = os.wait4(process.pid, os.WNOHANG)
    if pid == 0:
        return None
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


MINIMAX_GRACE_SECONDS = 60
"""minimax has no SIGTERM handler and dies at once; this only covers a process stuck in native code."""
ARCHIVE_SETTLE_SECONDS = 0.5
"""minimax copies an archive (0.8 MB, PAIRED's 83 MB with the teacher) without pausing this long, so a size that
holds still over it is a finished copy; the conversion then loads every archive it uses, which a torn one fails."""


def poll_minimax(args: Args, job: Job) -> None:
    """Stop a minimax run once the archive of its stop tick is completely written (its size holds still)."""
    directory = minimax_dir(args.out, job.method, job.seeds[0])
    if job.stop is None:
        rows = read_minimax_log(directory / "logs.csv")
        job.stop = stop_tick(rows, job.method, args.rollouts, minimax_archive_ticks(args, job.method))
    if job.stop is None:
        return
    if job.terminated is not None:
        if time.time() - job.terminated > MINIMAX_GRACE_SECONDS:
            signal_job(job, signal.SIGKILL)
        return
    archive = minimax_archive(directory, job.stop)
    sizes = []
    for _ in range(2):
        sizes.append(archive.stat().st_size if archive.is_file() else -1)
        time.sleep(ARCHIVE_SETTLE_SECONDS)
    if sizes[0] > 0 and sizes[0] == sizes[1]:
        signal_job(job, signal.SIGTERM)
        job.terminated = time.time()


def finish_job(args: Args, job: Job, cpu_s: float) -> dict:
    """The job's record for jobs.jsonl; a minimax job also gets its stopped.json."""
    record = {"job": job.name, "side": job.side, "method": job.method, "seeds": list(job.seeds)}
    environment = job_environment(job.side)
    kept = "all of the caller's" if job.side == "cleanued" else sorted(set(environment) - set(ENVIRONMENT_SET))
    record |= {"command": shlex.join(job.command), "cwd": str(REPO_ROOT), "log": str(job.log)}
    record |= {"environment_set": ENVIRONMENT_SET, "environment_kept": kept}
    record |= {"returncode": job.process.returncode, "wall_s": round(time.time() - job.started, 1)}
    record |= {"cpu_s": round(cpu_s, 1), "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    if job.side == "cleanued":
        record["ok"] = cleanued_done(args, job.method)
        return record
    directory = minimax_dir(args.out, job.method, job.seeds[0])
    rows = read_minimax_log(directory / "logs.csv")
    tick = job.stop or stop_tick(rows, job.method, args.rollouts, minimax_archive_ticks(args, job.method))
    row = next((row for row in rows if tick is not None and int(row["_tick"]) == tick), None)
    record["ok"] = row is not None and minimax_archive(directory, tick).is_file()
    if record["ok"]:
        n_updates = int(row["n_updates"])
        stopped = {"target": args.rollouts, "stop_tick": tick, "n_updates": n_updates}
        stopped |= {"rollouts": minimax_rollouts(job.method, tick, n_updates), **record}
        (directory / "stopped.json").write_text(json.dumps(stopped, indent=1) + "\n")
        record |= {"stop_tick": tick, "n_updates": n_updates, "rollouts": stopped["rollouts"]}
    return record


def make_jobs(args: Args, settings: dict) -> list[Job]:
    jobs = []
    for method in args.methods:
        command = cleanued_command(args, method, settings[method]["cleanued"])
        jobs.append(
            Job("cleanued", method, tuple(range(args.seeds)), command, args.out / "logs" / f"cleanued_{method}.log")
        )
        for seed in range(1, args.seeds + 1):
            command = minimax_command(args, method, seed, settings[method]["minimax"])
            log = args.out / "logs" / f"minimax_{method}_{seed}.log"
            jobs.append(Job("minimax", method, (seed,), command, log))
    return jobs


def check_existing_runs(args: Args, settings: dict) -> None:
    """Refuse an --out whose runs were made with other settings or seeds (resuming or reusing them would mix two
    configurations)."""
    for method in args.methods:
        for seed in range(1, args.seeds + 1):
            stopped = minimax_dir(args.out, method, seed) / "stopped.json"
            command = shlex.join(minimax_command(args, method, seed, settings[method]["minimax"]))
            if minimax_done(args, method, seed) and json.loads(stopped.read_text())["command"] != command:
                raise ConfigError(f"{stopped.parent} was trained by another command; use another --out")
        run_dir = cleanued_run_dir(args.out, method)
        if not (run_dir / "config.json").is_file():
            continue
        saved = read_saved_config(run_dir)["config"]
        used = {
            row["cleanued_flag"]: row["cleanued_used"] for row in settings[method]["table"] if row["kind"] != "fixed"
        }
        expected = {**used, "num_seeds": args.seeds, "seed": 0}
        expected |= {"archive_interval": args.checkpoint_every, "log_interval": LOG_INTERVAL}
        differing = [
            f"{key}: saved {saved.get(key)!r}, now {value!r}"
            for key, value in expected.items()
            if not same(saved.get(key), value)
        ]
        if differing:
            raise ConfigError(f"{run_dir} was trained with other settings ({'; '.join(differing)}); use another --out")


def run_stage(args: Args, settings: dict) -> None:
    pending = [
        job
        for job in make_jobs(args, settings)
        if not (
            cleanued_done(args, job.method) if job.side == "cleanued" else minimax_done(args, job.method, job.seeds[0])
        )
    ]
    print(f"run: {len(pending)} training processes to run, {args.jobs} at once", flush=True)
    running, failed = [], []
    # A SIGTERM to this process (not only Ctrl+C, which the children get too) stops the children below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        while pending or running:
            while pending and len(running) < args.jobs:
                job = pending.pop(0)
                prepare_job(args, job)
                job.log.parent.mkdir(parents=True, exist_ok=True)
                print(f"start {job.name}: {shlex.join(job.command)}", flush=True)
                with open(job.log, "a") as log:  # a resumed cleanued run keeps its earlier output
                    log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(job.command)}\n")
                    log.flush()
                    job.process = subprocess.Popen(
                        job.command, cwd=REPO_ROOT, env=job_environment(job.side), stdout=log, stderr=subprocess.STDOUT
                    )
                job.started = time.time()
                running.append(job)
            time.sleep(args.poll_seconds)
            for job in list(running):
                if job.side == "minimax" and job.process.returncode is None:
                    poll_minimax(args, job)
                cpu_s = reap(job.process)
                if cpu_s is None:
                    continue
                running.remove(job)
                record = finish_job(args, job, cpu_s)
                append_jsonl(args.out / "jobs.jsonl", record)
                state = "done" if record["ok"] else f"FAILED (exit {record['returncode']}; see {job.log})"
                print(f"{state}: {job.name} in {record['wall_s']:.0f} s wall, {record['cpu_s']:.0f} s CPU", flush=True)
                if not record["ok"]:
                    failed.append(job.name)
    finally:
        for job in running:  # interrupted: cleanued saves a checkpoint on SIGTERM, so a rerun resumes it
            if job.process.returncode is None:
                signal_job(job, signal.SIGTERM)
        for job in running:
            job.process.wait()
    if failed:
        raise SystemExit(f"run: {len(failed)} jobs failed: {', '.join(failed)}")


# ---------------------------------------------------------------------------------------------------------
# Evaluation


class Checkpoint(NamedTuple):
    side: str
    method: str
    seed: int  # index 0..N-1 on both sides (minimax's --seed is index + 1)
    grid: int  # the rollout count of the evaluation grid this checkpoint stands for
    rollouts: int  # rollouts the run had played at this checkpoint
    path: Path
    final: bool


def evaluation_grid(args: Args) -> list[int]:
    return list(range(args.checkpoint_every, args.rollouts + 1, args.checkpoint_every))


def cleanued_checkpoints(args: Args, method: str) -> list[Checkpoint]:
    archive = cleanued_run_dir(args.out, method) / "checkpoints" / "archive"
    found = []
    for grid in evaluation_grid(args):
        path = checkpoints.checkpoint_path(archive, grid)
        if path.exists():
            found += [
                Checkpoint("cleanued", method, seed, grid, grid, path, grid == args.rollouts)
                for seed in range(args.seeds)
            ]
    return found


def minimax_grid_ticks(rows: list[dict], method: str, grid: list[int], last_tick: int, archive_ticks: int) -> dict:
    """{grid rollouts: (tick, rollouts)}: for each grid point the archived tick whose rollout count is nearest
    (the last grid point is the stop tick itself)."""
    archived = [
        (int(row["_tick"]), minimax_rollouts(method, int(row["_tick"]), int(row["n_updates"])))
        for row in rows
        if int(row["_tick"]) % archive_ticks == 0 and int(row["_tick"]) <= last_tick
    ]
    chosen = {}
    for point in grid:
        if point == grid[-1]:
            chosen[point] = next((tick, played) for tick, played in archived if tick == last_tick)
        else:
            chosen[point] = min(archived, key=lambda item, point=point: (abs(item[1] - point), item[0]))
    return chosen


def minimax_checkpoints(args: Args, method: str) -> list[Checkpoint]:
    found = []
    for seed in range(1, args.seeds + 1):
        directory = minimax_dir(args.out, method, seed)
        if not minimax_done(args, method, seed):
            continue
        stopped = json.loads((directory / "stopped.json").read_text())
        rows = read_minimax_log(directory / "logs.csv")
        grid = evaluation_grid(args)
        for point, (tick, played) in minimax_grid_ticks(
            rows, method, grid, stopped["stop_tick"], minimax_archive_ticks(args, method)
        ).items():
            path = directory / "params" / f"tick_{tick:08d}.npz"
            found.append(Checkpoint("minimax", method, seed - 1, point, played, path, point == args.rollouts))
    return found


def convert_minimax_checkpoints(args: Args, found: list[Checkpoint]) -> None:
    """Convert the archives the evaluation needs (those not converted yet) in one minimax process."""
    pairs = []
    for item in {checkpoint.path for checkpoint in found if checkpoint.side == "minimax"}:
        if not item.exists():
            tick = int(item.stem.removeprefix("tick_"))
            pairs += [str(minimax_archive(item.parents[1], tick)), str(item)]
    if not pairs:
        return
    worker = [str(args.minimax_venv / "bin" / "python"), str(REPO_ROOT / "benchmarks" / "minimax_checkpoint_params.py")]
    print(f"evaluate: converting {len(pairs) // 2} minimax checkpoints", flush=True)
    subprocess.run([*worker, "convert", *pairs], check=True, env=job_environment("minimax"), stdout=subprocess.DEVNULL)


class Evaluator:
    """cleanued's evaluation of one student's parameters, jitted once for all checkpoints of both sides."""

    def __init__(self, args: Args):
        self.args = args
        self.lstm_size = SHARED["student_recurrent_hidden_dim"]
        self.network = dr.ActorCritic()
        size, walls, max_steps = SHARED["maze_height"], SHARED["maze_n_walls"], SHARED["maze_max_episode_steps"]
        self.env_params = EnvParams(max_steps=max_steps)
        rng_levels = jax.random.fold_in(jax.random.key(args.eval_seed), 0)
        sample = lambda rng: sample_dr_level(rng, size, size, walls)  # noqa: E731
        self.levels = jax.jit(jax.vmap(sample))(jax.random.split(rng_levels, args.train_levels))
        self.solvable_share = float(np.mean(np.asarray(jax.jit(jax.vmap(shortest_path_length))(self.levels)) >= 0))
        carry = dr.initial_carry(args.train_levels, self.lstm_size)
        self._train_levels = jax.jit(
            lambda params, rng: (
                play_levels(rng, self.network.apply, params, carry, self.levels, self.env_params, max_steps).returns
            )
        )
        self._heldout = {}

    def training_levels(self, params, grid: int, seed: int) -> np.ndarray:
        rng = jax.random.fold_in(jax.random.fold_in(jax.random.key(self.args.eval_seed + 1), grid), seed)
        return np.asarray(self._train_levels(params, rng))

    def heldout(self, params, maze_name: str, seed: int) -> np.ndarray:
        if maze_name not in self._heldout:
            maze, episodes = get_heldout_maze(maze_name), self.args.heldout_episodes
            carry = dr.initial_carry(episodes, self.lstm_size)
            self._heldout[maze_name] = jax.jit(
                lambda params, rng, maze=maze: (
                    evaluate_policy(rng, self.network.apply, params, carry, maze, self.env_params, episodes).returns
                )
            )
        index = self.args.heldout_mazes.index(maze_name)
        rng = jax.random.fold_in(jax.random.fold_in(jax.random.key(self.args.eval_seed + 2), index), seed)
        return np.asarray(self._heldout[maze_name](params, rng))


def evaluation_key(record: dict) -> tuple:
    return tuple(record[key] for key in ("side", "method", "seed", "grid", "kind", "maze", "episodes", "eval_seed"))


def evaluations_needed(args: Args, checkpoint: Checkpoint) -> list[tuple[str, str | None, int]]:
    """(kind, maze, episodes) evaluated at `checkpoint`."""
    needed = [("train_levels", None, args.train_levels)]
    if checkpoint.final:
        needed += [("heldout", maze, args.heldout_episodes) for maze in args.heldout_mazes]
    return needed


class ParameterSource:
    """Student parameters per checkpoint, loading each file once (a cleanued archive holds every seed)."""

    def __init__(self):
        self.cleanued_runs = {}  # method -> (script module, config, a runner state as the template to load into)
        self.loaded = {}  # path -> (params [seeds, ...] or one student's, student updates per seed or one)

    def get(self, checkpoint: Checkpoint):
        if checkpoint.path not in self.loaded:
            self.loaded = {checkpoint.path: self._load(checkpoint)}  # one file at a time: memory stays flat
        params, updates = self.loaded[checkpoint.path]
        if checkpoint.side == "cleanued":
            return jax.tree.map(lambda x: x[checkpoint.seed], params), int(updates[checkpoint.seed])
        return params, int(updates)

    def _load(self, checkpoint: Checkpoint):
        if checkpoint.side == "minimax":
            with np.load(checkpoint.path) as data:
                flat = {key: data[key] for key in data.files}
            return parameter_tree(flat), int(flat["n_updates"])
        if checkpoint.method not in self.cleanued_runs:  # the script, its config and a runner to shape the rest
            module, config, runner, _ = load_run(checkpoint.path.parents[2], checkpoint.path)
            self.cleanued_runs[checkpoint.method] = (module, config, runner)
        module, config, template = self.cleanued_runs[checkpoint.method]
        runner, _, _ = checkpoints.load(checkpoint.path, template)
        return module.policies(config)["student"](runner), np.asarray(runner.student_updates)


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (the minimax conversion worker)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def evaluate_stage(args: Args) -> None:
    path = args.out / "evaluations.jsonl"
    done = {evaluation_key(record) for record in read_jsonl(path)}
    evaluator, source, structure = None, ParameterSource(), None
    started, cpu_started = time.time(), cpu_seconds()
    count = 0
    for method in args.methods:
        found = cleanued_checkpoints(args, method) + minimax_checkpoints(args, method)
        todo = [
            (checkpoint, kind, maze, episodes)
            for checkpoint in found
            for kind, maze, episodes in evaluations_needed(args, checkpoint)
            if (checkpoint.side, method, checkpoint.seed, checkpoint.grid, kind, maze, episodes, args.eval_seed)
            not in done
        ]
        if not todo:
            continue
        convert_minimax_checkpoints(args, [checkpoint for checkpoint, *_ in todo])
        evaluator = evaluator or Evaluator(args)
        print(f"evaluate {method}: {len(todo)} evaluations of {len({c for c, *_ in todo})} checkpoints", flush=True)
        for checkpoint, kind, maze, episodes in todo:
            params, student_updates = source.get(checkpoint)
            if structure is None:
                structure = jax.tree.structure(params)
            elif jax.tree.structure(params) != structure:  # the name mapping and cleanued's network disagree
                raise ConfigError(f"{checkpoint.path}: its parameter tree does not match cleanued's ActorCritic")
            if kind == "train_levels":
                returns = evaluator.training_levels(params, checkpoint.grid, checkpoint.seed)
            else:
                returns = evaluator.heldout(params, maze, checkpoint.seed)
            record = {"side": checkpoint.side, "method": method, "seed": checkpoint.seed, "grid": checkpoint.grid}
            record |= {"rollouts": checkpoint.rollouts, "student_updates": student_updates, "kind": kind, "maze": maze}
            record |= {"episodes": episodes, "eval_seed": args.eval_seed, "final": checkpoint.final}
            record |= {"solve_rate": float(np.mean(returns > 0)), "return": float(np.mean(returns))}
            record |= {"checkpoint": str(checkpoint.path.relative_to(args.out))}
            if kind == "train_levels":
                record["solvable_share"] = evaluator.solvable_share
            append_jsonl(path, record)
            count += 1
    cpu_s, wall_s = cpu_seconds() - cpu_started, time.time() - started
    print(f"evaluate: {count} evaluations in {wall_s:.0f} s wall, {cpu_s:.0f} s CPU", flush=True)
    if count:
        append_jsonl(
            args.out / "jobs.jsonl",
            {"job": "evaluate", "evaluations": count, "wall_s": round(wall_s, 1), "cpu_s": round(cpu_s, 1)},
        )


# ---------------------------------------------------------------------------------------------------------
# Logs and curriculum


class Quantity(NamedTuple):
    """One curriculum statistic and where each side logs it."""

    name: str
    methods: tuple[str, ...]
    cleanued: str  # logs.csv column (rows are means over LOG_INTERVAL updates)
    cleanued_weight: str | None  # the column giving each row's share of updates the value describes
    minimax: str | None  # logs.csv column, or None where minimax does not log it
    minimax_kinds: tuple[str, ...]  # the rollouts (new, replay, mutant) the minimax value describes


ALL_KINDS = ("new", "replay", "mutant")
CURRICULUM = (
    Quantity(
        "replay fraction (per rollout)", ("plr", "accel"), "buffer/replay_fraction", None, "rollout/replay", ALL_KINDS
    ),
    Quantity(
        "walls of replayed levels", ("plr", "accel"), "level_replay/walls", "rollout/replay", "plr/n_walls", ("replay",)
    ),
    Quantity(
        "shortest path of replayed levels",
        ("plr", "accel"),
        "level_replay/shortest_path",
        "rollout/replay",
        "plr/shortest_path_length",
        ("replay",),
    ),
    Quantity("walls of new levels", ("plr", "accel"), "level_new/walls", "rollout/new", "env/n_walls", ("new",)),
    Quantity(
        "staleness (cu weighted_staleness, mm weighted_age)",
        ("plr", "accel"),
        "buffer/weighted_staleness",
        None,
        "plr/weighted_age",
        ALL_KINDS,
    ),
    Quantity(
        "mutation fraction (per rollout)", ("accel",), "buffer/mutation_fraction", None, "rollout/mutant", ALL_KINDS
    ),
    Quantity("walls of mutants", ("accel",), "level_mutant/walls", "rollout/mutant", None, ("mutant",)),
    Quantity("walls of designed levels", ("paired",), "level/walls", None, "env/n_walls", ALL_KINDS),
    Quantity("solvable share of designed levels", ("paired",), "level/solvable", None, "env/passable_ratio", ALL_KINDS),
    Quantity(
        "teacher's score of designed levels (relative regret)",
        ("paired",),
        "ued/score",
        None,
        "mean_return_tch",  # the teacher's episode return is the score, its only reward
        ALL_KINDS,
    ),
)
LOGGED_RETURN = {"cleanued": "train/return", "minimax": "return", "minimax_paired": "mean_return_a0"}
"""Each side's own logged training return (the protagonist's in PAIRED); defined differently (KNOWN_DIFFERENCES)."""


def read_cleanued_log(path: Path) -> list[dict]:
    """cleanued's logs.csv as dicts of floats (NaN where empty), with the per-row shares of rollouts that
    played replayed (`rollout/replay`), mutated (`rollout/mutant`) and new (`rollout/new`) levels."""
    if not path.is_file():
        return []
    rows = []
    with open(path) as handle:
        for raw in csv.DictReader(handle):
            row = {key: float(value) if value not in ("", None) else math.nan for key, value in raw.items()}
            replay = row.get("buffer/replay_fraction", 0.0)
            mutant = row.get("buffer/mutation_fraction", 0.0)
            row |= {"rollout/replay": replay, "rollout/mutant": mutant, "rollout/new": 1.0 - replay - mutant}
            rows.append(row)
    return rows


def minimax_events(rows: list[dict], method: str) -> list[dict]:
    """One record per rollout a minimax run played, in order: its position (`rollout`, from 1), its kind (new,
    replay, or ACCEL's mutant rollout after a replay) with `rollout/<kind>` indicators, and its tick's log row.
    A tick replayed when its gradient update raised n_updates (Robust PLR learns only on replays)."""
    events, previous_updates = [], 0
    for row in rows:
        n_updates = int(row["n_updates"])
        replay = method in ("plr", "accel") and n_updates > previous_updates
        previous_updates = n_updates
        kinds = ["replay", "mutant"] if replay and method == "accel" else ["replay" if replay else "new"]
        end = minimax_rollouts(method, int(row["_tick"]), n_updates)
        for offset, kind in enumerate(kinds):
            indicators = {f"rollout/{name}": float(name == kind) for name in ALL_KINDS}
            events.append(row | indicators | {"rollout": end - len(kinds) + 1 + offset, "kind": kind})
    return events


def windows(rollouts: int, window: int) -> list[tuple[int, int]]:
    """(start, end] windows of `window` rollouts covering 0..rollouts (the last one may be shorter)."""
    return [(start, min(start + window, rollouts)) for start in range(0, rollouts, window)]


def cleanued_window_value(rows: list[dict], seed: int, start: int, end: int, column: str, weight: str | None) -> float:
    """Mean of `column` over the seed's rows in (start, end], each row weighted by its share of updates the
    value describes; NaN when nothing in the window."""
    values, weights = [], []
    for row in rows:
        if int(row["seed"]) != seed or not start < row["update"] <= end:
            continue
        value, share = row.get(column, math.nan), 1.0 if weight is None else row.get(weight, math.nan)
        if not (math.isnan(value) or math.isnan(share)) and share > 0:
            values.append(value)
            weights.append(share)
    return float(np.average(values, weights=weights)) if values else math.nan


def minimax_window_value(events: list[dict], start: int, end: int, column: str, kinds: tuple[str, ...]) -> float:
    values = [
        event.get(column, math.nan) for event in events if start < event["rollout"] <= end and event["kind"] in kinds
    ]
    values = [value for value in values if not math.isnan(value)]
    return float(np.mean(values)) if values else math.nan


def nanmean(values) -> float:
    kept = [value for value in values if not math.isnan(value)]
    return float(np.mean(kept)) if kept else math.nan


def curriculum_records(args: Args, method: str, cleanued_rows: list[dict], minimax_runs: dict) -> list[dict]:
    """Per quantity, side and window: per-seed values and their mean. `minimax_runs` maps seed index to its
    rollout events."""
    records = []
    quantities = [quantity for quantity in CURRICULUM if method in quantity.methods]
    returned = LOGGED_RETURN["minimax_paired" if method == "paired" else "minimax"]
    quantities.append(
        Quantity(
            "logged training return (own definition)", (method,), LOGGED_RETURN["cleanued"], None, returned, ALL_KINDS
        )
    )
    for quantity in quantities:
        for start, end in windows(args.rollouts, args.window):
            per_seed = {
                "cleanued": [
                    cleanued_window_value(cleanued_rows, seed, start, end, quantity.cleanued, quantity.cleanued_weight)
                    for seed in range(args.seeds)
                    if cleanued_rows
                ],
                "minimax": [
                    minimax_window_value(events, start, end, quantity.minimax, quantity.minimax_kinds)
                    for _, events in sorted(minimax_runs.items())
                    if quantity.minimax is not None
                ],
            }
            for side, values in per_seed.items():
                record = {"method": method, "quantity": quantity.name, "side": side, "window": [start, end]}
                records.append(record | {"per_seed": values, "mean": nanmean(values) if values else None})
    return records


# ---------------------------------------------------------------------------------------------------------
# Statistics and report


def bootstrap_interval(values, resamples: int, seed: int = 0) -> tuple[float, tuple[float, float] | None]:
    """Mean over seeds and its 95% bootstrap interval (percentile: with a handful of seeds BCa's corrections are
    themselves too noisy); no interval for one seed, a point interval when every seed agrees."""
    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    if len(values) < 2:
        return mean, None
    if np.all(values == values[0]):
        return mean, (mean, mean)
    result = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=resamples,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return mean, (float(result.confidence_interval.low), float(result.confidence_interval.high))


def overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool | None:
    if a is None or b is None:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def describe(mean: float | None, interval: tuple[float, float] | None, digits: int = 3) -> str:
    if mean is None or math.isnan(mean):
        return "-"
    if interval is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def final_rows(mazes: tuple[str, ...]) -> list[tuple[str, str, str | None, str]]:
    """(label, kind, maze, field) of the evaluation rows of the final table, in order."""
    rows = [("training-distribution solve rate", "train_levels", None, "solve_rate")]
    rows.append(("training-distribution return", "train_levels", None, "return"))
    rows += [(f"{maze} solve rate", "heldout", maze, "solve_rate") for maze in mazes]
    return rows


def summary_records(
    args: Args, evaluations: list[dict], updates: dict, rollouts_played: dict, logged: dict
) -> list[dict]:
    """One record per method and metric: per side the per-seed values, mean and interval, and the overlap."""
    records = []
    for method in args.methods:
        final = sorted((r for r in evaluations if r["method"] == method and r["final"]), key=lambda r: r["seed"])
        sources = {
            label: {
                side: [r[field] for r in final if r["side"] == side and r["kind"] == kind and r["maze"] == maze]
                for side in SIDES
            }
            for label, kind, maze, field in final_rows(args.heldout_mazes)
        }
        sources["student gradient updates"] = {side: updates.get((method, side), []) for side in SIDES}
        sources["rollouts played"] = {side: rollouts_played.get((method, side), []) for side in SIDES}
        sources[f"logged training return, last {min(args.window, args.rollouts)} rollouts (own definition)"] = {
            side: logged.get((method, side), []) for side in SIDES
        }
        for label, per_side in sources.items():
            record = {"method": method, "metric": label}
            intervals = {}
            for side, values in per_side.items():
                values = [value for value in values if not math.isnan(value)]
                mean, interval = bootstrap_interval(values, args.bootstrap_resamples) if values else (None, None)
                intervals[side] = interval
                record[side] = {"per_seed": values, "mean": mean, "interval": interval}
            record["overlap"] = overlap(intervals["cleanued"], intervals["minimax"])
            records.append(record)
    return records


METHOD_NAMES = {"dr": "DR", "plr": "Robust PLR", "accel": "ACCEL", "paired": "PAIRED"}


def markdown_summary(records: list[dict]) -> str:
    lines = ["| method | metric | cleanued | minimax | intervals overlap |", "|---|---|---|---|---|"]
    for record in records:
        counts = record["metric"] in ("student gradient updates", "rollouts played")
        cells = []
        for side in SIDES:
            values, mean = record[side]["per_seed"], record[side]["mean"]
            if counts:
                cells.append(f"{mean:.0f} ({min(values):.0f}-{max(values):.0f})" if values else "-")
            else:
                cells.append(describe(mean, record[side]["interval"]))
        verdict = {True: "yes", False: "**no**", None: "-"}[None if counts else record["overlap"]]
        lines.append(f"| {METHOD_NAMES[record['method']]} | {record['metric']} | {cells[0]} | {cells[1]} | {verdict} |")
    return "\n".join(lines)


def markdown_curriculum(records: list[dict]) -> str:
    if not records:
        return ""
    ends = sorted({record["window"][1] for record in records})
    header = "| method | quantity | side | " + " | ".join(str(end) for end in ends) + " |"
    lines = [header, "|---|---|---|" + "---:|" * len(ends)]
    grouped = {}
    for record in records:
        key = (record["method"], record["quantity"], record["side"])
        grouped.setdefault(key, {})[record["window"][1]] = record["mean"]
    for (method, quantity, side), by_end in grouped.items():
        cells = [format_value(by_end.get(end)) for end in ends]
        lines.append(f"| {METHOD_NAMES[method]} | {quantity} | {side} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_value(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.3g}" if abs(value) >= 10 else f"{value:.3f}"  # staleness runs into the thousands


def curve_points(evaluations: list[dict], method: str, side: str) -> dict:
    """{grid rollouts: per-seed training-distribution solve rates}."""
    points = {}
    for record in evaluations:
        if record["method"] == method and record["side"] == side and record["kind"] == "train_levels":
            points.setdefault(record["grid"], []).append(record["solve_rate"])
    return dict(sorted(points.items()))


def plot_curves(args: Args, evaluations: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(args.methods), figsize=(4 * len(args.methods), 3.4), squeeze=False)
    for axis, method in zip(axes[0], args.methods, strict=True):
        for side, color in zip(SIDES, ("tab:blue", "tab:orange"), strict=True):
            points = curve_points(evaluations, method, side)
            if not points:
                continue
            x = list(points)
            summaries = [bootstrap_interval(values, args.bootstrap_resamples) for values in points.values()]
            means = [mean for mean, _ in summaries]
            seeds = max(len(values) for values in points.values())
            axis.plot(x, means, marker="o", color=color, label=f"{side} ({seeds} seed{'s' if seeds > 1 else ''})")
            if all(interval is not None for _, interval in summaries):
                low, high = zip(*(interval for _, interval in summaries), strict=True)
                axis.fill_between(x, low, high, color=color, alpha=0.2)
        axis.set_title(METHOD_NAMES[method])
        axis.set_xlabel("rollouts")
        axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
        axis.legend(loc="upper left", fontsize=8)  # learning curves rise: the top left stays empty
    axes[0][0].set_ylabel(f"solve rate, {args.train_levels} fresh training levels")
    figure.suptitle("Training-distribution solve rate: mean and 95% bootstrap band over seeds", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def gather_run_facts(args: Args) -> tuple[dict, dict, dict, dict, dict]:
    """From the logs: per (method, side) the final student gradient updates, the rollouts played and the last
    window's logged training return per seed; per method the cleanued rows and minimax events by seed."""
    updates, played, logged, cleanued_logs, minimax_logs = {}, {}, {}, {}, {}
    last = (args.rollouts - args.window, args.rollouts)
    for method in args.methods:
        rows = read_cleanued_log(cleanued_run_dir(args.out, method) / "logs.csv")
        cleanued_logs[method] = rows
        finals = [row for row in rows if int(row["update"]) == args.rollouts]
        if len(finals) == args.seeds:
            updates[method, "cleanued"] = [row["student_updates"] for row in sorted(finals, key=lambda r: r["seed"])]
            played[method, "cleanued"] = [float(args.rollouts)] * args.seeds
            logged[method, "cleanued"] = [
                cleanued_window_value(rows, seed, *last, LOGGED_RETURN["cleanued"], None) for seed in range(args.seeds)
            ]
        minimax_logs[method] = {}
        returned = LOGGED_RETURN["minimax_paired" if method == "paired" else "minimax"]
        for seed in range(1, args.seeds + 1):
            if not minimax_done(args, method, seed):
                continue
            directory = minimax_dir(args.out, method, seed)
            stopped = json.loads((directory / "stopped.json").read_text())
            rows = [row for row in read_minimax_log(directory / "logs.csv") if row["_tick"] <= stopped["stop_tick"]]
            events = minimax_events(rows, method)
            minimax_logs[method][seed - 1] = events
            updates.setdefault((method, "minimax"), []).append(float(stopped["n_updates"]))
            played.setdefault((method, "minimax"), []).append(float(stopped["rollouts"]))
            end = stopped["rollouts"]
            logged.setdefault((method, "minimax"), []).append(
                minimax_window_value(events, end - args.window, end, returned, ALL_KINDS)
            )
    return updates, played, logged, cleanued_logs, minimax_logs


def time_table(jobs: list[dict]) -> str:
    totals = {}
    for job in jobs:
        key = (job.get("method", "-"), job.get("side", job["job"]))
        wall, cpu, count = totals.get(key, (0.0, 0.0, 0))
        totals[key] = (wall + job["wall_s"], cpu + job["cpu_s"], count + 1)
    lines = ["| method | side | processes | wall s (sum) | CPU s (sum) |", "|---|---|---:|---:|---:|"]
    for (method, side), (wall, cpu, count) in totals.items():
        lines.append(f"| {METHOD_NAMES.get(method, method)} | {side} | {count} | {wall:,.0f} | {cpu:,.0f} |")
    return "\n".join(lines)


def report_stage(args: Args, settings: dict) -> str:
    evaluations = [
        record
        for record in read_jsonl(args.out / "evaluations.jsonl")
        if record["method"] in args.methods
        and record["eval_seed"] == args.eval_seed
        and record["episodes"] == (args.train_levels if record["kind"] == "train_levels" else args.heldout_episodes)
        and record["seed"] < args.seeds
    ]
    updates, played, logged, cleanued_logs, minimax_logs = gather_run_facts(args)
    summaries = summary_records(args, evaluations, updates, played, logged)
    curriculum = [
        record
        for method in args.methods
        for record in curriculum_records(args, method, cleanued_logs[method], minimax_logs[method])
    ]
    write_jsonl(args.out / "report.jsonl", summaries)
    write_jsonl(args.out / "curriculum.jsonl", curriculum)
    figure = args.out / "training_solve_rate.png"
    if evaluations:
        plot_curves(args, evaluations, figure)
    # Where the training ran: the last invocation with a run stage (a report may be made anywhere).
    invocations = read_jsonl(args.out / "invocations.jsonl")
    trained = [invocation for invocation in invocations if invocation["args"]["stage"] in ("run", "all")]
    environment = (trained or invocations or [{}])[-1]
    jobs = [job for job in read_jsonl(args.out / "jobs.jsonl") if job.get("ok", True)]
    solvable = next((record["solvable_share"] for record in evaluations if "solvable_share" in record), None)
    parts = [
        "# cleanued vs minimax-lib 0.2.0: learning at one equal configuration",
        f"{args.seeds} seed(s) per side, {args.rollouts} rollouts of 32 envs x 128 steps per run; 7x7 mazes, 8 walls "
        "(ACCEL: empty new mazes), 64-step episodes, LSTM 64, lr 3e-4 (settings.json lists every setting).",
        "cleanued: "
        + ", ".join(f"{k} {environment.get('cleanued', {}).get(k)}" for k in ("device", "jax", "commit"))
        + "; minimax: "
        + ", ".join(f"{k} {environment.get('minimax', {}).get(k)}" for k in ("device", "minimax-lib", "jax")),
        "## Final checkpoint",
        f"Mean over seeds [95% percentile bootstrap interval, {args.bootstrap_resamples} resamples]. Both sides' "
        "checkpoints are evaluated by cleanued's evaluator (sampled actions, first episode): training-distribution "
        f"rows on {args.train_levels} fixed fresh 7x7 8-wall DR levels (solvable share "
        f"{solvable if solvable is None else round(solvable, 3)}, at most 64 steps), held-out rows "
        f"{args.heldout_episodes} episodes per seed with each maze's own episode length. The last rows are counts "
        "(mean and range) and each side's own logged return, which the two libraries define differently.",
        markdown_summary(summaries),
        f"![training-distribution solve rate]({figure.name})",
        f"## Curriculum (windows of {args.window} rollouts; the column is the window's last rollout)",
        "Means over seeds. cleanued: logs.csv rows (means over 10 updates), level columns weighted by the share "
        "of updates that played such levels; minimax: one value per rollout from its per-tick logs.csv (an ACCEL "
        "replay tick is a replay and a mutant rollout); '-': not logged by that side or nothing in the window.",
        markdown_curriculum(curriculum),
        "## Settings",
        settings_markdown(settings),
        "## What is not equal",
        "\n".join(
            f"- {', '.join(METHOD_NAMES[method] for method in methods if method in args.methods)}: {text}"
            for methods, text in KNOWN_DIFFERENCES
            if set(methods) & set(args.methods)
        ),
        "## Time",
        time_table(jobs) if jobs else "(no finished jobs recorded)",
    ]
    text = "\n\n".join(parts) + "\n"
    (args.out / "report.md").write_text(text)
    return text


def settings_markdown(settings: dict) -> str:
    lines = []
    for method, entry in settings.items():
        problems = [row for row in entry["table"] if row["problem"]]
        if not problems:
            lines.append(
                f"- {METHOD_NAMES[method]}: every setting equal, and cleanued's defaults are minimax's shipped values"
            )
        lines += [f"- {METHOD_NAMES[method]}: {settings_line(row)}" for row in problems]
    return "\n".join(lines)


def settings_line(row: dict) -> str:
    return (
        f"{row['problem']}: cleanued `{row['cleanued_flag']}` default {row['cleanued_default']!r}, used "
        f"{row['cleanued_used']!r}; minimax `{row['minimax_flag']}` shipped {row['minimax_shipped']!r}, used "
        f"{row['minimax_used']!r}"
    )


# ---------------------------------------------------------------------------------------------------------
# Files and the command line


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_jsonl(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write(json.dumps(record, default=str) + "\n")


def write_jsonl(path: Path, records: list[dict]) -> None:
    checkpoints.write_atomic(path, "".join(json.dumps(record, default=str) + "\n" for record in records).encode())


def minimax_versions(venv: Path) -> dict:
    worker = [str(venv / "bin" / "python"), str(REPO_ROOT / "benchmarks" / "minimax_checkpoint_params.py"), "versions"]
    result = subprocess.run(worker, capture_output=True, text=True, env=job_environment("minimax"))
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"}
    return json.loads(result.stdout.strip().splitlines()[-1])


def method_settings(args: Args) -> dict:
    """Per method: both sides' flags and the settings table (also written to settings.json)."""
    settings = {}
    for method in args.methods:
        shipped = minimax_shipped(method, args.minimax_venv)
        minimax = minimax_settings(method, shipped)
        cleanued = cleanued_settings(method, minimax, args.match_deviations)
        defaults = flags_of(load_script(f"algos/{method}.py").Config())
        table = settings_table(method, defaults, shipped, minimax, cleanued)
        settings[method] = {"cleanued": cleanued, "minimax": minimax, "table": table}
    return settings


def main(args: Args) -> None:
    # Absolute paths: the training processes run in the repo root, whatever directory this was started from.
    args = dataclasses.replace(args, out=args.out.resolve(), minimax_venv=args.minimax_venv.absolute())
    args.out.mkdir(parents=True, exist_ok=True)
    ignore = args.out / ".gitignore"
    if not ignore.exists():
        ignore.write_text(
            "# run folders, checkpoints, converted parameters: large, rebuilt by the run stage\nruns/\nminimax/\n"
        )
    settings = method_settings(args)
    if args.stage in ("run", "all"):
        check_existing_runs(args, settings)  # before anything in --out changes
    checkpoints.write_atomic(args.out / "settings.json", (json.dumps(settings, indent=1, default=str) + "\n").encode())
    for method, entry in settings.items():
        for row in entry["table"]:
            if row["problem"]:
                print(f"settings {method}: {settings_line(row)}")
    invocation = {"argv": sys.argv, "args": dataclasses.asdict(args), "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    invocation |= {"cleanued": describe_environment(), "minimax": minimax_versions(args.minimax_venv)}
    append_jsonl(args.out / "invocations.jsonl", invocation)
    if args.stage in ("run", "all"):
        run_stage(args, settings)
    if args.stage in ("evaluate", "all"):
        evaluate_stage(args)
    if args.stage in ("report", "all"):
        print(report_stage(args, settings), flush=True)


if __name__ == "__main__":
    with one_line_errors():
        main(tyro.cli(Args))
