# rudder — kubebuilder-style Makefile. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN        ?= $(CURDIR)/bin
DEV_DIR    ?= $(BIN)/dev
KUBECONFIG_DEV := $(DEV_DIR)/kubeconfig
IMG        ?= rudder:dev
# VERSION is what `rudder version` prints: the commit, described by its nearest tag.
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null)
GOFLAGS_BUILD := -trimpath -ldflags "-s -w -X github.com/rudder-operator/rudder/internal/cli.version=$(VERSION)"
export RUDDER_BIN_DIR := $(BIN)

.DEFAULT_GOAL := help

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development
.PHONY: tools
tools: ## Build the pinned control plane and dev tools into bin/ (only what is missing or stale).
	@hack/tools/build.sh

.PHONY: manifests
manifests: tools ## Generate CRDs from api/ into config/crd/bases, and the charts/watches ConfigMaps of config/default.
	$(BIN)/controller-gen crd:generateEmbeddedObjectMeta=true paths=./api/... output:crd:artifacts:config=config/crd/bases
	go run ./hack/genconfig

.PHONY: generate
generate: tools ## Generate DeepCopy methods for api/.
	$(BIN)/controller-gen object paths=./api/...

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: lint
lint: tools vet ## Lint the code: gofmt, go vet, golangci-lint (hack/golangci.yml: Helm's SDK in four packages, 140 columns), the docs' references (hack/docrefs).
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(BIN)/golangci-lint run --config hack/golangci.yml ./...
	go test -count=1 ./hack/docrefs/
	@long=$$(for f in $$(git ls-files '*.go' | grep -v '_test\.go$$\|zz_generated'); do \
		n=$$(wc -l < $$f); [ $$n -le 400 ] || echo "  $$f: $$n lines"; done); \
	test -z "$$long" || { echo "source files over 400 lines (docs/development.md, "Code style"):"; echo "$$long"; exit 1; }

SAMPLES := config/samples/operator_v1alpha1_nginxoperator.yaml config/samples/cnat_v1alpha1_at.yaml config/samples/apps_v1_application.yaml

.PHONY: lint-charts
lint-charts: build ## rudder lint: watches.yaml, every chart (Helm's lint, strict) and the samples.
	$(BIN)/rudder lint --watches-file watches.yaml $(SAMPLES)

.PHONY: test-templates
test-templates: build ## Golden-file tests of what rudder applies for CRs (hack/template-test.sh; UPDATE=1 rewrites).
	hack/template-test.sh watches.yaml charts/testdata/template

.PHONY: test
test: tools lint lint-charts test-templates ## Run unit and integration tests (real control plane from bin/).
	go test -count=1 -timeout 25m ./...

.PHONY: bench
bench: tools ## Run the benchmarks (convergence, idle resync, memory, live reload) on a real control plane; report in bin/bench.txt.
	go test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 60m ./internal/bench/ | tee $(BIN)/bench.txt

.PHONY: bench-scale
# HEADLESS=1 makes the fleet's Services headless: the API server then allocates no ClusterIP,
# whose cost per Service grows with the Services of the cluster (docs/bench.md, "Scale").
bench-scale: tools ## The fleet at 1,000, 2,000 and 10,000 CRs (and 10,000 over 100 namespaces), Services with a ClusterIP (HEADLESS=1: headless); report in bin/bench-scale.txt (about 40 minutes).
	RUDDER_BENCH_SCALE_HEADLESS=$(HEADLESS) RUDDER_BENCH_SCALE=1000,2000,10000,10000/100 go test -count=1 -run '^$$' -bench BenchmarkScale -benchtime 1x -timeout 90m ./internal/bench/ | tee $(BIN)/bench-scale.txt

##@ Build
.PHONY: build
build: ## Build bin/rudder.
	CGO_ENABLED=0 go build $(GOFLAGS_BUILD) -o $(BIN)/rudder .

.PHONY: run
run: build ## Run rudder from source against the dev cluster (make dev-cluster).
	$(BIN)/rudder --kubeconfig $(KUBECONFIG_DEV) --watches-file ./watches.yaml --metrics-bind-address 127.0.0.1:18080 --metrics-secure=false --health-probe-bind-address :18081

.PHONY: docker-build
docker-build: ## Build the image (needs a Docker engine).
	docker build -t $(IMG) .

##@ Local cluster
.PHONY: dev-cluster
dev-cluster: ## Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok; kubeconfig in bin/dev/kubeconfig.
	@hack/tools/build.sh $(DEMO_TOOLS)
	@hack/dev-cluster.sh up

.PHONY: dev-cluster-down
dev-cluster-down: ## Stop the dev cluster and everything started with it.
	@hack/dev-cluster.sh down

.PHONY: demo
DEMO_TOOLS := etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm

demo: build ## Bring up the dev cluster, run rudder, apply the samples, show the results and a live chart reload.
	@hack/tools/build.sh $(DEMO_TOOLS)
	@hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop the demo: rudder and the dev cluster.
	@hack/demo.sh down

##@ Deployment
.PHONY: install
install: manifests ## Install the CRDs into the cluster of $KUBECONFIG.
	$(BIN)/kubectl apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRDs.
	$(BIN)/kubectl delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: manifests ## Deploy rudder (config/default, image $IMG) to the cluster of $KUBECONFIG.
	$(BIN)/kubectl kustomize config/default | sed 's|image: rudder:dev$$|image: $(IMG)|' | $(BIN)/kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove rudder's deployment.
	$(BIN)/kubectl delete --ignore-not-found -k config/default
