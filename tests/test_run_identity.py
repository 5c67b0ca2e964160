"""Who a run is and who writes it: the run hash covers every result-changing flag, and
exactly one process of a cluster writes.

The kinds of fault guarded here: two runs that differ in a flag that changes
what is trained getting one name (the second then overwrites or resumes the
first's model, run file and TensorBoard folder), and two processes of a
cluster both acting as the chief (both write the same files).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import types

import pytest

from baselines.core.conductor import choose_run_hash
from baselines.core.distribution import is_chief
from baselines.core.task import Loaded
from baselines.tiles.tile_args import TrainArgs

# Fields that say only where things are read or written, never what is
# trained. Every other field changes the trained model or the recorded
# results, so it must change the run's name.
LOCATION_ONLY = {"out_dir", "cache_dir", "results_csv"}


def other_value(value):
    """A different value of the same type (validity does not matter for naming)."""
    if value is None:  # an optional epoch, unset
        return 3
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 1
    return value + "_other"


RESULT_CHANGING = [f.name for f in dataclasses.fields(TrainArgs) if f.name not in LOCATION_ONLY]


def test_the_location_only_list_names_fields_and_stays_short():
    names = {f.name for f in dataclasses.fields(TrainArgs)}
    assert LOCATION_ONLY <= names
    assert len(RESULT_CHANGING) == len(names) - len(LOCATION_ONLY) >= 20


@pytest.mark.parametrize("field", RESULT_CHANGING)
def test_every_result_changing_flag_changes_the_run_hash(field, tmp_path):
    base = TrainArgs(model="LateJoinGAT", sampling="balanced", seed=3)
    changed = dataclasses.replace(base, **{field: other_value(getattr(base, field))})
    assert changed.run_hash() != base.run_hash()
    # And the names the run's files get, with or without a run of the same
    # data already there (the second case names a run with its data identity).
    data = Loaded(None, None, identity="d1")
    assert choose_run_hash(changed, tmp_path, data)[0] != choose_run_hash(base, tmp_path, data)[0]
    for args in (base, changed):
        (tmp_path / f"tb_{args.run_hash()}").mkdir(exist_ok=True)
        (tmp_path / f"tb_{args.run_hash()}" / "data_identity.json").write_text(
            json.dumps({"identity": "d0"})
        )
    assert choose_run_hash(changed, tmp_path, data)[0] != choose_run_hash(base, tmp_path, data)[0]


def test_the_same_flags_keep_their_name():
    assert TrainArgs(model="MLP", seed=1).run_hash() == TrainArgs(model="MLP", seed=1).run_hash()


def test_a_flag_added_later_is_hashed_only_when_set():
    """Runs saved before --average_from keep their names: unset, it is not hashed (and
    --max_files unset is hashed as the flag it replaced, --toy_data=False)."""
    args = TrainArgs(model="MLP", seed=1)
    fields = args.to_dict()
    del fields["average_from"], fields["max_files"]
    fields["toy_data"] = False
    before = hashlib.md5(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    assert args.run_hash() == before
    assert TrainArgs(model="MLP", seed=1, average_from="4").average_from == 4


# --- cluster roles ---------------------------------------------------------------------------

# TF_CONFIG cluster -> for each task (type, index): does it act as the chief,
# i.e. write the model, run file, CSV and TensorBoard logs? Exactly one writes.
CLUSTERS = {
    "chief and workers": (
        {"chief": ["h0:1"], "worker": ["h1:1", "h2:1"]},
        {("chief", 0): True, ("worker", 0): False, ("worker", 1): False},
    ),
    "workers only": (
        {"worker": ["h0:1", "h1:1", "h2:1"]},
        {("worker", 0): True, ("worker", 1): False, ("worker", 2): False},
    ),
    "chief, workers and an evaluator": (
        {"chief": ["h0:1"], "worker": ["h1:1"], "evaluator": ["h2:1"]},
        {("chief", 0): True, ("worker", 0): False, ("evaluator", 0): False},
    ),
    "workers and an evaluator": (
        {"worker": ["h0:1", "h1:1"], "evaluator": ["h2:1"]},
        {("worker", 0): True, ("worker", 1): False, ("evaluator", 0): False},
    ),
    "one task": ({"worker": ["h0:1"]}, {("worker", 0): True}),
}


def strategy_for(cluster: dict, task_type: str, index: int):
    """A stand-in strategy whose cluster resolver reads this TF_CONFIG."""
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type=task_type, task_id=index
    )
    return types.SimpleNamespace(cluster_resolver=resolver)


@pytest.mark.parametrize("name", list(CLUSTERS))
def test_exactly_the_table_s_process_of_each_cluster_writes(name):
    cluster, roles = CLUSTERS[name]
    tasks = {(kind, i) for kind, hosts in cluster.items() for i in range(len(hosts))}
    assert set(roles) == tasks  # the table covers every process of the cluster
    for (kind, index), writes in roles.items():
        assert is_chief(strategy_for(cluster, kind, index)) is writes, (name, kind, index)
    assert sum(roles.values()) == 1


def test_one_device_without_a_cluster_writes():
    assert is_chief(types.SimpleNamespace()) is True  # the default strategy has no resolver
    import tensorflow as tf

    assert is_chief(tf.distribute.get_strategy()) is True
