# Two entry points for a fresh clone: `make demo` and `make test`.
# Everything else here is the set-up they share.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/runner: pyproject.toml scripts/install_torch.sh
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	bash scripts/install_torch.sh $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(BIN)/runner

demo: $(BIN)/runner
	$(BIN)/runner apply specs/quickstart.toml
	$(BIN)/runner figures specs/quickstart.toml

test: $(BIN)/runner
	$(BIN)/python -m pytest -q --durations=25

bench: $(BIN)/runner
	$(BIN)/python benchmarks/iterate.py

clean:
	rm -rf $(VENV) store/*.zarr store/*.runner
