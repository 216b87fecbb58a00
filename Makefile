# make demo: set up and run the main job.  make test: set up and run every test.
# VERBOSE=1 (make demo VERBOSE=1) lets the frameworks log at their default levels (MindSpore:
# warnings too); by default the ranks log errors only.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done

.PHONY: setup demo test test-versions test-long soak test-gpu test-gpu1 test-npu lint clean

setup: $(STAMP)

# Re-run the install when the project's dependencies change; otherwise nothing to do.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@echo "Installing torch 2.13.0 and mindspore 2.10.0 (mindspore alone is an 800 MB download;"
	@echo "a few minutes): pip names each download with its size, and shows its progress on a terminal."
	$(PY) -m pip install --progress-bar on "torch==2.13.0" "mindspore==2.10.0" "numpy<2"
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

# The demo prints each command it runs (compat launch ...), the ranks' results and one line per
# check at the end.
demo: setup
	@$(PY) examples/train_demo.py --steps 30 $(if $(VERBOSE),--verbose)

# mypy runs beside pytest, whose ranks leave a core idle much of the time; its report follows the
# tests', and make test fails if either fails.
# compileall: where PYTHONDONTWRITEBYTECODE is set (as in CI), every rank process the suite starts
# would otherwise compile compat and the test cases again.
test: setup
	$(PY) -m ruff check .
	$(PY) -m compileall -q compat adapters tests examples
	@echo "$(PY) -m mypy compat adapters (beside the tests; its report follows theirs)"
	@$(PY) -m mypy compat adapters > .mypy-report 2>&1 & typing=$$!; \
	$(PY) -m pytest -q; tests=$$?; \
	wait $$typing; typed=$$?; echo "mypy compat adapters:"; cat .mypy-report; rm -f .mypy-report; \
	test $$tests = 0 && test $$typed = 0

# The rank suite on the oldest and newest tested release of each framework (frameworks.toml
# tested_versions), each in an environment of its own (.venv-torch2.7.1, ...) that installs the
# package with that framework's extra beside that release. Outside make test: each environment is
# a download of one to a few GB. PIP_ARGS adds pip options (e.g. --index-url of CPU-only wheels).
# Every release runs, and the releases that failed are named at the end.
test-versions: setup
	@failed=""; \
	for pin in $$($(PY) -c "from compat.core import versions; print(*versions.tested_releases())"); do \
	  framework=$${pin%%==*}; venv=.venv-$$framework$${pin#*==}; \
	  echo "== $$pin in $$venv"; \
	  { test -x $$venv/bin/python || $(PYTHON) -m venv $$venv; } && \
	  $$venv/bin/python -m pip install -q --upgrade pip && \
	  $$venv/bin/python -m pip install $(PIP_ARGS) "$$pin" -e ".[$$framework,test]" && \
	  COMPAT_TEST_FRAMEWORKS=$$framework $$venv/bin/python -m pytest -q \
	    tests/test_versions.py tests/test_collectives.py || failed="$$failed $$pin"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-versions failed on:$$failed"; exit 1; fi; \
	echo "test-versions passed on every tested release"

# Long runs, outside make test: every test marked long, or the soak alone.
test-long: setup
	$(PY) -m pytest -q -m long

soak: setup
	$(PY) -m pytest -q -s -m long -k soak

# The multi-rank suite on 2+ GPUs (torch NCCL, MindSpore NCCL) or NPUs (MindSpore HCCL); each
# test says why it skipped where the hardware is absent.
test-gpu: setup
	COMPAT_HARDWARE=gpu $(PY) -m pytest -q -rs tests/test_hardware.py

# One NVIDIA GPU and whatever torch is installed: NCCL at world size 1 (every rank case), Gloo at
# 2 ranks with CUDA tensors, the device rules, compat.comm delegating to torch.cuda.comm, and
# compat's own work per call on CUDA tensors (compat bench -n 1). Under 8 minutes; -v lists what
# ran and what was skipped (everything, each part named with why, where there is no GPU).
test-gpu1: setup
	COMPAT_HARDWARE=gpu1 timeout 480 $(PY) -m pytest -v -rA -s -k gpu1 tests/test_hardware.py

test-npu: setup
	COMPAT_HARDWARE=npu $(PY) -m pytest -q -rs tests/test_hardware.py

lint: setup
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) .venv-torch* .venv-mindspore* build dist *.egg-info
