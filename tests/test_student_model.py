"""The one-file contract: a class added to models.py is a model, and models.py rebuilds it.

The student path follows docs/adding_a_model.md in a scratch copy of the
repository (its template pasted into models.py, then its one-command check and
the submission); the grader path swaps only that models.py into a second clean
copy and ranks the student's saved model there. Bad student models are refused
in one line: a wrong score shape, a name that collides, a kwarg the class does
not take.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, copy_repository

from baselines.core.errors import PipelineError

GUIDE = ROOT / "docs" / "adding_a_model.md"
MODELS = Path("baselines") / "tiles" / "models.py"


def template_class() -> str:
    text = GUIDE.read_text()
    block = re.search(r"<!-- template:start -->\s*```python\n(.*?)```", text, re.S)
    assert block, "the guide lost its template block"
    return block.group(1)


def guide_check_commands() -> list[str]:
    """The commands of the guide's check block (the bash block this test runs)."""
    text = GUIDE.read_text()
    block = re.search(
        r"<!-- docs-test: run by tests/test_student_model.py -->\n```bash\n(.*?)```", text, re.S
    )
    assert block, "the guide lost its check block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def with_student_class(models_source: str, class_source: str) -> str:
    """models.py as the guide says to edit it: tfgnn imported, the class appended."""
    assert "import tensorflow as tf\n" in models_source
    source = models_source.replace(
        "import tensorflow as tf\n", "import tensorflow as tf\nimport tensorflow_gnn as tfgnn\n", 1
    )
    return source.rstrip("\n") + "\n\n\n" + class_source


def run(cmd: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess:
    # HOME points at an empty folder: the default data root (~/data/...) is
    # absent, as on a student's machine before any download.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", HOME=str(home))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def read_rows(path: Path) -> list[str]:
    return path.read_text().splitlines()


@pytest.mark.slow
def test_student_trains_predicts_submits_and_the_grader_ranks_identically(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    student = copy_repository(tmp_path / "student")
    (student / MODELS).write_text(with_student_class((ROOT / MODELS).read_text(), template_class()))

    # The guide's one-command check, as the guide gives it (no .venv in the copy:
    # this interpreter stands in for it).
    (command,) = guide_check_commands()
    assert command.startswith("make check-model MODEL=StudentSAGE")
    made = f"make -o .venv/.installed PY={shlex.quote(sys.executable)} {command[5:]}"
    check = run(["bash", "-c", made], student, home)
    assert check.returncode == 0, check.stderr[-3000:]
    out = student / "out" / "check-model"
    (model_dir,) = out.glob("model_*")
    predictions = out / "predictions_output_model.csv"
    submission = out / "predictions_kaggle.csv"
    kaggle = run(
        [
            sys.executable,
            "create_kaggle_csv.py",
            f"--inputcsv={predictions}",
            f"--output={submission}",
        ],
        student,
        home,
    )
    assert kaggle.returncode == 0, kaggle.stderr[-2000:]
    assert "TOY DATA" in kaggle.stdout  # the toy set stood in, and said so
    toy_test = sorted(p.stem for p in (ROOT / "data" / "tile_xla_toy" / "test").glob("*.npz"))
    rows = read_rows(submission)
    assert rows[0] == "ID,TopConfigs"
    assert sorted(r.split(",")[0] for r in rows[1:]) == [f"tile:xla:{t}" for t in toy_test]

    # The grader: a clean copy, only models.py swapped in, the student's model
    # folder and run file handed in.
    grader = copy_repository(tmp_path / "grader")
    (grader / MODELS).write_text((student / MODELS).read_text())
    handed_in = tmp_path / "handed_in"
    handed_in.mkdir()
    subprocess.run(["cp", "-r", str(model_dir), str(handed_in)], check=True)
    run_file = out / f"run_{model_dir.name.removeprefix('model_')}.jsonz"
    subprocess.run(["cp", str(run_file), str(handed_in)], check=True)
    graded = run(
        [
            sys.executable,
            "tiles_gen_predictions_csv.py",
            f"--dir={handed_in / model_dir.name}",
            f"--data_root={grader / 'data' / 'tile_xla_toy'}",
            f"--output={tmp_path / 'graded.csv'}",
        ],
        grader,
        home,
    )
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert read_rows(tmp_path / "graded.csv") == read_rows(predictions)

    # Without the student's models.py the class is unknown, in one line.
    clean = copy_repository(tmp_path / "clean")
    refused = run(
        [sys.executable, "tiles_gen_predictions_csv.py", f"--dir={handed_in / model_dir.name}"],
        clean,
        home,
    )
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "unknown model 'StudentSAGE'" in refused.stderr.strip().splitlines()[-1]


@pytest.fixture(autouse=True)
def keras_registry():
    """Model classes register with Keras by name when defined: a variant module's
    classes must not stay registered in place of the real ones."""
    import tensorflow as tf

    saved = dict(tf.keras.utils.get_custom_objects())
    yield
    registry = tf.keras.utils.get_custom_objects()
    registry.clear()
    registry.update(saved)


def load_models_module(tmp_path: Path, source: str):
    """A models.py variant imported under a name of its own (beside the real one)."""
    path = tmp_path / "student_models.py"
    path.write_text(source)
    name = f"student_models_{abs(hash(source))}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


WRONG_SHAPE = '''
class StudentWrongShape(LateJoinModel):
    """Returns one extra axis."""

    def forward(self, graph, num_configs, training=None):
        return super().forward(graph, num_configs, training)[:, :, None]
'''


def test_a_model_returning_the_wrong_shape_is_refused_naming_the_expected_one(tmp_path):
    from baselines.tiles.model_builder import build_model, create_variables

    source = with_student_class((ROOT / MODELS).read_text(), WRONG_SHAPE)
    module = load_models_module(tmp_path, source)
    model = build_model("StudentWrongShape", 3, {"hidden_dim": 8}, module=module)
    with pytest.raises(PipelineError) as caught:
        create_variables(model)
    message = str(caught.value)
    assert "[1, 3, 1]" in message and "[batch, num_configs] = [1, 3]" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "extra, message",
    [
        # A second class of the same name would silently replace the first.
        ('\nclass MLP(LateJoinModel):\n    """Again."""\n', "class MLP collides with"),
        # A class that takes an imported layer's name hides the layer.
        ('\nclass SAGEConv(LateJoinModel):\n    """Hides a layer."""\n', "class SAGEConv collides"),
        # A base class's name, imported into models.py or not.
        ('\nclass EarlyJoinModel(LateJoinModel):\n    """A base."""\n', "collides with"),
        ('\nclass TileModel(LateJoinModel):\n    """A base."""\n', "collides with the base"),
    ],
)
def test_a_colliding_class_name_is_refused_in_one_line(tmp_path, extra, message):
    from baselines.tiles.model_builder import build_model

    module = load_models_module(tmp_path, (ROOT / MODELS).read_text() + extra)
    with pytest.raises(PipelineError, match=message) as caught:
        build_model("LateJoinGAT", 3, {}, module=module)
    text = str(caught.value)
    assert f"{module.__file__}:" in text and "\n" not in text
    # The line of the second definition is named.
    line = len((ROOT / MODELS).read_text().splitlines()) + 2
    assert f"{module.__file__}:{line}:" in text


def test_kwargs_a_student_class_does_not_take_are_refused_with_a_suggestion(tmp_path):
    from baselines.tiles.model_builder import resolve_model_kwargs

    module = load_models_module(
        tmp_path, with_student_class((ROOT / MODELS).read_text(), template_class())
    )
    kwargs = {"mix_dim": 8, "hidden_dim": 16}
    assert resolve_model_kwargs("StudentSAGE", kwargs, module) == kwargs
    with pytest.raises(PipelineError) as caught:
        resolve_model_kwargs("StudentSAGE", {"mixdim": 8}, module)
    assert "StudentSAGE does not take mixdim (did you mean mix_dim?)" in str(caught.value)
    with pytest.raises(PipelineError, match="does not take num_heads"):
        resolve_model_kwargs("StudentSAGE", {"num_heads": 2}, module)


def test_a_models_kwargs_are_its_constructors_followed_through_kwargs(tmp_path):
    """Each constructor names its own parts' kwargs and passes the rest on; one that
    passes nothing on ends the chain. Helpers and private classes are not models."""
    from baselines.tiles.model_builder import model_classes, model_kwargs

    source = with_student_class((ROOT / MODELS).read_text(), template_class())
    source += (
        '\n\nclass _Helper(LateJoinModel):\n    """Private: not a model."""\n'
        '\n\nclass NotAModel(tf.keras.layers.Layer):\n    """A layer of the student\'s."""\n'
        '\n\nclass Deeper(StudentSAGE):\n    """Inherits a student class and adds a kwarg."""\n\n'
        "    def __init__(self, num_configs, num_ops=OPCODE_VOCAB_SIZE, depth=2, **kwargs):\n"
        "        super().__init__(num_configs, num_ops, **kwargs)\n"
        "        self.depth = depth\n"
        '\n\nclass Fixed(LateJoinModel):\n    """Passes nothing on: only its own kwarg."""\n\n'
        "    def __init__(self, num_configs, num_ops=OPCODE_VOCAB_SIZE, width=3):\n"
        "        super().__init__(num_configs, num_ops, hidden_dim=width)\n"
    )
    module = load_models_module(tmp_path, source)
    names = list(model_classes(module))
    assert names[-3:] == ["StudentSAGE", "Deeper", "Fixed"]
    assert "_Helper" not in names and "NotAModel" not in names
    assert not {"TileModel", "LateJoinModel", "EarlyJoinModel"} & set(names)  # bases
    shared = ["hidden_dim", "op_embedding_dim", "activation", "dropout", "final_mlp_layers"]
    deeper = model_kwargs("Deeper", module)
    assert list(deeper)[:5] == shared and list(deeper)[-2:] == ["mix_dim", "depth"]
    assert deeper["mix_dim"] == 32 and deeper["depth"] == 2
    assert model_kwargs("Fixed", module) == {"width": 3}


def test_a_layer_only_a_call_builds_is_rebuilt_and_its_weights_copied(tmp_path, monkeypatch):
    """The template's extra Dense layers are not built by `build()`: the rebuild runs
    a forward pass, as training did, and scores exactly as the trained model, and so
    does Keras' own loader (the class's own kwarg, mix_dim, is in its config)."""
    import tensorflow as tf

    from baselines.core.saved_model import copy_saved_variables, save_model, variable_paths
    from baselines.tiles import kernel_batches as graph_lib
    from baselines.tiles import model_builder
    from baselines.tiles.model_builder import restore_model

    source = with_student_class((ROOT / MODELS).read_text(), template_class())
    module = load_models_module(tmp_path, source)
    monkeypatch.setattr(model_builder, "models_module", lambda: module)
    kwargs = {"hidden_dim": 8, "mix_dim": 4}
    trained = model_builder.build_model("StudentSAGE", 4, kwargs)
    model_builder.create_variables(trained)
    model_dir = tmp_path / "model_x"
    save_model(trained, model_dir)

    fresh = model_builder.build_model("StudentSAGE", 4, kwargs)
    model_builder.create_variables(fresh, compiled=False)
    assert "mix_out/kernel" not in variable_paths(fresh)  # build() alone leaves it out
    with pytest.raises(
        PipelineError, match=r"saved variable mix_\w+/\w+ \[.*\] has no counterpart"
    ):
        copy_saved_variables(model_dir, fresh)

    rebuilt = restore_model(
        model_dir, {"model": "StudentSAGE", "model_kwargs": kwargs, "configs": 4}
    )
    loaded = tf.keras.models.load_model(model_dir, compile=False)
    rng = np.random.default_rng(0)
    batch = graph_lib.graph_from_batch(graph_lib.to_tensors(graph_lib.dummy_batch(4)))
    batch = batch.replace_features(
        node_sets={
            "op": {
                "op": tf.constant([3, 7], tf.int32),
                "feats": tf.constant(rng.normal(size=(2, 146)), tf.float32),
            },
            "config": {
                **batch.node_sets["config"].features,
                "feats": tf.constant(rng.normal(size=(4, 24)), tf.float32),
            },
        }
    )
    expected = trained.forward(batch, 4).numpy()
    assert np.ptp(expected) > 0  # the configs score differently: a real comparison
    np.testing.assert_array_equal(rebuilt.forward(batch, 4), expected)
    assert loaded.get_config()["mix_dim"] == 4
    np.testing.assert_array_equal(loaded.forward(batch, 4), expected)
