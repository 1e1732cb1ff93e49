# Chronolog — every target sets up what it needs first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
HOST   ?= 127.0.0.1
PORT   ?= 9092
DATA   ?= ./data

.PHONY: install run newcomer test test-docker bench chaos fuzz soak lint format generate check-java check-compose check-clients check-openssl check-chromium clean

## Development: the project with every extra (Spark, console, test and lint tools).
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(STAMP) $(RUN_STAMP)

install: $(STAMP)

## `make run`: only what the broker and the CLI need (the base install and the arrow
## extra, ~290 MB instead of ~1.2 GB). A venv `make install` made already has it.
## --no-compile: Python compiles a module when it is first imported, not all of
## NumPy and PyArrow before the broker may start.
$(RUN_STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -e '.[arrow]'
	touch $(RUN_STAMP)

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

## tests/security and bench_security make their CA and certificates with the openssl CLI.
check-openssl:
	@command -v openssl >/dev/null 2>&1 || { \
	  echo "openssl not found: installing Debian's openssl"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends openssl; }

## Build the images with podman and run the compose integration suite (docs/operations.md);
## installs podman & co. with apt-get if missing. Host ports: CHRONOLOG_HOST_PORT etc.
test-docker:
	$(PYTHON) docker/podman/run_stack.py

## The console's browser tests drive Debian's headless Chromium through its chromedriver.
check-chromium:
	@command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 || { \
	  echo "chromium/chromedriver not found: installing Debian's chromium and chromium-driver"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium chromium-driver; }

## Two real clients that share no code with the Python ones: kcat (Debian's, on an older
## librdkafka) and kafkajs (npm, pinned by tests/js/package-lock.json, into tests/js/node_modules).
check-clients:
	@command -v kcat >/dev/null 2>&1 || { \
	  echo "kcat not found: installing Debian's kcat"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends kcat; }
	@command -v npm >/dev/null 2>&1 || { \
	  echo "npm not found: installing Debian's nodejs and npm"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends nodejs npm; }
	@test -d tests/js/node_modules/kafkajs || { \
	  echo "kafkajs not found: installing it from npm into tests/js"; \
	  cd tests/js && npm ci --no-audit --no-fund --loglevel=error; }

run: $(RUN_STAMP)
	$(BIN)/chronolog serve --data-dir $(DATA) --host $(HOST) --port $(PORT)

## The in-process suites (no sockets but port-0 ones, no servers, no clock or CPU share
## asserted, only tmp_path) run on TEST_WORKERS processes; everything that starts brokers,
## clients, JVMs or browsers, or measures time and CPU, runs after them in one process.
TEST_WORKERS ?= 2
PARALLEL_TESTS := tests/protocol tests/storage \
  tests/broker/test_kip848_assignors.py tests/broker/test_transactions_model.py
test: install check-java check-maven check-s3server check-compose check-clients check-openssl check-chromium check-go check-rdkafka-build
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile $(PARALLEL_TESTS); a=$$?; \
	  $(BIN)/python -m pytest -q -ra $(addprefix --ignore=,$(PARALLEL_TESTS)); b=$$?; \
	  test $$a -eq 0 -a $$b -eq 0
	$(MAKE) --no-print-directory lint

bench: install check-java check-openssl check-s3server ecosystem
	$(BIN)/python -m bench

## kill -9 rounds under load and simulated power loss, longer than the short run in `make test`.
CHAOS_ROUNDS ?= 25
chaos: install
	CHRONOLOG_CHAOS_ROUNDS=$(CHAOS_ROUNDS) CHRONOLOG_POWER_LOSS_EXAMPLES=50 \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/reliability

## Ten minutes of steady load with rolls and retention; writes docs/soak.md and docs/soak.png.
SOAK_MINUTES ?= 10
soak: install
	$(BIN)/python -m bench.soak --minutes $(SOAK_MINUTES) --out docs

## 1,000,000 mutated requests of every API and version against a live broker (bounded: 30 min).
FUZZ_REQUESTS ?= 1000000
fuzz: install
	$(BIN)/python -m tests.reliability.fuzz_live --requests $(FUZZ_REQUESTS) --seconds 1800 \
	  --dir $$(mktemp -d /tmp/chronolog-fuzz-XXXXXX)

## A new user's first minutes on a fresh clone, checked against README (tests/newcomer.py):
## clone, make run, the five-minute example, PySpark as README says, the Spark example.
newcomer: check-java
	$(PYTHON) tests/newcomer.py

## Rewrite protocol/messages.py (the typed message classes) from the declarations in protocol/.
generate: install
	$(BIN)/python -m protocol.generate

lint: install
	$(BIN)/ruff check broker protocol storage client pipeline console tests bench docker
	$(BIN)/mypy broker protocol storage client pipeline console

format: install
	$(BIN)/ruff format broker protocol storage client pipeline console tests bench
	$(BIN)/ruff check --fix broker protocol storage client pipeline console tests bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache

## Kafka's own world against Chronolog (docs/compatibility.md): Java 17 + Maven fetch Kafka 4.x's
## jars from Maven Central into .cache/ (reused). `make test` runs the short set in tests/ecosystem.
.PHONY: check-maven ecosystem test-ecosystem
## The ecosystem tests in `make test` fetch Kafka's jars with Maven and compile Java sources.
check-maven:
	@command -v javac >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { \
	  echo "javac/mvn not found: installing Debian's openjdk-17-jdk-headless and maven"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless maven; }

## The tier's tests and benches run a real S3 server: s3proxy 2.7.0, one shaded jar that
## Maven fetches from Central into .cache/s3proxy (~35 s once, then a no-op; docs/storage.md).
.PHONY: check-s3server check-seaweedfs test-s3-seaweedfs
check-s3server: install check-maven
	$(BIN)/python -m tests.helpers.s3server install

## The same object-store tests against a second real S3 server: SeaweedFS, built once from
## the Go proxy into .cache/seaweedfs (~8 min on 2 cores, 2 GB of modules; not in make test).
check-seaweedfs: install check-go
	$(BIN)/python -m tests.helpers.s3server install seaweedfs

test-s3-seaweedfs: check-seaweedfs
	CHRONOLOG_S3_SERVER=seaweedfs $(BIN)/python -m pytest -q -ra tests/remote

ecosystem: check-maven
	$(PYTHON) tools/kafka-ref/kafkaref.py fetch
	$(PYTHON) tools/kafka-ref/kafkaref.py spark-kafka

test-ecosystem: install ecosystem
	CHRONOLOG_ECOSYSTEM=full $(BIN)/python -m pytest -q -ra tests/ecosystem

## Go >= 1.26 (this machine kind ships it in /usr/local/go) builds tests/go and runs
## franz-go's own tests; modules come from the Go proxy into .cache/go (tests/ecosystem/golang.py).
.PHONY: check-go test-peers test-peers-franz
check-go:
	@go version 2>/dev/null | grep -Eq 'go1\.(2[6-9]|[3-9][0-9])' || { \
	  echo "Go >= 1.26 is needed by tests/go and franz-go's tests; found: $$(go version 2>&1)"; exit 1; }

## The peers' own test suites against Chronolog (docs/compatibility.md, "Go clients").
test-peers: test-peers-franz

## franz-go v1.22.3's whole pkg/kgo suite against one Chronolog broker (~4-6 min).
test-peers-franz: install check-go
	CHRONOLOG_ECOSYSTEM=full $(BIN)/python -m pytest -q -ra -s tests/ecosystem/test_franz_go_suite.py
## librdkafka's own integration tests (its tests/, source from npm's node-rdkafka, built once
## into .cache/librdkafka) against one Chronolog broker, both group protocols
## (tools/peers/librdkafka.py; docs/compatibility.md lists the tests that do not apply).
.PHONY: test-peers test-peers-rdkafka test-peers-rdkafka-sasl check-rdkafka-build
check-rdkafka-build:
	@command -v g++ >/dev/null 2>&1 && command -v make >/dev/null 2>&1 \
	  && test -f /usr/include/openssl/ssl.h && test -f /usr/include/zlib.h \
	  && test -f /usr/include/zstd.h && test -f /usr/include/rapidjson/document.h || { \
	  echo "librdkafka's build needs g++, OpenSSL, zlib, zstd and RapidJSON headers: installing Debian's"; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends \
	    build-essential libssl-dev zlib1g-dev libzstd-dev rapidjson-dev; }

test-peers-rdkafka: install check-clients check-rdkafka-build ecosystem
	$(BIN)/python tools/peers/librdkafka.py run --group-protocol classic; classic=$$?; \
	$(BIN)/python tools/peers/librdkafka.py run --group-protocol consumer; consumer=$$?; \
	test $$classic -eq 0 && test $$consumer -eq 0

## The harness's SASL suites (its sasl_test.py) over a SASL_PLAINTEXT listener: SCRAM-SHA-512
## runs every test, as upstream's "SASL SCRAM" suite does; PLAIN a subset (upstream: 0001 only).
RDKAFKA_SASL_PLAIN_TESTS = 0001,0012,0017,0018,0030,0031,0054,0056,0063,0081,0090,0109,0129,0135
test-peers-rdkafka-sasl: install check-clients check-rdkafka-build ecosystem
	$(BIN)/python tools/peers/librdkafka.py run --security sasl-scram; scram=$$?; \
	$(BIN)/python tools/peers/librdkafka.py run --security sasl-plain \
	  --tests $(RDKAFKA_SASL_PLAIN_TESTS); plain=$$?; \
	test $$scram -eq 0 && test $$plain -eq 0

test-peers: test-peers-rdkafka test-peers-rdkafka-sasl
