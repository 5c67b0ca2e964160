"""Which kwargs each model class takes, and upstream's names for them. No TensorFlow.

    resolve_model_kwargs("EarlyJoinSAGE", {"num_gnns": 3})   # {"num_layers": 3}
    resolve_model_kwargs("MLP", {"num_gnns": 3})             # PipelineError, one line

Kept apart from models.py so that the entry scripts can refuse an unknown
model or kwarg before paying seconds for importing TensorFlow; models.py
checks at import that its classes are exactly `MODEL_NAMES`. Values (layer
counts, reductions, ...) are checked by the model constructors.
"""

from __future__ import annotations

from typing import Any

from baselines.tiles.errors import PipelineError

MODEL_NAMES = (
    "MLP",
    "EarlyJoinSAGE",
    "LateJoinSAGE",
    "EarlyJoinResGCN",
    "LateJoinResGCN",
    "LateJoinGAT",
    "ChebSAGE",
)

# Kwargs for parts every model has: the op encoder, the scoring head, pooling.
COMMON_KWARGS = (
    "hidden_dim",
    "op_embedding_dim",
    "activation",
    "dropout",
    "final_mlp_layers",
    "reduction",
)
GRAPH_KWARGS = ("num_layers", "directed")
# Late-join models apply their config encoder and head once per configuration:
# `config_dim` sets that part's width apart from the op states' `hidden_dim`.
LATE_JOIN_KWARGS = ("config_dim",)
MODEL_KWARGS: dict[str, tuple[str, ...]] = {
    "MLP": COMMON_KWARGS + LATE_JOIN_KWARGS,
    "EarlyJoinSAGE": COMMON_KWARGS + GRAPH_KWARGS,
    "LateJoinSAGE": COMMON_KWARGS + GRAPH_KWARGS + LATE_JOIN_KWARGS,
    "EarlyJoinResGCN": COMMON_KWARGS + GRAPH_KWARGS,
    "LateJoinResGCN": COMMON_KWARGS + GRAPH_KWARGS + LATE_JOIN_KWARGS,
    "LateJoinGAT": COMMON_KWARGS
    + GRAPH_KWARGS
    + LATE_JOIN_KWARGS
    + ("num_heads", "config_encoding", "tiled_op_heads", "dim_layout"),
    "ChebSAGE": COMMON_KWARGS + GRAPH_KWARGS + ("cheb_order", "cheb_layout"),
}


# Upstream's kwarg names (its models and its sweep, SPEC §10) -> this project's
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
# Every kwarg upstream's models or sweep take (SPEC §10), by upstream's name.
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


def resolve_model_kwargs(name: str, given: dict[str, Any]) -> dict[str, Any]:
    """`given` with upstream's names mapped to this project's; PipelineError if wrong.

    Upstream's kwarg names (`KWARG_ALIASES`: `num_gnns`, `op_embed_dim`,
    `hidden_activation`, `mlp_layers`) are taken for this project's; an alias
    given together with the name it stands for is refused, and so is an
    upstream kwarg for a part the model does not have (`num_gnns` for the MLP,
    `mlp_layers` for the ResGCN models, where upstream meant another part).
    """
    if name not in MODEL_NAMES:
        raise PipelineError(
            f"--model: unknown model '{name}'; choose one of {', '.join(MODEL_NAMES)}"
        )
    takes = f"{name} takes {', '.join(MODEL_KWARGS[name])}"
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
        if canonical not in MODEL_KWARGS[name] and (key in UPSTREAM_KWARGS or canonical in NO_PART):
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
        if c not in MODEL_KWARGS[name]
    )
    if unknown:
        raise PipelineError(
            f"--model_kwargs_json: {name} does not take {', '.join(unknown)}; {takes}"
        )
    return kwargs
