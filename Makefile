# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Every JVM artifact (Apache Kafka, kafka-clients, Spark's Kafka source) from jvm/pom.xml, copied to jvm/lib/.
JVM_STAMP := jvm/lib/.installed
# The ksql-equivalent module is built from sources too: a change to them rebuilds it.
JVM_POMS  := jvm/pom.xml $(wildcard jvm/*/pom.xml) $(shell find jvm/ksql-equivalent/src -type f 2>/dev/null)
# The real Go clients (Sarama, kafka-go, franz-go) as oracles and producers: tests/go, pinned by its go.sum.
GO_STAMP  := tests/go/bin/.installed
GO_SRCS   := tests/go/go.mod tests/go/go.sum $(wildcard tests/go/*.go)
# Airflow (the nightly DAG's test) in a virtualenv of its own: its pins never touch .venv.
AIRFLOW_VENV  := .venv-airflow
AIRFLOW_STAMP := $(AIRFLOW_VENV)/.installed

.PHONY: demo test test-slow bench install check-java check-mvn check-cc check-node check-go test-deps clean

demo: $(STAMP) $(JVM_STAMP)
	$(BIN)/streamapp demo

# The whole suite, the full-volume reliability scenarios (`-m slow`) included: CI runs this. Two processes, each
# with its own broker and SparkSession, a module in one of them (tests/conftest.py); TEST_PROCESSES=0 runs one.
TEST_PROCESSES ?= 2
test: $(STAMP) $(JVM_STAMP) $(GO_STAMP) $(AIRFLOW_STAMP) test-deps
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The web views' browser test drives Debian's headless Chromium; the metrics' tests run Debian's Prometheus
# (prometheus, promtool) against the shipped alerts (CI runs as root).
test-deps:
	@test -x /usr/bin/chromium -a -x /usr/bin/promtool -a -x /usr/bin/prometheus || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium prometheus; \
	  else echo "Chromium and Prometheus are required by the browser and metrics tests: run 'sudo apt-get install -y chromium prometheus' (or 'make test-deps' as root)." >&2; exit 1; fi; }

# Only the full-volume scenarios (also part of `make test`).
test-slow: $(STAMP) $(JVM_STAMP) $(GO_STAMP)
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

bench: $(STAMP) $(JVM_STAMP)
	$(BIN)/python benchmarks/run_all.py

install: $(STAMP) $(JVM_STAMP) $(GO_STAMP) $(AIRFLOW_STAMP)

check-java:
	@command -v java >/dev/null 2>&1 || { echo "Java 17 or newer is required (for Spark and the Java partitioner oracle): install it, e.g. 'apt-get install openjdk-17-jdk-headless'." >&2; exit 1; }
	@command -v javac >/dev/null 2>&1 || { echo "javac (a JDK, not only a JRE) 17 or newer is required: install 'openjdk-17-jdk-headless'." >&2; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	  [ "$${v:-0}" -ge 17 ] || { echo "Java $$v found, Java 17 or newer is required: install 'openjdk-17-jdk-headless'." >&2; exit 1; }

check-mvn:
	@command -v mvn >/dev/null 2>&1 || { echo "Maven is required (it brings Apache Kafka and Spark's Kafka source from Maven Central): install it, e.g. 'apt-get install maven'." >&2; exit 1; }

check-cc:
	@command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || { echo "A C compiler is required for the partitioners' fast path: install one, e.g. 'apt-get install build-essential python3-dev'." >&2; exit 1; }

# Go 1.21+ fetches the Go 1.26 toolchain that tests/go/go.mod names from the module proxy by itself.
check-go:
	@command -v go >/dev/null 2>&1 || { echo "Go 1.26 is required (the real Sarama, kafka-go and franz-go are test oracles, from the Go module proxy): install Go 1.26, or any Go 1.21 or newer, which fetches 1.26 itself." >&2; exit 1; }
	@v=$$(go env GOVERSION | sed -n 's/^go1\.\([0-9]*\).*/\1/p'); \
	  [ "$${v:-0}" -ge 21 ] || { echo "$$(go env GOVERSION) found, Go 1.26 is required (Debian 12's golang-go is 1.19): install Go 1.26, or any Go 1.21 or newer, which fetches 1.26 itself." >&2; exit 1; }

check-node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { echo "Node.js and npm are required (the real kafkajs is a test oracle): install them, e.g. 'apt-get install nodejs npm'." >&2; exit 1; }

$(STAMP): setup.cfg setup.py pyproject.toml streamapp/partitioners/_fast.c tests/kafkajs/package-lock.json | check-java check-cc check-node
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/python -c 'from streamapp.partitioners import FAST; assert FAST, "the partitioners C extension did not build: see the pip output above"'
	npm ci --prefix tests/kafkajs --no-audit --no-fund --silent
	touch $(STAMP)

# Maven runs once: this stamp is newer than every pom until one changes.
$(JVM_STAMP): $(JVM_POMS) | check-java check-mvn
	rm -rf jvm/lib
	mvn -q -B -f jvm/pom.xml package
	touch $(JVM_STAMP)

# go fetches the modules go.sum pins from the Go module proxy (once, into its module cache).
$(GO_STAMP): $(GO_SRCS) | check-go
	cd tests/go && go build -mod=readonly -buildvcs=false -o bin/goclients .
	touch $(GO_STAMP)

# apache-airflow and the Spark provider, pinned in deploy/airflow/requirements.txt (660 MB; 2 min 10 s here at load 10).
$(AIRFLOW_STAMP): deploy/airflow/requirements.txt
	test -x $(AIRFLOW_VENV)/bin/python || $(PYTHON) -m venv $(AIRFLOW_VENV)
	$(AIRFLOW_VENV)/bin/pip install --quiet --upgrade pip
	$(AIRFLOW_VENV)/bin/pip install --quiet -r deploy/airflow/requirements.txt
	touch $(AIRFLOW_STAMP)

clean:
	rm -rf jvm/lib $(VENV) $(AIRFLOW_VENV) build *.egg-info data .pytest_cache streamapp/partitioners/*.so tests/kafkajs/node_modules tests/go/bin
