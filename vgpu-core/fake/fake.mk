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

# fake.mk - the fake CUDA driver (libcuda.so.1), the fake NVML
# (libnvidia-ml.so.1), cuda-probe and their tests.
#
# Included by vgpu-core/Makefile; also usable alone from vgpu-core/:
#   make -f fake/fake.mk fakes cuda-probe fake-test
#
#   fakes       build/fake/libcuda.so.1, build/fake/libnvidia-ml.so.1 (+ .so links)
#   cuda-probe  build/cuda-probe
#   fake-test   C tests of both fakes and cuda-probe, normal and ASan+UBSan

FAKE_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

CC ?= gcc
BUILD ?= build
OPT ?= -O2 -g
CFLAGS_BASE ?= -std=gnu11 -D_GNU_SOURCE -fPIC -Iinclude \
	-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
SAN ?= -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# -fno-ipa-icf: every exported variant (cuLaunchKernel, cuLaunchKernel_ptsz...)
# must keep its own address, so dladdr() names the exact variant.
FAKE_CFLAGS := $(CFLAGS_BASE) -I$(FAKE_DIR) -fno-ipa-icf
FAKE_COMMON := $(FAKE_DIR)/fake_config.c $(FAKE_DIR)/fake_state.c $(FAKE_DIR)/fake_gpu.c \
	$(FAKE_DIR)/fake_mig.c $(FAKE_DIR)/fake_mig_state.c $(FAKE_DIR)/fake_fdscan.c
FAKE_HDRS := $(wildcard $(FAKE_DIR)/*.h) include/vgpu_cuda.h include/vgpu_nvml.h
FAKE_CUDA_SRCS := $(FAKE_DIR)/fake_cuda.c $(FAKE_DIR)/fake_cuda_stream.c $(FAKE_DIR)/fake_cuda_mem.c \
	$(FAKE_DIR)/fake_cuda_host.c $(FAKE_DIR)/fake_cuda_procaddr.c $(FAKE_COMMON)
FAKE_NVML_SRCS := $(FAKE_DIR)/fake_nvml.c $(FAKE_DIR)/fake_nvml_mig.c $(FAKE_COMMON)
# -Bsymbolic: like the real driver, the fakes' own references (the
# cuGetProcAddress table, internal calls) bind to their own definitions,
# never to a preloaded library's functions of the same name.
FAKE_LDFLAGS := -shared -Wl,-Bsymbolic -Wl,-z,noexecstack -lpthread -lm

.PHONY: fakes cuda-probe fake-test

fakes: $(BUILD)/fake/libcuda.so.1 $(BUILD)/fake/libnvidia-ml.so.1 \
	$(BUILD)/fake/libcuda.so $(BUILD)/fake/libnvidia-ml.so

cuda-probe: $(BUILD)/cuda-probe

# Fake libraries for directory D (build/fake or build/fake-san) with flags F.
define fake_libs
$(1)/libcuda.so.1: $$(FAKE_CUDA_SRCS) $$(FAKE_HDRS) $$(FAKE_DIR)/fake_cuda.map
	@mkdir -p $$(@D)
	$$(CC) $$(FAKE_CFLAGS) $(2) -o $$@ $$(FAKE_CUDA_SRCS) -Wl,-soname,libcuda.so.1 \
		-Wl,--version-script=$$(FAKE_DIR)/fake_cuda.map $$(FAKE_LDFLAGS)

$(1)/libnvidia-ml.so.1: $$(FAKE_NVML_SRCS) $$(FAKE_HDRS) $$(FAKE_DIR)/fake_nvml.map
	@mkdir -p $$(@D)
	$$(CC) $$(FAKE_CFLAGS) $(2) -o $$@ $$(FAKE_NVML_SRCS) -Wl,-soname,libnvidia-ml.so.1 \
		-Wl,--version-script=$$(FAKE_DIR)/fake_nvml.map $$(FAKE_LDFLAGS)

$(1)/libcuda.so: $(1)/libcuda.so.1
	ln -sf libcuda.so.1 $$@

$(1)/libnvidia-ml.so: $(1)/libnvidia-ml.so.1
	ln -sf libnvidia-ml.so.1 $$@
endef

$(eval $(call fake_libs,$(BUILD)/fake,$(OPT)))
$(eval $(call fake_libs,$(BUILD)/fake-san,-O1 -g $(SAN)))

$(BUILD)/cuda-probe: tools/cuda-probe.c include/vgpu_cuda.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) $(OPT) -o $@ tools/cuda-probe.c -ldl

$(BUILD)/fake-san/cuda-probe: tools/cuda-probe.c include/vgpu_cuda.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_BASE) -O1 -g $(SAN) -o $@ tools/cuda-probe.c -ldl

# The test links both fakes as a -lcuda -lnvidia-ml application would, and
# runs cuda-probe (from the same directory set) as a second process.
FAKE_TEST_SRCS := $(FAKE_DIR)/test/fake_test.c $(FAKE_DIR)/fake_config.c $(FAKE_DIR)/fake_state.c \
	$(FAKE_DIR)/fake_mig.c $(FAKE_DIR)/fake_mig_state.c \
	$(FAKE_DIR)/fake_gpu.c $(FAKE_DIR)/fake_fdscan.c
FAKE_TEST_DEPS := $(FAKE_TEST_SRCS) test/check.h $(FAKE_HDRS)

define fake_test
$(1)/fake_test: $$(FAKE_TEST_DEPS) $(1)/libcuda.so $(1)/libnvidia-ml.so
	$$(CC) $$(FAKE_CFLAGS) -Itest $(2) -o $$@ $$(FAKE_TEST_SRCS) -L$(1) \
		-Wl,-rpath,$$(abspath $(1)) -lcuda -lnvidia-ml -ldl -lpthread -lm
endef

$(eval $(call fake_test,$(BUILD)/fake,-O1 -g))
$(eval $(call fake_test,$(BUILD)/fake-san,-O1 -g $(SAN)))

# The MIG model's tests (fake NVML MIG, CUDA view of a MIG instance), linked the same way.
FAKE_MIG_TEST_SRCS := $(FAKE_DIR)/test/fake_mig_test.c $(FAKE_DIR)/fake_config.c \
	$(FAKE_DIR)/fake_state.c $(FAKE_DIR)/fake_mig.c $(FAKE_DIR)/fake_mig_state.c $(FAKE_DIR)/fake_gpu.c \
	$(FAKE_DIR)/fake_fdscan.c

define fake_mig_test
$(1)/fake_mig_test: $$(FAKE_MIG_TEST_SRCS) test/check.h $$(FAKE_HDRS) $(1)/libcuda.so $(1)/libnvidia-ml.so
	$$(CC) $$(FAKE_CFLAGS) -Itest $(2) -o $$@ $$(FAKE_MIG_TEST_SRCS) -L$(1) \
		-Wl,-rpath,$$(abspath $(1)) -lcuda -lnvidia-ml -ldl -lpthread -lm
endef

$(eval $(call fake_mig_test,$(BUILD)/fake,-O1 -g))
$(eval $(call fake_mig_test,$(BUILD)/fake-san,-O1 -g $(SAN)))

# The fakes look for device nodes in a directory of the tests' own (absent:
# every GPU visible), not the host's /dev.
fake-test: export VGPU_FAKE_DEV_DIR := $(abspath $(BUILD)/test-dev)
fake-test: $(BUILD)/fake/fake_test $(BUILD)/cuda-probe $(BUILD)/fake-san/fake_test \
		$(BUILD)/fake-san/cuda-probe $(BUILD)/fake/fake_mig_test $(BUILD)/fake-san/fake_mig_test
	FAKE_TEST_PROBE=$(abspath $(BUILD)/cuda-probe) FAKE_TEST_LIBDIR=$(abspath $(BUILD)/fake) \
		$(BUILD)/fake/fake_test
	FAKE_TEST_PROBE=$(abspath $(BUILD)/fake-san/cuda-probe) \
		FAKE_TEST_LIBDIR=$(abspath $(BUILD)/fake-san) \
		$(BUILD)/fake-san/fake_test
	$(BUILD)/fake/fake_mig_test
	$(BUILD)/fake-san/fake_mig_test
