"""Synthetic look-alikes of the TpuGraphs files, for tests, smoke runs and benchmarks.

Not part of the library: `baselines` never imports this package. It writes the
files in the format the library reads (the real release's keys, dtypes and
columns), so the library meets them as it meets real data.

- `synthetic.common`: the file format's columns, opcodes and program names, and
  the op-graph builder both generators use;
- `synthetic.tiles`: tile:xla kernels (`data/make_synthetic.py`);
- `synthetic.layout`: layout programs (`data/make_synthetic_layout.py`).
"""
