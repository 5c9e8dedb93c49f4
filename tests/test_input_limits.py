"""Input limits through the command line: every bad or oversized input is one line and exit 2.

Each case here once ended in a traceback, a hang, a silently wrong objective or an
out-of-memory error. The cache cases check that a damaged, stale or altered intra-op
cache is rebuilt from the JSON, with one warning line.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result

from gapstop.launch import main
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.io import MAX_HORIZON, load_problem, problem_to_dict
from gapstop.problems.pipeline.io import MAX_DP_CELLS, MAX_STAGES

EXAMPLE = Path(__file__).parent / "problems" / "intraop" / "data" / "example.json"


def _graph(size_out: list[Any], *, work: list[Any] | None = None, size_param: list[Any] | None = None,
           edges: list[list[int]] | None = None, bandwidth: Any = 1.0, memory: Any = None) -> dict[str, Any]:
    n = len(size_out)
    return {"graph": {"name": "g", "nodes": {"work": work if work is not None else [1.0] * n,
                                             "size_param": size_param if size_param is not None else [0] * n,
                                             "size_out": size_out},
                      "edges": edges if edges is not None else [[i, i + 1] for i in range(n - 1)]},
            "bandwidth": bandwidth, "memory": memory}


def _write(tmp_path: Path, doc: Any, name: str = "g.json") -> Path:
    f = tmp_path / name
    f.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return f


def _one_error_line(res: Result, *needles: str) -> str:
    """The run ended with exit 2 and exactly one ``error: ...`` line on stderr, containing ``needles``."""
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.output
    for s in needles:
        assert s in lines[0], lines[0]
    return lines[0]


def _bound(path: Path, *extra: str) -> Result:
    return CliRunner().invoke(main, ["pipeline", "bound", str(path), "-k", "2", "--method", "simple", *extra])


# ------------------------------------------------------------------------ pipeline magnitudes
def test_crossing_bytes_past_2_63_are_refused_by_solve(tmp_path: Path) -> None:
    # two producers of 2^62 bytes each feeding one consumer: a block holding both producers
    # sends 2^63 bytes, which int64 kernels would wrap to a negative cost
    f = _write(tmp_path, _graph([2**62, 2**62, 0], edges=[[0, 2], [1, 2]]))
    res = CliRunner().invoke(main, ["pipeline", "solve", str(f), "-k", "2", "--in-process", "--no-bounds",
                                    "--time-limit", "1", "--quiet"])
    _one_error_line(res, str(f), "graph.nodes.size_out[1]", "2^62")


@pytest.mark.parametrize("over,needle", [
    ({"size_out": [2**63, 1]}, "graph.nodes.size_out[0]"),                     # does not fit int64 at all
    ({"size_out": [1e19, 1]}, "graph.nodes.size_out[0]"),                      # the same as a float
    ({"size_out": [2**61, 2**61], "size_param": [1, 0]}, "graph.nodes.size_param[0]"),
    ({"memory": 1e30}, "memory"),                                              # numba's int64 argument
    ({"memory": 2**62 + 1}, "memory"),
    ({"work": [1e308, 1e308]}, "graph.nodes.work[0]"),                         # the float sum is inf
    ({"work": [6e299, 6e299]}, "graph.nodes.work[1]"),
    ({"size_out": [10**15, 1], "bandwidth": 1e-300}, "bandwidth"),             # bytes / B is inf
])
def test_magnitudes_that_would_overflow_are_refused(tmp_path: Path, over: dict[str, Any], needle: str) -> None:
    args: dict[str, Any] = {"size_out": [1, 1], **over}
    size_out = args.pop("size_out")
    f = _write(tmp_path, _graph(size_out, **args))
    # evaluate runs the numba kernels on a partition, as every search does
    result = _write(tmp_path, {"blocks": [0, 1]}, "r.json")
    _one_error_line(CliRunner().invoke(main, ["pipeline", "evaluate", str(f), str(result)]), needle)


def test_sizes_at_the_limit_are_scored_exactly(tmp_path: Path) -> None:
    # 2^62 bytes in all (the most accepted) still score exactly: block {0, 1} sends 2^61 bytes
    f = _write(tmp_path, _graph([2**61, 2**61, 0], edges=[[0, 2], [1, 2]], bandwidth=2.0**40,
                                memory=2**62))
    result = _write(tmp_path, {"blocks": [0, 0, 1]}, "r.json")
    res = CliRunner().invoke(main, ["pipeline", "evaluate", str(f), str(result)])
    assert res.exit_code == 0, res.output
    costs = json.loads(res.stdout)["block_costs"]
    assert costs == [2.0 + 2**62 / 2.0**40, 1.0 + 2**62 / 2.0**40]


@pytest.mark.mip
@pytest.mark.parametrize("method", ["simple", "bottleneck", "bottleneck-no-io", "guess-the-bottleneck", "exact"])
def test_memory_at_the_limit_bounds_below_brute_force(tmp_path: Path, method: str) -> None:
    """M = 2^62 with tiny sizes: the MIPs' scaled memory allowance once passed int64."""
    from gapstop.problems.pipeline.io import load_graph
    from tests.problems.pipeline.reference import brute_force

    f = _write(tmp_path, _graph([1, 1, 1, 1], work=[1.0, 2.0, 3.0, 4.0], size_param=[1, 1, 1, 1], memory=2**62))
    opt = brute_force(load_graph(f), 2)
    assert opt == 7.0   # {0, 1, 2} | {3}: 6 + 1 sent, 4 + 1 received
    res = CliRunner().invoke(main, ["pipeline", "bound", str(f), "-k", "2", "--method", method, "--time-limit", "10"])
    assert res.exit_code == 0, res.output
    value = json.loads(res.stdout)["value"]
    assert 0 < value <= opt


# ------------------------------------------------------------------------------------ stages
def test_k_above_the_maximum_is_refused(tmp_path: Path) -> None:
    f = _write(tmp_path, _graph([1, 1, 1]))
    for cmd in (["pipeline", "bound", str(f), "--method", "simple"],
                ["pipeline", "solve", str(f), "--in-process", "--time-limit", "1", "--quiet"]):
        res = CliRunner().invoke(main, [*cmd, "-k", str(MAX_STAGES + 1)])
        _one_error_line(res, "-k", str(MAX_STAGES))


def test_k_above_n_within_the_maximum_still_works(tmp_path: Path) -> None:
    f = _write(tmp_path, _graph([1, 1, 1]))
    res = CliRunner().invoke(main, ["pipeline", "bound", str(f), "-k", "10", "--method", "spectral"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] == "bound-only"


def test_decoder_table_limit_names_the_largest_k(tmp_path: Path) -> None:
    n = MAX_DP_CELLS // 1000
    f = _write(tmp_path, _graph([1] * n, edges=[]))
    most = MAX_DP_CELLS // (n + 1) - 1
    res = CliRunner().invoke(main, ["pipeline", "bound", str(f), "-k", str(most + 1), "--method", "simple"])
    _one_error_line(res, "-k", f"at most {most} stages")
    res = CliRunner().invoke(main, ["pipeline", "bound", str(f), "-k", str(most), "--method", "simple"])
    assert res.exit_code == 0, res.output


def test_spectral_bound_is_skipped_on_large_graphs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gapstop.problems.pipeline.bounds as bounds

    monkeypatch.setattr(bounds, "SPECTRAL_MAX_N", 4)
    small, large = _write(tmp_path, _graph([1] * 4), "s.json"), _write(tmp_path, _graph([1] * 5), "l.json")
    got = {}
    for f in (small, large):
        res = CliRunner().invoke(main, ["pipeline", "bound", str(f), "-k", "2", "--method", "spectral"])
        assert res.exit_code == 0, res.output
        got[f] = json.loads(res.stdout)
    assert got[small]["status"] == "bound-only" and got[small]["value"] > 0
    assert got[large]["status"] == "skipped" and got[large]["value"] is None


# ---------------------------------------------------------------------------- options
@pytest.mark.parametrize("cmd", ["pipeline-bound", "intraop-bound", "pipeline-solve", "intraop-solve"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e300"])
def test_time_limit_must_be_a_positive_finite_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     cmd: str, value: str) -> None:
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    graph = _write(tmp_path, _graph([1, 1, 1]))
    args = {"pipeline-bound": ["pipeline", "bound", str(graph), "-k", "2", "--method", "simple"],
            "intraop-bound": ["intraop", "bound", str(EXAMPLE), "--method", "trivial"],
            "pipeline-solve": ["pipeline", "solve", str(graph), "-k", "2", "--in-process", "--no-bounds", "--quiet"],
            "intraop-solve": ["intraop", "solve", str(EXAMPLE), "--in-process", "--quiet"]}[cmd]
    _one_error_line(CliRunner().invoke(main, [*args, "--time-limit", value]), "--time-limit")


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_cpus_per_worker_must_be_a_positive_finite_number(tmp_path: Path, value: str) -> None:
    graph = _write(tmp_path, _graph([1, 1, 1]))
    res = CliRunner().invoke(main, ["pipeline", "solve", str(graph), "-k", "2", "--in-process", "--no-bounds",
                                    "--quiet", "--time-limit", "1", "--cpus-per-worker", value])
    _one_error_line(res, "--cpus-per-worker")


@pytest.mark.parametrize("option,value", [("--islands", "0"), ("--islands", "-3"), ("--islands", "5000"),
                                          ("--workers", "5000")])
def test_thread_counts_are_limited(tmp_path: Path, option: str, value: str) -> None:
    graph = _write(tmp_path, _graph([1, 1, 1]))
    res = CliRunner().invoke(main, ["pipeline", "solve", str(graph), "-k", "2", "--in-process", "--no-bounds",
                                    "--quiet", "--time-limit", "1", option, value])
    _one_error_line(res, option, "[1, 4096]")


# ------------------------------------------------------------------- documents: size, depth
def _commands(f: Path, tmp_path: Path) -> list[list[str]]:
    return [["pipeline", "bound", str(f), "-k", "2", "--method", "simple"],
            ["intraop", "bound", str(f), "--method", "trivial"]]


@pytest.mark.parametrize("which", ["graph", "instance", "result", "solution", "run-dir"])
def test_deeply_nested_json_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str) -> None:
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    f = _write(tmp_path, "[" * 100_000 + "]" * 100_000, "nested.json")
    graph = _write(tmp_path, _graph([1, 1, 1]))
    cmd = {"graph": _commands(f, tmp_path)[0], "instance": _commands(f, tmp_path)[1],
           "result": ["pipeline", "evaluate", str(graph), str(f)],
           "solution": ["intraop", "evaluate", str(EXAMPLE), str(f)],
           "run-dir": ["report", str(tmp_path)]}[which]
    if which == "run-dir":
        f = f.rename(tmp_path / "result.json")
    _one_error_line(CliRunner().invoke(main, cmd), str(f), "nested too deeply" if which != "run-dir" else "recursion")


@pytest.mark.parametrize("problem", ["pipeline", "intraop"])
def test_integer_of_too_many_digits_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                problem: str) -> None:
    """Python refuses to convert integers of more than 4300 digits while parsing."""
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    huge = "9" * 5000
    if problem == "pipeline":
        text = json.dumps(_graph([1, 1, 1])).replace('"memory": null', f'"memory": {huge}')
    else:
        text = EXAMPLE.read_text().replace('"usage_limit": 50', f'"usage_limit": {huge}')
    assert huge in text
    f = _write(tmp_path, text, "digits.json")
    _one_error_line(CliRunner().invoke(main, _commands(f, tmp_path)[problem == "intraop"]), str(f),
                    "not valid JSON")


@pytest.mark.parametrize("problem", ["pipeline", "intraop"])
@pytest.mark.parametrize("gz", [True, False])
def test_input_above_the_size_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str,
                                               gz: bool) -> None:
    """A valid document padded past the limit: compressed it is a gzip bomb in miniature
    (200 kB of whitespace compress to a few hundred bytes)."""
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GAPSTOP_MAX_INPUT_BYTES", "100000")
    doc = _graph([1, 1, 1]) if problem == "pipeline" else json.loads(EXAMPLE.read_text())
    data = (json.dumps(doc) + " " * 200_000).encode()
    f = tmp_path / ("doc.json.gz" if gz else "doc.json")
    f.write_bytes(gzip.compress(data) if gz else data)
    assert f.stat().st_size < 100_000 if gz else f.stat().st_size > 100_000
    cmd = _commands(f, tmp_path)[problem == "intraop"]
    _one_error_line(CliRunner().invoke(main, cmd), str(f), "input size limit of 100000 bytes")
    monkeypatch.delenv("GAPSTOP_MAX_INPUT_BYTES")
    assert CliRunner().invoke(main, cmd).exit_code == 0   # the same file within the default limit


def test_gzip_bomb_is_stopped_while_decompressing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """64 MiB of zeros (64 kB compressed) against a 1 MB limit: refused after inflating
    about the limit, not the whole stream."""
    monkeypatch.setenv("GAPSTOP_MAX_INPUT_BYTES", "1000000")
    f = tmp_path / "bomb.json.gz"
    f.write_bytes(gzip.compress(bytes(64 << 20), compresslevel=9))
    inflated = [0]
    real = gzip.GzipFile.read

    def counting_read(self: gzip.GzipFile, size: int = -1) -> bytes:
        out = real(self, size)
        inflated[0] += len(out)
        return out

    monkeypatch.setattr(gzip.GzipFile, "read", counting_read)
    _one_error_line(CliRunner().invoke(main, ["pipeline", "bound", str(f), "-k", "2", "--method", "simple"]),
                    str(f), "decompresses to more than")
    assert 1_000_000 < inflated[0] <= 1_000_000 + (1 << 20)


# --------------------------------------------------------------------------- intra-op horizon
def test_interval_end_above_the_horizon_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    doc = json.loads(EXAMPLE.read_text())
    doc["problem"]["nodes"]["intervals"][2] = [0, 2**40]   # a dense profile of 2^40 steps
    f = _write(tmp_path, doc, "wide.json")
    _one_error_line(CliRunner().invoke(main, ["intraop", "bound", str(f), "--method", "trivial"]),
                    "problem.nodes.intervals[2]", str(MAX_HORIZON))
    doc["problem"]["nodes"]["intervals"][2] = [0, MAX_HORIZON]
    ok = _write(tmp_path, doc, "edge.json")
    assert load_problem(ok, cache=False).horizon == MAX_HORIZON


# ------------------------------------------------------------------------------ intra-op cache
def _evaluate(instance: Path, tmp_path: Path) -> Result:
    sol = tmp_path / "sol.json"
    sol.write_text("[0, 0, 2, 1, 0]")
    return CliRunner().invoke(main, ["intraop", "evaluate", str(instance), str(sol)])


def _cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """The example instance and its cache file, after one load through the command line."""
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    inst = tmp_path / "example.json"
    shutil.copy(EXAMPLE, inst)
    res = _evaluate(inst, tmp_path)
    assert res.exit_code == 0 and json.loads(res.stdout)["cost"] == 445 and res.stderr == ""
    (file,) = (tmp_path / "cache" / "intraop").glob("*.npz")
    return inst, file


def _rebuilt(inst: Path, file: Path, tmp_path: Path) -> None:
    """The next load warns once, scores as the JSON says and leaves a good cache behind."""
    res = _evaluate(inst, tmp_path)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["cost"] == 445
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: {file}: cache not usable"), res.stderr
    again = _evaluate(inst, tmp_path)
    assert again.stderr == "" and json.loads(again.stdout)["cost"] == 445


@pytest.mark.parametrize("damage", ["empty", "truncated", "junk"])
def test_corrupt_cache_file_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    inst, file = _cached(tmp_path, monkeypatch)
    raw = file.read_bytes()
    file.write_bytes({"empty": b"", "truncated": raw[: len(raw) // 2], "junk": b"junk"}[damage])
    _rebuilt(inst, file, tmp_path)


def test_cache_of_other_content_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache file under the example's name but made from another instance (copied, or
    left from an older layout under the same name) is not trusted."""
    inst, file = _cached(tmp_path, monkeypatch)
    other = tmp_path / "other.json"
    other.write_text(json.dumps(problem_to_dict(random_instance(5, 3))))
    load_problem(other, cache_dir=tmp_path / "other-cache")
    (other_file,) = (tmp_path / "other-cache").glob("*.npz")
    shutil.copy(other_file, file)
    _rebuilt(inst, file, tmp_path)


def _rewrite(file: Path, edit: Any, *, keep_digest: bool) -> None:
    from gapstop.problems.intraop import io

    with np.load(file) as z:
        arrays = {k: z[k].copy() for k in z.files}
    edit(arrays)
    if not keep_digest:  # as if the whole file had been made consistently from the altered arrays
        arrays["arrays_sha256"] = np.array(io._arrays_digest(str(arrays["name"]), int(arrays["usage_limit"]),
                                                             arrays))
    np.savez(file, **arrays)


@pytest.mark.parametrize("edit,keep_digest", [
    (lambda a: a["node_cost"].__setitem__(0, a["node_cost"][0] + 1), True),    # a cost changed in place
    (lambda a: a["node_usage"].__setitem__(slice(None), 10**6), False),        # no feasible solution left
    (lambda a: a["end"].__setitem__(0, 2**40), False),                        # beyond the horizon limit
    (lambda a: a.__setitem__("node_cost", a["node_cost"].astype(np.float64)), False),  # another dtype
])
def test_altered_cache_arrays_are_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Any,
                                          keep_digest: bool) -> None:
    inst, file = _cached(tmp_path, monkeypatch)
    _rewrite(file, edit, keep_digest=keep_digest)
    _rebuilt(inst, file, tmp_path)
