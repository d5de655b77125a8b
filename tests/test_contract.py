"""The driver contract (common/contract.py): every script keeps it, and a script that leaves out a piece fails in
one line naming it before anything compiles."""

import importlib
import importlib.util
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest

from algos import dr
from common import driver
from common.config import with_flags
from common.contract import BatchedOverSeeds, check_config, check_functions
from common.devices import make_placement
from common.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("dr", "paired", "plr", "accel", "plr_parallel", "accel_parallel", "sfl")
SCHEDULE_PROPERTY = '''    @property
    def schedule_spans_run(self) -> bool:
        """The learning rate anneals over the run: a resume keeps its length."""
        return self.ppo.anneal_lr

'''
OMISSIONS = {
    "schedule_spans_run": (SCHEDULE_PROPERTY, "its Config does not declare schedule_spans_run"),
    "student_updates": (
        '        student_updates=operator.attrgetter("student_updates"),\n',
        "make_train gave no student_updates",
    ),
    "policies": ('        policies={"student": student_params},\n', "make_train's policies are not a mapping"),
    "placement": ("        placement=placement,\n", "make_train gave no placement"),
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_keeps_the_contract(name, tmp_path):
    module = importlib.import_module(f"algos.{name}")
    config = with_flags(module.Config(), runs_dir=str(tmp_path), num_envs=4)
    check_config(config, f"algos/{name}.py")
    functions = check_functions(module.make_train(config), f"algos/{name}.py")
    assert "student" in functions.policies and functions.placement.num_devices == 1


def script_without(piece: str, folder: Path, monkeypatch):
    """algos/dr.py with one piece of the contract cut out, imported from `folder`/algos/."""
    cut, _ = OMISSIONS[piece]
    source = (REPO_ROOT / "algos" / "dr.py").read_text()
    assert source.count(cut) == 1, f"algos/dr.py no longer has {cut!r}: update this test"
    path = folder / "algos" / f"dr_without_{piece}.py"
    path.parent.mkdir(parents=True)
    path.write_text(source.replace(cut, ""))
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts its repo root first
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, path.stem, module)  # tyro reads the Config's source through its module
    spec.loader.exec_module(module)
    return module, path


@pytest.mark.parametrize("piece", OMISSIONS)
def test_a_script_missing_a_piece_fails_in_one_line_before_compiling(piece, tmp_path, monkeypatch, capsys):
    module, path = script_without(piece, tmp_path, monkeypatch)
    runs = tmp_path / "runs"
    monkeypatch.setattr(sys, "argv", [str(path), "--runs-dir", str(runs), "--num-envs", "4", "--total-updates", "20"])
    with pytest.raises(SystemExit) as exit_status:
        driver.main(module.Config, module.make_train, module.__doc__, str(path), module.HEADLINE_METRICS)
    lines = capsys.readouterr().err.strip().splitlines()
    expected = OMISSIONS[piece][1]
    assert exit_status.value.code == 2
    assert len(lines) == 1 and lines[0].startswith(f"error: algos/{path.name} breaks the driver contract"), lines
    assert expected in lines[0], lines
    assert not runs.exists(), "no run folder may be made for a script that breaks the contract"


def test_make_train_must_return_the_declared_functions(tmp_path):
    config = with_flags(dr.Config(), runs_dir=str(tmp_path), num_envs=4)
    functions = dr.make_train(config)
    with pytest.raises(ConfigError, match="make_train returned a tuple, not a common.contract.BatchedOverSeeds"):
        driver.run(config, lambda config: tuple(functions), "algos/dr.py", ())
    with pytest.raises(ConfigError, match=r"make_train gave no step \(runner state -> \(runner state, metrics\)"):
        driver.run(config, lambda config: functions._replace(step="not a function"), "algos/dr.py", ())
    with pytest.raises(ConfigError, match="its Config's env_steps_per_update is 0, not env steps one update"):
        check_config(type("Config", (), {"run": config.run, "env_steps_per_update": 0, "schedule_spans_run": 1})(), "x")
    assert not (tmp_path / config.run.run_name).exists()


def test_a_step_without_the_health_metric_is_named(tmp_path):
    """The one piece only a compiled step shows: its metrics must carry health/finite (a toy step compiles fast)."""
    config = with_flags(dr.Config(), runs_dir=str(tmp_path), num_envs=4, total_updates=2, log_interval=1)

    def make_train(config):
        return BatchedOverSeeds(
            init=lambda rngs: {"student_updates": jnp.zeros(len(rngs), jnp.int32)},
            step=lambda runner: (runner, {"train/return": jnp.zeros((len(runner["student_updates"]), 1))}),
            evaluate=lambda runner: {},
            levels=lambda runner: ((), {}),
            train=lambda rngs: None,
            student_updates=lambda runner: runner["student_updates"],
            policies={"student": lambda runner: runner},
            placement=make_placement(config.run, config.ppo.num_envs),
        )

    with pytest.raises(ConfigError, match="algos/toy.py breaks the driver contract: its step's metrics have no health"):
        driver.run(with_flags(config, eval_interval=0, screenshot_interval=0), make_train, "algos/toy.py", ())
