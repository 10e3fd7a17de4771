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
	$(BIN)/dlci test --ops elu,softplus,avg_pool2d,conv2d,onnx::Elu,onnx::AveragePool,keras::Conv2D --targets all --budget 180 --limit-per-op 4 --out dlci-out --fail-on never

test: $(BIN)/dlci
	$(BIN)/python -m pytest -q tests

.PHONY: install demo test
