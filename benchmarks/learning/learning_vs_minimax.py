"""Learning side by side with minimax-lib 0.2.0: train both libraries at one equal configuration and compare
how they learn, with one evaluator for both.

Methods: DR, Robust PLR, ACCEL and PAIRED, at a configuration from the flags (by default a small one a CPU can
train: 7x7 mazes with 8 walls, ACCEL from empty mazes; 64-step episodes; 32 envs x 128 steps; LSTM 64; `--maze-size`,
`--n-walls`, `--max-steps`, `--num-envs`, `--num-steps` and `--lstm-size` change it); lr 3e-4, the rest of PPO and
every method setting as minimax's shipped `minimax/config/configs/maze/<method>.json`, whose values cleanued's
flags are derived from, so the two sides cannot drift apart (`settings.json` lists each setting with cleanued's
default and minimax's shipped value and the run prints every mismatch). The scripts' own checks run on the
derived flags before anything trains. `--diagnostic FLAG=VALUE` changes one of those minimax settings for both
sides (flag-only diagnostic runs, each in its own `--out`). `--first-seed S` trains another, independent set of
seeds on both sides, in its own `--out`; `pool_seed_sets.py` pools such folders into one table.

Stages (`--stage`, each resumable: it skips what is already done, so a long job can simply be restarted):

- run: cleanued trains one process per method with `--num-seeds N` (`algos/<method>.py`, archives every
  `--checkpoint-every` updates); minimax trains one process per seed (`minimax.train`, unmodified, through
  minimax_train.py, which only logs more of its buffer; in its own venv, with the shipped config's flags
  plus the overrides; `--seed=S+1..S+N`), stopped at the same number of rollouts: a tick is one rollout for DR,
  PLR and PAIRED (archives every `--checkpoint-every` ticks), and an ACCEL replay tick also plays the mutants, so
  an ACCEL run (archives every `--accel-archive-ticks` ticks) stops at the first archive where tick + replay ticks
  reaches `--rollouts`.
  `--jobs` processes run at once. An interrupted cleanued run resumes exactly (`--resume`); an interrupted
  minimax run starts over, because its checkpoints do not hold the PLR buffer.
- evaluate: every minimax checkpoint on the grid of `--checkpoint-every` rollouts is converted to cleanued's
  parameter tree (benchmarks/learning/minimax_checkpoint_params.py in minimax's venv; PAIRED: the protagonist), and
  every checkpoint of both sides is evaluated with cleanued's code (`common/heldout_eval.py`, sampled
  actions, first episode): (a) on one fixed set of `--train-levels` fresh DR levels of the training size
  (the training-distribution curve); (b) from `--heldout-from` rollouts on (default: the second half), on the
  held-out mazes, `--heldout-episodes` each.
- report: solve rates and returns as mean [95% bootstrap interval over seeds] per side with the Mann-Whitney U
  p-value, held-out mazes first averaged per seed over the checkpoints from `--heldout-from` on (one checkpoint's
  held-out rate swings by up to 0.65 between neighbours), then at the final checkpoint; gradient updates, the
  curriculum from both sides' logs in windows of `--window` rollouts, time per job, and a PNG of the
  training-distribution and held-out solve rates against rollouts.

    python benchmarks/learning/learning_vs_minimax.py --methods dr plr accel paired --seeds 4 --rollouts 600 --jobs 2
    python benchmarks/learning/learning_vs_minimax.py --stage report   # again after any stage, or to re-read results
    python benchmarks/learning/learning_vs_minimax.py --methods dr accel --seeds 6 --maze-size 11 --n-walls 30 \
        --max-steps 128 --out benchmarks/results/lvm_11x11   # a larger configuration, in its own --out

Output under `--out`: `experiment.json` (the settings that define its runs: a later invocation with others is
refused), `invocations.jsonl` (argv, device, versions of both stacks), `settings.json`,
`jobs.jsonl` (every training command exactly, with its environment, wall and CPU seconds), `logs/`,
`runs/` (cleanued's run folders), `minimax/` (minimax's log dirs, checkpoints and converted parameters),
`evaluations.jsonl`, and the report: `report.md`, `report.jsonl`, `curriculum.jsonl`,
`solve_rate.png`. `runs/` and `minimax/` are bulky (a PAIRED checkpoint holds the teacher: about 83 MB
per seed, some 5 GB for the full comparison) and listed in a `.gitignore` the run writes.

The code follows the stages, in this file's folder: learning_vs_minimax_config.py (`Args`, the equal configuration,
the flag mapping), learning_vs_minimax_outputs.py (what one stage leaves under `--out` for the next), then
learning_vs_minimax_run.py, learning_vs_minimax_evaluate.py and learning_vs_minimax_report.py; this file chains
them.
"""

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# A GPU shared by several training processes and this one: allocate on demand instead of grabbing 75% each.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import tyro  # noqa: E402

# SCAFFOLDING: make `benchmarks`, `algos`, `common` and `envs` importable when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.learning.learning_vs_minimax_config import REPO_ROOT, Args, method_settings  # noqa: E402
from benchmarks.learning.learning_vs_minimax_evaluate import evaluate_stage  # noqa: E402
from benchmarks.learning.learning_vs_minimax_outputs import (  # noqa: E402
    append_jsonl,
    experiment_path,
    experiment_settings,
)
from benchmarks.learning.learning_vs_minimax_report import report_stage, settings_line  # noqa: E402
from benchmarks.learning.learning_vs_minimax_run import check_existing_runs, job_environment, run_stage  # noqa: E402
from common import checkpoint as checkpoints  # noqa: E402
from common.provenance import describe_environment  # noqa: E402
from common.runs import one_line_errors  # noqa: E402


def minimax_versions(venv: Path) -> dict:
    worker = [
        str(venv / "bin" / "python"),
        str(REPO_ROOT / "benchmarks" / "learning" / "minimax_checkpoint_params.py"),
        "versions",
    ]
    result = subprocess.run(worker, capture_output=True, text=True, env=job_environment("minimax"))
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"}
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(args: Args) -> None:
    # Absolute paths: the training processes run in the repo root, whatever directory this was started from.
    args = dataclasses.replace(args, out=args.out.resolve(), minimax_venv=args.minimax_venv.absolute())
    settings = method_settings(args)
    check_existing_runs(args, settings)  # before anything in --out changes, whatever the stage
    args.out.mkdir(parents=True, exist_ok=True)
    ignore = args.out / ".gitignore"
    if not ignore.exists():
        ignore.write_text(
            "# run folders, checkpoints, converted parameters: large, rebuilt by the run stage\nruns/\nminimax/\n"
        )
    experiment = json.dumps(experiment_settings(args), indent=1) + "\n"
    checkpoints.write_atomic(experiment_path(args.out), experiment.encode())
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
