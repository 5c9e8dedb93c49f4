"""Importers: real model files -> pipeline graphs with per-op metadata and roofline costs.

* :mod:`problems.pipeline.importers.onnx_graph`: ONNX files (optional extra ``gapstop[onnx]``).
* :mod:`problems.pipeline.importers.roofline`: the per-op cost rules every importer shares.
"""
