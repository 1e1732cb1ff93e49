# Chronolog — every target sets up what it needs first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 9092
DATA   ?= ./data

.PHONY: install run test bench chaos fuzz lint format check-java check-compose clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

## Java is needed only by PySpark; install a headless JRE if the machine has none.
check-java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "java not found: installing a headless JRE for PySpark"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless; }

## docker-compose 1.29 validates docker/docker-compose.yml without a Docker engine.
check-compose:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  echo "docker-compose not found: installing Debian's docker-compose"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-compose; }

run: install
	$(BIN)/chronolog serve --data-dir $(DATA) --host $(HOST) --port $(PORT)

test: install check-java check-compose
	$(BIN)/python -m pytest -q -ra
	$(MAKE) --no-print-directory lint

bench: install check-java
	$(BIN)/python -m bench

## kill -9 rounds under load and simulated power loss, longer than the short run in `make test`.
CHAOS_ROUNDS ?= 25
chaos: install
	CHRONOLOG_CHAOS_ROUNDS=$(CHAOS_ROUNDS) CHRONOLOG_POWER_LOSS_EXAMPLES=50 \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/reliability

## 1,000,000 mutated requests of every API and version against a live broker (bounded: 30 min).
FUZZ_REQUESTS ?= 1000000
fuzz: install
	$(BIN)/python -m tests.reliability.fuzz_live --requests $(FUZZ_REQUESTS) --seconds 1800 \
	  --dir $$(mktemp -d /tmp/chronolog-fuzz-XXXXXX)

lint: install
	$(BIN)/ruff check broker protocol storage client pipeline tests bench
	$(BIN)/mypy broker protocol storage client pipeline

format: install
	$(BIN)/ruff format broker protocol storage client pipeline tests bench
	$(BIN)/ruff check --fix broker protocol storage client pipeline tests bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
