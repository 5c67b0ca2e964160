"""Upstream's names for model kwargs, and the check of a model's kwargs. No TensorFlow.

    resolve_model_kwargs("EarlyJoinSAGE", {"num_gnns": 3})   # {"num_layers": 3}
    resolve_model_kwargs("MLP", {"num_gnns": 3})             # PipelineError, one line

Which models exist and which kwargs each takes is read off models.py: from its
source before TensorFlow is imported (`model_catalog.read_catalog`, so entry
scripts refuse a misspelt model or kwarg at once), from the imported classes
after (`model_builder.runtime_catalog`). Values (layer counts, reductions, ...)
are checked by the model constructors.
"""

from __future__ import annotations

import difflib
from typing import Any

from baselines.core.errors import PipelineError
from baselines.tiles.model_catalog import ModelCatalog, read_catalog

# Upstream's kwarg names (its models and its sweep, tiles_beam_experiments.py) -> this project's
# names. Upstream's MLP calls its depth `mlp_layers` and its SAGE models call
# the head after the GNN `final_mlp_layers`: both are the scoring head's depth
# here, and `final_mlp_layers` is the canonical name because upstream's ResGCN
# used `mlp_layers` for something else (see UPSTREAM_ELSEWHERE). A run file
# keeps the names the user passed; `build_model` maps them.
KWARG_ALIASES: dict[str, str] = {
    "num_gnns": "num_layers",
    "op_embed_dim": "op_embedding_dim",
    "hidden_activation": "activation",
    "mlp_layers": "final_mlp_layers",
}
# Every kwarg upstream's models or sweep take, by upstream's name.
UPSTREAM_KWARGS = (
    "num_gnns",
    "op_embed_dim",
    "hidden_dim",
    "mlp_layers",
    "final_mlp_layers",
    "hidden_activation",
    "directed",
    "reduction",
)
# Why a model has no part for an upstream kwarg (canonical name -> reason).
NO_PART: dict[str, str] = {
    "num_layers": "it has no graph layers",
    "directed": "it has no graph layers, so no edge directions",
}
# (model, upstream name) pairs where upstream meant another part than the alias's.
UPSTREAM_ELSEWHERE: dict[tuple[str, str], str] = {
    (model, "mlp_layers"): (
        "upstream's ResGCN used mlp_layers for the depth of the MLP inside each graph "
        "convolution, and these ResGCN layers have one Dense layer each; the scoring "
        "head's depth is final_mlp_layers"
    )
    for model in ("EarlyJoinResGCN", "LateJoinResGCN")
}


def resolve_model_kwargs(
    name: str, given: dict[str, Any], catalog: ModelCatalog | None = None
) -> dict[str, Any]:
    """`given` with upstream's names mapped to this project's; PipelineError if wrong.

    `catalog` says which models exist and what each takes (default: read from
    models.py's source). A model whose kwargs the source cannot tell (a base
    from elsewhere) has its names mapped here and its kwargs checked once the
    classes are imported.

    Upstream's kwarg names (`KWARG_ALIASES`: `num_gnns`, `op_embed_dim`,
    `hidden_activation`, `mlp_layers`) are taken for this project's; an alias
    given together with the name it stands for is refused, and so is an
    upstream kwarg for a part the model does not have (`num_gnns` for the MLP,
    `mlp_layers` for the ResGCN models, where upstream meant another part).
    """
    catalog = catalog or read_catalog()
    catalog.check_name(name)
    accepted = catalog.kwargs.get(name)
    takes = f"{name} takes {', '.join(accepted or ())}"
    kwargs: dict[str, Any] = {}
    for key, value in given.items():
        canonical = KWARG_ALIASES.get(key, key)
        if canonical != key and canonical in given:
            raise PipelineError(
                f"--model_kwargs_json: {key} is upstream's name for {canonical}; "
                f"give one of them, not both"
            )
        if (name, key) in UPSTREAM_ELSEWHERE:
            raise PipelineError(
                f"--model_kwargs_json: {key} means nothing for {name}: "
                f"{UPSTREAM_ELSEWHERE[name, key]}"
            )
        if accepted is None:
            kwargs[canonical] = value
            continue
        if canonical not in accepted and (key in UPSTREAM_KWARGS or canonical in NO_PART):
            shown = key if key == canonical else f"{key} (= {canonical})"
            whose = "upstream's " if key in UPSTREAM_KWARGS else ""
            reason = NO_PART.get(canonical, "it has no part for it")
            raise PipelineError(
                f"--model_kwargs_json: {whose}{shown} means nothing for {name}: {reason}; {takes}"
            )
        kwargs[canonical] = value
    unknown = sorted(
        k if k == c else f"{k} (= {c})"
        for k, c in ((k, KWARG_ALIASES.get(k, k)) for k in given)
        if accepted is not None and c not in accepted
    )
    if unknown:
        close = [
            match[0]
            for k in unknown
            if (match := difflib.get_close_matches(k, accepted or (), n=1))
        ]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise PipelineError(
            f"--model_kwargs_json: {name} does not take {', '.join(unknown)}{hint}; {takes}"
        )
    return kwargs
