# The README's quick start: `make demo` (the main job on its embedded default) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV := .tools/bin/uv

.PHONY: demo test lint typecheck unit bench repro-times test-real clean

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

# How long the stored reproducers run as probes: TORCH_PYTHON is an interpreter with torch.
repro-times: $(BIN)/bisect-bot
	@test -n "$(TORCH_PYTHON)" || { echo "usage: make repro-times TORCH_PYTHON=/path/to/python-with-torch"; exit 2; }
	$(BIN)/python benchmarks/reproducer_times.py --python $(TORCH_PYTHON)

test-real: $(BIN)/bisect-bot
	$(BIN)/python -m pytest -q -s -m real tests/real

clean:
	rm -rf $(VENV) .tools demo-output
