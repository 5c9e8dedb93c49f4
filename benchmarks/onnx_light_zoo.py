"""The onnx package's light model zoo through the ONNX importer (a script, not a test; needs onnx).

    python benchmarks/onnx_light_zoo.py

For each of the nine ``backend/test/data/light`` files: its ONNX nodes, the nodes folded away, the
graph's nodes, the import time (``import_onnx`` from the file to the graph document, in-process,
median of 5) and the total FLOPs against 2 x the architecture's published multiply-adds (at the
published figure's input size; the references and hand counts are those of
``tests/problems/pipeline/test_onnx_light_zoo.py``). Prints a markdown table.
"""
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gapstop.problems.pipeline.importers.onnx_graph import import_onnx  # noqa: E402
from tests.problems.pipeline import test_onnx_light_zoo as Z  # noqa: E402

NAMES = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
         "vgg19", "zfnet512")


def main() -> None:
    print("| file | ONNX nodes | folded | graph nodes | import s | total / (2 x published) |")
    with tempfile.TemporaryDirectory(prefix="gapstop-zoo-") as tmp:
        for name in NAMES:
            path = Z.LIGHT / f"light_{name}.onnx"
            times = []
            for _ in range(5):
                t = time.perf_counter()
                doc, _ = import_onnx(path, Z.A100)
                times.append(time.perf_counter() - t)
            at_size = doc
            if name in Z.PUBLISHED:
                pub = Z.PUBLISHED[name]
                if doc["meta"]["input_shapes"][next(iter(doc["meta"]["input_shapes"]))][2] != pub.side:
                    at_size = Z._import(Z._at_side(Path(tmp), name, pub.side))
                macs, tag = pub.macs, f"{pub.side}x{pub.side}"
            else:
                macs, tag = Z.HAND_COUNTED[name](), "hand count"
            ratio = at_size["meta"]["total_flops"] / (2 * macs) - 1
            meta = doc["meta"]
            print(f"| {name} ({tag}) | {meta['onnx_nodes']} | {meta['folded_nodes']} | "
                  f"{len(doc['graph']['nodes']['names'])} | {statistics.median(times):.2f} | {100 * ratio:+.2f} % |",
                  flush=True)

if __name__ == "__main__":
    main()
