# Two commands for a fresh machine (see README):
#   make demo   -- set up .venv and run foveate on the bundled examples (outputs in out/demo)
#   make test   -- set up .venv and run the test suite
# Setup installs the CPU build of torch 2.13.0 *before* the project, so nothing pulls CUDA packages.
# To keep your own torch (e.g. a CUDA build), install it into $(VENV) first: setup then leaves it alone.

VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: setup demo test bench bench-service clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[dev,ray]"
	$(BIN)/python -c "import torch, foveate; print('foveate', foveate.__version__, '| torch', torch.__version__)"
	touch $@

demo: setup
	$(BIN)/foveate select example:page -q "What is the total due?" -q "When was it signed?" -o out/demo/page
	$(BIN)/foveate select example:photo --point 250,180 -o out/demo/photo
	@echo "open out/demo/*/overlay.png and mosaic.png"

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/foveate bench --json out/bench.json

bench-service: setup
	$(BIN)/foveate store bench --json out/bench-store.json
	$(BIN)/foveate bench-serve --pools thread,process --json out/bench-serve.json

clean:
	rm -rf $(VENV) out .pytest_cache
