"""Keras layers for tile cost models, one small module per idea.

- `op_encoder`: opcode embedding + node features -> op node states.
- `sage`: GraphSAGE-style convolution over both directions of `feed`, tied or per-direction.
- `res_gcn`: residual GCN convolution over both directions of `feed`, tied or per-direction.
- `cheb`: Chebyshev spectral convolution (ChebNet) on the symmetrized op graph.
- `gat`: GATv2 attention over both directions of `feed`, residual + LayerNorm.
- `config_encoder`: per-dimension config tokens beside the kernel's matching dims.
- `pointwise`: a Dense layer for inputs of any rank through one MatMul.
- `readout`: pooling op states per kernel and the per-config scoring head.
- `graph_ops`: sparse adjacency matrices of `feed` and propagation over them.
"""

from baselines.tiles.layers.cheb import ChebConv
from baselines.tiles.layers.config_encoder import PerDimConfigEncoder
from baselines.tiles.layers.gat import GATv2Block
from baselines.tiles.layers.op_encoder import OpEncoder
from baselines.tiles.layers.pointwise import PointwiseDense
from baselines.tiles.layers.readout import ConfigScoringHead, KernelPooling
from baselines.tiles.layers.res_gcn import ResGCNConv
from baselines.tiles.layers.sage import SAGEConv

__all__ = [
    "ChebConv",
    "ConfigScoringHead",
    "GATv2Block",
    "KernelPooling",
    "PerDimConfigEncoder",
    "OpEncoder",
    "PointwiseDense",
    "ResGCNConv",
    "SAGEConv",
]
