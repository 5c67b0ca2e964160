"""Baseline models and pipelines for the TpuGraphs dataset."""
