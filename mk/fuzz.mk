# Fuzzing (issue 12): libFuzzer harnesses of every parser of untrusted
# bytes (tests/fuzz), built by clang in a build of their own, and
# schemathesis against docs/openapi.json on a live server.
#
#   make fuzz           every harness for FUZZ_SECONDS (default 60) each; prints the figures
#   make fuzz-ci        the same for 20 s each; fails on a crash, leak or timeout
#   make fuzz-api       schemathesis against a runbox-serve of this tree
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_CI_SECONDS ?= 20
# Scratch: what the fuzzers find (corpus, crashes, logs), never the repo.
FUZZ_WORK ?= $(FUZZ_BUILD)/work

DEBIAN_PACKAGES += clang libclang-rt-14-dev

.PHONY: fuzz fuzz-ci fuzz-build fuzz-api

fuzz-build: export CC := clang
fuzz-build:
	$(call locked_cmake,$(FUZZ_BUILD),-DCMAKE_BUILD_TYPE=Debug -DRBX_FUZZ=ON,--target fuzz-harnesses)

# The table also goes to bench/out/fuzz.md, which make bench puts into
# bench/RESULTS.md.
fuzz: fuzz-build
	mkdir -p bench/out
	{ echo "\`make fuzz\`, $(FUZZ_SECONDS) s a harness, $$(date -u '+%Y-%m-%d %H:%M UTC'), main $$(git rev-parse --short HEAD 2>/dev/null):"; \
	  echo; tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_WORK); } > bench/out/fuzz.md.new; \
	status=$$?; cat bench/out/fuzz.md.new; mv bench/out/fuzz.md.new bench/out/fuzz.md; exit $$status

# The harnesses alone: `make test` runs fuzz-api as a stage of its own, in the lane of the
# suites that count the host's runbox cgroups (tests/ci/stages.py), since its server makes them.
fuzz-ci: fuzz-build
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_CI_SECONDS) $(FUZZ_WORK)

# schemathesis from PyPI in a venv of its own (the 4.x line runs on Debian's
# Python 3.11), against runbox-serve of the normal build on a free loopback
# port with a state directory of its own. Every execution it sends really
# runs, so examples are few and timeouts short (tests/fuzz/api.sh).
SCHEMATHESIS_VERSION ?= 4.32.5
FUZZ_API_VENV ?= $(FUZZ_BUILD)/venv
FUZZ_API_EXAMPLES ?= 25

.PHONY: fuzz-api-venv
fuzz-api-venv: $(FUZZ_API_VENV)/bin/schemathesis

$(FUZZ_API_VENV)/bin/schemathesis:
	/usr/bin/python3 -m venv $(FUZZ_API_VENV)
	$(FUZZ_API_VENV)/bin/pip install -q schemathesis==$(SCHEMATHESIS_VERSION)

fuzz-api: build $(FUZZ_API_VENV)/bin/schemathesis
	tests/fuzz/api.sh $(BUILD) $(FUZZ_API_VENV)/bin/schemathesis $(FUZZ_API_EXAMPLES) $(FUZZ_WORK)/api
