# Two commands on a fresh machine (see README):
#   make render   build the site into _site/ with fresh runs (needs Quarto on PATH, or QUARTO=/path/to/quarto)
#   make test     run the whole test suite: a full render of a clean copy, checked in headless Chromium,
#                 and the capture tests again under the older Transformers
# Each builds the virtual environment it needs from the pinned requirements first.
# While writing one page: make page PAGE=labs/05-trace-residual-stream.qmd (renders and executes only it).

PYTHON ?= python3
# Bytecode: pip installs with --no-compile, so Python compiles each module on its first import and keeps it in
# __pycache__, unless PYTHONDONTWRITEBYTECODE is set (some machines set it). Then every process a render or the
# tests start (a kernel per executed page, each runner and CLI test) compiled torch and Transformers from source
# again, 15 to 20 s each on a 2-core machine; the environments make builds keep their bytecode.
unexport PYTHONDONTWRITEBYTECODE
# --no-compile: pip would byte-compile every file of torch and transformers (about 40 s per environment on a
# 2-core machine); Python compiles only what is imported, on first import.
PIP_INSTALL = -m pip install --quiet --no-compile
VENV := .venv
COMPAT_VENV := .venv-compat
RUNNER_VENV := .venv-runner
PEERS_VENV := .venv-peers
BIN := $(VENV)/bin
# Lighthouse for the site tests (tests/site/test_lighthouse.py), pinned by its package-lock.json, installed by npm ci.
LIGHTHOUSE := tests/site/lighthouse
# Pyodide (CPython in WebAssembly) for Lab 05 Part 3's editor, pinned by its package-lock.json, installed by npm ci;
# a render copies the files the site serves from it (residlab/build/pyodide_files.py, a post-render step).
PYODIDE := assets/pyodide
# CodeMirror 6 and esbuild for the same editor, pinned by their own package-lock.json, installed by npm ci; a render
# bundles the editor's one script from them (residlab/build/editor_bundle.py, a post-render step).
EDITOR := assets/editor
# onnxruntime-web and the tokenizer for Lab 05 Part 4's "Run it in the page", pinned by their package-lock.json,
# installed by npm ci; a render copies the files the site serves (residlab/build/onnx_files.py, a post-render step).
ONNX_RUNTIME := assets/onnx-runtime
# torch comes first, from this index: PyPI's Linux wheel of torch is the CUDA build, several GB. A GPU user sets
# another PyTorch index (e.g. TORCH_INDEX=https://download.pytorch.org/whl/cu128); TORCH_INDEX= (empty) takes
# torch from PyPI like the other requirements (CI does: its PyPI serves the CPU build).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

# $(call build_venv,DIR,REQUIREMENTS[,PREFIX]): a fresh environment with the file's own torch pin from TORCH_INDEX,
# then the rest of the file (pip keeps that torch: 2.13.0+cpu satisfies torch==2.13.0); PREFIX runs the installs
# (BESIDE: at the lower priority of the suites that fill the gaps).
define build_venv
	$(PYTHON) -m venv $(1)
	$(if $(3),$(3) )$(1)/bin/python $(PIP_INSTALL) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$$(grep -E '^torch==' $(2))"
	$(if $(3),$(3) )$(1)/bin/python $(PIP_INSTALL) -r $(2)
	touch $(1)/.installed
endef

.PHONY: release render page pyodide editor pythia pythia-capture test test-site test-rest test-compat test-peers venv venv-peers sync clean

venv: $(VENV)/.installed

venv-peers: $(PEERS_VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(call build_venv,$(VENV),requirements.txt)

# The second environment differs only in the libraries the lock names under "also_tested".
$(COMPAT_VENV)/.installed: tests/compat-requirements.txt pyproject.toml | $(LONG_SUITES_FIRST)
	$(call build_venv,$(COMPAT_VENV),tests/compat-requirements.txt,$(LONG_SUITES_BESIDE))

# What a learner installs for the downloadable runners, and nothing else (tests/runners/test_runners_alone.py).
$(RUNNER_VENV)/.installed: assets/labs/residual-requirements.txt
	$(call build_venv,$(RUNNER_VENV),assets/labs/residual-requirements.txt)

# The learners' wheelhouse: the wheels the learners' requirement files resolve to (torch first, from TORCH_INDEX, as
# every environment takes it) and nothing else. tests/site/test_page_commands.py builds each page's environment
# by running the page's own venv and pip lines with pip allowed no index but this folder, so a page that installs
# too little fails there as a learner's run would.
WHEELHOUSE := .wheelhouse
LEARNER_REQUIREMENTS := assets/labs/torch-requirements.txt assets/labs/residual-requirements.txt
$(WHEELHOUSE)/.filled: $(LEARNER_REQUIREMENTS)
	rm -rf $(WHEELHOUSE)
	$(PYTHON) -m pip download --quiet --dest $(WHEELHOUSE) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$$(grep -E '^torch==' assets/labs/torch-requirements.txt)"
	$(PYTHON) -m pip download --quiet --dest $(WHEELHOUSE) --find-links $(WHEELHOUSE) $(addprefix -r ,$(LEARNER_REQUIREMENTS))
	touch $@

$(LIGHTHOUSE)/node_modules/.installed: $(LIGHTHOUSE)/package.json $(LIGHTHOUSE)/package-lock.json
	npm ci --prefix $(LIGHTHOUSE) --no-audit --no-fund --loglevel=error
	touch $@

pyodide: $(PYODIDE)/node_modules/.installed

# onnxruntime-web and the tokenizer for Lab 05 Part 4's "Run it in the page", pinned by their lock; a render copies the
# files the page loads (residlab/build/onnx_files.py), and the site suite's browser checks read the same install.
$(ONNX_RUNTIME)/node_modules/.installed: $(ONNX_RUNTIME)/package.json $(ONNX_RUNTIME)/package-lock.json
	npm ci --prefix $(ONNX_RUNTIME) --no-audit --no-fund --loglevel=error
	touch $@

$(PYODIDE)/node_modules/.installed: $(PYODIDE)/package.json $(PYODIDE)/package-lock.json
	npm ci --prefix $(PYODIDE) --no-audit --no-fund --loglevel=error
	touch $@

editor: $(EDITOR)/node_modules/.installed

$(EDITOR)/node_modules/.installed: $(EDITOR)/package.json $(EDITOR)/package-lock.json
	npm ci --prefix $(EDITOR) --no-audit --no-fund --loglevel=error
	touch $@

# TransformerLens and nnsight on top of the project's pins (the file names requirements.txt first): the pages'
# peer snippets (tests/peers) and benchmarks/peer_capture.py. Never part of the other environments.
$(PEERS_VENV)/.installed: benchmarks/peer-requirements.txt requirements.txt pyproject.toml | $(LONG_SUITES_FIRST)
	$(call build_venv,$(PEERS_VENV),benchmarks/peer-requirements.txt,$(LONG_SUITES_BESIDE))

# Four suites run side by side (each builds the environments it needs first), their output kept apart by target.
# The two long ones start as soon as their environments are built: the site suite (one render of a clean copy, then
# the pages' commands and the browser; the stand-ins' publish renders) and the rest (units, runners). The whole run
# waits for one chain, the site suite's render and then its pages' commands (measured alone: the site suite 8.5
# minutes, the rest 4, the compatibility and peer suites under 1 each). The compatibility and peer suites run BESIDE
# the long ones, at a lower priority, and fill the gaps; the rest suite keeps the normal priority (lowered too, it got
# almost no time until the site suite ended and then ran alone: CI 14.7 minutes against 12.7). Their environments are
# built after the long suites' (LONG_SUITES_FIRST, which only `make test` sets), so those are built on both cores and
# the long suites start sooner, and at the same lower priority (LONG_SUITES_BESIDE): they were built while the site
# suite's render ran, at its priority. The suites' processes (pytest, the render's kernels, the runners) take one torch
# thread each (OMP_NUM_THREADS): side by side they already fill the cores, and more threads than cores only spin;
# the course's numbers are computed on one thread whatever the setting (single_thread).
SITE_SUITE := tests/site
REST_SUITE := tests/unit tests/runners
BESIDE := nice -n 10
LONG_SUITES_FIRST :=
LONG_SUITES_BESIDE :=
test:
	OMP_NUM_THREADS=1 $(MAKE) -j4 --output-sync=target LONG_SUITES_FIRST="$(VENV)/.installed $(RUNNER_VENV)/.installed" \
		LONG_SUITES_BESIDE="$(BESIDE)" test-site test-rest test-compat test-peers

# The site suite runs the pages' commands too, each page's environment built from the wheelhouse as the page says
# (tests/site/test_page_commands.py). Its tests mostly wait on Chromium, so they run on SITE_WORKERS pytest-xdist
# workers, a test file per worker at a time (module fixtures such as Lighthouse's run once), after one render the
# workers share; the files go out in the order tests/site/conftest.py gives them (LONGEST_FIRST), not reordered by
# their number of tests, so the pages' commands start as soon as the render is done.
SITE_WORKERS ?= 3
test-site: $(VENV)/.installed $(WHEELHOUSE)/.filled $(LIGHTHOUSE)/node_modules/.installed $(PYODIDE)/node_modules/.installed \
		$(EDITOR)/node_modules/.installed $(ONNX_RUNTIME)/node_modules/.installed
	RESIDLAB_WHEELHOUSE="$(abspath $(WHEELHOUSE))" $(BIN)/python -m pytest --numprocesses=$(SITE_WORKERS) --dist=loadfile --no-loadscope-reorder $(SITE_SUITE)

# One process: its tests compute (runners, trainings), and a second worker here only slowed the other suites
# (measured: 14.5 minutes against 13).
test-rest: $(VENV)/.installed $(RUNNER_VENV)/.installed $(PYODIDE)/node_modules/.installed $(EDITOR)/node_modules/.installed $(ONNX_RUNTIME)/node_modules/.installed
	RESIDLAB_RUNNER_PYTHON="$(abspath $(RUNNER_VENV)/bin/python)" $(BIN)/python -m pytest $(REST_SUITE)

# What depends on the Transformers, tokenizers and huggingface_hub releases: loading, capture, observation and the
# audit in this process. Not again here: the runners run alone (the runner environment pins its own releases), the
# copy model's packet (no Transformers in it), and the output folder's races (the file system's, after the model ran).
COMPAT_SUITE := tests/unit/pythia/test_pythia_capture.py tests/unit/pythia/test_pythia_observe.py tests/unit/pythia/test_pythia_trust.py \
	tests/unit/pythia/test_observation_reference.py tests/unit/capture/test_architectures.py tests/unit/audit/test_audit.py \
	tests/unit/capture/test_recording.py -k "not runner_alone and not copy_model_packet and not losing_the_race"
test-compat: $(COMPAT_VENV)/.installed
	$(BESIDE) $(COMPAT_VENV)/bin/python -m pytest $(COMPAT_SUITE)

# The pages' TransformerLens and nnsight snippets against residlab's numbers (the whole tree's run leaves them out).
test-peers: $(PEERS_VENV)/.installed
	$(BESIDE) $(PEERS_VENV)/bin/python -m pytest tests/peers

# Order-only: sync uses the environment as it is (built if missing, never reinstalled), so after a version bump it
# can say what disagrees before pip could install the new version.
sync: | $(VENV)/.installed
	$(BIN)/residlab sync

# A published build is a fresh run: no frozen results or shared page results survive from earlier renders. The course
# releases under releases/ (kept in the repository as built) are checked against their manifests first; the render
# copies them into the site as they are (_releases.yml), and site verify reads their pages too.
render: $(VENV)/.installed $(PYODIDE)/node_modules/.installed $(EDITOR)/node_modules/.installed $(ONNX_RUNTIME)/node_modules/.installed
	$(BIN)/residlab sync --check
	$(BIN)/residlab site check
	$(BIN)/residlab release verify --all
	rm -rf _freeze .residlab-render-cache
	$(BIN)/residlab site render
	$(BIN)/residlab site verify _site

# Instructors: record the build make render left in _site/ as a term's release, releases/TERM/ with its pins and a
# manifest of its files' sha256 (residlab/build/release.py); a release that exists is refused, never overwritten.
# RELEASE, not TERM: make reads the terminal's TERM from the environment.
release: | $(VENV)/.installed
	@test -n "$(RELEASE)" || { echo "usage: make release RELEASE=2027-spring (after make render)"; exit 2; }
	$(BIN)/residlab release $(RELEASE)

# The six pinned Pythia-14M files, fetched (only what is missing) and verified into the lock's cache folder,
# .residlab-pythia/<the lock's digest>/, which `make render` then uses for Lab 05 Part 4 and Lab 06 Part 3. Any
# refusal is one line naming the file and the reason. RESIDLAB_PYTHIA_LOCK names another lock (the tests' stand-ins).
pythia: $(VENV)/.installed
	$(BIN)/residlab pythia fetch --cache

# Instructors: refresh the committed capture of those verified files, assets/captures/<repository>-<revision>/.
pythia-capture: $(VENV)/.installed
	$(BIN)/residlab pythia capture --captures assets/captures

page: $(VENV)/.installed $(PYODIDE)/node_modules/.installed $(EDITOR)/node_modules/.installed $(ONNX_RUNTIME)/node_modules/.installed
	@test -n "$(PAGE)" || { echo "usage: make page PAGE=path/to/page.qmd"; exit 2; }
	$(BIN)/residlab site render $(PAGE)

clean:
	rm -rf $(VENV) $(COMPAT_VENV) $(RUNNER_VENV) $(PEERS_VENV) $(WHEELHOUSE) $(LIGHTHOUSE)/node_modules $(PYODIDE)/node_modules $(EDITOR)/node_modules $(ONNX_RUNTIME)/node_modules .residlab-onnx _site _freeze .residlab-render-cache .quarto
