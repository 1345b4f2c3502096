# The two commands a new user needs: `make demo` (main job) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
# checkov's pins conflict with the project's (hack/lint/checkov-constraints.txt): its own venv.
CHECKOV_VENV := .venv-checkov
# The policy pack's virtualenv (policy/constraints.txt says why it is its own).
POLICY_VENV := policy/venv
# The documentation site's virtualenv (docs/requirements.txt says why it is its own).
DOCS_VENV := .venv-docs
TOOLS_BIN = $(shell hack/tools/build.sh --bin-dir)

export PULUMI_SKIP_UPDATE_CHECK := true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION := true
export PULUMI_IGNORE_AMBIENT_PLUGINS := true

.PHONY: demo test unit lint fmt runner-lock tools base-tools venv policy-venv docs-venv docs clean host-packages

## demo: build/reuse the toolchain, start a disposable control plane, run a real `pulumi up`
## (BACKEND=postgres: the state and the stack's lease in a throwaway PostgreSQL)
## (KSERVE=1: also KServe's controller, building its toolchain family first, and a KServe replica)
BACKEND ?= file
demo: venv $(if $(KSERVE),tools,base-tools) host-packages
	INFERCRANE_TOOLS_BIN=$(TOOLS_BIN) $(PY) -m infercrane_dev.demo --backend '$(BACKEND)' \
	  $(if $(KSERVE),--kserve) $(DEMO_ARGS)

## test: lint, type-check, go test of hack/tools, unit tests, the dev tools' tests, then
## real-engine conformance on the local control plane (and its real node)
## (hack/test.sh: KServe's, Kind's and the newest Pulumi CLI's toolchain families build in the
## background meanwhile)
test: venv policy-venv base-tools host-packages
	PYTEST_ARGS='$(PYTEST_ARGS)' hack/test.sh

## conformance: the conformance suite against an existing cluster (not a local one of its own),
## acting as CONTEXT, which must be an admin: make conformance KUBECONFIG=<file> CONTEXT=<admin
## context> [KSERVE_CRD=install]. Removes what it created and fails if anything is left
## (tests/conformance/README.md). Without CONTEXT it stops here, before anything runs.
ifneq ($(filter conformance,$(MAKECMDGOALS)),)
ifeq ($(strip $(CONTEXT)),)
$(error make conformance: CONTEXT=<admin context> is required; usage: make conformance KUBECONFIG=<file> CONTEXT=<admin context> [KSERVE_CRD=install])
endif
endif
.PHONY: conformance
conformance: venv base-tools
	INFERCRANE_TOOLS_BIN=$(TOOLS_BIN) INFERCRANE_CONFORMANCE_KUBECONFIG='$(KUBECONFIG)' \
	  INFERCRANE_CONFORMANCE_CONTEXT='$(CONTEXT)' \
	  INFERCRANE_CONFORMANCE_INSTALL_KSERVE_CRD='$(KSERVE_CRD)' \
	  $(PY) -m pytest -rs tests/conformance $(PYTEST_ARGS)

## test-pythons: the built wheel in a clean virtualenv of Python 3.11 (its checks only), 3.12
## (exact pins) and 3.13 (lowest allowed dependencies): imports, --version, unit tests and the
## conformance subset marked `pythons` (infercrane_dev/pythons.py; make test runs it too)
.PHONY: test-pythons
test-pythons: venv base-tools
	INFERCRANE_TOOLS_BIN=$(TOOLS_BIN) $(PY) -m infercrane_dev.pythons

## soak: the property tests (tests/conformance/faults/: the deletion rule, the desired state's
## versions between two runners; killed `pulumi up`s of a component package program) on random sequences for at least SOAK_MINUTES (default 60),
## in batches of about SOAK_BATCH_MINUTES (default 15), each on a local control plane of its
## own; prints its seed first (SEED=<n> draws the same batches again; hack/soak.sh). Not part
## of `test`, which runs a fixed set
.PHONY: soak
soak: venv base-tools
	INFERCRANE_TOOLS_BIN=$(TOOLS_BIN) SOAK_MINUTES='$(SOAK_MINUTES)' \
	  SOAK_BATCH_MINUTES='$(SOAK_BATCH_MINUTES)' SEED='$(SEED)' PY='$(PY)' \
	  PYTEST_ARGS='$(PYTEST_ARGS)' hack/soak.sh

## unit: the fast tests only (no binaries, no cluster)
unit: venv
	$(PY) -m pytest -rs tests/unit infercrane_dev/tests

## bench: real engine vs the API floor for N = 1..1000 intents, many stacks, state backends,
## the policy pack's cost, the program under mocks -> benchmarks/results/bench.{json,md,svg}. Not part of `test`. Trims repetitions to an
## 80 min budget, but one repetition of every size always runs; BENCH_ARGS=--quick takes minutes
## preview: the engine's PR comment for STACK on a disposable local control plane (BASE=<git ref>
## applies that revision of the stack file first, so the comment shows the change)
.PHONY: preview
preview: venv base-tools
	@test -n "$(STACK)" || { echo "usage: make preview STACK=<stack> [BASE=<git ref>]" >&2; exit 2; }
	INFERCRANE_TOOLS_BIN=$(TOOLS_BIN) $(PY) -m infercrane_dev.preview --stack '$(STACK)' $(if $(BASE),--base '$(BASE)')

.PHONY: bench
bench: venv policy-venv base-tools
	INFERCRANE_TOOLS_BIN=$(TOOLS_BIN) $(PY) -m benchmarks $(BENCH_ARGS)

## lint: ruff, mypy, shellcheck, go vet of hack/tools, actionlint and zizmor on the workflows,
## the strict documentation build (`docs`: a broken link, a page outside the nav or any warning
## fails; 71 s with a new .venv-docs from a warm pip cache, 3 s once it exists), and kube-score
## and checkov on every rendered variant (needs `tools` for go vet, actionlint and kube-score)
lint: venv base-tools $(CHECKOV_VENV)/.installed docs
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/shellcheck $$(find hack -name '*.sh' | sort) .ci/run
	hack/tools/build.sh --vet
	if [[ -d .github/workflows ]]; then \
	  $(TOOLS_BIN)/actionlint -shellcheck=$(VENV)/bin/shellcheck .github/workflows/*.yml; \
	  $(VENV)/bin/zizmor --offline --persona=auditor --config .github/zizmor.yml .github/; \
	fi
	$(PY) -m infercrane_dev.scoring --kube-score $(TOOLS_BIN)/kube-score \
	  --checkov $(CHECKOV_VENV)/bin/checkov

fmt: venv
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## runner-lock: write the runner image's hash lock again (infercrane_dev/images/
## runner-requirements.txt) after constraints.txt changes; make test says when it is stale
runner-lock: venv
	$(PY) -m infercrane_dev.images.wheel_lock

## host-packages: the pinned Debian packages a real node needs (runc, iptables, nftables);
## installs only what is missing, and only as root on Debian 12
host-packages:
	hack/host-packages.sh

## tools: build what is missing of the pinned toolchain into ~/.cache/infercrane/tools/<key>
tools:
	hack/tools/build.sh

## base-tools: all of it but KServe's controller and Kind's tools (kind, CoreDNS), which only
## their scenarios, `up --kserve` and `python -m infercrane_dev.kind` need, and the newest Pulumi
## CLI, which only the engine-contract cases on it need (make test builds them in the background)
base-tools:
	hack/tools/build.sh --without kserve,kind,coredns,pulumi-newest

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

## policy-venv: the policy pack's own virtualenv (pulumi-policy and InferCrane), policy/venv
policy-venv: $(POLICY_VENV)/.installed

$(POLICY_VENV)/.installed: policy/requirements.txt policy/constraints.txt pyproject.toml
	$(PYTHON) -m venv $(POLICY_VENV)
	cd policy && venv/bin/python -m pip install --quiet --disable-pip-version-check \
	  -c constraints.txt -r requirements.txt
	touch $@

## docs: the documentation site, built strictly (any warning fails: a broken link or anchor, a
## page outside the nav) into .infercrane/site; the reference pages are generated from the code
## during the build (infercrane_dev/docs_hook.py)
docs: docs-venv
	# Material 9.8 prints an end-of-life banner on every build; it is news, not a warning.
	# `python -m`, not the mkdocs script: the hook imports infercrane_dev from this checkout,
	# which only the working directory on sys.path provides (live: python -m mkdocs serve).
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/python -m mkdocs build --strict --site-dir .infercrane/site

docs-venv: $(DOCS_VENV)/.installed

$(DOCS_VENV)/.installed: docs/requirements.txt constraints.txt pyproject.toml
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	  -c constraints.txt -r docs/requirements.txt -e .
	touch $@

$(CHECKOV_VENV)/.installed: hack/lint/checkov-constraints.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	  -c hack/lint/checkov-constraints.txt checkov
	touch $@

clean:
	rm -rf .infercrane .mypy_cache .ruff_cache .pytest_cache
