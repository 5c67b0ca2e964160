"""docs/research.md's examples run as written, and the Kaggle extra docs/submission.md installs
is pinned in the lock.

- The feature snippet (a `python` block marked `<!-- docs-test: run by tests/test_docs_guides.py
  -->`) runs from the repository root and prints the widths the guide names.
- The layout template, pasted at the end of `baselines/layout/models.py` as the guide says,
  is a model with a graph part, and in a scratch copy the guide's commands (the `bash` block
  with that marker) train it one toy epoch and rank every configuration of the toy test split.
  The `run` blocks of the guide (a toy epoch with a feature's kwarg, the two quality benchmarks
  at their smallest) are run by tests/test_docs.py.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, copy_repository

GUIDE = ROOT / "docs" / "research.md"
RUN_BY_THIS = "<!-- docs-test: run by tests/test_docs_guides.py -->"
LAYOUT_MODELS = Path("baselines") / "layout" / "models.py"


def marked_block(language: str) -> str:
    """The one `language` block of the guide that this test runs."""
    found = re.findall(
        re.escape(RUN_BY_THIS) + rf"\n```{language}\n(.*?)^```", GUIDE.read_text(), re.S | re.M
    )
    assert len(found) == 1, f"research.md: {len(found)} {language} blocks marked for this test"
    return found[0]


def layout_template() -> str:
    block = re.search(
        r"<!-- layout-template:start -->\n```python\n(.*?)```\n<!-- layout-template:end -->",
        GUIDE.read_text(),
        re.S,
    )
    assert block, "research.md lost its layout template"
    return block.group(1)


def with_template(models_source: str) -> str:
    """models.py as the guide says to edit it: the class appended at the end."""
    return models_source.rstrip("\n") + "\n\n\n" + layout_template()


def quiet_env(home: Path | None = None) -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    if home is not None:  # an empty home: no ~/data, as before any download
        env["HOME"] = str(home)
    return env


@pytest.mark.slow
def test_the_feature_snippet_prints_the_widths_the_guide_names():
    proc = subprocess.run(
        [sys.executable, "-"],
        input=marked_block("python"),
        cwd=ROOT,
        env=quiet_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "tile columns: file 24 normalized 28" in out, out
    assert "analytic_inputs=False: the head reads 24 columns" in out, out
    assert "analytic_inputs=True: the head reads 28 columns" in out, out
    assert "with the new column: 29" in out, out
    # [configurable nodes, 4 configurations, 15 padding inputs]
    assert re.search(r"tile_padding \(\d+, 4, 15\)", out), out


@pytest.fixture
def keras_registry():
    """Defining a model class registers it with Keras by name: restored afterwards."""
    import tensorflow as tf

    saved = dict(tf.keras.utils.get_custom_objects())
    yield
    registry = tf.keras.utils.get_custom_objects()
    registry.clear()
    registry.update(saved)


def test_the_layout_template_is_a_model_with_a_graph_part(tmp_path, keras_registry):
    """Built by name from models.py with it pasted in: its graph part is used by the scorer,
    reads no configuration field, and the scores are [graphs, configurations]."""
    from baselines.core import model_lookup
    from baselines.core.errors import PipelineError
    from baselines.core.format import OPCODE_VOCAB_SIZE
    from baselines.layout.batching import dummy_batch, to_model_inputs, to_tensors

    path = tmp_path / "guide_layout_models.py"
    path.write_text(with_template((ROOT / LAYOUT_MODELS).read_text()))
    spec = importlib.util.spec_from_file_location("guide_layout_models", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        positional = (None, OPCODE_VOCAB_SIZE)
        model = model_lookup.build_model(
            module, module.LayoutModel, "StudentLayout", positional, {"hidden_dim": 8}
        )
        with pytest.raises(PipelineError, match="hidden_dim must be an integer of at least 1"):
            model_lookup.build_model(
                module, module.LayoutModel, "StudentLayout", positional, {"hidden_dim": 0}
            )
    finally:
        del sys.modules[spec.name]
    model.create_variables()
    assert model.splits_graph_part and model.nodes_per_config(100, 7) == 7
    inputs = to_model_inputs(to_tensors(dummy_batch(5)))
    graph_only = {
        key: value
        for key, value in inputs.items()
        if not key.startswith("config_")  # config_values, config_rows, config_codes, mask
    }
    part = model.graph_part(graph_only)
    scores = model.config_part(inputs, part)
    assert scores.shape == (1, 5)


@pytest.mark.slow
def test_the_layout_template_trains_and_ranks_in_a_scratch_copy(tmp_path):
    from baselines.layout.data import read_config_count

    repo = copy_repository(tmp_path / "repo")
    models = repo / LAYOUT_MODELS
    models.write_text(with_template(models.read_text()))
    home = tmp_path / "home"
    home.mkdir()
    lines = [
        line.strip().replace("model_<hash>", "model_*")
        for line in marked_block("bash").splitlines()
        if line.strip()
    ]
    assert [shlex.split(line)[1] for line in lines] == [
        "layout_train.py",
        "layout_gen_predictions_csv.py",
    ]
    proc = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + "\n".join(lines)],
        cwd=repo,
        env=quiet_env(home),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trained StudentLayout" in proc.stdout + proc.stderr
    rows = (repo / "out/student_layout/layout_xla_default_predictions.csv").read_text().split()
    assert rows[0] == "ID,TopConfigs"
    test_dir = repo / "data/layout_toy/xla/default/test"
    expected = {
        f"layout:xla:default:{p.stem}": read_config_count(p) for p in test_dir.glob("*.npz")
    }
    ranked = dict(row.split(",", 1) for row in rows[1:])
    assert sorted(ranked) == sorted(expected)
    for row_id, ranking in ranked.items():
        assert sorted(int(i) for i in ranking.split(";")) == list(range(expected[row_id]))


def pins(path: Path) -> dict[str, str]:
    """{package: version} of a requirements or constraints file's `name==version` lines."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"{path.name}: {line!r} is not pinned (name==version)"
            found[name.lower().replace("_", "-")] = version
    return found


@pytest.mark.parametrize("extra", ["requirements-kaggle.txt", "requirements-dask.txt"])
def test_each_optional_extra_is_pinned_as_the_lock_pins_it(extra):
    lock = pins(ROOT / "constraints.txt")
    for name, version in pins(ROOT / extra).items():
        assert lock.get(name) == version, (
            f"{extra}: {name}=={version}, constraints.txt {lock.get(name)}"
        )
    target = extra.removeprefix("requirements-").removesuffix(".txt")
    assert f"install-{target}:" in (ROOT / "Makefile").read_text()


def test_the_guides_quick_epochs_name_runs_of_their_own():
    """`bench/quality.py --epochs N` (the comparison's toy example) trains runs kept apart from
    the recipe's own: the override is part of the runs' digest, and nothing else changes."""
    spec = importlib.util.spec_from_file_location("quality_bench", ROOT / "bench" / "quality.py")
    quality = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quality)
    recipe = ROOT / "configs" / "recommended.flags"
    assert quality.recipe_digest(recipe, []) == quality.recipe_digest(recipe)
    assert quality.recipe_digest(recipe, ["--epochs=2"]) != quality.recipe_digest(recipe)
    assert quality.build_parser().parse_args(["--epochs", "2"]).epochs == 2
    assert quality.build_parser().parse_args([]).epochs is None
