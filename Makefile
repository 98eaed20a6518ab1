# Every target creates what it needs: a fresh clone runs `make test` or `make demo` directly.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The SAM CLI's own environment (it pins its own boto3); its settings live in $(SAM_APP_DIR).
SAM_VENV := .venv-sam
SAM_STAMP := $(SAM_VENV)/.installed
SAM_APP_DIR := $(SAM_VENV)/app-dir

.PHONY: test lint typecheck doctest unit demo clean dist

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,durable]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check lib handlers tests bench infra

typecheck: $(STAMP)
	$(BIN)/mypy --strict lib/sqsjobs

# Every test, whatever it costs (tests/conftest.py marks the tiers), in three pytest processes side by side
# that share nothing they could race on, then the 15 slowest of all (tests/shards.py says how they split).
# tests/scaffold runs `sam validate --lint` and `sam build` on the projects `sqsjobs init` writes:
# the SAM CLI's own environment is built first.
unit: $(STAMP) browser $(SAM_STAMP) $(SAM_APP_DIR)/metadata.json
	$(BIN)/python tests/shards.py 15

# The fast loop: lint, types, and the tests marked with no cost (tests/tiers.py). It needs neither
# .venv-sam, nor Chromium, nor checkov. The directories whose every test has a cost (PATH_COSTS there)
# are not even collected. Two pytest processes, one a core (tests/unit, and the rest; about even):
# pytest-xdist is no dependency. The unit shard's report is printed after the other's.
FAST_TIER := not moto and not local_cloud and not sam and not browser and not slow
FAST_IGNORE := --ignore=tests/integration --ignore=tests/e2e --ignore=tests/scaffold --ignore=tests/unit
# $(call fast-tier,VENV_BIN[,MORE]): the fast tier's two pytest processes, with that environment's pytest
# (MORE: a further marker condition, e.g. the oldest environment's "and not durable").
define fast-tier
	@log=$$(mktemp); \
	$(1)/pytest tests/unit -p no:cacheprovider -q -m "$(FAST_TIER) $(2)" --durations=5 >$$log 2>&1 & unit=$$!; \
	$(1)/pytest tests $(FAST_IGNORE) -p no:cacheprovider -q -m "$(FAST_TIER) $(2)" --durations=5; rest=$$?; \
	wait $$unit; units=$$?; echo "---- tests/unit"; cat $$log; rm -f $$log; \
	test $$rest -eq 0 && test $$units -eq 0
endef
.PHONY: check
check: lint typecheck
	$(call fast-tier,$(BIN))

# The oldest boto3/botocore sqsjobs admits (pyproject.toml's floor, pinned by tests/oldest-constraints.txt),
# in an environment of its own with everything else as pip resolves it beside them: `make test` runs the
# fast tier against it too (tests/unit/test_dependency_floors.py keeps the pin at the floor).
OLDEST_VENV := .venv-oldest
OLDEST_BIN := $(OLDEST_VENV)/bin
OLDEST_STAMP := $(OLDEST_VENV)/.installed
OLDEST_CONSTRAINTS := tests/oldest-constraints.txt

$(OLDEST_STAMP): pyproject.toml $(OLDEST_CONSTRAINTS)
	test -x $(OLDEST_BIN)/python || $(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_BIN)/python -m pip install --quiet --upgrade pip
	$(OLDEST_BIN)/python -m pip install --quiet -c $(OLDEST_CONSTRAINTS) -e '.[dev]'
	touch $@

.PHONY: check-oldest
check-oldest: $(OLDEST_STAMP)
	@$(OLDEST_BIN)/python -c "import boto3, botocore; print('fast tier on boto3', boto3.__version__, \
		'botocore', botocore.__version__)"
	$(call fast-tier,$(OLDEST_BIN),and not durable)

# The console's browser tests drive Debian's Chromium through Playwright (never a
# browser build of Playwright's own): install the package when it is missing.
CHROMIUM := /usr/bin/chromium
.PHONY: browser
browser:
	@test -x $(CHROMIUM) || { (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) \
		|| echo "make: could not install chromium; the console's browser tests will be skipped" >&2; }

# Template checks (sam build among them) come before pytest: tests/infra/test_bundle.py inspects
# the fresh .aws-sam/build they leave. Then the fast tier again, on the oldest boto3/botocore admitted.
test: lint typecheck template-checks doctest unit check-oldest

# Every `>>>` example under lib/sqsjobs runs (none is skipped): no network, moto or botocore's Stubber.
# Every >>> example under lib/ runs; fake credentials and no instance metadata: the examples never leave 127.0.0.1.
doctest: $(STAMP)
	AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_EC2_METADATA_DISABLED=true \
		$(BIN)/pytest -p no:cacheprovider -q --doctest-modules lib/sqsjobs

# docs/reference/*.md from the docstrings of sqsjobs.__all__ (tests/docs/test_reference.py fails when they are stale).
reference: $(STAMP)
	$(BIN)/python tests/reference_pages.py

# KEEP=1 leaves the local cloud and the operator console running after the demo (Ctrl-C stops them).
demo: $(STAMP)
	$(BIN)/python -m demo $(if $(filter 1,$(KEEP)),--keep)

# ---- figures and proofs (issue 8): bench writes BENCHMARKS.md; chaos and fuzz at full size ----
.PHONY: bench chaos fuzz

# The bundle figures read sam build's output (.aws-sam/build).
bench: $(STAMP) sam-build
	$(BIN)/python -m bench

# Only the bundle figures (this repository's functions, and a project sqsjobs init makes, through sam build),
# rewritten in place in BENCHMARKS.md.
.PHONY: bench-bundle
bench-bundle: $(STAMP) sam-build
	$(BIN)/python -m bench.bundle

# chaos: the model-based test at 20x its make-test size; 10,000 jobs (2,000 of them in job groups) with 2% of
# DynamoDB calls failing after botocore's retries and kills before and after side effects, whose ledger (and the
# model's result) goes to CHAOS.md; then a 2,000-member group on the local cloud (10% duplicate sends, 2% poison:
# its callback runs once). make test runs all three smaller. A failing model still gets its line in CHAOS.md.
CHAOS_MODEL_XML := $(VENV)/chaos-model.xml
chaos: $(STAMP)
	rm -f $(CHAOS_MODEL_XML) $(CHAOS_MODEL_XML).failed
	SQSJOBS_MODEL_SCALE=20 $(BIN)/pytest tests/model -p no:cacheprovider -q --timeout=0 \
		--junitxml=$(CHAOS_MODEL_XML) || touch $(CHAOS_MODEL_XML).failed
	PYTHONPATH=tests SQSJOBS_MODEL_SCALE=20 $(BIN)/python -m chaos.harness --jobs 10000 --fail 0.02 \
		--write CHAOS.md --model-junit $(CHAOS_MODEL_XML)
	test ! -e $(CHAOS_MODEL_XML).failed
	SQSJOBS_GROUP_SCALE_MEMBERS=2000 $(BIN)/pytest tests/e2e/test_groups.py -p no:cacheprovider -q --timeout=1800

fuzz: $(STAMP)
	SQSJOBS_FUZZ_EXAMPLES=10000 $(BIN)/pytest tests/fuzz -p no:cacheprovider -q -s --timeout=0

# ---- distribution (docs/deploy.md, "Install sqsjobs"): the wheel and sdist, and a Lambda layer zip of the
# base install for python3.12 arm64 (infra/bundle/Makefile's `layer`, the same runtime as every bundle).
DIST ?= dist
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
dist: $(STAMP)
	@test -n "$(PY312_BIN)" || { echo "dist: python3.12 not found (pyenv or PATH): the layer is compiled for it" >&2; exit 2; }
	rm -rf "$(DIST)" build
	$(BIN)/python -m build --outdir "$(DIST)" .
	$(MAKE) -f infra/bundle/Makefile layer PYTHON312="$(PY312_BIN)/python3.12" \
		WHEEL="$(abspath $(DIST))/sqsjobs-$(VERSION)-py3-none-any.whl" \
		LAYER_ZIP="$(abspath $(DIST))/sqsjobs-layer-$(VERSION)-python3.12-arm64.zip"
	ls -l "$(DIST)"

# `sqsjobs init`'s costly checks on every one of the 256 option combinations (make test: a covering subset).
.PHONY: scaffold-matrix
scaffold-matrix: $(STAMP) $(SAM_STAMP) $(SAM_APP_DIR)/metadata.json
	SQSJOBS_SCAFFOLD_MATRIX=all $(BIN)/pytest tests/scaffold/test_init_matrix.py -p no:cacheprovider -q --timeout=0

clean:
	rm -rf $(VENV) $(OLDEST_VENV) .pytest_cache .mypy_cache .ruff_cache

# ---- template checks: cfn-lint + sqsjobs rules, sam validate/build, checkov ----
# aws-sam-cli and checkov each pin their own boto3, so each gets its own venv.
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# sam build needs python3.12 (the functions' runtime): pyenv's, else one on PATH.
PY312_BIN := $(or $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.12.*/bin)),$(patsubst %/,%,$(dir $(shell command -v python3.12 2>/dev/null))))
# Offline: sam validate needs only a region; dummy credentials stop botocore
# from searching for real ones (and the instance metadata endpoint); no telemetry.
# sam's own settings live in $(SAM_APP_DIR), not ~/.aws-sam: its weekly "newer
# version?" request is marked done (until 2100), so sam never calls out.
SAM_ENV := SAM_CLI_TELEMETRY=0 __SAM_CLI_APP_DIR="$(CURDIR)/$(SAM_APP_DIR)" AWS_DEFAULT_REGION=us-east-1 \
	AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_EC2_METADATA_DISABLED=true \
	PATH="$(PY312_BIN):$$PATH"

.PHONY: template-checks template-lint sam-validate sam-build checkov clean-template-envs

$(SAM_STAMP):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SAM_VENV)/bin/python -m pip install --quiet 'aws-sam-cli>=1.120,<2'
	touch $@

$(SAM_APP_DIR)/metadata.json: | $(SAM_STAMP)
	mkdir -p $(SAM_APP_DIR)
	echo '{"lastVersionCheck": 4102444800.0, "telemetryEnabled": false}' > $@

$(CHECKOV_STAMP):
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet 'checkov>=3.2,<4'
	touch $@

template-lint: $(STAMP)
	$(BIN)/cfn-lint template.yaml
	$(BIN)/sqsjobs check template.yaml

sam-validate: $(SAM_STAMP) $(SAM_APP_DIR)/metadata.json
	$(SAM_ENV) $(SAM_VENV)/bin/sam validate --template template.yaml
	$(SAM_ENV) $(SAM_VENV)/bin/sam validate --lint --template template.yaml

sam-build: $(SAM_STAMP) $(SAM_APP_DIR)/metadata.json
	@test -n "$(PY312_BIN)" || { echo "sam-build: python3.12 not found (pyenv or PATH)" >&2; exit 2; }
	$(SAM_ENV) $(SAM_VENV)/bin/sam build --template template.yaml
	test -f .aws-sam/build/WorkerFunction/worker.py -a -f .aws-sam/build/WorkerFunction/sqsjobs/__init__.py
	test -f .aws-sam/build/RedriveFunction/redrive.py -a -f .aws-sam/build/RedriveFunction/sqsjobs/__init__.py
	test ! -e .aws-sam/build/WorkerFunction/sqsjobs/console

# No update check against the registry, no guideline download from a platform.
checkov: $(CHECKOV_STAMP)
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true BC_SKIP_MAPPING=TRUE $(CHECKOV_VENV)/bin/checkov --config-file .checkov.yaml

template-checks: template-lint sam-validate sam-build checkov

clean-template-envs:
	rm -rf $(SAM_VENV) $(CHECKOV_VENV) .aws-sam
