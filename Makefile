# make demo: set up and run the main job.  make test: set up and run every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done

.PHONY: setup demo test test-long soak test-gpu test-npu lint clean

setup: $(STAMP)

# Re-run the install when the project's dependencies change; otherwise nothing to do.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0" "mindspore==2.10.0" "numpy<2"
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

demo: setup
	$(PY) -m compat launch -n 2 --framework torch --timeout 300 examples/reduce_scatter_styles.py
	$(PY) -m compat launch -n 2 --framework mindspore --timeout 300 examples/reduce_scatter_styles.py
	$(PY) examples/train_demo.py --steps 30

test: setup
	$(PY) -m ruff check .
	$(PY) -m mypy compat adapters
	$(PY) -m pytest -q

# Long runs, outside make test: every test marked long, or the soak alone.
test-long: setup
	$(PY) -m pytest -q -m long

soak: setup
	$(PY) -m pytest -q -s -m long -k soak

# The multi-rank suite on 2+ GPUs (torch NCCL, MindSpore NCCL) or NPUs (MindSpore HCCL); each
# test says why it skipped where the hardware is absent.
test-gpu: setup
	COMPAT_HARDWARE=gpu $(PY) -m pytest -q -rs tests/test_hardware.py

test-npu: setup
	COMPAT_HARDWARE=npu $(PY) -m pytest -q -rs tests/test_hardware.py

lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) build dist *.egg-info
