"""The learned-policy options of the CLI: one line and exit 2 without torch; with torch,
pretrain writes a policy that ``pipeline solve --policy`` runs as an island."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gapstop.launch import main
from gapstop.problems.pipeline.generators import random_dag, regal_like
from gapstop.problems.pipeline.io import save_graph


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    d = tmp_path / "graphs"
    d.mkdir()
    for s in range(4):
        save_graph(regal_like(s, n=14 + 2 * s), d / f"g{s}.json")
    return d


def _one_error_line(res, msg: str) -> None:
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and msg in lines[0], res.output


@pytest.mark.parametrize("which", ["pretrain", "solve"])
def test_without_torch_the_cli_says_how_to_install_it(which: str, corpus: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    if which == "pretrain":
        args = ["rl", "pretrain", "--graphs", str(corpus), "--out", str(tmp_path / "p.pt")]
    else:
        args = ["pipeline", "solve", str(corpus / "g0.json"), "-k", "2", "--policy", str(tmp_path / "p.pt"),
                "--in-process", "--quiet"]
    _one_error_line(CliRunner().invoke(main, args), "pip install 'gapstop[rl]'")


def test_pretrain_then_solve_with_the_policy(corpus: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    out = tmp_path / "p.pt"
    res = CliRunner().invoke(main, ["rl", "pretrain", "--graphs", str(corpus), "--out", str(out), "--chips", "2,3",
                                    "--samples", "60", "--checkpoint-every", "1", "--val-samples", "4",
                                    "--layers", "1", "--width", "8"])
    assert res.exit_code == 0, res.output
    from gapstop.problems.pipeline.rl.policy import load_policy

    _, meta = load_policy(str(out))
    split = meta["split"]
    assert sorted(Path(p).name for p in split["train"] + split["val"] + split["test"]) == [
        f"g{s}.json" for s in range(4)]
    assert len(split["val"]) == 1 and len(split["test"]) == 1
    assert meta["val_reward"] == max(h["val_reward"] for h in meta["history"])  # the best checkpoint
    assert len(meta["history"]) == 3  # one per PPO iteration of 20 rollouts
    g = tmp_path / "g.json"
    save_graph(random_dag(9, 4), g)
    # one island, island 0, which is the policy's: with a second (BRKGA) island beside it, the
    # island that reports a shared best partition first is a race
    res = CliRunner().invoke(main, ["pipeline", "solve", str(g), "-k", "3", "--ring", "--policy", str(out),
                                    "--finetune", "--in-process", "--islands", "1", "--no-bounds", "--time-limit", "3",
                                    "--quiet", "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert list(doc["workers"]["evals"]) == ["search-0"] and doc["workers"]["evals"]["search-0"] > 0
    assert doc["found_by"] == "search-0" and doc["constraints"]["ring"]


def test_a_bad_policy_file_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    g = tmp_path / "g.json"
    save_graph(random_dag(6, 1), g)
    bad = tmp_path / "bad.pt"
    bad.write_text("nope")
    res = CliRunner().invoke(main, ["pipeline", "solve", str(g), "-k", "2", "--policy", str(bad), "--in-process"])
    _one_error_line(res, "not a policy file")


def test_finetune_without_a_policy_is_one_line(tmp_path: Path) -> None:
    g = tmp_path / "g.json"
    save_graph(random_dag(6, 1), g)
    res = CliRunner().invoke(main, ["pipeline", "solve", str(g), "-k", "2", "--finetune", "--in-process"])
    _one_error_line(res, "--finetune: needs --policy")
