"""Builds a tile model of models.py by name, creates its variables, rebuilds saved runs."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import tensorflow as tf

from baselines.core import model_lookup
from baselines.core.errors import PipelineError
from baselines.core.saved_model import copy_saved_variables, saved_variable_shapes, variable_paths
from baselines.tiles.data import OPCODE_VOCAB_SIZE
from baselines.tiles.features import FeatureStats
from baselines.tiles.kernel_batches import (
    BATCH_SIGNATURE,
    dummy_batch,
    graph_from_batch,
    to_tensors,
)
from baselines.tiles.model_base import TileModel
from baselines.tiles.run_records import read_run_for_model

MODELS_MODULE = "baselines.tiles.models"
_RESGCN_MLP = (
    "upstream's ResGCN used mlp_layers for the depth of the MLP inside each graph "
    "convolution, and these ResGCN layers have one Dense layer each; the scoring "
    "head's depth is final_mlp_layers"
)
# Upstream's kwarg names (those it shares with this project's too); run files keep the names
# given, `build_model` maps them.
_ALIASES = {
    "num_gnns": "num_layers",
    "op_embed_dim": "op_embedding_dim",
    "hidden_activation": "activation",
    "mlp_layers": "final_mlp_layers",
}
UPSTREAM = model_lookup.Upstream(
    aliases=_ALIASES,
    names=(*_ALIASES, "hidden_dim", "final_mlp_layers", "directed", "reduction"),
    no_part={
        "num_layers": "it has no graph layers",
        "directed": "it has no graph layers, so no edge directions",
    },
    elsewhere={(m, "mlp_layers"): _RESGCN_MLP for m in ("EarlyJoinResGCN", "LateJoinResGCN")},
)


def models_module() -> ModuleType:
    return importlib.import_module(MODELS_MODULE)


def model_classes(module: ModuleType | None = None) -> dict[str, type[TileModel]]:
    return model_lookup.model_classes(module or models_module(), TileModel)


def model_kwargs(name: str, module: ModuleType | None = None) -> dict[str, Any]:
    cls = model_lookup.find_model(module or models_module(), TileModel, name)
    return model_lookup.constructor_kwargs(cls, TileModel)


def resolve_model_kwargs(
    name: str, given: dict[str, Any], module: ModuleType | None = None
) -> dict[str, Any]:
    """`given` with upstream's names mapped to this project's; PipelineError if wrong."""
    return model_lookup.resolve_kwargs(name, given, tuple(model_kwargs(name, module)), UPSTREAM)


def build_model(
    name: str,
    num_configs: int,
    kwargs: dict[str, Any] | None = None,
    module: ModuleType | None = None,
) -> TileModel:
    """The model `name` of models.py; a bad name, kwarg or value is one line."""
    return model_lookup.build_model(
        module or models_module(),
        TileModel,
        name,
        (num_configs, OPCODE_VOCAB_SIZE),
        kwargs,
        UPSTREAM,
    )


def check_scores_shape(model: TileModel, scores: tf.Tensor, kernels: int, configs: int) -> None:
    """PipelineError unless a forward pass gave [kernels, configs] scores."""
    shape = tuple(scores.shape)
    if shape != (kernels, configs):
        raise PipelineError(
            f"{type(model).__name__}.forward returned scores of shape {list(shape)} for "
            f"{kernels} kernel(s) of {configs} configs; a model must return "
            f"[batch, num_configs] = [{kernels}, {configs}] (one score per configuration, "
            "lower = predicted faster)"
        )


def create_variables(model: TileModel, compiled: bool = True) -> None:
    """Creates the model's variables: `compiled`, by a forward pass under the dynamic batch
    signature (any batch size once saved; layers only a call builds too); else by `build()`."""
    if not compiled:
        model.build()
        return
    batch = to_tensors(dummy_batch(model.num_configs, model.architecture_inputs))
    call = tf.function(
        lambda batch: model(graph_from_batch(batch)),
        input_signature=[BATCH_SIGNATURE],
        autograph=False,
    )
    check_scores_shape(model, call(batch), 1, model.num_configs)


def build_from_record(record: dict[str, Any]) -> TileModel:
    """The run's model class with its kwargs, its standard parts' variables created."""
    vocab = record.get("opcode_vocab_size", OPCODE_VOCAB_SIZE)
    if vocab != OPCODE_VOCAB_SIZE:
        raise PipelineError(
            f"run file: opcode vocabulary {vocab} differs from this code's {OPCODE_VOCAB_SIZE}"
        )
    model = build_model(record["model"], int(record["configs"]), record["model_kwargs"])
    create_variables(model, compiled=False)
    return model


def restore_model(model_dir: Path, record: dict[str, Any]) -> TileModel:
    """Rebuilds the run's model class and copies the saved weights in."""
    model_dir = Path(model_dir).expanduser()
    model = build_from_record(with_saved_layout(record, model_dir))
    if variable_paths(model).keys() != saved_variable_shapes(model_dir).keys():
        create_variables(model, compiled=True)
    copy_saved_variables(model_dir, model)
    return model


def with_saved_layout(record: dict[str, Any], model_dir: Path) -> dict[str, Any]:
    """`record` with `cheb_layout` set for a ChebSAGE saved without it, from its variables."""
    if record.get("model") != "ChebSAGE":
        return record
    kwargs = resolve_model_kwargs("ChebSAGE", record["model_kwargs"])
    if "cheb_layout" in kwargs:
        return record
    parallel = any(path.startswith("cheb_branch/") for path in saved_variable_shapes(model_dir))
    layout = "parallel" if parallel else "interleaved"
    return {**record, "model_kwargs": {**record["model_kwargs"], "cheb_layout": layout}}


def load_trained_model(model_dir: Path) -> tuple[TileModel, dict[str, Any], FeatureStats]:
    record, stats = read_run_for_model(model_dir)
    return restore_model(model_dir, record), record, stats
