# kiln's build. GNU make; `make help` lists the targets.
#
# The binaries go to ./bin and nowhere else: bin/cc must never be installed
# on PATH, where it would shadow the system C compiler.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO       ?= go
BIN      := bin
SHARED   ?= ../shared
ONNXNODE := $(SHARED)/onnx-node
SCOPE    := $(SHARED)/onnx-node.scope.tsv
ZOO      := $(SHARED)/zoo
FUZZTIME ?= 20s
BENCHTIME ?= 3
OUT      := out

# Ops kiln implements beyond the op set $(SCOPE) was computed for (it is
# shared and read-only): a test is in scope when the TSV marks it 'in', or
# when it uses one of these ops and all its ops are in scope.
SCOPE_ADDED := NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Adagrad Adam Momentum Gradient
IN_SCOPE = awk -F'\t' -v dir=$(ONNXNODE) -v added="$(SCOPE_ADDED)" \
	'BEGIN { n = split(added, a, " "); for (i = 1; i <= n; i++) { ok[a[i]] = 1; new[a[i]] = 1 } } \
	NR == FNR { if ($$2 == "in") { m = split($$3, o, ","); for (i = 1; i <= m; i++) ok[o[i]] = 1 }; next } \
	{ m = split($$3, o, ","); all = 1; uses = 0; for (i = 1; i <= m; i++) { all = all && ok[o[i]]; uses = uses || new[o[i]] } \
	  if ($$2 == "in" || all && uses) print dir "/" $$1 }' $(SCOPE) $(SCOPE)

# Packages whose code is concurrent: also tested with the race detector.
RACE_PKGS := ./runtime/... ./ir/ops ./internal/conformance ./internal/trainer ./internal/serve

.PHONY: help build build-arm64 build-cuda deps deps-cuda deps-cuda-headers test fuzz fuzz-long conformance conformance-aarch64 conformance-cuda-sim bench demo clean proto lib lib-test

help: ## list the targets
	@echo "kiln — make TARGET"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'
	@echo "Variables: FUZZTIME=$(FUZZTIME) (per fuzz target), BENCHTIME=$(BENCHTIME) (seconds per benchmark), SHARED=$(SHARED) (test models)."

build: ## build bin/cc and bin/infer (CGO_ENABLED=0; installs nothing)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/cc ./cmd/cc
	CGO_ENABLED=0 $(GO) build -o $(BIN)/infer ./cmd/infer

# CUDA tools from Debian non-free, unpacked with dpkg -x into CUDA_DIR without
# their dependencies (the driver is not needed to compile): deps-cuda gets
# ptxas (nvidia-cuda-toolkit, 84 MB), so cc build --target cuda embeds
# cubins; deps-cuda-headers gets cuda.h and libcuda's link stub
# (nvidia-cuda-dev, 774 MB, not in CI) for go build -tags cuda.
CUDA_DIR ?= /opt/kiln-cuda
CUDA_APT  = -o Dir::Etc::sourcelist=$(CUDA_DIR)/apt/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$(CUDA_DIR)/apt/lists -o Dir::Cache=$(CUDA_DIR)/apt/cache
CUDA_TAGS_ENV = CGO_CFLAGS="-I$(CUDA_DIR)/usr/include" CGO_LDFLAGS="-L$(CUDA_DIR)/usr/lib/x86_64-linux-gnu/stubs"

deps-cuda: ## unpack ptxas (Debian non-free nvidia-cuda-toolkit, without dependencies) into CUDA_DIR, for cubins
	@if [ -x $(CUDA_DIR)/usr/bin/ptxas ] || command -v ptxas >/dev/null; then echo "ok: ptxas"; exit 0; fi; \
	mkdir -p $(CUDA_DIR)/apt/lists/partial $(CUDA_DIR)/apt/cache/archives/partial $(CUDA_DIR)/debs; \
	. /etc/os-release; echo "deb http://deb.debian.org/debian $${VERSION_CODENAME:-bookworm} main contrib non-free" > $(CUDA_DIR)/apt/sources.list; \
	apt-get $(CUDA_APT) update >/dev/null; \
	cd $(CUDA_DIR)/debs && apt-get $(CUDA_APT) download nvidia-cuda-toolkit && dpkg -x nvidia-cuda-toolkit_*.deb $(CUDA_DIR) && rm -f nvidia-cuda-toolkit_*.deb; \
	$(CUDA_DIR)/usr/bin/ptxas --version | tail -1

deps-cuda-headers: deps-cuda ## unpack cuda.h and libcuda's link stub (nvidia-cuda-dev, 774 MB) into CUDA_DIR, for go build -tags cuda
	@if [ -f $(CUDA_DIR)/usr/include/cuda.h ]; then echo "ok: cuda.h"; exit 0; fi; \
	cd $(CUDA_DIR)/debs && apt-get $(CUDA_APT) download nvidia-cuda-dev && \
	dpkg-deb --fsys-tarfile nvidia-cuda-dev_*.deb | tar -x -C $(CUDA_DIR) ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so && rm -f nvidia-cuda-dev_*.deb; \
	echo "build the CUDA runtime with: $(CUDA_TAGS_ENV) go build -tags cuda ./..."

build-cuda: deps-cuda-headers ## bin/cuda/infer: infer with the CUDA runtime (cgo, -tags cuda; runs where libcuda.so.1, the NVIDIA driver, is installed)
	$(CUDA_TAGS_ENV) $(GO) build -tags cuda -o $(BIN)/cuda/infer ./cmd/infer

build-arm64: ## build bin/linux_arm64/infer (GOARCH=arm64 CGO_ENABLED=0): runs aarch64 engines on the device, or here under qemu
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o $(BIN)/linux_arm64/infer ./cmd/infer

deps: ## check Go, LLVM 14 (llc) and a linker; install the tools with apt-get when root
	@.ci/deps

test: ## gofmt check, go vet, go test ./..., go test -race on the concurrent packages
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt: these files are not formatted (run gofmt -w):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -timeout 30m ./...
	@if [ "$$($(GO) env CGO_ENABLED)" = 1 ] && command -v "$$($(GO) env CC)" >/dev/null; then \
		echo "$(GO) test -race $(RACE_PKGS)"; $(GO) test -race $(RACE_PKGS); \
	else \
		echo "skipping go test -race: it needs cgo and a C compiler (make deps installs gcc)"; \
	fi

fuzz: ## run every fuzz target (FuzzRead, FuzzParse, ...) for FUZZTIME each
	@for file in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "$(GO) test -run '^\$$' -fuzz '^$$target\$$' -fuzztime $(FUZZTIME) ./$$(dirname $${file#./})"; \
			GO=$(GO) .ci/fuzz-one "$$target" ./$$(dirname $${file#./}) $(FUZZTIME); \
		done; \
	done

fuzz-long: ## every fuzz target for 10 minutes each (FUZZTIME=10m); what one finds lands in its testdata/fuzz
	@$(MAKE) --no-print-directory fuzz FUZZTIME=10m

conformance: build ## the reference executor on ONNX's node tests (those in scope) and the zoo models
	@status=0; \
	if [ -d $(ONNXNODE) ] && [ -f $(SCOPE) ]; then \
		echo "== bin/cc test: the tests in $(ONNXNODE) that $(SCOPE) marks 'in', and those of the ops in SCOPE_ADDED"; \
		$(BIN)/cc test $$($(IN_SCOPE)) || status=1; \
		echo "== bin/cc test --backend cpu: the same tests through compiled engines (ops the CPU backend lacks are skipped)"; \
		$(BIN)/cc test --backend cpu $$($(IN_SCOPE)) || status=1; \
	else \
		echo "skipping ONNX node tests: $(ONNXNODE) or $(SCOPE) is absent"; \
	fi; \
	if [ -d $(ZOO) ]; then \
		echo "== bin/cc test --rel-l2 1e-4 $(ZOO)"; \
		$(BIN)/cc test --rel-l2 1e-4 $(ZOO) || status=1; \
		echo "== bin/cc test --backend cpu --rel-l2 1e-4 $(ZOO)"; \
		$(BIN)/cc test --backend cpu --rel-l2 1e-4 $(ZOO) || status=1; \
		echo "== bin/cc test --backend cuda-sim --rel-l2 1e-4 $(ZOO): the CUDA kernels, run on the CPU"; \
		$(BIN)/cc test --backend cuda-sim --rel-l2 1e-4 $(ZOO) || status=1; \
	else \
		echo "skipping the zoo models: $(ZOO) is absent"; \
	fi; \
	exit $$status

conformance-aarch64: build build-arm64 ## the node tests in scope and the zoo through aarch64 engines, run by the arm64 infer under qemu (not in CI: ~5 minutes)
	@status=0; \
	if [ -d $(ONNXNODE) ] && [ -f $(SCOPE) ]; then \
		echo "== bin/cc test --backend aarch64: the node tests in scope"; \
		$(BIN)/cc test --backend aarch64 $$($(IN_SCOPE)) || status=1; \
	else \
		echo "skipping ONNX node tests: $(ONNXNODE) or $(SCOPE) is absent"; \
	fi; \
	if [ -d $(ZOO) ]; then \
		echo "== bin/cc test --backend aarch64 --cpu cortex-a76 --rel-l2 1e-4 $(ZOO)"; \
		$(BIN)/cc test --backend aarch64 --cpu cortex-a76 --rel-l2 1e-4 $(ZOO) || status=1; \
	else \
		echo "skipping the zoo models: $(ZOO) is absent"; \
	fi; \
	exit $$status

conformance-cuda-sim: build ## the node tests in scope and the zoo through CUDA kernels run on the CPU (cuda-sim; the node tests are not in CI: ~5 minutes)
	@status=0; \
	if [ -d $(ONNXNODE) ] && [ -f $(SCOPE) ]; then \
		echo "== bin/cc test --backend cuda-sim: the node tests in scope"; \
		$(BIN)/cc test --backend cuda-sim $$($(IN_SCOPE)) || status=1; \
	else \
		echo "skipping ONNX node tests: $(ONNXNODE) or $(SCOPE) is absent"; \
	fi; \
	if [ -d $(ZOO) ]; then $(BIN)/cc test --backend cuda-sim --rel-l2 1e-4 $(ZOO) || status=1; fi; \
	exit $$status

bench: ## kiln vs ONNX Runtime on the float32 zoo models and the generated ones (internal/benchmodels) in FP32 and INT8 (kiln's QDQ export in both), 1 and 2 threads (not part of CI)
	@if [ ! -d $(ZOO) ]; then echo "skipping make bench: $(ZOO) is absent"; exit 0; fi; \
	if ! command -v node >/dev/null; then echo "skipping make bench: node is absent (ONNX Runtime runs in Node.js)"; exit 0; fi; \
	if ! command -v llc >/dev/null && ! command -v llc-14 >/dev/null; then echo "skipping make bench: llc is absent (make deps)"; exit 0; fi; \
	$(MAKE) --no-print-directory build $(BENCHMODELS)/.stamp; \
	$(GO) run ./internal/bench --zoo $(ZOO) --extra $(BENCHMODELS) --bin $(BIN) --ort $(SHARED)/tools/ort/ort_bench.js --duration $(BENCHTIME)

# The generated benchmark models (internal/benchmodels: architecture families
# the zoo lacks), written once and again only when the generator changes.
BENCHMODELS := $(OUT)/benchmodels
$(BENCHMODELS)/.stamp: $(filter-out %_test.go,$(wildcard internal/benchmodels/*.go))
	$(GO) run ./internal/benchmodels -o $(BENCHMODELS)
	@touch $@

demo: deps build ## inspect, convert and test the bundled models, compile them to engines, check and benchmark them; then INT8: calibrate, compile, compare with FP32
	@mkdir -p $(OUT)/demo
	@echo '$$ bin/cc inspect testdata/models/digits_mlp.onnx'
	@$(BIN)/cc inspect testdata/models/digits_mlp.onnx
	@echo
	@echo '$$ bin/cc convert testdata/models/digits_mlp.onnx $(OUT)/demo/digits_mlp.onnxtxt'
	@$(BIN)/cc convert testdata/models/digits_mlp.onnx $(OUT)/demo/digits_mlp.onnxtxt
	@echo '$$ cut -c -120 $(OUT)/demo/digits_mlp.onnxtxt'
	@cut -c -120 $(OUT)/demo/digits_mlp.onnxtxt
	@echo '$$ bin/cc convert $(OUT)/demo/digits_mlp.onnxtxt $(OUT)/demo/digits_mlp.onnx'
	@$(BIN)/cc convert $(OUT)/demo/digits_mlp.onnxtxt $(OUT)/demo/digits_mlp.onnx
	@diff <($(BIN)/cc inspect testdata/models/digits_mlp.onnx | tail -n +2) <($(BIN)/cc inspect $(OUT)/demo/digits_mlp.onnx | tail -n +2) >/dev/null && \
		echo "(the round trip gives the same model)"
	@echo
	@echo '$$ bin/cc test testdata/models'
	@$(BIN)/cc test testdata/models
	@for m in digits_mlp digits_cnn; do \
		echo; \
		echo "\$$ bin/cc build --time-passes testdata/models/$$m.onnx -o $(OUT)/demo/$$m.kiln"; \
		$(BIN)/cc build --time-passes testdata/models/$$m.onnx -o $(OUT)/demo/$$m.kiln; \
		echo "\$$ bin/infer check $(OUT)/demo/$$m.kiln --test-data testdata/models/$$m/test_data_set_0"; \
		$(BIN)/infer check $(OUT)/demo/$$m.kiln --test-data testdata/models/$$m/test_data_set_0; \
		echo "\$$ bin/infer bench $(OUT)/demo/$$m.kiln --threads 1 --duration 1"; \
		$(BIN)/infer bench $(OUT)/demo/$$m.kiln --threads 1 --duration 1; \
	done
	@echo
	@echo "== INT8: calibrate on 32 training images, compile, and compare with FP32 on the 360 held-out test images"
	@for m in digits_cnn:x digits_mlp:x_flat; do \
		name=$${m%%:*}; x=$${m##*:}; \
		echo; \
		echo "\$$ bin/cc build --precision int8 --calib testdata/data/digits_calib/$$x.pb testdata/models/$$name.onnx -o $(OUT)/demo/$$name.int8.kiln"; \
		$(BIN)/cc build --precision int8 --calib testdata/data/digits_calib/$$x.pb testdata/models/$$name.onnx -o $(OUT)/demo/$$name.int8.kiln || exit 1; \
		echo "\$$ bin/infer compare $(OUT)/demo/$$name.kiln $(OUT)/demo/$$name.int8.kiln --data testdata/data/digits_test/$$x.pb --labels testdata/data/digits_test/y.pb --threads 1 --html $(OUT)/demo/$$name.int8.html"; \
		$(BIN)/infer compare $(OUT)/demo/$$name.kiln $(OUT)/demo/$$name.int8.kiln --data testdata/data/digits_test/$$x.pb --labels testdata/data/digits_test/y.pb --threads 1 --html $(OUT)/demo/$$name.int8.html || exit 1; \
	done
	@echo
	@echo "(charts of each comparison: $(OUT)/demo/digits_cnn.int8.html, $(OUT)/demo/digits_mlp.int8.html)"

# libkiln: the runtime as a C library, the only cgo in kiln (infer and the
# runtime build with CGO_ENABLED=0). kiln.h is the API; the header cgo
# writes beside the library (Go's types) is removed.
lib: ## build bin/libkiln.so and bin/kiln.h: kiln's runtime as a C library (needs cgo and gcc)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -o $(BIN)/libkiln.so ./bindings/c
	rm -f $(BIN)/libkiln.h
	cp bindings/c/kiln.h $(BIN)/kiln.h

lib-test: lib build ## build libkiln and the C and Python examples, classify a digit with both; the C answer must equal infer run's
	@mkdir -p $(OUT)/lib-test
	$(BIN)/cc build testdata/models/digits_mlp.onnx -o $(OUT)/lib-test/digits_mlp.kiln
	gcc -Wall -Wextra -Werror -O2 -I $(BIN) bindings/c/example/digit.c -L $(BIN) -lkiln -Wl,-rpath,$(abspath $(BIN)) -o $(OUT)/lib-test/digit
	$(OUT)/lib-test/digit $(OUT)/lib-test/digits_mlp.kiln bindings/c/example/digit_2.npy | tee $(OUT)/lib-test/c.txt
	python3 bindings/c/example/digit.py $(BIN)/libkiln.so $(OUT)/lib-test/digits_mlp.kiln bindings/c/example/digit_2.npy | tee $(OUT)/lib-test/python.txt
	diff $(OUT)/lib-test/c.txt $(OUT)/lib-test/python.txt
	$(BIN)/infer run $(OUT)/lib-test/digits_mlp.kiln --input input=bindings/c/example/digit_2.npy --threads 1
	@echo "the C and Python examples agree; now on ten held-out digits against infer run --output-dir, bit for bit:"
	CGO_ENABLED=1 $(GO) test -count=1 -v -run TestExamples ./bindings/c

# The KServe v2 gRPC stubs are generated from the vendored .proto and
# committed, so builds need no protoc; `make proto` regenerates them with
# the plugin versions pinned here (protoc from apt's protobuf-compiler).
PROTO_DIR := internal/serve/inferencepb
PROTO_PKG := github.com/kiln-ml/kiln/$(PROTO_DIR)

proto: ## regenerate internal/serve/inferencepb's Go code from grpc_predict_v2.proto (needs protoc)
	@command -v protoc >/dev/null || { echo "make proto needs protoc: apt-get install -y protobuf-compiler"; exit 1; }
	GOBIN=$(abspath $(BIN)) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	GOBIN=$(abspath $(BIN)) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
	protoc -I $(PROTO_DIR) --plugin=protoc-gen-go=$(BIN)/protoc-gen-go --plugin=protoc-gen-go-grpc=$(BIN)/protoc-gen-go-grpc \
		--go_out=$(PROTO_DIR) --go_opt=paths=source_relative --go_opt=Mgrpc_predict_v2.proto=$(PROTO_PKG) \
		--go-grpc_out=$(PROTO_DIR) --go-grpc_opt=paths=source_relative --go-grpc_opt=Mgrpc_predict_v2.proto=$(PROTO_PKG) \
		grpc_predict_v2.proto

clean: ## remove bin/ and out/
	rm -rf $(BIN) $(OUT)
