# Set-up and the two jobs of the README. `make demo` and `make test` each create
# .venv (Python 3.11, pinned packages) on first use.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || echo python3)
VENV := .venv
PY := $(VENV)/bin/python
DEMO_OUT := out/demo
DEMO_DATA := data/tile_xla_toy
DEMO_LAYOUT_DATA := data/layout_toy
DEMO_LAYOUT_CSV := $(DEMO_OUT)/layout/layout_xla_default_predictions.csv

.PHONY: install install-dask install-kaggle demo test test-fast check-model mutation lint bench clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is needed (TensorFlow 2.15); set PYTHON=/path/to/python3.11")'
	@echo "Installing the pinned packages into $(VENV) (1-2 minutes, ~2 GB; pip shows each package)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check --progress-bar on -r requirements.txt -c constraints.txt
	@$(PY) -c 'import numpy, sys; sys.exit(0 if numpy.__version__.startswith("1.") else "numpy 2 got in")'
	touch $@

# Optional: the Dask cluster engine (kaggle_submission.py --runner=DaskRunner), pinned.
install-dask: $(VENV)/.installed-dask

$(VENV)/.installed-dask: $(VENV)/.installed requirements-dask.txt constraints.txt
	$(PY) -m pip install --disable-pip-version-check --progress-bar on -r requirements-dask.txt -c constraints.txt
	touch $@

# Optional: the Kaggle command line tool, to download and submit (docs/submission.md), pinned.
install-kaggle: $(VENV)/.installed-kaggle

$(VENV)/.installed-kaggle: $(VENV)/.installed requirements-kaggle.txt constraints.txt
	$(PY) -m pip install --disable-pip-version-check --progress-bar on -r requirements-kaggle.txt -c constraints.txt
	touch $@

# Toy training, then predictions, on the bundled toy data: tile:xla and one layout
# collection (layout:xla:default); then one submission of both (the other three
# layout collections get dummy rankings).
demo: install
	$(PY) tiles_train.py --model=MLP --max_files=100 --epochs=20 --early_stop=10 \
		--data_root=$(DEMO_DATA) --out_dir=$(DEMO_OUT) --cache_dir=$(DEMO_OUT)/cache
	$(PY) tiles_gen_predictions_csv.py --dir "$$(ls -td $(DEMO_OUT)/model_* | head -1)" \
		--data_root=$(DEMO_DATA) --output=$(DEMO_OUT)/predictions_output_model.csv
	$(PY) layout_train.py --source=xla --search=default --epochs=2 \
		--data_root=$(DEMO_LAYOUT_DATA) --out_dir=$(DEMO_OUT)/layout
	$(PY) layout_gen_predictions_csv.py --dir "$$(ls -td $(DEMO_OUT)/layout/model_* | head -1)" \
		--output=$(DEMO_LAYOUT_CSV)
	$(PY) create_kaggle_csv.py --data_root=$(DEMO_DATA) --layout_root=$(DEMO_LAYOUT_DATA) \
		--allow_missing --inputcsv=$(DEMO_OUT)/predictions_output_model.csv,$(DEMO_LAYOUT_CSV) \
		--output=$(DEMO_OUT)/predictions_kaggle.csv

# Everything (what CI runs), in two worker processes (pytest-xdist): many tests
# wait on a subprocess or on Python, so two workers keep both cores busy. The Dask
# extra is installed so that the job's Dask test runs.
test: install install-dask
	$(PY) -m pytest -q -n 2

# The edit loop: every test but those marked slow (subprocess runs, several
# processes, Beam, the walkthroughs); about 3.5 minutes on 2 cores.
test-fast: install
	$(PY) -m pytest -q -n 2 -m "not slow"

# A model of your own in baselines/tiles/models.py: one toy epoch, then predictions.
#   make check-model MODEL=StudentSAGE KWARGS='{"mix_dim": 16}'
MODEL ?= MLP
KWARGS ?= {}
CHECK_OUT := out/check-model
check-model: install
	$(PY) tiles_train.py --model=$(MODEL) --model_kwargs_json='$(KWARGS)' --bundled_toy=True \
		--epochs=1 --out_dir=$(CHECK_OUT) --cache_dir=$(CHECK_OUT)/cache
	$(PY) tiles_gen_predictions_csv.py --dir "$$(ls -td $(CHECK_OUT)/model_* | head -1)" \
		--output=$(CHECK_OUT)/predictions_output_model.csv

# One-line wrong changes the tests must catch (tools/mutations.toml); not part of `test`.
mutation: install
	$(PY) tools/mutation_check.py

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) out
