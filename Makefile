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

# Two phases: the quick tests on both cores (pytest-xdist), then the tests marked slow one at a time: most run a
# scan under a time budget, and a budgeted search that shares the CPU finds less. Both phases run; either failing
# fails the target.
test: $(BIN)/dlci
	$(BIN)/python -m pytest -q -n 2 -m "not slow" --durations=15 tests; quick=$$?; \
	$(BIN)/python -m pytest -q -m slow --durations=40 tests; slow=$$?; \
	test $$quick -eq 0 && test $$slow -eq 0

# the inner loop: everything but the tests marked slow (real scans, campaigns, pip installs, bisections)
check: $(BIN)/dlci
	$(BIN)/python -m pytest -q -n 2 -m "not slow" --durations=15 tests

.PHONY: install demo test check
