# Two commands for a fresh machine (see README):
#   make demo   -- set up .venv (the core install) and run foveate on the bundled examples (outputs in out/demo)
#   make test   -- set up .venv with the dev extras and run the test suite (CI: .ci/run, which runs `make lint` first)
# Setup installs the CPU build of torch 2.13.0 *before* the project, so nothing pulls CUDA packages.
# To keep your own torch (e.g. a CUDA build), install it into $(VENV) first: setup then leaves it alone.

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
CHECKED := src tests scripts

.PHONY: setup setup-dev demo test lint format bench bench-service clean

setup: $(VENV)/.core

setup-dev: $(VENV)/.dev

# the core install (encode, select, prompt), then the models checked once (foveate prepare)
$(VENV)/.core: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python -c "import torch, foveate; print('foveate', foveate.__version__, '| torch', torch.__version__)"
	$(BIN)/foveate prepare
	touch $@

# the dev extras (service, Ray, ONNX export, plots, tests, ruff, mypy); prepare exports the question encoder
$(VENV)/.dev: $(VENV)/.core pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/foveate prepare
	touch $@

demo: setup
	$(BIN)/foveate select example:page -q "What is the total due?" -q "When was it signed?" -o out/demo/page
	$(BIN)/foveate select example:photo --point 250,180 -o out/demo/photo
	@echo "open out/demo/*/q01-*/overlay.png and mosaic.png"

test: setup-dev
	$(BIN)/python -m pytest -q

lint: setup-dev
	$(BIN)/ruff check $(CHECKED)
	$(BIN)/ruff format --check $(CHECKED)
	$(BIN)/mypy

format: setup-dev
	$(BIN)/ruff check --fix $(CHECKED)
	$(BIN)/ruff format $(CHECKED)

bench: setup-dev
	$(BIN)/foveate bench --json out/bench.json

bench-service: setup-dev
	$(BIN)/foveate store bench --json out/bench-store.json
	$(BIN)/foveate bench-serve --pools thread,process --json out/bench-serve.json

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .ruff_cache
