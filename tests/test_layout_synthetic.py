"""Tests for the synthetic layout generator and the bundled toy set (data/layout_toy)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import REAL_SAMPLES, ROOT

from baselines.core.errors import PipelineError
from baselines.layout.data import read_layout_file
from baselines.layout.metrics import kendall_tau
from synthetic.layout import cost_model

SCRIPT = ROOT / "data" / "make_synthetic_layout.py"
TOY = ROOT / "data" / "layout_toy"
COLLECTIONS = [(s, q) for s in ("xla", "nlp") for q in ("default", "random")]
SPLITS = ("train", "valid", "test")
TOY_COUNTS = {"train": 8, "valid": 3, "test": 3}
# The real files' keys in their order, with their dtypes, as the real layout files hold them.
REAL_KEYS = {
    "node_feat": "<f4",
    "node_opcode": "|u1",
    "edge_index": "<i8",
    "node_config_feat": "<f4",
    "node_config_ids": "<i8",
    "config_runtime": "<i8",
    "node_splits": "<i8",
}
SMALL = ["--graphs_per_split", "2/1/1", "--quiet"]


def _load_script():
    spec = importlib.util.spec_from_file_location("make_synthetic_layout", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_layout = _load_script()


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.npz"))}


def _toy(split: str | None = None) -> list[Path]:
    pattern = f"*/*/{split or '*'}/*.npz"
    return sorted(TOY.glob(pattern))


def _members(path: Path) -> list[tuple[str, str, bool]]:
    """(key, dtype, Fortran order) of each member, in file order, from the npy headers."""
    out = []
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            with zf.open(info) as f:
                np.lib.format.read_magic(f)
                _, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            out.append((info.filename.removesuffix(".npy"), dtype.str, fortran))
    return out


def _family(path: Path) -> str:
    return path.stem.split("_")[0]


# ---------------------------------------------------------------------------
# The bundled toy set.


def test_toy_set_has_every_collection_and_split_with_the_recorded_counts():
    for source, search in COLLECTIONS:
        for split, count in TOY_COUNTS.items():
            assert len(list((TOY / source / search / split).glob("*.npz"))) == count


def test_every_toy_file_loads_with_the_real_keys_and_dtypes():
    files = _toy()
    assert len(files) == 4 * sum(TOY_COUNTS.values())
    for path in files:
        graph = read_layout_file(path)  # the validated reader: raises on any defect
        members = _members(path)
        assert [(k, d) for k, d, _ in members] == list(REAL_KEYS.items()), path
        assert dict((k, f) for k, _, f in members)["edge_index"], "edge_index in Fortran order"
        n = graph.num_nodes
        assert 100 <= n <= 400
        assert 0.02 <= graph.num_configurable / n <= 0.08
        assert set(graph.node_opcode[graph.node_config_ids].tolist()) <= {26, 34, 75}
        with np.load(path) as z:
            splits = z["node_splits"]
            feat = z["node_config_feat"]
        assert splits.ndim == 2 and splits.shape[0] == 1
        assert splits[0, 0] == 0 and splits[0, -1] == n and np.all(np.diff(splits[0]) > 0)
        assert feat.min() >= -1 and feat.max() <= 5 and np.all(feat == np.round(feat))
        assert np.all(graph.edge_index[:, 0] > graph.edge_index[:, 1])  # u consumes v < u
        expected_configs = (200, 200) if "/test/" in str(path) else (100, 300)
        assert expected_configs[0] <= graph.num_configs <= expected_configs[1]


def _tensor_of(graph, node: int, group: int) -> int | None:
    """The node whose output a group lays out, from the edges (operands in edge order)."""
    ops = graph.edge_index[graph.edge_index[:, 0] == node, 1].tolist()
    if group == 0:
        return node
    if group == 1:
        return ops[0]
    return ops[1] if graph.node_opcode[node] in (26, 34) else None


def test_configuration_groups_are_permutations_of_their_tensors_rank():
    for path in _toy("train")[::3] + _toy("test")[::3]:
        graph = read_layout_file(path)
        rank = np.count_nonzero(graph.node_feat[:, 21:27], axis=1)
        for j, node in enumerate(graph.node_config_ids.tolist()):
            for group in range(3):
                values = graph.node_config_feat[:, j, 6 * group : 6 * group + 6].astype(int)
                tensor = _tensor_of(graph, node, group)
                if tensor is None:
                    assert np.all(values == -1), (path, node, group)
                    continue
                r = rank[tensor]
                assert np.all(values[:, r:] == -1)
                explicit = values[np.any(values >= 0, axis=1), :r]
                assert np.all(np.sort(explicit, axis=1) == np.arange(r)), (path, node, group)


def test_real_sample_dtypes_and_member_order_match(tmp_path):
    real = sorted((REAL_SAMPLES / "layout").glob("*/*/*/*.npz"))
    if not real:
        pytest.skip(f"real layout samples not found at {REAL_SAMPLES / 'layout'}")
    for path in real:
        source, search, split = path.parts[-4:-1]
        toy = sorted((TOY / source / search / split).glob("*.npz"))[0]
        assert _members(toy) == _members(path), (toy, path)


def test_valid_and_test_families_are_held_out_from_train():
    for source, search in COLLECTIONS:
        folder = TOY / source / search
        families = {s: {_family(p) for p in (folder / s).glob("*.npz")} for s in SPLITS}
        assert families["train"] and families["valid"] and families["test"]
        assert not families["train"] & families["valid"]
        assert not families["train"] & families["test"]
        assert len(families["train"]) >= 2  # several families to learn from


def test_default_and_random_collections_hold_the_same_programs():
    for source in ("xla", "nlp"):
        for split in SPLITS:
            default = sorted((TOY / source / "default" / split).glob("*.npz"))
            random_ = sorted((TOY / source / "random" / split).glob("*.npz"))
            assert [p.name for p in default] == [p.name for p in random_]
            a, b = read_layout_file(default[0]), read_layout_file(random_[0])
            assert np.array_equal(a.node_feat, b.node_feat)
            assert np.array_equal(a.edge_index, b.edge_index)
            assert not np.array_equal(a.node_config_feat[:10], b.node_config_feat[:10])


def test_test_files_have_all_zero_runtimes_and_train_files_positive_ones():
    for path in _toy("test"):
        assert not np.any(read_layout_file(path).config_runtime), path
    for path in _toy("train") + _toy("valid"):
        assert np.all(read_layout_file(path).config_runtime > 0), path


def test_runtimes_vary_within_a_graph_and_do_not_follow_file_order():
    rng = np.random.default_rng(0)
    taus = []
    for path in _toy("train"):
        runtime = read_layout_file(path).config_runtime
        assert runtime.max() / runtime.min() > 1.05, path
        taus.append(kendall_tau(rng.permutation(runtime.size), runtime))
        assert abs(kendall_tau(np.arange(runtime.size), runtime)) < 0.3, path
    assert abs(np.mean(taus)) < 0.05
    assert max(abs(t) for t in taus) < 0.3


def test_repeated_configurations_differ_only_by_noise():
    repeats = 0
    for path in _toy("train"):
        graph = read_layout_file(path)
        rows = graph.node_config_feat.reshape(graph.num_configs, -1)
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        ratio = graph.config_runtime / graph.config_runtime[first[inverse]]
        repeats += int(np.sum(first[inverse] != np.arange(graph.num_configs)))
        assert np.all(np.abs(np.log(ratio)) < 8 * cost_model.NOISE_SIGMA), path
    assert repeats > 0


def test_toy_runtimes_follow_the_documented_model_within_the_noise():
    log_ratios = []
    for path in _toy("train") + _toy("valid"):
        g = read_layout_file(path)
        model = cost_model.layout_runtime_ns(
            g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids, g.node_config_feat
        )
        log_ratios.append(np.log(g.config_runtime / model))
    log_ratios = np.concatenate(log_ratios)
    assert abs(log_ratios.mean()) < 0.002
    assert 0.008 < log_ratios.std() < 0.012  # the 1% log-normal noise


def test_default_search_is_not_always_won_by_the_compiler_default():
    beaten = 0
    for path in sorted(TOY.glob("*/default/train/*.npz")):
        g = read_layout_file(path)
        terms = cost_model.layout_cost_terms(
            g.node_feat, g.node_opcode, g.edge_index, g.node_config_ids, g.node_config_feat
        )
        total = terms["transposes"] + terms["padding"]
        beaten += bool(np.any(total < total[0] * 0.999))
    assert beaten >= 2


def _recorded_command() -> list[str]:
    """The toy set's command line from data/README.md, as arguments after the script."""
    text = (ROOT / "data" / "README.md").read_text()
    lines = [
        line
        for line in text.splitlines()
        if "make_synthetic_layout.py" in line and "layout_toy" in line
    ]
    assert len(lines) == 1, lines
    args = shlex.split(lines[0].strip())
    return args[args.index("data/make_synthetic_layout.py") + 1 :]


def test_bundled_toy_set_equals_a_fresh_generation_with_the_recorded_command(tmp_path):
    args = _recorded_command()
    assert args[args.index("--out") + 1] == "data/layout_toy"
    args[args.index("--out") + 1] = str(tmp_path / "fresh")
    assert make_layout.main([*args, "--quiet"]) == 0
    fresh, bundled = _files(tmp_path / "fresh"), _files(TOY)
    assert sorted(fresh) == sorted(bundled)
    for name in bundled:
        assert fresh[name] == bundled[name], name
    assert sum(len(b) for b in bundled.values()) < 5 * 10**6
    assert sum(p.stat().st_size for p in TOY.rglob("*") if p.is_file()) < 5 * 10**6


# ---------------------------------------------------------------------------
# The generator.


def test_same_seed_is_byte_identical_and_another_seed_differs(tmp_path):
    for name, seed in (("a", "3"), ("b", "3"), ("c", "4")):
        assert make_layout.main(["--out", str(tmp_path / name), "--seed", seed, *SMALL]) == 0
    a, b, c = (_files(tmp_path / name) for name in "abc")
    assert len(a) == 4 * 4
    assert a == b
    assert a.keys() != c.keys() or all(a[k] != c[k] for k in a)


def test_test_labels_keeps_test_runtimes_and_changes_nothing_else(tmp_path):
    for name, extra in (("hidden", []), ("labelled", ["--test_labels"])):
        assert make_layout.main(["--out", str(tmp_path / name), *SMALL, *extra]) == 0
    hidden, labelled = _files(tmp_path / "hidden"), _files(tmp_path / "labelled")
    assert hidden.keys() == labelled.keys()
    for name in hidden:
        if "/test/" not in name:
            assert hidden[name] == labelled[name]
            continue
        a = read_layout_file(tmp_path / "hidden" / name)
        b = read_layout_file(tmp_path / "labelled" / name)
        assert not np.any(a.config_runtime) and np.all(b.config_runtime > 0)
        assert np.array_equal(a.node_config_feat, b.node_config_feat)


def test_rewrite_replaces_a_set_and_refuses_other_folders(tmp_path):
    out = tmp_path / "set"
    assert make_layout.main(["--out", str(out), *SMALL]) == 0
    assert make_layout.main(["--out", str(out), "--graphs_per_split", "1/0/0", "--quiet"]) == 0
    assert len(_files(out)) == 4
    assert not list(tmp_path.glob("*.tmp-*"))
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(PipelineError, match="not a synthetic layout set"):
        make_layout.main(["--out", str(other), *SMALL])
    assert (other / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("text", ["8/3", "8/3/x", "8/-1/3", ""])
def test_bad_graphs_per_split_is_refused_in_one_line(tmp_path, text):
    with pytest.raises(PipelineError, match="graphs_per_split"):
        make_layout.main(["--out", str(tmp_path / "x"), "--graphs_per_split", text])


# ---------------------------------------------------------------------------
# The cost model on hand-built graphs.


def _hand_graph(shape: tuple[int, int], bits: int, consumer_opcode: int):
    """parameter (0) -> reshape (1, configurable) -> consumer (2); same shape throughout."""
    feat = np.zeros((3, 140), dtype=np.float32)
    feat[:, 1] = bits
    feat[:, 21:23] = shape
    feat[:, 134:136] = (1, 0)  # row-major: dim 1 most minor
    opcodes = np.array([63, 75, consumer_opcode], dtype=np.uint8)
    edges = np.array([[1, 0], [2, 1]], dtype=np.int64)
    ids = np.array([1, 2] if consumer_opcode == 75 else [1], dtype=np.int64)
    return feat, opcodes, edges, ids


def _config(*groups_per_node) -> np.ndarray:
    """One configuration: per configurable node, (out, in) minor-to-major lists ([] = -1)."""
    row = np.full((len(groups_per_node), 18), -1, dtype=np.float32)
    for j, (out, inp) in enumerate(groups_per_node):
        row[j, : len(out)] = out
        row[j, 6 : 6 + len(inp)] = inp
    return row


def test_agreeing_layouts_remove_exactly_the_transpose_term():
    # 256 x 512 bf16: both dims are multiples of 128 and 8, so no layout pads.
    feat, opcodes, edges, ids = _hand_graph((256, 512), 16, consumer_opcode=2)  # 2: add
    configs = np.stack(
        [
            _config(([1, 0], [])),  # reshape writes row-major: what the add reads
            _config(([0, 1], [])),  # reshape writes column-major: the add needs a transpose
        ]
    )
    runtime = cost_model.layout_runtime_ns(feat, opcodes, edges, ids, configs)
    tensor_bytes = 256 * 512 * 2
    assert runtime[1] - runtime[0] == pytest.approx(0.004 * tensor_bytes)
    assert cost_model.TRANSPOSE_NS_PER_BYTE == 0.004  # the docstring's constant
    # BASE by hand: the reshape and the add each write 256 * 512 * 2 bytes at 1000 bytes/ns.
    assert runtime[0] == pytest.approx(2 * tensor_bytes / 1000)


def test_two_configurable_nodes_agree_when_the_consumer_reads_the_new_layout():
    feat, opcodes, edges, ids = _hand_graph((256, 512), 32, consumer_opcode=75)
    configs = np.stack(
        [
            _config(([1, 0], []), ([1, 0], [])),  # both at the default
            _config(([0, 1], []), ([1, 0], [])),  # reshape 2 reads by default: 1 transpose
            _config(([0, 1], []), ([1, 0], [0, 1])),  # reshape 2 reads what 1 writes: none
        ]
    )
    terms = cost_model.layout_cost_terms(feat, opcodes, edges, ids, configs)
    bytes_ = 256 * 512 * 4
    assert terms["transposes"] == pytest.approx([0.0, 0.004 * bytes_, 0.0])
    # Node 1 reads the parameter in its default layout in every configuration.
    assert np.all(terms["padding"] == 0)


def test_padding_by_hand():
    # 100 x 64 f32. Row-major ([1, 0]): minor 64 -> 128 lanes, second 100 -> 104 sublanes:
    # 104 * 128 = 13312 stored elements. Column-major ([0, 1]): minor 100 -> 128, second
    # 64 stays: 8192. Configured layouts of the reshape: its output and its input (the
    # parameter, always read row-major here).
    feat, opcodes, edges, ids = _hand_graph((100, 64), 32, consumer_opcode=2)
    configs = np.stack([_config(([1, 0], [])), _config(([0, 1], []))])
    terms = cost_model.layout_cost_terms(feat, opcodes, edges, ids, configs)
    row_major_waste = (13312 - 6400) * 4 * 0.002
    column_major_waste = (8192 - 6400) * 4 * 0.002
    assert terms["padding"] == pytest.approx(
        [2 * row_major_waste, row_major_waste + column_major_waste]
    )
    assert terms["transposes"] == pytest.approx([0.0, 0.004 * 6400 * 4])
    assert cost_model.PAD_NS_PER_BYTE == 0.002


def test_all_minus_one_groups_mean_the_node_feat_layout():
    feat, opcodes, edges, ids = _hand_graph((100, 64), 32, consumer_opcode=2)
    explicit = _config(([1, 0], [1, 0]))
    default = _config(([], []))
    runtime = cost_model.layout_runtime_ns(feat, opcodes, edges, ids, np.stack([explicit, default]))
    assert runtime[0] == runtime[1]


def test_graph_ids_name_their_family():
    for path in _toy():
        assert re.fullmatch(r"[a-z0-9]+_(bf16|f32)_\d{3}", path.stem), path


# ---------------------------------------------------------------------------
# Release-size presets (data/make_synthetic.py --collection layout) and cost models.

# The real release's files per split and per-graph sizes, written out here (not read
# from the generator): xla ~14,105 nodes and 10-12k configs per graph, nlp ~5,659
# nodes and (by the generator's documented choice) 9-11k configs; test files 1,000.
RELEASE_GRAPHS = {
    "xla:random": (69, 7, 8),
    "xla:default": (61, 7, 8),
    "nlp:random": (207, 20, 17),
    "nlp:default": (198, 20, 17),
}
MEAN_NODES = {"xla": 14_105, "nlp": 5_659}
MEAN_CONFIGS = {"xla": 11_000, "nlp": 10_000}
PRESET_SCALE = {"release": 1, "release_half": 2, "release_quarter": 4, "release_eighth": 8}


def _within(value: float, target: float, tolerance: float = 0.05) -> bool:
    return abs(value - target) <= tolerance * target


@pytest.mark.parametrize("preset", sorted(PRESET_SCALE))
@pytest.mark.parametrize("collection", sorted(RELEASE_GRAPHS))
def test_release_presets_plan_the_real_counts_and_sizes_within_5_percent(preset, collection):
    from synthetic.layout.release import release_plan

    plan = release_plan(preset, collection, seed=0)
    source = collection.split(":")[0]
    for split, real in zip(SPLITS, RELEASE_GRAPHS[collection]):
        expected = max(1, int(real / PRESET_SCALE[preset] + 0.5))
        assert len(plan[split]) == expected, (split, plan[split])
        nodes = [n for n, _ in plan[split]]
        configs = [c for _, c in plan[split]]
        assert _within(np.mean(nodes), MEAN_NODES[source]), (split, np.mean(nodes))
        target_configs = 1_000 if split == "test" else MEAN_CONFIGS[source]
        assert _within(np.mean(configs), target_configs), (split, np.mean(configs))
        if split != "test" and source == "xla":
            assert min(configs) >= 10_000 and max(configs) <= 12_000
    if preset == "release":  # a long tail: the largest train graph well above the mean
        train_nodes = [n for n, _ in plan["train"]]
        assert max(train_nodes) > 2.5 * MEAN_NODES[source]
        assert np.median(train_nodes) < MEAN_NODES[source]


def test_a_planned_file_has_exactly_the_planned_node_and_config_counts():
    from synthetic.layout.release import (
        SizeTargets,
        generate_planned_file,
        release_plan,
    )

    tiny = SizeTargets(
        nodes_mean=900,
        nodes_sigma=0.3,
        min_nodes=700,
        configs_low=40,
        configs_high=60,
        test_configs=20,
    )
    plan = release_plan("release_eighth", "nlp:random", seed=5, targets=tiny)
    for split in ("train", "test"):
        nodes, configs = plan[split][0]
        graph_id, arrays = generate_planned_file(5, "nlp", "random", split, 0, (nodes, configs))
        assert arrays["node_opcode"].shape == (nodes,)
        assert arrays["node_feat"].shape == (nodes, 140)
        assert arrays["node_config_feat"].shape[0] == configs == arrays["config_runtime"].size
        assert arrays["node_splits"][0, -1] == nodes
        assert list(arrays) == list(REAL_KEYS)
        assert _family(Path(graph_id)) in (
            ("gru",) if split == "test" else ("bert", "gpt", "mixer")
        )
        assert arrays["node_config_ids"].size >= 5
        if split == "test":
            assert not np.any(arrays["config_runtime"]) and configs == 20
        else:
            assert np.all(arrays["config_runtime"] > 0)


def _load_make_synthetic():
    path = ROOT / "data" / "make_synthetic.py"
    spec = importlib.util.spec_from_file_location("make_synthetic", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_release_cli_writes_the_plan_identically_for_any_worker_count(tmp_path, monkeypatch):
    from synthetic.layout import release

    # Tiny per-graph targets: the preset's graph counts and the pool are under test here
    # (the plan is made in this process, so the workers see the tiny sizes too).
    monkeypatch.setitem(
        release.RELEASE_TARGETS, "nlp", release.SizeTargets(800, 0.3, 700, 30, 40, 10)
    )
    script = _load_make_synthetic()
    files = {}
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        args = ["--collection", "layout", "--preset", "release_eighth", "--out", str(out)]
        args += ["--collections", "nlp:default", "--workers", workers, "--quiet"]
        assert script.main(args) == 0
        files[workers] = _files(out)
    assert files["1"] == files["2"]
    counts = {s: sum(f"/{s}/" in k for k in files["1"]) for s in SPLITS}
    assert counts == {"train": 25, "valid": 3, "test": 2}  # 198/20/17 over 8, at least 1
    assert all(k.startswith("nlp/default/") for k in files["1"])
    assert not list(tmp_path.glob("*.tmp-*"))


def test_nlp_configs_sets_the_configurations_of_nlp_graphs_only(tmp_path, monkeypatch):
    """--nlp_configs LOW,HIGH (up to the real release's 56,000-66,000) moves every nlp
    train/valid graph's configuration count into [LOW, HIGH], the mean to its middle,
    and leaves the nlp test graphs (1,000) and the xla collections as they were."""
    from synthetic.layout import release

    planned = {}

    def record(out, preset, seed, collections, *rest, nlp_configs=None, **kw):
        nlp = release.nlp_targets(nlp_configs)
        for c in collections:
            planned[c] = release.release_plan(preset, c, seed, nlp if c[:4] == "nlp:" else None)
        return []

    monkeypatch.setattr(release, "write_release_dataset", record)
    args = ["--collection", "layout", "--preset", "release", "--out", str(tmp_path / "x")]
    args += ["--collections", "xla:default,nlp:random", "--nlp_configs", "56000,66000"]
    assert _load_make_synthetic().main(args) == 0
    for split in SPLITS:
        configs = [c for _, c in planned["nlp:random"][split]]
        if split == "test":
            assert set(configs) == {1_000}
        else:
            assert min(configs) >= 56_000 and max(configs) <= 66_000, split
            assert _within(np.mean(configs), 61_000, 0.01), (split, np.mean(configs))
    assert planned["xla:default"] == release.release_plan("release", "xla:default", 0)


def test_written_nlp_graphs_hold_the_configurations_nlp_configs_asks_for(tmp_path, monkeypatch):
    """The writer plans nlp graphs with the given counts (tiny nodes keep it fast)."""
    from synthetic.layout import release

    monkeypatch.setitem(
        release.RELEASE_TARGETS, "nlp", release.SizeTargets(800, 0.3, 700, 30, 40, 10)
    )
    infos = release.write_release_dataset(
        tmp_path / "set",
        "release_eighth",
        collections=["nlp:default"],
        workers=1,
        nlp_configs=(61, 67),
    )
    for info in infos:
        if info.split == "test":
            assert info.num_configs == 10
        else:
            assert 61 <= info.num_configs <= 67, info


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--collection", "layout"], "needs --preset"),
        (["--collection", "layout", "--preset", "release", "--train", "3"], "--train"),
        (
            ["--collection", "layout", "--preset", "release", "--collections", "xla:foo"],
            "collections",
        ),
        (["--collection", "layout", "--preset", "release", "--workers", "0"], "workers"),
        (["--cost_model", "alternate"], "layout flag"),
        (["--nlp_configs", "56000,66000"], "layout flag"),
        (["--search_space", "decisions"], "layout flag"),
        (["--collection", "layout", "--preset", "release", "--nlp_configs", "66000"], "LOW,HIGH"),
        (["--collection", "layout", "--preset", "release", "--nlp_configs", "9,5"], "LOW <= HIGH"),
        (["--collection", "layout", "--preset", "release", "--nlp_configs", "0,5"], "LOW <= HIGH"),
        (
            ["--collection", "layout", "--preset", "release", "--collections", "xla:default"]
            + ["--nlp_configs", "5,9"],
            "no nlp collection",
        ),
    ],
)
def test_bad_release_flags_are_refused_in_one_line(tmp_path, extra, match):
    with pytest.raises(PipelineError, match=match):
        _load_make_synthetic().main(["--out", str(tmp_path / "x"), *extra])
    assert not (tmp_path / "x").exists()


def test_the_two_cost_models_order_configurations_differently_and_are_deterministic():
    from synthetic.layout import generate_file

    taus = []
    for source in ("xla", "nlp"):
        for index in range(3):
            args = (7, source, "random", "train", index)
            _, standard = generate_file(*args)
            _, alternate = generate_file(*args, cost_model="alternate")
            _, again = generate_file(*args, cost_model="alternate")
            assert np.array_equal(alternate["config_runtime"], again["config_runtime"])
            for key in ("node_feat", "edge_index", "node_config_feat"):
                assert np.array_equal(standard[key], alternate[key])
            taus.append(kendall_tau(standard["config_runtime"], alternate["config_runtime"]))
    assert np.mean(taus) < 0.8, taus
    assert max(taus) < 0.95, taus


def test_cost_model_flag_of_the_toy_script_changes_only_the_runtimes(tmp_path):
    for name, model in (("s", "standard"), ("a", "alternate")):
        args = ["--out", str(tmp_path / name), "--cost_model", model, *SMALL, "--test_labels"]
        assert make_layout.main(args) == 0
    s, a = _files(tmp_path / "s"), _files(tmp_path / "a")
    assert s.keys() == a.keys()
    for name in s:
        x, y = read_layout_file(tmp_path / "s" / name), read_layout_file(tmp_path / "a" / name)
        assert np.array_equal(x.node_config_feat, y.node_config_feat)
        assert not np.array_equal(x.config_runtime, y.config_runtime)
    with pytest.raises(PipelineError, match="unknown cost model"):
        from synthetic.layout import write_layout_dataset

        write_layout_dataset(tmp_path / "bad", {"train": 1}, seed=0, cost_model="fast")


def _repeat_log_ratios(config_feat: np.ndarray, runtimes: np.ndarray) -> np.ndarray:
    """log(runtime / runtime of the first row with the same configuration), repeats only."""
    rows = config_feat.reshape(len(runtimes), -1)
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    first = first[inverse.reshape(-1)]
    repeat = first != np.arange(len(runtimes))
    return np.log(runtimes[repeat] / runtimes[first[repeat]])


def test_release_size_runtimes_rank_as_their_noise_free_costs():
    from synthetic.layout.release import generate_planned_file

    # A graph of the release's mean xla size, 600 of its ~11,000 configurations: one
    # configuration moves its runtime by ~0.1-1%, so noise of the toy set's 1% ranked
    # its configurations at Kendall's tau 0.05-0.66 against their noise-free costs.
    _, a = generate_planned_file(0, "xla", "default", "valid", 1, (14_105, 600))
    clean = cost_model.layout_runtime_ns(
        a["node_feat"],
        a["node_opcode"],
        a["edge_index"],
        a["node_config_ids"],
        a["node_config_feat"],
    )
    measured = a["config_runtime"].astype(np.float64)
    assert kendall_tau(clean, measured) > 0.9
    log_noise = np.log(measured / clean)
    assert np.abs(log_noise).max() < 8 * cost_model.RELEASE_NOISE_SIGMA
    repeats = _repeat_log_ratios(a["node_config_feat"], measured)
    assert repeats.size > 0 and np.abs(repeats).max() < 8 * cost_model.RELEASE_NOISE_SIGMA


def test_release_noise_is_the_level_of_the_real_files():
    files = sorted((REAL_SAMPLES / "layout").glob("*/*/*/*.npz"))
    labelled = [g for g in map(read_layout_file, files) if np.any(g.config_runtime)]
    if not labelled:
        pytest.skip("../shared/real_samples/layout is absent: no real layout runtimes")
    ratios = np.concatenate(
        [
            _repeat_log_ratios(g.node_config_feat, g.config_runtime.astype(np.float64))
            for g in labelled
        ]
    )
    assert ratios.size > 100  # hundreds of repeated configurations in the samples
    # Every real repeat lies within the release noise's 8 sigma, and the largest is
    # more than a tenth of a sigma: the level is neither below nor far above them.
    spread = np.abs(ratios).max()
    assert cost_model.RELEASE_NOISE_SIGMA / 10 < spread < 8 * cost_model.RELEASE_NOISE_SIGMA
