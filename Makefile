# Copyright 2026 The vgpu-dra Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

# vgpu-dra: the single entry point for building, testing, benchmarking and the demo.
# `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
BIN_DIR := bin
VGPU_CORE_BUILD := vgpu-core/build
FAKE_LIB_DIR := $(abspath $(VGPU_CORE_BUILD))/fake
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/vgpu-dra/vgpu-dra-driver/pkg/common/version.Version=$(VERSION)

# go-nvml's cgo wrappers call NVML functions that NVML marks deprecated; the
# warnings are about NVIDIA's header, not our code.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
export CGO_ENABLED := 1

GO_PACKAGES := ./...
BINARIES := dra-kubelet-plugin dra-controller kubectl-vgpu vgpu-install
# Platforms of the kubectl plugin's release archives.
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_DIR := _output/release
# Pinned linter (`make lint`); golangci-lint is served by the Go module proxy.
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT := _output/tools/golangci-lint-$(GOLANGCI_LINT_VERSION)/golangci-lint
FUZZTIME ?= 30s

.PHONY: help
help: ## show this help
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: vgpu-core $(addprefix $(BIN_DIR)/,$(BINARIES)) ## build libvgpu.so, the fake drivers and the Go binaries

$(BIN_DIR)/%: FORCE
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/$*

# Static, no cgo: the kubectl plugin runs on users' machines, the image's
# init container (vgpu-install) runs whatever C library the image holds, and
# the controller is cluster-side code that links no GPU library
# (pkg/contract/names/deps_test.go checks the last).
$(BIN_DIR)/kubectl-vgpu $(BIN_DIR)/vgpu-install $(BIN_DIR)/dra-controller: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/$(@F)

.PHONY: release-kubectl-vgpu
release-kubectl-vgpu: ## kubectl-vgpu release archives and SHA256SUMS for RELEASE_PLATFORMS (_output/release)
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	for p in $(RELEASE_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; dir=$(RELEASE_DIR)/kubectl-vgpu-$(VERSION)-$$os-$$arch; \
	  mkdir -p $$dir; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $$dir/kubectl-vgpu ./cmd/kubectl-vgpu; \
	  cp docs/kubectl-vgpu.md $$dir/README.md; \
	  tar -C $(RELEASE_DIR) --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
	    -czf $$dir.tar.gz $$(basename $$dir); \
	  rm -rf $$dir; \
	done
	cd $(RELEASE_DIR) && sha256sum *.tar.gz > SHA256SUMS

.PHONY: vgpu-core
vgpu-core: ## build libvgpu.so, the fake CUDA/NVML drivers and cuda-probe (and the burst probe Go tests run)
	$(MAKE) -C vgpu-core all build/test/burst_test

# make test and make accuracy run their parts and print the seconds each
# took (also after a failure) and the suites that could not run on this
# machine (hack/run-parts.sh). make test runs lint and go-test beside the C
# suite (a+b: side by side, a,b: one after the other), which spends most of
# its time starting processes under valgrind and the sanitizers, one at a
# time; vgpu-core builds what both use first.
TEST_PARTS := fmt-check generate-check vet vgpu-core lint,go-test+vgpu-core-test

.PHONY: test
test: ## all checks and unit tests, none judged by wall-clock time (Go with -race, vgpu-core C suite); prints seconds per part
	@hack/run-parts.sh "make test" $(MAKE) --no-print-directory -- $(TEST_PARTS)

.PHONY: go-test
go-test: vgpu-core ## Go tests with -race (part of make test)
	VGPU_FAKE_NVML_LIB=$(FAKE_LIB_DIR)/libnvidia-ml.so.1 \
	VGPU_CORE_BUILD=$(abspath $(VGPU_CORE_BUILD)) \
		$(GO) test -race -count=1 -timeout 30m $(GO_PACKAGES)

.PHONY: vgpu-core-test
vgpu-core-test: ## the vgpu-core C suite: normal, ASan/UBSan, -O0, valgrind (part of make test)
	$(MAKE) -C vgpu-core test

.PHONY: accuracy
accuracy: vgpu-core ## the compute limiter's real-time shares on the fake driver: quick subset, streams grid, MIG SM limits (root; ~9 min)
	$(MAKE) -C vgpu-core accuracy

.PHONY: fmt-check
fmt-check: ## fail if any Go file is not gofmt-formatted
	@bad=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$bad" ]; then echo "gofmt needed on:"; echo "$$bad"; exit 1; fi

.PHONY: generate
generate: ## regenerate generated Go code (DeepCopy of the API types, k8s.io/code-generator's deepcopy-gen)
	$(GO) tool deepcopy-gen --go-header-file hack/boilerplate/boilerplate.go.txt --output-file zz_generated.deepcopy.go ./api/...

.PHONY: generate-check
generate-check: ## fail if generated Go code is not what make generate writes
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  for f in $$(git ls-files --cached --others --exclude-standard 'api/*zz_generated.deepcopy.go'); do \
	    mkdir -p "$$tmp/$$(dirname $$f)" && cp "$$f" "$$tmp/$$f"; done && \
	  $(MAKE) -s generate && \
	  stale=$$(for f in $$(git ls-files --cached --others --exclude-standard 'api/*zz_generated.deepcopy.go'); do \
	    cmp -s "$$f" "$$tmp/$$f" || echo "$$f"; done) && \
	  if [ -n "$$stale" ]; then echo "generated code was stale (make generate rewrote it):"; echo "$$stale"; exit 1; fi

.PHONY: vet
vet: ## go vet
	$(GO) vet $(GO_PACKAGES)

.PHONY: bench
bench: vgpu-core ## benchmarks: prepare path (Go) and interception overhead (C)
	$(GO) test -run '^$$' -bench . -benchmem $(GO_PACKAGES)
	$(MAKE) -C vgpu-core bench

.PHONY: lint
lint: $(GOLANGCI_LINT) ## golangci-lint with .golangci.yml (pinned version, installed into _output/tools on first use), licence headers, libvgpu.so's unit graph
	$(GOLANGCI_LINT) run ./...
	hack/verify-boilerplate.sh
	$(MAKE) -s -C vgpu-core lint

# The pinned linter, built from the Go module proxy (a few minutes, once).
$(GOLANGCI_LINT):
	GOBIN=$(abspath $(@D)) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: fuzz
fuzz: ## run every Go fuzz target (func Fuzz* in *_test.go) for FUZZTIME each (default 30s)
	grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' pkg cmd | \
	  sed -E 's|^(.*)/[^/]*:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort | \
	  while read -r dir target; do \
	    echo "== $$target ./$$dir"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) "./$$dir" </dev/null; \
	  done

.PHONY: image
image: build ## driver image as a docker-save tar without a container engine (_output/images/vgpu-dra-driver.tar)
	VERSION=$(VERSION) deployments/build-image.sh

.PHONY: chart-test
chart-test: ## helm lint and template tests of the chart (also part of make test)
	$(GO) test -count=1 ./deployments/...

.PHONY: demo
demo: build ## the main job: simulated GPUs shared by workloads under hard limits (root; first run ~18 min, then ~1 min)
	./demo/run.sh

.PHONY: demo-down
demo-down: ## remove the demo and stop its local cluster
	./demo/run.sh down

.PHONY: e2e
e2e: build ## end-to-end specs on a fresh local cluster, always torn down, then scale-smoke (root; two nodes; first run ~25 min, then ~18 min)
	./test/e2e/run.sh
	$(MAKE) scale-smoke

.PHONY: e2e-matrix
e2e-matrix: build ## the e2e capability specs on Kubernetes 1.35 (with its gates and without consumable capacity), 1.36, 1.37 and 1.38 (root; each version built once; ~8 min a row)
	./test/e2e/matrix.sh

# The scale benchmark (docs/scale.md): simulated nodes (KWOK) and pods through
# the real control plane, in its own directory and on its own ports.
SCALE_NODES ?= 1000
SCALE_PODS ?= 10000
SCALE_STEADY ?= 1000

.PHONY: scale-bench
scale-bench: $(BIN_DIR)/dra-controller ## 1000 KWOK GPU nodes, 10,000 pods, baseline/scheduler/policy arms; prints the table (SCALE_NODES, SCALE_PODS)
	SCALE_NODES=$(SCALE_NODES) SCALE_PODS=$(SCALE_PODS) SCALE_STEADY=$(SCALE_STEADY) SCALE_PROFILE=$${SCALE_PROFILE:-1} \
		nice ./test/scale/run.sh

.PHONY: scale-smoke
scale-smoke: $(BIN_DIR)/dra-controller ## the scale benchmark's correctness checks at 50 nodes, 500 pods, policy arms (part of make e2e, ~2 min)
	SCALE_NODES=50 SCALE_PODS=500 SCALE_STEADY=100 SCALE_RATE=50 \
		SCALE_ARMS="c-binpack c-spread" ./test/scale/run.sh

.PHONY: e2e-cluster-up
e2e-cluster-up: build ## start (or reuse) the local e2e cluster with the driver installed
	./test/e2e/cluster.sh up
	./test/e2e/driver.sh install

.PHONY: e2e-cluster-down
e2e-cluster-down: ## stop the local e2e cluster and remove its state (the build cache stays)
	./test/e2e/cluster.sh down

.PHONY: clean
clean: ## remove build outputs
	rm -rf $(BIN_DIR)
	$(MAKE) -C vgpu-core clean

.PHONY: FORCE
FORCE:
