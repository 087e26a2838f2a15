# Two entry points for a fresh clone: `make demo` and `make test`.
# Everything else here is the set-up they share.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test coverage bench clean

# the demo's needs only; `make test` adds the test extras (pytest, Ray, ...)
$(BIN)/runner: pyproject.toml scripts/install_torch.sh
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	bash scripts/install_torch.sh $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $(BIN)/runner

$(VENV)/.test-extras: $(BIN)/runner
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: $(BIN)/runner
	$(BIN)/runner apply specs/quickstart.toml
	$(BIN)/runner figures specs/quickstart.toml

# one pytest worker per CPU (pytest-xdist), one torch thread each: workers never oversubscribe
test: $(VENV)/.test-extras
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -q -n auto --durations=25

$(VENV)/.coverage-extras: $(VENV)/.test-extras
	$(BIN)/python -m pip install --quiet -e '.[coverage]'
	touch $@

# line and branch coverage of the whole suite (the CLI's subprocesses too), then a table per package;
# slower than `make test` (about 1.5x): a guide for contributors, not part of CI
coverage: $(VENV)/.coverage-extras
	rm -f .coverage .coverage.*
	COVERAGE_FILE=$(CURDIR)/.coverage OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(BIN)/python -m pytest -q -n auto --cov --cov-report=
	$(BIN)/python -m coverage combine --quiet || true
	$(BIN)/python -m coverage json --quiet -o coverage.json
	$(BIN)/python scripts/coverage_table.py coverage.json

bench: $(BIN)/runner
	$(BIN)/python benchmarks/iterate.py

clean:
	rm -rf $(VENV) store/*.zarr store/*.runner .coverage .coverage.* coverage.json
