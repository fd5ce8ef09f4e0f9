# exclusive-placement — developer entry points. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
BENCH_SCALE_ARGS ?=
TEST_WORKERS ?= 2

.DEFAULT_GOAL := help

# Colour only on a terminal (and not with NO_COLOR set); the name column as wide as the longest name.
help: ## List the targets
	@if [ -t 1 ] && [ -z "$${NO_COLOR:-}" ]; then on=$$'\033[36m'; off=$$'\033[0m'; else on=; off=; fi; \
	grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -v on="$$on" -v off="$$off" 'BEGIN {FS = ":.*?## "} \
	  {name[NR] = $$1; text[NR] = $$2; if (length($$1) > width) width = length($$1)} \
	  END {for (i = 1; i <= NR; i++) printf "  %s%s%s  %s\n", on, sprintf("%-" width "s", name[i]), off, text[i]}'

# The project itself goes in editable and without dependencies (every one is pinned in the requirements;
# the build backend too, hence no build isolation): its console scripts, kubectl-exclusive_placement among
# them, land in .venv/bin and run this checkout's code.
$(STAMP): requirements.txt requirements-tools.txt requirements-dev.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --editable .
	@touch $(STAMP)

venv: $(STAMP) ## Create .venv from the pinned requirements (product, tools and dev tools) and install the project

test: $(STAMP) kube ## Run the whole test suite (the kube tier and quick benchmark variants included) on TEST_WORKERS processes
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=30 $(PYTEST_ARGS)

test-slow: $(STAMP) ## Run only the slow tests (scale runs, full benchmarks)
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

lint: $(STAMP) ## ruff, ruff format, mypy --strict, import contracts (CONTRIBUTING.md)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

fmt: $(STAMP) ## Format and auto-fix
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

certs: $(STAMP) ## Generate dev certificates into .dev/certs
	$(PY) -m certs generate --out-dir .dev/certs --service exclusive-placement-webhook --namespace exclusive-placement --dns localhost --ip 127.0.0.1

run: $(STAMP) kube ## Bring up the real control plane + webhook + resizer, run examples/jobset-exclusive.yaml, keep serving
	$(PY) -m devstack run

demo: $(STAMP) kube ## Scripted end to end on the real control plane, non-interactive; exits 0 when every Job is placed
	$(PY) -m devstack demo

bench: $(STAMP) kube ## JobSet vs the four strategies (+ all-or-nothing in the gang race) on the real control plane, each contender 3 times: ~1 h 45 min (writes bench/results/)
	$(PY) -m bench strategies --repeat 3 --out bench/results

bench-quick: $(STAMP) kube ## The quick comparison (4x8, every contender 3 times, as run by make test): ~6-9 min here (writes .bench-quick/)
	$(PY) -m bench strategies --quick --repeat 3 --out .bench-quick

bench-kube: $(STAMP) kube ## make bench plus the long wait in real minutes (4 Jobs x 4 pods on 2 pools, pods run 4 min, ~5 min per contender and run): ~3 h (writes bench/results/)
	$(PY) -m bench strategies --repeat 3 --long-wait --out bench/results

bench-kueue: $(STAMP) kube ## JobSet, gate and elastic next to Kueue (3 JobSets of 4x4 queued, quota for one), each 3 times: ~20 min (writes bench/results/kueue/)
	$(PY) -m bench strategies --kueue --repeat 3 --no-plots --out bench/results/kueue

bench-webhook: $(STAMP) kube ## Webhook admission load vs no-op endpoints fed the same reviews (hey, built by make kube from its pin)
	$(PY) -m bench webhook --tool hey --out bench/results/webhook.json

bench-resizer: $(STAMP) kube ## Bind-to-resize latency and resizer RSS over 1,000 Jobs on the real control plane (kwok nodes; writes bench/results/resizer.json)
	$(PY) -m bench resizer --out bench/results

bench-scale: $(STAMP) kube ## kwok nodes on the real control plane, Jobs at 50/s: RSS, admission, bind-to-resize (BENCH_SCALE_ARGS; writes bench/results/scale.json)
	$(PY) -m bench scale --out bench/results $(BENCH_SCALE_ARGS)

bench-abuse: $(STAMP) kube ## One abusive client per attack vs the webhook: peak RSS, a legitimate admission meanwhile; the dry-run flood on the real control plane (writes bench/results/abuse.json)
	$(PY) -m bench abuse

bench-controlplane: $(STAMP) kube ## The real control plane: warm start and idle RSS, 16 nodes (writes bench/results/controlplane.json)
	$(PY) -m bench controlplane --out bench/results

soak: $(STAMP) kube ## Faults on the real control plane (toxiproxy, API Priority and Fairness, kwok, restarts), ~5 min (writes bench/results/soak.json)
	$(PY) -m bench soak --out bench/results

helm-lint: $(STAMP) ## helm lint --strict of the chart, no helm binary needed (Helm's library via helm-python-sdk)
	$(PY) -m devstack chart lint

helm-template: $(STAMP) ## The manifests the chart renders (helm template, no helm binary; cert-manager mode: no key printed)
	$(PY) -m devstack chart template --set certs.mode=cert-manager

kube: $(STAMP) ## Build the real control plane (kube-apiserver, KCM, scheduler, etcd, kwok, JobSet; Kueue from cluster/kueue/go.mod) from cluster/go.mod into .cache/kube
	@$(PY) -m devstack.controlplane build

clean: ## Remove the venv, caches and dev state
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis .dev .bench-quick .bench

.PHONY: help venv kube test test-slow lint fmt certs run demo bench bench-quick bench-kube bench-kueue bench-webhook bench-resizer bench-scale bench-abuse bench-controlplane soak helm-lint helm-template clean
