# The README's quick start: `make demo` (the main job on its embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := .tools/bin/uv

.PHONY: demo test lint typecheck unit bench test-real clean

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv

$(BIN)/bisect-bot: $(UV) pyproject.toml
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(VENV)
	$(UV) pip install --quiet --python $(BIN)/python -e '.[test]'
	touch $@

demo: $(BIN)/bisect-bot
	$(BIN)/bisect-bot demo

test: $(BIN)/bisect-bot lint typecheck unit

lint: $(BIN)/bisect-bot
	$(BIN)/ruff check .

typecheck: $(BIN)/bisect-bot
	$(BIN)/mypy

unit: $(BIN)/bisect-bot
	$(BIN)/python -m pytest -q

bench: $(BIN)/bisect-bot
	$(BIN)/python benchmarks/bisect_speed.py

test-real: $(BIN)/bisect-bot
	$(BIN)/python -m pytest -q -s -m real tests/real

clean:
	rm -rf $(VENV) .tools demo-output
