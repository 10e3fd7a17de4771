# Two commands on a fresh machine: `make demo` (dlci's main job on the bundled default) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

$(BIN)/dlci: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -c constraints.txt -e '.[all,dev]'
	touch $@

install: $(BIN)/dlci

demo: $(BIN)/dlci
	$(BIN)/dlci scan --sample tvm-elu-minimum --out dlci-out --budget 300 --fail-on never

test: $(BIN)/dlci
	$(BIN)/python -m pytest -q --durations=40 tests

# the inner loop: everything but the tests marked slow (real scans, campaigns, pip installs, bisections)
check: $(BIN)/dlci
	$(BIN)/python -m pytest -q -m "not slow" --durations=15 tests

.PHONY: install demo test check
