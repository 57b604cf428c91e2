# The two commands of the README (`make demo`, `make test`) set up everything they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_SCENARIO := fixtures/scenarios/gpu_fell_off_bus.toml
DEMO_CASE := forensics-out/demo-case

.PHONY: install demo test lint bench fuzz clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/forensics simulate $(DEMO_SCENARIO) --out $(DEMO_CASE) --seed 7
	$(BIN)/forensics analyze $(DEMO_CASE)/job --out forensics-out/demo

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check parsers forensics tests bench

bench: install
	$(BIN)/python bench/run.py

fuzz: install
	FORENSICS_FUZZ=1 $(BIN)/python -m pytest tests -k "property or fuzz" -p no:cacheprovider

clean:
	rm -rf $(VENV) forensics-out .pytest_cache
