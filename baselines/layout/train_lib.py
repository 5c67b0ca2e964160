"""Training a layout cost model under a ranking loss, and ranking whole validation graphs.

    record = train_layout(train_graphs, valid_graphs, ResModel(16), epochs=10, configs=16,
                          batch=4, lr=1e-3, clip_norm=1e-2, seed=0, losses="ListMLELoss:1")
    record["val"]["kendall_tau"]        # mean over validation graphs

Keras `fit` runs the epochs through the core loop (`baselines.core.keras_fit`):
each epoch draws `configs` configurations per train graph (fewer: padded and
masked), and validation measures the pooled OPA on one fixed sample of
configurations per graph, which early stopping follows (ending on the best
epoch's weights), and Kendall's tau on the same sample (`ValidationKendallTau`).
TensorBoard scalars are written after every epoch, and a run with a backup
folder resumes at its last finished epoch (`keras_fit.resumable_fit`, shared
with the tile pipeline). Then every validation graph is ranked with all its
configurations (in chunks of at most `SCORE_SLOT_BUDGET` node-configuration
slots, so a large graph's calls stay bounded; or in one call for a model that
attends across configurations, so chunking never changes its scores) and
Kendall's tau, OPA and slowdown@k are reported. On CPU a seed gives the same
run: pass an unbuilt model, its weights are created after the seed is set.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from baselines.core import distribution, metrics
from baselines.core.errors import PipelineError
from baselines.core.fused_adam import FusedAdam
from baselines.core.io_utils import remove_stale_temporaries
from baselines.core.keras_fit import EpochBatches, RankingTrainer, capped_configs, compile_trainer
from baselines.core.runner import fit_run, set_determinism
from baselines.core.saved_model import save_finished_run
from baselines.core.tensorboard import HParams
from baselines.layout.batching import (
    BATCH_SIGNATURE,
    PreparedGraph,
    assemble_batch,
    batch_source,
    config_fields,
    prepare_graphs,
    segment_source,
    to_model_inputs,
    to_tensors,
)
from baselines.layout.graph import LayoutGraph
from baselines.layout.metrics import kendall_tau, slowdown_at_k
from baselines.layout.models import LayoutModel
from baselines.layout.run_data import load_run_split, max_configs_note
from baselines.layout.run_files import COLLECTION
from baselines.layout.task import LayoutTrainArgs, check_run, toy_banner

SLOWDOWN_KS = (1, 10, 100)
SCORE_CHUNK = 256  # configurations per scoring call, at most
# Node-configuration slots per scoring call: a graph of n nodes (as the model
# counts them, `LayoutModel.nodes_per_config`) is scored SCORE_SLOT_BUDGET // n
# configurations per call (1 to SCORE_CHUNK). With a fixed count the largest
# graph set the peak: an early-join model (ResModel) holds [nodes, configs,
# hidden] float32 states, a few at once. Measured on a 19.5k-node graph with 256
# configurations per call: one call peaked at ~3.3 such states per slot (2.0 GB
# at hidden 32, 8.0 GB at hidden 128), and whole prediction runs at ~6 (most
# likely the allocator keeping freed blocks between calls of other shapes; 4.15
# GB at hidden 32). Taking 6 states x 128 hidden x 4 B = 3 KiB per slot, 2**18
# slots are at most ~0.8 GB per call at hidden 128 whatever the graph's size (a
# 20k-node graph: 13 configurations per call; measured 0.37 GB), well under 4 GB
# beside the ~0.6 GB the rest of a prediction process holds; ~0.2 GB at the
# baseline's hidden 32.
SCORE_SLOT_BUDGET = 2**18


class GraphScorer:
    """Scores every configuration of a prepared graph, in chunks sized to the graph.

    A chunk holds at most `chunk` configurations and at most `slot_budget`
    node-configuration slots (`chunk_for`), so one call's memory is bounded
    whatever the graph's size. A configuration's score does not depend on its
    chunk beyond float32 rounding (a kernel may sum in another order for another
    row count, e.g. a chunk of one configuration). A graph's fields are
    assembled once and only its configurations' fields change between its
    chunks; a model split in two (`LayoutModel.splits_graph_part`) has its graph
    part computed once per graph and each chunk scored by `config_part`. Each
    traced function serves every graph and chunk size (all dimensions but the
    state widths are dynamic in its signature). A model that attends across
    configurations (`attends_across_configs`) scores all of a graph's
    configurations in one call instead, so its scores do not depend on the
    chunking (and its memory is not bounded by the budget).
    """

    def __init__(
        self, model: LayoutModel, chunk: int = SCORE_CHUNK, slot_budget: int = SCORE_SLOT_BUDGET
    ):
        self.model, self.chunk, self.slot_budget = model, chunk, slot_budget
        self._score = tf.function(
            lambda batch: model.forward(to_model_inputs(batch), None, training=False),
            input_signature=[BATCH_SIGNATURE],
        )
        # A model split in two (`LayoutModel.graph_part`) has its graph part
        # computed once per graph, and only the configurations' fields change
        # between a graph's calls: on a 19.5k-node graph scored 13
        # configurations per call, the op encoder, batch assembly and tensor
        # conversion were ~15% of every call, repeated ~800 times.
        self.splits = model.splits_graph_part and not model.attends_across_configs
        self._graph_part = tf.function(
            lambda batch: model.graph_part(to_model_inputs(batch), training=False),
            input_signature=[BATCH_SIGNATURE],
        )
        self._config_part = None  # traced once the graph part's structure is known

    def score_batch(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        """[graphs, configs] scores of an assembled batch (padding slots scored too)."""
        return self._score(to_tensors(batch)).numpy()

    def chunk_for(self, graph: PreparedGraph) -> int:
        """Configurations per call for `graph`: slot_budget // its nodes, 1 to `chunk`.

        The nodes are those the model holds states of per configuration
        (`nodes_per_config`); never below 1, so a graph larger than the budget
        is still scored, one configuration per call.
        """
        if self.model.attends_across_configs:
            return max(graph.num_configs, 1)
        nodes = self.model.nodes_per_config(graph.node_feats.shape[0], graph.cfg_node.shape[0])
        return min(max(self.slot_budget // max(nodes, 1), 1), self.chunk)

    def score(self, graph: PreparedGraph) -> np.ndarray:
        """[configs] scores of every configuration of `graph`, in file order."""
        chunk = self.chunk_for(graph)
        chunks = [
            np.arange(start, min(start + chunk, graph.num_configs))
            for start in range(0, graph.num_configs, chunk)
        ]
        if not chunks:
            return np.zeros(0, np.float32)
        tensors = to_tensors(assemble_batch([graph], [0], [chunks[0]], len(chunks[0])))
        part = self._graph_part(tensors) if self.splits else None
        parts = []
        for slots in chunks:
            if slots is not chunks[0]:
                # The graph's fields stay; only its configurations' change.
                tensors.update(to_tensors(config_fields(graph, slots, len(slots))))
            parts.append(self._call(tensors, part)[0])
        return np.concatenate(parts)

    def _call(self, tensors: dict[str, tf.Tensor], part) -> np.ndarray:
        """[graphs, configs] scores: `forward`, or `config_part` given the graph part."""
        if part is None:
            return self._score(tensors).numpy()
        if self._config_part is None:
            # Rows vary by graph; the widths stay static (layers split kernels by them).
            part_signature = tf.nest.map_structure(
                lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), part
            )
            self._config_part = tf.function(
                lambda batch, part: self.model.config_part(
                    to_model_inputs(batch), part, training=False
                ),
                input_signature=[BATCH_SIGNATURE, part_signature],
            )
        return self._config_part(tensors, part).numpy()


def evaluate_graphs(model: LayoutModel, graphs: Sequence[PreparedGraph]) -> dict[str, Any]:
    """Kendall tau (per graph and mean), pooled OPA and mean slowdown@k over all configurations."""
    scorer = GraphScorer(model)
    taus, pairs, slowdowns = {}, np.zeros(2), {k: [] for k in SLOWDOWN_KS}
    for g in graphs:
        scores = scorer.score(g)
        metrics.require_finite_scores([g.graph_id], [scores], "layout graphs")
        taus[g.graph_id] = kendall_tau(scores, g.raw_runtimes)
        pairs += metrics.kernel_opa(scores, g.raw_runtimes)
        for k in SLOWDOWN_KS:
            slowdowns[k].append(slowdown_at_k(scores, g.raw_runtimes, k))
    defined = [t for t in taus.values() if np.isfinite(t)]
    return {
        "kendall_tau": float(np.mean(defined)) if defined else float("nan"),
        "tau_per_graph": taus,
        "opa": float(pairs[0] / max(pairs[1], 1.0)),
        "slowdown": {str(k): float(np.mean(v)) for k, v in slowdowns.items()},
        "graphs": len(graphs),
    }


class ValidationKendallTau(tf.keras.callbacks.Callback):
    """Adds `val_kendall_tau` to an epoch's logs: mean Kendall tau-b over the validation sample.

        tau = ValidationKendallTau(GraphScorer(model), val_batches)
        trainer.fit(..., callbacks=[tau, early_stopping, tensorboard])  # before what reads logs

    The sample is `val_batches`' fixed one (the configurations validation OPA
    is measured on), scored per graph on its unpadded slots. The mean is over
    graphs whose tau is defined; a graph met twice (replica top-up) counts
    once. Runs only on epochs that validated (`val_opa` in the logs).
    """

    def __init__(self, scorer: GraphScorer, val_batches: EpochBatches):
        super().__init__()
        self.scorer, self.val_batches = scorer, val_batches

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        if logs is None or "val_opa" not in logs:
            return
        taus: dict[str, float] = {}
        for batch in self.val_batches.batches(0):
            scores = self.scorer.score_batch(batch)
            runtimes = batch["config_runtimes"].reshape(scores.shape)
            mask = batch["config_mask"].reshape(scores.shape) > 0
            for graph_id, s, r, m in zip(batch["graph_id"], scores, runtimes, mask):
                taus[graph_id.decode()] = kendall_tau(s[m], r[m])
        defined = [t for t in taus.values() if np.isfinite(t)]
        logs["val_kendall_tau"] = float(np.mean(defined)) if defined else float("nan")


def layout_batches(
    train_graphs: Sequence[LayoutGraph],
    valid_graphs: Sequence[LayoutGraph],
    batch: int,
    configs: int,
    seed: int,
    keep_nodes: int | None,
    replicas: int,
    log: Callable[[str], None],
) -> tuple[list[PreparedGraph], list[PreparedGraph], int, EpochBatches, EpochBatches]:
    """(train and validation graphs prepared, configurations per graph and step, their
    batches). Train batches hold segments of `keep_nodes` nodes, or whole graphs; the
    validation batches draw one fixed sample of configurations per graph."""
    if not train_graphs or not valid_graphs:
        raise PipelineError("train_layout needs at least one train and one validation graph")
    if any(not g.has_labels for g in [*train_graphs, *valid_graphs]):
        raise PipelineError("train and validation graphs need runtimes (test files hold none)")
    train, valid = prepare_graphs(train_graphs), prepare_graphs(valid_graphs)
    configs = capped_configs(configs, max(g.num_configs for g in train), "graph", log)
    source = batch_source(train) if keep_nodes is None else segment_source(train, keep_nodes, seed)
    train_batches = EpochBatches(source, batch, configs, seed, num_replicas=replicas)
    val_batches = EpochBatches(
        batch_source(valid), batch, configs, seed + 1, fixed_epoch=0, num_replicas=replicas
    )
    return train, valid, configs, train_batches, val_batches


def trainer_factory(
    model: LayoutModel, losses: str, configs: int, lr: float, clip_norm: float | None
) -> Callable[[], RankingTrainer]:
    """What `fit_run` calls, under the strategy's scope, to create the model's variables and
    its trainer (Adam at `lr`, clipped to `clip_norm`)."""
    loss_fn = metrics.make_loss_fn(metrics.parse_losses(losses))

    def build_trainer() -> RankingTrainer:
        if not model.built:
            model.create_variables()
        trainer = RankingTrainer(model, loss_fn, configs, to_graph=to_model_inputs)
        compile_trainer(trainer, FusedAdam(learning_rate=lr, clipnorm=clip_norm))
        return trainer

    return build_trainer


def train_layout(
    train_graphs: Sequence[LayoutGraph],
    valid_graphs: Sequence[LayoutGraph],
    model: LayoutModel,
    *,
    epochs: int,
    configs: int,
    batch: int,
    lr: float,
    clip_norm: float | None,
    seed: int,
    losses: str = "ListMLELoss:1",
    early_stop: int | None = None,
    keep_nodes: int | None = None,
    progress: bool = True,
    strategy: tf.distribute.Strategy | None = None,
    backup_dir: Path | None = None,
    tb_dir: Path | None = None,
    log: Callable[[str], None] = print,
    final_validation: bool = True,
    average_from: int | None = None,
    hparams: HParams | None = None,
) -> dict[str, Any]:
    """Trains `model` in place and returns its record (curve, best epoch, validation metrics).

    `configs` per graph per step (capped to the most any train graph has),
    `batch` graphs per step, Adam at `lr` clipped to `clip_norm`; the fit,
    early stopping (`early_stop`: None never), resume (`backup_dir`), weight
    averaging and TensorBoard (`hparams`) are `core.runner.fit_run`'s.
    `keep_nodes`: segment training; None trains through every node.
    `final_validation=False` leaves out ranking every configuration (no "val").
    """
    strategy = strategy or tf.distribute.get_strategy()
    chief = distribution.is_chief(strategy)
    set_determinism(seed)
    replicas = strategy.num_replicas_in_sync
    train, valid, configs, train_batches, val_batches = layout_batches(
        train_graphs, valid_graphs, batch, configs, seed, keep_nodes, replicas, log
    )
    fitted = fit_run(
        trainer_factory(model, losses, configs, lr, clip_norm),
        train_batches,
        val_batches,
        strategy=strategy,
        epochs=epochs,
        early_stop=early_stop,
        chief=chief,
        backup_dir=backup_dir,
        tb_dir=tb_dir,
        average_from=average_from,
        first=[ValidationKendallTau(GraphScorer(model), val_batches)],  # read by those after
        extra_curve=("val_kendall_tau",),
        hparams=hparams,
        progress=f"train {type(model).__name__}" if progress else None,
        log=log,
    )
    record = {
        "model": type(model).__name__,
        "model_kwargs": model.get_config(),
        **dict(configs=configs, batch=batch, lr=lr, clip_norm=clip_norm, seed=seed),
        **dict(losses=losses, epochs=epochs, replicas=replicas, keep_nodes=keep_nodes),
        "train_graphs": [g.graph_id for g in train],
        "valid_graphs": [g.graph_id for g in valid],
        "average_from": average_from,
        **fitted.record_fields(),
    }
    if not chief:  # the chief validates
        return {**record, "chief": False}
    if final_validation:
        clock = time.perf_counter()
        record["val"] = evaluate_graphs(model, valid)
        record["timings"]["val_eval_s"] = time.perf_counter() - clock
    return record


def train(
    args: LayoutTrainArgs,
    *,
    strategy: tf.distribute.Strategy | None = None,
    progress: bool = False,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Trains and saves one layout run as `layout_train.py` does; returns its run record.

        record = train(LayoutTrainArgs(epochs=2, out_dir="out/layout"))
        record["run_hash"], record["val"]["kendall_tau"]

    Writes `model_<hash>/`, `run_<hash>.jsonz` and `tb_<hash>/` into
    `args.out_dir`; `backup_<hash>/` holds the last finished epoch while it
    trains, so the same call after a crash resumes there. A bad flag is a
    PipelineError (one line). `layout_beam_experiments.py` trains each run of
    a sweep with it. A worker that is not the chief of a `multi_worker`
    cluster saves nothing and returns an empty record.
    """
    from baselines.layout.run_files import build_model

    root, toy, out = check_run(args, log)
    if toy:
        log(toy_banner(root))
    run_hash, folder = args.run_hash(), args.collection_dir(root)
    log(f"layout:{args.source}:{args.search} from {folder}; run {run_hash}")
    strategy = strategy or tf.distribute.get_strategy()
    chief = distribution.is_chief(strategy)
    if chief:
        remove_stale_temporaries(out, log)
    model = build_model(args.model, args.model_kwargs())  # a bad name or kwarg: before loading
    train_graphs, valid_graphs = load_train_graphs(args, folder, log)
    started = time.perf_counter()
    record = train_layout(
        train_graphs,
        valid_graphs,
        model,
        **args.train_kwargs(),
        progress=progress,
        strategy=strategy,
        backup_dir=out / f"backup_{run_hash}",
        tb_dir=out / f"tb_{run_hash}",
        log=log,
        hparams=HParams.of_flags(
            args.to_dict(), LayoutTrainArgs.NOT_HASHED, HPARAMS_METRICS, run_label(args, run_hash)
        ),
    )
    if not chief:
        log(f"trained {record['model']} as a worker; the chief evaluates and saves the run")
        return {}
    val = record["val"]
    averaged = record["averaged_epochs"]
    ended_on = (
        f"the mean of the weights of its last {averaged} epochs"
        if averaged
        else f"best epoch {record['best_epoch']}"
    )
    log(
        f"trained {record['model']} in {time.perf_counter() - started:.1f} s, {ended_on}: "
        f"validation Kendall tau {val['kendall_tau']:.4f}, "
        f"OPA {val['opa']:.4f} over {val['graphs']} graphs"
    )
    run = {
        "collection": COLLECTION,
        "args": args.to_dict(),
        "run_hash": run_hash,
        "toy_data": toy,
        "data_root": str(root),
        "source": args.source,
        "search": args.search,
        "model": record["model"],
        "model_kwargs": record["model_kwargs"],
        "train": {k: v for k, v in record.items() if k not in ("model", "model_kwargs")},
        "val": val,
        "train_curve": record["train_curve"],
    }
    save_finished_run(model, run, out, log)
    if toy:
        log(toy_banner(root))
    return run


# Scalars the HParams dashboard shows beside each run's flags: (tag, run, title).
HPARAMS_METRICS = (
    ("epoch_kendall_tau", "validation", "val Kendall tau (sampled configs)"),
    ("epoch_opa", "validation", "val OPA"),
    ("epoch_loss", "validation", "val loss"),
    ("epoch_loss", "train", "train loss"),
)


def run_label(args: LayoutTrainArgs, run_hash: str) -> str:
    """A readable TensorBoard run name: model, collection and the hash's first 8 digits."""
    return f"{args.model}-{args.source}:{args.search}-{run_hash[:8]}"


def load_train_graphs(
    args: LayoutTrainArgs, folder: Path, log: Callable[[str], None]
) -> tuple[list[LayoutGraph], list[LayoutGraph]]:
    """The train and validation graphs of a run, reduced as its args say."""
    reduce = dict(**args.split_kwargs(), log=log)
    train_graphs = load_run_split(folder / "train", training=True, **reduce)
    valid_graphs = load_run_split(folder / "valid", training=True, **reduce)
    graphs = [*train_graphs, *valid_graphs]
    note = max_configs_note(args.max_configs, graphs, distinct=args.drop_duplicates)
    if note:
        log(note)  # the flag stays in the run hash and run file as given
    return train_graphs, valid_graphs
