"""Finds the models of models.py, builds one by name and creates its variables.

    catalog = runtime_catalog()                       # names and kwargs, from the classes
    model = build_model("LateJoinGAT", 64, {"hidden_dim": 128})
    create_variables(model)                           # one forward pass: before training

A model is a public `TileModel` subclass defined in models.py; nothing lists
them (see models.py). Its kwargs are read off its classes: the `takes` of it
and its bases plus the keyword parameters of each `__init__` below
`TileModel`, the same rules `model_catalog` applies to the source before
TensorFlow is imported.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import tensorflow as tf

from baselines.core.errors import PipelineError
from baselines.tiles.data import OPCODE_VOCAB_SIZE
from baselines.tiles.graph import BATCH_SIGNATURE, dummy_batch, graph_from_batch, to_tensors
from baselines.tiles.model_base import TileModel
from baselines.tiles.model_catalog import (
    ModelCatalog,
    read_catalog,
    unknown_model_message,
)
from baselines.tiles.model_kwargs import resolve_model_kwargs

MODELS_MODULE = "baselines.tiles.models"


def models_module() -> ModuleType:
    return importlib.import_module(MODELS_MODULE)


def model_classes(module: ModuleType | None = None) -> dict[str, type[TileModel]]:
    """Every public TileModel subclass defined in `module` (default models.py), in file order."""
    module = module or models_module()
    return {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and isinstance(obj, type)
        and issubclass(obj, TileModel)
        and obj.__module__ == module.__name__
    }


def accepted_kwargs(cls: type[TileModel]) -> tuple[str, ...]:
    """The kwargs `cls` takes (`TileModel.kwarg_names`)."""
    return cls.kwarg_names()


def runtime_catalog(module: ModuleType | None = None) -> ModelCatalog:
    """The models and their kwargs, from the imported classes.

    The module's source is read too, so that a class name defined twice (the
    second silently replacing the first) is refused here as before the import.
    """
    module = module or models_module()
    path = Path(inspect.getsourcefile(module) or module.__name__)
    read_catalog(models_file=path)
    classes = model_classes(module)
    return ModelCatalog(
        path=path,
        names=tuple(classes),
        kwargs={name: accepted_kwargs(cls) for name, cls in classes.items()},
        uncertain=frozenset(),
    )


def build_model(
    name: str,
    num_configs: int,
    model_kwargs: dict[str, Any] | None = None,
    module: ModuleType | None = None,
) -> TileModel:
    """Instantiates a model class by name; bad names or kwargs raise PipelineError.

    Kwarg names, upstream's included, are resolved by
    `model_kwargs.resolve_model_kwargs`; values are checked by the constructor.
    """
    module = module or models_module()
    catalog = runtime_catalog(module)
    if name not in catalog.names:
        obj = getattr(module, name, None)
        if isinstance(obj, type) and issubclass(obj, TileModel):
            raise PipelineError(
                f"--model: {name} is a base class, not a model; models are the classes "
                f"defined in {catalog.path.name}: {', '.join(catalog.names)}"
            )
        raise PipelineError(unknown_model_message(name, catalog.names, catalog.path))
    kwargs = resolve_model_kwargs(name, model_kwargs or {}, catalog)
    try:
        return model_classes(module)[name](num_configs, OPCODE_VOCAB_SIZE, **kwargs)
    except (TypeError, ValueError) as e:
        raise PipelineError(f"--model_kwargs_json: bad value for {name}: {e}") from None


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
    """Creates the model's variables, for training (`compiled`) or inference.

    With `compiled`, one forward pass on a tiny kernel runs under the fully
    dynamic batch signature, so Keras records a shape-agnostic input spec and a
    saved model accepts batches of any size: needed before `save_model`. The
    pass also creates the variables of layers that only a call builds (a
    student's extra layer), and its scores must have the shape [batch,
    num_configs]. Without it, `model.build()` creates the standard parts'
    variables from the known widths, with no forward pass at all (what
    prediction needs for the shipped models; `run_files.restore_model` adds
    the forward pass when the saved model holds more).
    """
    if not compiled:
        model.build()
        return
    batch = to_tensors(dummy_batch(model.num_configs))
    call = tf.function(
        lambda batch: model(graph_from_batch(batch)),
        input_signature=[BATCH_SIGNATURE],
        autograph=False,
    )
    check_scores_shape(model, call(batch), 1, model.num_configs)
