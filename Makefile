# Two commands matter: `make run` and `make test`. Like plain `make` (which builds
# build/dtrain), both install missing Debian packages first (scripts/install-deps.sh;
# as another user than root it names the missing ones and the command), then build with
# CMake. CTEST_ARGS passes on to both halves of make test (e.g. CTEST_ARGS="-R scale").
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local

.PHONY: all deps run test bench format clean install

all: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# make install [PREFIX=/usr/local] [DESTDIR=stage]: bin/dtrain, lib/libdtrain.a,
# include/dtrain/*.h (the public headers), lib/pkgconfig/dtrain.pc
install: all
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

deps:
	scripts/install-deps.sh

# make run again: configs measured before are kept, those flagged busy measured again;
# FORCE=1 runs every config again (dtrain scale --force), WAIT_IDLE=1 waits for a
# quiet machine before each run (--wait-idle).
run: all
	FORCE=$(FORCE) WAIT_IDLE=$(WAIT_IDLE) scripts/main-job.sh $(BUILD)/dtrain

# Both halves run whatever the first gives; make test fails if either failed.
test: all
	@release=passed; sanitized=passed; \
	(cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)) || release=FAILED; \
	(cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DDT_SANITIZE=ON >/dev/null && \
	 cmake --build $(BUILD_ASAN) -j $(JOBS) && \
	 cd $(BUILD_ASAN) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)) || sanitized=FAILED; \
	echo "make test: release build $$release, ASan + UBSan build $$sanitized"; \
	[ $$release = passed ] && [ $$sanitized = passed ]

bench: all
	scripts/install-deps.sh --bench
	bench/compare_torch.sh $(BUILD)/dtrain
	PRECISION=bf16 bench/compare_torch.sh $(BUILD)/dtrain 2 lenet5 resnet18
	bench/int8_compare.sh $(BUILD)/dtrain

format:
	scripts/install-deps.sh --dev
	clang-format -i include/dtrain/*.h src/*/*.h src/*/*.c tests/*.c

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
