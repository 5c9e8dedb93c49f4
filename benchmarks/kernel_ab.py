"""Kernel speed at an earlier commit against the working tree, side by side (a benchmark script, not a test).

    python benchmarks/kernel_ab.py --rev REV [--reps 9] [--only trws,forest,replay,propagate,slice]
        [--instance INSTANCE]

Each kernel module of the working tree is also loaded as it was at ``REV`` (``git show``, into a
temporary folder, under another module name, with its own numba cache), and both versions run
the same calls on the same inputs, alternating, single-threaded. Printed per case: the median
seconds of each over ``--reps`` rounds and their ratio (tree / REV; below 1 is faster), and
whether both left bit-identical results (a fold must not change any number).

Cases: ``trws`` the TRW-S pass of the search (finite tables) and of the bound (excluded entries as
+inf) on instance A's core; ``forest`` the search's induced-forest sweeps on a penalty search's
own tables and unaries after three iterations (weight 10, seed 1); ``replay`` the degree <= 2 elimination and the labelling of the
eliminated nodes on float (search) and exact integer (bound) tables of instance A; ``propagate``
the MCM constraint search (bounds and triangle propagation) on a model-like graph; ``slice``
Kahn + SliceGraph decodes, and Kahn orders alone, on a model-like graph.
The intra-op cases read instance A of ``/work/shared/data/iopddl`` or ``--instance`` (falling back to a
generated instance).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
INSTANCE = Path("/work/shared/data/iopddl/asplos-2025-iopddl-A.json.gz")  # --instance replaces it


def load_at(rev: str, rel: str, tmp: Path):
    """The module at ``rel`` as it was at ``rev``, imported under a private name."""
    name = "ab_" + rel.replace("/", "_").removesuffix(".py")
    src = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout
    path = tmp / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def race(label: str, old, new, reps: int) -> None:
    """``old``/``new``: callables returning (result arrays); timed alternately, reps rounds."""
    ro, rn = old(), new()  # compile / load cache, and the results to compare
    same = all(np.array_equal(a, b, equal_nan=True) for a, b in zip(ro, rn))
    to, tn = [], []
    for _ in range(reps):
        t = time.perf_counter()
        old()
        to.append(time.perf_counter() - t)
        t = time.perf_counter()
        new()
        tn.append(time.perf_counter() - t)
    mo, mn = float(np.median(to)), float(np.median(tn))
    print(f"{label:34s} rev {mo:9.4f} s   tree {mn:9.4f} s   ratio {mn / mo:5.3f}   identical {same}",
          flush=True)


def intraop_problem():
    if INSTANCE.exists():
        from gapstop.problems.intraop.io import load_problem
        return load_problem(INSTANCE)
    from gapstop.problems.intraop.generators import random_instance
    return random_instance(3000, 0, max_k=6, limit_quantile=0.5)


def case_trws(rev: str, tmp: Path, reps: int) -> None:
    from gapstop.problems.intraop import _bound_kernels as BK, _kernels as K
    from gapstop.problems.intraop._dual import CoreDual, prepare_bounds
    from gapstop.problems.intraop.relaxed import RelaxedSolver, prepare
    oldK = load_at(rev, "problems/intraop/_kernels.py", tmp)
    oldBK = load_at(rev, "problems/intraop/_bound_kernels.py", tmp)
    problem = intraop_problem()
    # the search: float tables, finite
    rs = RelaxedSolver(prepare(problem))
    net, plan = rs.prep.net, rs.prep.plan
    rng = np.random.default_rng(0)
    theta = np.array(net.unary, dtype=np.float64) + rng.random(len(net.unary))
    work = np.array(rs.work)

    def search(fn):
        def go():
            msg = np.zeros(len(rs.msg))
            sol = np.zeros(net.n, dtype=np.int64)
            hat = np.zeros(int(net.k.max()))
            for _ in range(50):
                for order, rank in ((rs._fwd, rs._rank_f), (rs._bwd, rs._rank_b)):
                    fn(order, rank, rs._gamma, theta, net.ptr, net.k, plan.adj_ptr, plan.adj_nbr, plan.adj_tab,
                       work, plan.tab_off, plan.tab_x, msg, rs._msg_off, rs._rev, sol, hat)
            return msg, sol
        return go

    race("trws search (50 fwd+bwd passes)", search(oldK.trws_pass), search(K.trws_pass), reps)
    # the bound: excluded entries as +inf
    cd = CoreDual(prepare_bounds(problem))
    cd._replay(cd.prep.unary.copy())
    bplan, bnet = cd.prep.plan, cd.prep.net
    BK.to_float(cd.theta, cd.theta_f)
    BK.to_float(cd.work, cd.work_f)
    print(f"  bound tables: {int(np.isinf(cd.work_f).sum())} of {len(cd.work_f)} entries +inf", flush=True)

    def bound(fn):
        def go():
            msg = np.zeros(len(cd.msg))
            sol = np.zeros(bnet.n, dtype=np.int64)
            hat = np.zeros(int(bnet.k.max()))
            for _ in range(5):
                for order, rank in ((cd.fwd, cd.rank_f), (cd.bwd, cd.rank_b)):
                    fn(order, rank, cd.gamma, cd.theta_f, bnet.ptr, bnet.k, bplan.adj_ptr, bplan.adj_nbr,
                       bplan.adj_tab, cd.work_f, bplan.tab_off, bplan.tab_x, msg, cd.msg_off, cd.rev, sol, hat)
            return msg, sol
        return go

    race("trws bound (5 fwd+bwd passes)", bound(getattr(oldBK, "trws_sweep", oldK.trws_pass)), bound(K.trws_pass), reps)


def case_replay(rev: str, tmp: Path, reps: int) -> None:
    from gapstop.problems.intraop import _bound_kernels as BK, reduce as R
    from gapstop.problems.intraop._dual import prepare_bounds
    from gapstop.problems.intraop.relaxed import prepare
    oldR = load_at(rev, "problems/intraop/reduce.py", tmp)
    oldBK = load_at(rev, "problems/intraop/_bound_kernels.py", tmp)
    problem = intraop_problem()
    prep = prepare(problem)
    net, plan = prep.net, prep.plan
    theta0 = np.array(net.unary, dtype=np.float64)
    work0 = R.new_work(net, plan)

    def flt(mod):
        def go():
            theta, work = theta0.copy(), work0.copy()
            for _ in range(5):
                mod.run_plan(plan, net, theta, work)
            return theta, work
        return go

    race("replay float (5 whole plans)", flt(oldR), flt(R), reps)
    bp = prepare_bounds(problem)
    bnet, bplan = bp.net, bp.plan
    bcols = (bplan.op_kind, bplan.op_v, bplan.op_u, bplan.op_w, bplan.op_t1, bplan.op_t2, bplan.op_t3,
             bplan.op_out)

    def exact(mod):
        def go():
            theta, work = bp.unary.copy(), bp.work.copy()
            tmp_ = np.zeros(int(bnet.k.max()), dtype=np.int64)
            elim0 = np.zeros(bplan.num_ops, dtype=np.int64)
            for _ in range(5):
                mod.replay_int(*bcols, bplan.tab_x, bplan.tab_off, bnet.k, bnet.ptr, theta, work, tmp_, elim0)
            return theta, work, elim0
        return go

    race("replay int (5 whole plans)", exact(oldBK), exact(BK), reps)
    theta1, work1 = flt(R)()
    btheta, bwork, _ = exact(BK)()

    def labels(mod):
        def go():
            sol = np.zeros(net.n, dtype=np.int64)
            for _ in range(20):
                mod.reconstruct(plan, net, theta1, work1, sol)
            return (sol,)
        return go

    def labels_int(mod):
        def go():
            sol = np.zeros(bnet.n, dtype=np.int64)
            for _ in range(20):
                mod.reconstruct_int(bplan.op_kind, bplan.op_v, bplan.op_u, bplan.op_w, bplan.op_t1, bplan.op_t2,
                                    bplan.tab_x, bplan.tab_off, bnet.k, bnet.ptr, btheta, bwork, sol)
            return (sol,)
        return go

    race("reconstruct float (20 plans)", labels(oldR), labels(R), reps)
    race("reconstruct int (20 plans)", labels_int(oldBK), labels_int(BK), reps)


def case_propagate(rev: str, tmp: Path, reps: int) -> None:
    from gapstop.problems.pipeline import _propagate as P
    from gapstop.problems.pipeline._kernels import kahn_order
    from gapstop.problems.pipeline.generators import model_like
    oldP = load_at(rev, "problems/pipeline/_propagate.py", tmp)
    prob = model_like(400, 0)
    n = prob.n
    g = (prob.succ_ptr, prob.succ, prob.pred_ptr, prob.pred)

    def run(mod, topological):
        def go():
            out = []
            for seed in range(20):
                rng = np.random.default_rng(seed)
                if topological:  # 8 chips: every search finds a labelling
                    c = 8
                    seq = kahn_order(rng.random(n), prob.succ_ptr, prob.succ, prob.pred_ptr).astype(np.int64)
                else:  # 16 chips, random order: every search ends on its backtrack budget
                    c = 16
                    seq = rng.permutation(n).astype(np.int64)
                st, chips, fails = mod.constrained_dfs(seq, np.full(n, -1, np.int64), np.zeros((0, c)), False,
                                                       seed, c, True, True, -1, *g,
                                                       np.asarray(prob.size_param, np.int64),
                                                       np.asarray(prob.size_out, np.int64), 2000)
                out.append(chips)
            return out
        return go

    race("mcm dfs topological (20 searches)", run(oldP, True), run(P, True), reps)
    race("mcm dfs random order (20 searches)", run(oldP, False), run(P, False), reps)


def case_slice(rev: str, tmp: Path, reps: int) -> None:
    from gapstop.problems.pipeline import _kernels as PK
    from gapstop.problems.pipeline.generators import model_like
    oldPK = load_at(rev, "problems/pipeline/_kernels.py", tmp)
    prob = model_like(2000, 0)
    keys = np.random.default_rng(1).random((20, prob.n))

    def run(mod):
        def go():
            return (mod.decode_batch(keys, 16, prob.work, prob.size_param, prob.size_out, prob.succ_ptr,
                                     prob.succ, prob.pred_ptr, prob.pred, prob.bandwidth,
                                     prob.memory if prob.memory is not None else -1, np.inf),)
        return go

    race("slicegraph decode_batch (20 keys)", run(oldPK), run(PK), reps)

    def kahn(mod):
        def go():
            return [mod.kahn_order(key, prob.succ_ptr, prob.succ, prob.pred_ptr) for key in keys for _ in range(100)]
        return go

    race("kahn_order (2000 orders)", kahn(oldPK), kahn(PK), reps)


def case_forest(rev: str, tmp: Path, reps: int) -> None:
    from gapstop.problems.intraop.penalty import PenaltySearch
    from gapstop.problems.intraop.relaxed import prepare
    oldK = load_at(rev, "problems/intraop/_kernels.py", tmp)
    from gapstop.problems.intraop import _kernels as K
    # a search's own state after a few iterations: replayed tables and penalised unaries
    search = PenaltySearch(prepare(intraop_problem()), 10.0, 1)
    for _ in range(3):
        search.iterate()
    rs = search.solver
    net, plan = rs.prep.net, rs.prep.plan
    start = search.current.copy()
    perms = [np.random.default_rng(i).permutation(plan.core) for i in range(20)]

    def sweeps(fn):
        extra = (np.zeros(int(net.k.max())),) if fn.py_func.__code__.co_argcount == 19 else ()  # older: ``zeros``

        def go():
            sol = start.copy()
            n = net.n
            in_s, uf, mark, par = (np.zeros(n, dtype=np.int64) for _ in range(4))
            order = np.zeros(len(plan.core), dtype=np.int64)
            h = np.empty(len(net.unary))
            scratch = np.empty(int(net.k.max()))
            changed = [fn(p, sol, rs.theta, net.ptr, net.k, plan.adj_ptr, plan.adj_nbr, plan.adj_tab, rs.work,
                          plan.tab_off, plan.tab_x, in_s, uf, mark, order, par, h, scratch, *extra) for p in perms]
            return sol, np.array(changed)
        return go

    race("forest sweeps (20)", sweeps(oldK.forest_sweep), sweeps(K.forest_sweep), reps)


CASES = {"trws": case_trws, "forest": case_forest, "replay": case_replay, "propagate": case_propagate,
         "slice": case_slice}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", required=True)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--instance", type=Path, default=INSTANCE, help="intra-op instance of the trws and replay cases")
    a = ap.parse_args()
    globals()["INSTANCE"] = a.instance
    from threadpoolctl import threadpool_limits
    with threadpool_limits(1), tempfile.TemporaryDirectory() as d:
        for name in a.only.split(","):
            CASES[name](a.rev, Path(d), a.reps)


if __name__ == "__main__":
    main()
