"""--split-at module: where torch.distributed.pipelining can begin a stage, and the best plan
among those cuts, against brute force over every set of cuts. No torch needed."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gapstop.launch import main
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.io import save_graph
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.plan import module_cuts, module_split, solve_module_split, split_spec
from tests.problems.pipeline import reference as ref
from tests.problems.pipeline.test_plan import _relabel_topological


def _with_modules(p: PipelineProblem, stacks: list[list[str]], inputs: int = 1) -> PipelineProblem:
    """``p`` as a torch import: the first ``inputs`` nodes are inputs, node i ran in ``stacks[i]``."""
    ops = tuple({"name": f"n{i}", "op": "Input" if i < inputs else "aten.x", "module": s[-1] if s else None,
                 "module_stack": s} for i, s in enumerate(stacks))
    return dataclasses.replace(p, ops=ops, meta={"source": "torch"})


def _random_stacks(n: int, seed: int) -> list[list[str]]:
    """Module stacks of a program: node 0 is the input, then layers of one to three ops, each
    op in a child module or in the layer itself, and one module (``shared``) called twice."""
    rng = np.random.default_rng(seed)
    stacks: list[list[str]] = [[]]
    layer = 0
    while len(stacks) < n:
        for j in range(int(rng.integers(1, 4))):
            if len(stacks) < n:
                child = [f"layers.{layer}.c{j}"] if rng.random() < 0.7 else []
                stacks.append([f"layers.{layer}", *child])
        layer += 1
        if layer == 2 and len(stacks) < n:
            stacks.append(["shared"])
    stacks[-1] = ["shared"] if n > 6 else stacks[-1]
    return stacks


def test_module_cuts_are_first_ops_of_modules_that_run_once() -> None:
    p = _relabel_topological(random_dag(9, 0))
    stacks = [[], ["emb"], ["layers.0", "layers.0.attn"], ["layers.0", "layers.0.attn"], ["layers.0", "layers.0.mlp"],
              ["act"], ["layers.1"], ["act"], ["head"]]
    cuts = module_cuts(_with_modules(p, stacks))
    # not emb: nothing but the input runs before it; layers.0 (outermost) rather than layers.0.attn;
    # act runs twice, so no split_spec entry can name it
    assert cuts == {2: "layers.0", 4: "layers.0.mlp", 6: "layers.1", 8: "head"}
    assert module_cuts(p) == {}  # no metadata
    assert module_cuts(dataclasses.replace(_with_modules(p, stacks), meta={"source": "onnx"})) == {}


def _cut_bytes_direct(p: PipelineProblem, starts: list[int]) -> int:
    """Bytes sent forward over each stage boundary: tensors made before it and read after it."""
    total = 0
    for c in starts[1:]:
        total += sum(int(p.size_out[u]) for u in range(c) if any(v >= c for (uu, v) in p.edges if uu == u))
    return total


@pytest.mark.parametrize("seed", range(10))
def test_module_split_is_the_best_plan_over_every_set_of_module_cuts(seed: int) -> None:
    n = 10 + seed % 3
    base = _relabel_topological(random_dag(n, seed, memory=seed % 2 == 1, k_hint=3))
    p = _with_modules(base, _random_stacks(n, seed))
    cuts = sorted(module_cuts(p))
    assert cuts
    for k in (1, 2, 3, 4):
        ev = module_split(p, k)
        plans = []
        for r in range(min(k - 1, len(cuts)) + 1):
            for chosen in itertools.combinations(cuts, r):
                starts = [0, *chosen]
                blocks = np.zeros(n, np.int64)
                for s, c in enumerate(starts):
                    blocks[c:] = s
                e = evaluate(p, blocks)
                plans.append((e.objective, sum(c * c for c in e.block_costs), _cut_bytes_direct(p, starts), starts))
        best = min(x[0] for x in plans)
        assert ev.objective == best
        # the tie-break: least sum of squared stage costs, then fewest bytes over the boundaries
        ties = [x for x in plans if x[0] == best]
        sq = min(x[1] for x in ties)
        assert sum(c * c for c in ev.block_costs) == pytest.approx(sq, rel=1e-12)
        fewest = min(x[2] for x in ties if x[1] == pytest.approx(sq, rel=1e-12))
        starts = [0, *[int(np.argmax(ev.blocks == s)) for s in range(1, int(ev.blocks.max()) + 1)]]
        assert _cut_bytes_direct(p, starts) == fewest
        assert set(starts[1:]) <= set(cuts) and (np.diff(ev.blocks) >= 0).all()
        # the split_spec names the module of each stage's first op
        spec = split_spec(p, ev)["split_spec"]
        assert list(spec) == [module_cuts(p)[c] for c in starts[1:]]


def test_tie_break_prefers_the_most_even_other_stages() -> None:
    # input, five ops of work 1 and one of work 4, in a chain: at k = 3 the last op alone is the
    # bottleneck (4 + 1/1000); the five ops split 3 + 2 or 2 + 3 under it (not 1 + 4, which costs
    # 4 + 2/1000), and 3 + 2 has the smaller sum of squares (stage 0 receives nothing)
    work = np.array([0.0, 1, 1, 1, 1, 1, 4])
    edges = np.array([[i, i + 1] for i in range(6)])
    base = PipelineProblem("chain", work, np.zeros(7, np.int64), np.ones(7, np.int64), edges, 1000.0, None)
    p = _with_modules(base, [[], *[[f"m{i}"] for i in range(1, 7)]])
    ev = module_split(p, 3)
    assert ev.objective == 4 + 1 / 1000
    assert ev.blocks.tolist() == [0, 0, 0, 0, 1, 1, 2]
    assert split_spec(p, ev)["split_spec"] == {"m4": "BEGINNING", "m6": "BEGINNING"}


@pytest.mark.parametrize("bytes_at, starts", [([0, 5, 1, 0], [0, 2]), ([0, 1, 5, 0], [0, 1])])
def test_tie_break_between_equally_even_plans_takes_the_fewest_cut_bytes(bytes_at: list[int],
                                                                         starts: list[int]) -> None:
    from gapstop.problems.pipeline import _kernels

    # cut positions 0..3: the plans [0, 1) [1, 3) and [0, 2) [2, 3) both cost (2, 3)
    cost = np.full((4, 4), np.inf)
    cost[0, 1], cost[1, 3], cost[0, 2], cost[2, 3], cost[0, 3], cost[1, 2] = 2, 3, 3, 2, 10, 1
    T, got = _kernels.split_at_cuts(cost, np.array(bytes_at, np.int64), 2)
    assert T == 3 and got.tolist() == starts


def test_bounds_are_unrestricted_and_below_the_brute_force_optimum() -> None:
    n = 9
    base = _relabel_topological(random_dag(n, 3, k_hint=3))
    p = _with_modules(base, _random_stacks(n, 3))
    for k in (2, 3):
        doc = solve_module_split(p, k, time_limit_s=20.0)
        opt = ref.brute_force(p, k)  # over every partition, not only module plans
        assert doc["lower_bound"] <= opt * (1 + 1e-9) <= doc["objective"] * (1 + 1e-9)
        assert doc["mode"] == "module" and doc["module_optimal"]
        assert doc["objective"] == evaluate(p, doc["blocks"], doc["order"], k=k).objective
        if doc["stopped_because"] == "optimal":
            assert doc["objective"] == pytest.approx(opt, rel=1e-5)


def test_cli_split_at_module_is_the_default_for_graphs_with_module_metadata(tmp_path: Path) -> None:
    n = 10
    base = _relabel_topological(random_dag(n, 5, k_hint=3))
    p = _with_modules(base, _random_stacks(n, 5))
    f = tmp_path / "g.json"
    save_graph(p, f)
    for extra in ([], ["--split-at", "module"]):
        out = tmp_path / "r.json"
        r = CliRunner().invoke(main, ["pipeline", "solve", str(f), "-k", "3", "--no-bounds", "--out", str(out),
                                      *extra])
        assert r.exit_code == 0, r.output
        doc = json.loads(out.read_text())
        assert doc["mode"] == "module" and doc["objective"] == module_split(p, 3).objective
        assert doc["split_spec"] and doc["split_points"] == list(doc["split_spec"])
        r = CliRunner().invoke(main, ["pipeline", "evaluate", str(f), str(out)])
        assert json.loads(r.output)["objective"] == doc["objective"]
    # bad combinations: one line, exit 2
    plain = tmp_path / "plain.json"
    save_graph(base, plain)
    for args, msg in (([str(plain), "--split-at", "module"], "error: --split-at module: the graph has no module"),
                      ([str(f), "--split-at", "module", "--contiguous"], "error: --contiguous: not with --split-at"),
                      ([str(f), "--run-dir", str(tmp_path / "rd")], "error: --run-dir: not with --split-at module"),
                      ([str(f), "--split-at", "module", "--ring"], "error: --split-at module: cannot be combined")):
        r = CliRunner().invoke(main, ["pipeline", "solve", *args, "-k", "2", "--no-bounds"])
        assert r.exit_code == 2 and r.output.count("\n") == 1 and r.output.startswith(msg), r.output
