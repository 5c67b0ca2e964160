"""Tile-size cost model for the TpuGraphs tile:xla collection."""
