# Two entry points, each working on a fresh machine with only python3:
#   make run    start the web app and REST API on http://127.0.0.1:8000
#   make test   run the test suite (Triton kernels run in the interpreter, on the CPU)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test bench clean

run: $(VENV)/.web
	$(BIN)/kvplan serve --host $(HOST) --port $(PORT)

test: $(VENV)/.dev
	TRITON_INTERPRET=1 $(BIN)/python -m pytest

bench: $(VENV)/.dev
	$(BIN)/python bench/oneliner.py

$(VENV)/.venv:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	touch $@

$(VENV)/.web: pyproject.toml $(VENV)/.venv
	$(BIN)/python -m pip install -q -e '.[web,hub]'
	touch $@

$(VENV)/.dev: pyproject.toml $(VENV)/.venv
	$(BIN)/python -m pip install -q -e '.[web,hub,gpu,dev]'
	touch $@ $(VENV)/.web

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
