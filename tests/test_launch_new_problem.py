"""A new problem, command line included, from its definition alone: nothing in engine/,
actors/ or launch.py names it. The problem lives in this file: a countdown whose searches
find ``start - 1``, ``start - 2``, ... down to ``floor``, and whose bound job proves ``floor``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner

from gapstop.engine.cli import exit_for, run_options, solve_command, user_errors, write_json
from gapstop.engine.coordinator import integral
from gapstop.engine.errors import InputError
from gapstop.engine.protocol import Island
from gapstop.engine.records import Bound
from gapstop.launch import main
from gapstop.problems import registry

ROOT = Path(__file__).resolve().parents[1]


class _Countdown:
    def __init__(self, start: int, floor: int) -> None:
        self.value, self.floor = start, floor

    def step(self, budget_s: float, on_improvement: Any, should_stop: Any) -> int:
        time.sleep(min(budget_s, 0.01))
        if self.value > self.floor:
            self.value -= 1
            on_improvement(self.value, self.value)
        return 1


@click.group("countdown")
def countdown() -> None:
    """A countdown problem."""


@countdown.command("solve")
@click.argument("path", type=click.Path(dir_okay=False))
@run_options
@user_errors
def countdown_solve(path: str, time_limit: float, target_gap: float, seed: int, out: str | None,
                    run_dir: str | None, resume: str | None, address: str | None, workers: int | None,
                    cpus_per_worker: float, in_process: bool, quiet: bool, plot: str | None) -> None:
    problem = CountdownDefinition().load(path)

    def emit(doc: dict[str, Any]) -> None:
        write_json(out, doc)
        click.echo(json.dumps(doc))

    doc = solve_command("countdown", path, problem, {}, emit, time_limit=time_limit, target_gap=target_gap,
                        seed=seed, run_dir=run_dir, resume=resume, address=address, workers=workers,
                        cpus_per_worker=cpus_per_worker, in_process=in_process, quiet=quiet, plot=plot, out=out)
    exit_for(doc)


class CountdownDefinition:
    name = "countdown"

    def load(self, path: str) -> Any:
        try:
            doc = json.loads(Path(path).read_text())
            return {"start": int(doc["start"]), "floor": int(doc["floor"])}
        except (OSError, ValueError, KeyError) as e:
            raise InputError(f"{path}: not a countdown ({e})") from None

    def check_params(self, problem: Any, params: dict[str, Any]) -> None:
        pass

    def evaluator(self, problem: Any, params: dict[str, Any]) -> Any:
        def score(sol: Any) -> tuple[int, int]:
            if int(sol) < problem["floor"]:
                raise ValueError("below the floor")
            return int(sol), int(sol)

        return integral(score)

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, island: Island) -> Any:
        return _Countdown(problem["start"], problem["floor"])

    def to_solution(self, found: Any) -> Any:
        return found

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]:
        return []

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"kind": "floor", "share": 1.0}]

    def prepare_bounds(self) -> None:
        pass

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any, seed: int,
                      num_workers: int) -> None:
        ctx.bound(Bound("floor", problem["floor"], "optimal", 0.0, "countdown"))

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Any, reason: str,
                   elapsed_s: float) -> dict[str, Any]:
        inc = coord.incumbent
        return {"problem": "countdown", "objective": None if inc is None else inc.cost, "lower_bound": coord.lb,
                "gap": coord.gap, "bounds": [b.to_dict() for b in coord.bounds.values()],
                "stopped_because": reason, "elapsed_s": round(elapsed_s, 3)}

    def cli_groups(self) -> list[click.Group]:
        return [countdown]


def test_a_new_problems_commands_run_through_the_command_line_from_its_definition(tmp_path: Path) -> None:
    registry.register(CountdownDefinition())
    instance = tmp_path / "c.json"
    instance.write_text(json.dumps({"start": 40, "floor": 25}))
    runner = CliRunner()
    assert "countdown" in runner.invoke(main, ["--help"]).output
    res = runner.invoke(main, ["countdown", "solve", str(instance), "--time-limit", "30", "--in-process", "--quiet",
                               "--run-dir", str(tmp_path / "run"), "--out", str(tmp_path / "out.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["stopped_because"] == "optimal" and doc["objective"] == doc["lower_bound"] == 25
    assert json.loads((tmp_path / "run" / "result.json").read_text())["objective"] == 25
    # the shared commands know it too, and the shared checks apply to its options
    shown = runner.invoke(main, ["report", str(tmp_path / "run")])
    assert shown.exit_code == 0 and "25" in shown.output, shown.output
    bad = runner.invoke(main, ["countdown", "solve", str(instance), "--target-gap", "2"])
    assert bad.exit_code == 2 and "--target-gap" in bad.output
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    res = runner.invoke(main, ["countdown", "solve", str(broken), "--in-process", "--run-dir", str(tmp_path / "r2")])
    assert res.exit_code == 2 and res.output.startswith(f"error: {broken}: not a countdown")


def test_the_engine_the_actors_and_the_entry_point_dispatch_on_no_problem_name() -> None:
    # what adding a problem must not touch: they reach problems through the registry only (the
    # figures' panel types and the learned policy's rollout actors are a problem's own code)
    files = [*(ROOT / "engine").rglob("*.py"), *(ROOT / "actors").rglob("*.py"), *(ROOT / "cluster").rglob("*.py"),
             ROOT / "launch.py"]
    assert len(files) > 30
    named = {str(p.relative_to(ROOT)) for p in files for name in ("pipeline", "intraop")
             if f'"{name}"' in p.read_text() or f"'{name}'" in p.read_text()}
    assert named == set()
