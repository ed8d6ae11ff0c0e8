# Two commands on a fresh machine (see README):
#   make render   build the site with fresh runs (needs Quarto; without it, does everything else and says how to get it)
#   make test     run the whole test suite, including the capture tests under the older Transformers
# Each builds the virtual environment it needs from the pinned requirements first.

PYTHON ?= python3
VENV := .venv
COMPAT_VENV := .venv-compat
RUNNER_VENV := .venv-runner
BIN := $(VENV)/bin

.PHONY: render test test-main test-compat venv sync clean

venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

# The second environment differs only in the libraries the lock names under "also_tested".
$(COMPAT_VENV)/.installed: tests/compat-requirements.txt pyproject.toml
	$(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install --quiet -r tests/compat-requirements.txt
	touch $@

# What a learner installs for the downloadable runners, and nothing else (tests/test_runners_alone.py).
$(RUNNER_VENV)/.installed: assets/labs/residual-requirements.txt
	$(PYTHON) -m venv $(RUNNER_VENV)
	$(RUNNER_VENV)/bin/python -m pip install --quiet -r assets/labs/residual-requirements.txt
	touch $@

test: test-main test-compat

test-main: $(VENV)/.installed $(RUNNER_VENV)/.installed
	RESIDLAB_RUNNER_PYTHON="$(abspath $(RUNNER_VENV)/bin/python)" $(BIN)/python -m pytest

test-compat: $(COMPAT_VENV)/.installed
	$(COMPAT_VENV)/bin/python -m pytest tests/test_pythia_capture.py tests/test_pythia_observe.py tests/test_architectures.py tests/test_audit.py

sync: $(VENV)/.installed
	$(BIN)/residlab sync

render: $(VENV)/.installed
	$(BIN)/residlab sync --check
	$(BIN)/residlab site check
	@if command -v quarto >/dev/null 2>&1; then \
		QUARTO_PYTHON="$(abspath $(BIN)/python)" PATH="$(abspath $(BIN)):$$PATH" quarto render --cache-refresh; \
	else \
		$(BIN)/residlab site run && \
		echo "" && \
		echo "Every page's cells ran and every static check passed, but Quarto is not installed, so no HTML was built." && \
		echo "Install Quarto 1.10 or newer from https://quarto.org/docs/get-started/ (or your package manager)," && \
		echo "then run 'make render' again; the site is written to _site/." && \
		exit 3; \
	fi

clean:
	rm -rf $(VENV) $(COMPAT_VENV) $(RUNNER_VENV) _site .quarto .jupyter_cache
