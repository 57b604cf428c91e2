# The two commands of the README (`make demo`, `make test`) set up everything they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_SCENARIO := fixtures/scenarios/gpu_fell_off_bus.toml
DEMO_CASE := forensics-out/demo-case

.PHONY: install demo test test-fast notebooks lint bench bench-big fuzz clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,ray,triage]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/forensics simulate $(DEMO_SCENARIO) --out $(DEMO_CASE) --seed 7
	$(BIN)/forensics analyze $(DEMO_CASE)/job --out forensics-out/demo
	@echo "Open in a browser: $(abspath forensics-out/demo/report.html)"

# `make test` never installs system packages: without chromium the browser test is skipped (one
# line says why); .ci/run installs chromium first so CI runs it.
test: install
	@command -v chromium >/dev/null 2>&1 || echo "no chromium found: tests/test_browser.py will be skipped (.ci/run installs it)"
	$(BIN)/python -m pytest -n auto --dist loadfile -rs

# The quick loop: no browser, no notebooks, no evaluation corpus (markers in pyproject.toml).
test-fast: install
	$(BIN)/python -m pytest -n auto --dist loadfile -m "not browser and not notebooks and not corpus"

# Execute the notebooks and save them with their outputs (and the hash of the code that made them).
notebooks: install
	$(BIN)/python notebooks/run.py

lint: install
	$(BIN)/ruff check parsers forensics tests bench tools

bench: install
	$(BIN)/python bench/run.py
	$(BIN)/python bench/small.py
	$(BIN)/python bench/independent_job.py bench/work/independent --measure

# The independent-job shape (1.4 GB: one quoted DCGM CSV of 512 GPUs, a pdsh dmesg of 128 nodes, 64
# INFO-level rank logs), generated once, then analyze timed against cat and grep -E -c (bench/README.md).
bench-big: install
	$(BIN)/python bench/independent_job.py bench/work/independent --measure

# Long random fuzzing (not part of `make test`): FORENSICS_FUZZ_EXAMPLES examples per fuzz test.
fuzz: install
	FORENSICS_FUZZ=1 FORENSICS_FUZZ_EXAMPLES=$${FORENSICS_FUZZ_EXAMPLES:-2000} $(BIN)/python -m pytest tests \
		-k "property or fuzz" -p no:cacheprovider -p no:warnings -q -rf

clean:
	rm -rf $(VENV) forensics-out .pytest_cache
