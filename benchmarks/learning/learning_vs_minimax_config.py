"""The configuration of benchmarks/learning/learning_vs_minimax.py: its command line (`Args`), the equal configuration
both libraries train at, and how cleanued's flags are derived from minimax's shipped values.

Every stage reads it: `method_settings` gives each method's flags for both sides and the settings table written
to settings.json; `KNOWN_DIFFERENCES` lists what no flag can make equal.
"""

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

import numpy as np

from common.config import (
    AT_LEAST_ONE,
    NON_NEGATIVE,
    Range,
    flags_of,
    raise_first,
    range_problems,
    unset_means,
    with_flags,
)
from common.errors import ConfigError
from common.evaluate import load_script
from envs.heldout import HELDOUT_MAZES

REPO_ROOT = Path(__file__).resolve().parents[2]

METHODS = ("dr", "plr", "accel", "paired")
SIDES = ("cleanued", "minimax")
LOG_INTERVAL = 10
"""cleanued's --log-interval: logs.csv rows, stop checks and checkpoints fall on multiples of it."""

PPO_SHARED = {
    "lr": 3e-4,
    "adam_eps": 1e-5,
    "student_gae_lambda": 0.98,
    "student_ppo_n_epochs": 5,
    "student_ppo_n_minibatches": 1,
    "student_ppo_clip_eps": 0.2,
    "student_value_loss_coef": 0.5,
    "max_grad_norm": 0.5,
}
"""The PPO settings both sides train with, as minimax's flags; the maze and batch sizes come from the command line
(`equal_configuration`), everything else is each method's shipped value."""


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
SHARED_WITH_THE_STUDENTS = {
    "paired": (
        Setting("num_epochs", "teacher_ppo_n_epochs"),
        Setting("num_minibatches", "teacher_ppo_n_minibatches"),
        Setting("clip_eps", "teacher_ppo_clip_eps"),
        Setting("vf_coef", "teacher_value_loss_coef"),
    ),
}
"""Per method, minimax flags of their own whose cleanued side trains with a student setting: PAIRED's teacher PPO
(algos/paired.py's teacher shares the students'), so minimax is given the students' values there (its shipped ones
are the same)."""

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
        "teacher_ppo_clip_value_loss": True,
    },
}

KNOWN_DIFFERENCES = (
    (
        METHODS,
        "Random streams differ (cleanued seeds are split(key(S), N)[i], minimax's --seed=S+i+1, S = --first-seed), "
        "so the sides are "
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


DEFAULT_HELDOUT_MAZES = ("SixteenRooms", "Labyrinth", "StandardMaze")
HELDOUT_STREAMS = tuple(dict.fromkeys((*DEFAULT_HELDOUT_MAZES, *HELDOUT_MAZES)))
"""Every held-out maze in the order whose index keys its evaluation stream: the default mazes first (the streams
of every comparison kept), then the others as envs/heldout.py registers them. A maze's stream must not depend on
where --heldout-mazes names it, since its records count as done under any order."""


def heldout_maze_problems(mazes: tuple[str, ...]) -> list[tuple[bool, str]]:
    """`raise_first`'s (condition, message) pairs for a --heldout-mazes: an unknown maze, a maze twice."""
    return [
        *[(name not in HELDOUT_MAZES, f"unknown held-out maze {name!r}") for name in mazes],
        (len(set(mazes)) < len(mazes), f"--heldout-mazes {' '.join(mazes)}: a maze twice"),
    ]


@dataclass(frozen=True)
class Args:
    methods: tuple[Literal["dr", "plr", "accel", "paired"], ...] = METHODS
    """Methods to compare (algos/<method>.py against minimax's <method>.json)."""
    seeds: Annotated[int, AT_LEAST_ONE] = 4
    """Seeds per side: one cleanued process vmaps them, minimax runs one process per seed."""
    first_seed: Annotated[int, NON_NEGATIVE] = 0
    """Seed set: cleanued's seeds are split(key(S), N), minimax's --seed=S+1..S+N; sets whose S are at least N apart
    share no seed (to see whether a difference found on one set of seeds is chance)."""
    cleanued_per_seed: bool = False
    """Train cleanued's seeds one process each (--num-seeds 1, --seed S + i), as minimax runs them, instead of vmapped
    in one process (a different set of random keys: compare as distributions)."""
    same_init: bool = False
    """Start cleanued's seed i from minimax's initial parameters of seed i (minimax's init checkpoint, converted, given
    to cleanued with --init-from), so the sides differ in everything but where they start."""
    init_from: Path | None = None
    """Start every student of both sides from these parameters: an .npz of `params/<path>` arrays, one seed's for every
    seed or stacked with one per seed (`benchmarks/learning/fork_run.py params` writes one from a cleanued run's seeds),
    read by cleanued's --init-from and by minimax through minimax_train.py's --init_params: a start that stalls one
    library's seeds, tried in the other."""
    rollouts: Annotated[int, AT_LEAST_ONE] = 600
    """Rollouts (of --num-envs x --num-steps) per run: cleanued updates; minimax ticks (ACCEL: ticks + replay ticks)."""
    maze_size: Annotated[int, Range(2, 101)] = 7
    """Height and width of the training mazes' interior."""
    n_walls: Annotated[int, NON_NEGATIVE] = 8
    """Walls of DR's and PLR's new levels and of PAIRED's designed ones (ACCEL's new levels are empty)."""
    max_steps: Annotated[int, AT_LEAST_ONE] = 64
    """Episode length on the training mazes (held-out mazes keep their own)."""
    num_envs: Annotated[int, AT_LEAST_ONE] = 32
    """Parallel envs per rollout."""
    num_steps: Annotated[int, AT_LEAST_ONE] = 128
    """Steps per env per rollout."""
    lstm_size: Annotated[int, AT_LEAST_ONE] = 64
    """The student's LSTM size."""
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
    heldout_mazes: tuple[str, ...] = DEFAULT_HELDOUT_MAZES
    """Held-out mazes, evaluated at every checkpoint from --heldout-from on (each with its own episode length)."""
    heldout_episodes: Annotated[int, AT_LEAST_ONE] = 200
    """Episodes per held-out maze, seed and checkpoint."""
    heldout_from: Annotated[int | None, unset_means("the second half: rollouts // 2")] = None
    """Rollouts from which every checkpoint is evaluated on the held-out mazes; the held-out figure per seed is the
    mean over those checkpoints (one checkpoint's held-out rate swings too much to decide on)."""
    eval_seed: Annotated[int, Range(0, 2**31 - 1)] = 0
    """Seed of the evaluation levels and actions (the same for both sides)."""
    window: Annotated[int, AT_LEAST_ONE] = 50
    """Rollouts per window of the curriculum statistics and the logged training return."""
    diagnostic: tuple[str, ...] = ()
    """Flag-only diagnostic runs: minimax settings as FLAG=VALUE (e.g. plr_staleness_coef=0) that both sides train
    with, minimax taking the value and cleanued's flag derived from it as from a shipped one; only the settings
    the comparison maps (settings.json), and the maze and batch sizes only through their own flags."""
    match_deviations: bool = True
    """Run cleanued's flagged deviations as minimax: --carry-across-updates, --no-maxmc-running-max, --teacher-lr=lr."""
    bootstrap_resamples: Annotated[int, AT_LEAST_ONE] = 10_000
    """Resamples of the bootstrap intervals over seeds."""
    minimax_venv: Path = REPO_ROOT / "benchmarks" / ".minimax-venv"
    """Virtual environment with minimax-lib 0.2.0 (benchmarks/speed/bench_algos.py creates it)."""
    poll_seconds: Annotated[float, NON_NEGATIVE] = 2.0
    """How often running jobs are checked (minimax's stop condition is read from its logs.csv)."""

    def __post_init__(self):
        raise_first(range_problems(self))
        raise_first(
            [
                (not self.methods, "--methods: give at least one method"),
                (len(set(self.methods)) < len(self.methods), f"--methods {' '.join(self.methods)}: a method twice"),
                *heldout_maze_problems(self.heldout_mazes),
                (
                    self.n_walls > self.maze_size**2 - 2,
                    f"--n-walls ({self.n_walls}) must leave two cells free for the agent and the goal: at most "
                    f"{self.maze_size**2 - 2} in a {self.maze_size}x{self.maze_size} maze",
                ),
                (
                    "accel" in self.methods and 2 * self.accel_archive_ticks >= self.checkpoint_every,
                    f"--accel-archive-ticks ({self.accel_archive_ticks}) must be under half of --checkpoint-every "
                    f"({self.checkpoint_every}): an ACCEL tick plays one or two rollouts, so coarser archives can put "
                    "two checkpoints of the grid on one archive",
                ),
                (
                    self.rollouts % self.checkpoint_every != 0,
                    f"--rollouts ({self.rollouts}) must be a multiple of --checkpoint-every ({self.checkpoint_every})",
                ),
                (
                    self.checkpoint_every % LOG_INTERVAL != 0,
                    f"--checkpoint-every ({self.checkpoint_every}) must be a multiple of {LOG_INTERVAL} (cleanued's "
                    "--log-interval)",
                ),
                (
                    self.same_init and "paired" in self.methods,
                    "--same-init covers the student alone: PAIRED's teacher and antagonist would still start apart",
                ),
                (
                    self.init_from is not None and (self.same_init or self.cleanued_per_seed),
                    "--init-from gives both sides their start: not with --same-init, nor --cleanued-per-seed",
                ),
                (
                    self.init_from is not None and "paired" in self.methods,
                    "--init-from covers the student alone: PAIRED's teacher and antagonist would still start apart",
                ),
                *init_from_problems(self),
                *diagnostic_problems(self),
                (
                    self.heldout_from is not None and not 1 <= self.heldout_from <= self.rollouts,
                    f"--heldout-from ({self.heldout_from}) must be between 1 and --rollouts ({self.rollouts})",
                ),
            ]
        )

    @property
    def heldout_start(self) -> int:
        """The first grid point evaluated on the held-out mazes."""
        start = self.rollouts // 2 if self.heldout_from is None else self.heldout_from
        return -(-start // self.checkpoint_every) * self.checkpoint_every

    @property
    def diagnostic_settings(self) -> dict:
        """--diagnostic as {minimax flag: value}, each value read as JSON (a number, true, false) or kept a string."""
        return {flag: parse_value(value) for flag, _, value in (item.partition("=") for item in self.diagnostic)}

    def describe(self) -> str:
        """The configuration in words, for report labels."""
        return (
            f"{self.maze_size}x{self.maze_size} mazes with {self.n_walls} walls (ACCEL: empty new mazes), "
            f"{self.max_steps}-step episodes, {self.num_envs} envs x {self.num_steps} steps, LSTM {self.lstm_size}"
            + (f"; diagnostic: {', '.join(self.diagnostic)}" if self.diagnostic else "")
        )


INIT_FROM_PROBE = "params/Dense_3/bias"
"""The value head's bias: (1,) for one seed's parameters, (N, 1) for N seeds' (any student, either library)."""


def init_from_problems(args: Args) -> list[tuple[bool, str]]:
    """--init-from: an .npz of one seed's student parameters, or of a stack of --seeds seeds' (or of one)."""
    path = args.init_from
    if path is None:
        return []
    if not (path.suffix == ".npz" and path.is_file()):
        return [(True, f"--init-from {path}: no such .npz (fork_run.py params writes one)")]
    try:
        with np.load(path, allow_pickle=False) as data:
            probe = data[INIT_FROM_PROBE].shape if INIT_FROM_PROBE in data.files else None
    except (OSError, ValueError) as error:
        return [(True, f"--init-from {path}: cannot read it as an .npz ({error})")]
    if probe is None:
        return [(True, f"--init-from {path}: no {INIT_FROM_PROBE}, so not a student's parameters")]
    stacked = probe[0] if len(probe) == 2 else 1
    return [
        (
            stacked not in (1, args.seeds),
            f"--init-from {path} holds {stacked} seeds' parameters: give one seed's or --seeds ({args.seeds})",
        )
    ]


def init_from_digest(path: Path) -> str:
    """What experiment.json records of --init-from: its contents, wherever the file is kept."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def diagnostic_flags(method: str) -> set[str]:
    """The minimax flags --diagnostic may set for `method`: those a cleanued flag is derived from."""
    return {setting.minimax for setting in STUDENT_SETTINGS + METHOD_SETTINGS[method]}


def diagnostic_problems(args: "Args") -> list[tuple[bool, str]]:
    problems = []
    overridden = [equal_configuration(args), *(method_overrides(method, args) for method in args.methods)]
    own_flags = set().union(*overridden) - set(PPO_SHARED)  # the maze and batch sizes
    allowed = set().union(*(diagnostic_flags(method) for method in args.methods)) - own_flags
    for item in args.diagnostic:
        flag, equals, _ = item.partition("=")
        problems += [
            (not equals or not flag, f"--diagnostic {item!r}: give FLAG=VALUE, e.g. plr_staleness_coef=0"),
            (
                bool(equals) and flag not in allowed,
                f"--diagnostic {flag}: not a setting of {' '.join(args.methods)} the comparison maps, or one with "
                f"its own flag; choose from {', '.join(sorted(allowed))}",
            ),
        ]
    return problems


def equal_configuration(args: Args) -> dict:
    """The maze, batch and network sizes both sides train with, as minimax's flags, and the PPO settings."""
    return {
        "maze_height": args.maze_size,
        "maze_width": args.maze_size,
        "maze_n_walls": args.n_walls,
        "maze_max_episode_steps": args.max_steps,
        "n_parallel": args.num_envs,
        "n_rollout_steps": args.num_steps,
        "student_recurrent_hidden_dim": args.lstm_size,
        **PPO_SHARED,
    }


def method_overrides(method: str, args: Args) -> dict:
    """Per method, minimax flags on top of the equal configuration: ACCEL starts from empty mazes; PAIRED's teacher
    places the walls."""
    return {"accel": {"maze_n_walls": 0}, "paired": {"maze_ued_n_walls": args.n_walls}}.get(method, {})


class CleanuedRun(NamedTuple):
    """One cleanued training process of a method."""

    name: str  # its run folder under runs/
    seeds: tuple[int, ...]  # the seed indices (0..N-1, as evaluated and reported) it trains, in its own seed order
    seed: int  # its --seed


def cleanued_runs(args: Args, method: str) -> list[CleanuedRun]:
    """cleanued's processes for `method`: one vmapping all seeds (keys split(key(S), N)), or with
    --cleanued-per-seed one per seed, as minimax runs them (seed i: --seed S + i, --num-seeds 1)."""
    if not args.cleanued_per_seed:
        return [CleanuedRun(f"cleanued_{method}", tuple(range(args.seeds)), args.first_seed)]
    return [CleanuedRun(f"cleanued_{method}_seed{i}", (i,), args.first_seed + i) for i in range(args.seeds)]


def cleanued_run_settings(args: Args, method: str, run: CleanuedRun) -> dict:
    """cleanued's run flags for one of `method`'s runs, {field: value}: its folder under --out, seeds, length,
    intervals and the parameters it starts from (--same-init, --init-from)."""
    return {
        "runs_dir": args.out / "runs",
        "run_name": run.name,
        "num_seeds": len(run.seeds),
        "seed": run.seed,
        "total_updates": args.rollouts,
        "log_interval": LOG_INTERVAL,
        "eval_interval": 0,
        "screenshot_interval": 0,
        "checkpoint_interval": args.checkpoint_every,
        "archive_interval": args.checkpoint_every,
        **({"init_from": initial_parameters_path(args, method, run)} if args.same_init else {}),
        **({"init_from": args.init_from.resolve()} if args.init_from else {}),
    }


def initial_parameters_path(args: Args, method: str, run: CleanuedRun) -> Path:
    """--same-init: the minimax initial parameters `run` starts from: every seed's, stacked in seed order, or with
    --cleanued-per-seed its one seed's, as converted from minimax's init checkpoint."""
    if args.cleanued_per_seed:
        (index,) = run.seeds
        return args.out / "init" / f"{method}_{args.first_seed + index + 1}" / "initial.npz"
    return args.out / "init" / f"minimax_{method}.npz"


def minimax_shipped(method: str, venv: Path) -> dict:
    """minimax's shipped maze config for `method`, {flag: value}, read as a file from its venv."""
    found = sorted(venv.glob(f"lib/python*/site-packages/minimax/config/configs/maze/{method}.json"))
    if not found:
        raise ConfigError(f"no minimax-lib in {venv} (create it with benchmarks/speed/bench_algos.py --minimax)")
    grid = json.loads(found[0].read_text())["args"]
    # A shipped config is a grid of one point: every value is a one-item list.
    return {key: value[0] if isinstance(value, list) else value for key, value in grid.items()}


def minimax_settings(method: str, shipped: dict, args: Args) -> dict:
    """minimax's training flags for `method`: the shipped values with the equal configuration and the diagnostic's
    settings of `method` on top, and the students' values where cleanued shares them (PAIRED's teacher PPO)."""
    diagnostic = {flag: value for flag, value in args.diagnostic_settings.items() if flag in diagnostic_flags(method)}
    settings = {**shipped, **equal_configuration(args), **method_overrides(method, args), **diagnostic}
    student = {setting.flag: setting.minimax for setting in STUDENT_SETTINGS}
    shared = SHARED_WITH_THE_STUDENTS.get(method, ())
    return settings | {setting.minimax: settings[student[setting.flag]] for setting in shared}


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
        ("teacher", SHARED_WITH_THE_STUDENTS.get(method, ())),
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


def method_settings(args: Args) -> dict:
    """Per method: both sides' flags and the settings table (also written to settings.json)."""
    settings = {}
    for method in args.methods:
        shipped = minimax_shipped(method, args.minimax_venv)
        minimax = minimax_settings(method, shipped, args)
        cleanued = cleanued_settings(method, minimax, args.match_deviations)
        script_defaults = load_script(f"algos/{method}.py").Config()
        try:  # the script's own checks on the flags its run gets, before anything trains
            run_settings = cleanued_run_settings(args, method, cleanued_runs(args, method)[0])
            with_flags(script_defaults, **cleanued, **run_settings)
        except ConfigError as error:
            raise ConfigError(f"algos/{method}.py at this configuration: {error}") from None
        defaults = flags_of(script_defaults)
        table = settings_table(method, defaults, shipped, minimax, cleanued)
        settings[method] = {"cleanued": cleanued, "minimax": minimax, "table": table}
    return settings
