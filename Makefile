# pg_gpu: PGXS for src/*.c and the compute layer's C (cuda/*.c, cuda/cpu/*.c),
# nvcc for the CUDA backend (cuda/gpu/*.cu).
#
#   make                 build (CUDA backend when nvcc is found, else CPU only)
#   make WITH_CUDA=0     CPU-only build
#   make install         install into the PostgreSQL that pg_config names
#   make unit            build and run the compute-layer unit tests
#   make installcheck    pg_regress against a running server
#   make gpu-check       the GPU suite (tests/gpu/gpu-check.sh), on a machine with a GPU

MODULE_big = pg_gpu
MODULEDIR  = extension
DATA       = extension/pg_gpu.control $(wildcard extension/pg_gpu--*.sql)
REGRESS    = $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=.
EXTRA_CLEAN = tests/unit/unit_compute tests/bench/bench_matmul tests/lab/tc_check tests/gpu/gpu_hog tests/gpu/gpu_resources tests/fuzz/fuzz_compute cuda/*.o cuda/cpu/*.o cuda/gpu/*.o src/*.o results regression.diffs regression.out

CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard $(CUDA_HOME)/bin/nvcc))
WITH_CUDA ?= $(if $(NVCC),1,0)
# Hopper machine code plus PTX that newer GPUs JIT-compile.
NVCC_ARCH ?= -gencode arch=compute_90,code=[sm_90,compute_90]
NVCC_FLAGS = -O3 -std=c++17 -Xcompiler -fPIC $(NVCC_ARCH) -DPGGPU_MIN_CC=90 -Icuda

# OpenBLAS (Debian's libopenblas-dev) for the CPU matrix product
BLAS_CFLAGS ?= $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   ?= $(or $(shell pkg-config --libs openblas 2>/dev/null),-lopenblas)

# the compute layer: the driver and the route planner, the CPU backend, and
# the CUDA backend (one file a concern: cuda/gpu/common.cuh lists them) or
# its stand-in
COMPUTE_OBJS = cuda/dataset.o cuda/matmul.o cuda/compute.o cuda/fit.o cuda/hier.o cuda/seed.o cuda/columns.o cuda/parts.o cuda/farthest.o cuda/sample.o cuda/together.o cuda/route.o cuda/cpu/kmeans.o cuda/cpu/pass.o cuda/cpu/rows.o cuda/cpu/trials.o cuda/cpu/columns.o cuda/cpu/blocks.o cuda/cpu/gemm.o cuda/cpu/matmul.o cuda/knn.o cuda/cpu/knn.o
GPU_OBJS = $(patsubst %.cu,%.o,$(sort $(wildcard cuda/gpu/*.cu)))
ifeq ($(WITH_CUDA),1)
COMPUTE_OBJS += $(GPU_OBJS)
CUDA_LIBS = -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++ -ldl -lrt -lpthread
else
COMPUTE_OBJS += cuda/gpu/stand_in.o
CUDA_LIBS =
endif

OBJS = src/pg_gpu.o src/compat.o src/read.o src/unusable.o src/rows.o src/vector.o src/scan.o src/kmeans.o src/matmul.o src/matrix_table.o src/info.o src/support.o src/model.o src/predict.o src/progress.o src/relation.o src/gpus.o src/citus.o src/citus_kmeans.o src/citus_matmul.o src/citus_node.o src/sample.o src/kmeans_args.o src/weights.o src/keys.o src/knn.o src/transform.o $(COMPUTE_OBJS)
# libpq: the coordinator of a Citus cluster talks to its nodes (src/citus.c)
PG_CPPFLAGS = -Icuda $(BLAS_CFLAGS) -I$(libpq_srcdir)
# identical floating-point rounding on CPU and GPU: no contraction into FMA
PG_CFLAGS = -ffp-contract=off
# OpenBLAS is loaded on first use (cuda/cpu/matmul.c): not linked into the library
SHLIB_LINK_INTERNAL = $(libpq)
SHLIB_LINK = $(CUDA_LIBS) -ldl -lm

# nvcc objects have no LLVM bitcode; skip the JIT bitcode step
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

COMPUTE_H = cuda/compute_internal.h cuda/half.h cuda/pg_gpu_compute.h cuda/route.h
cuda/gpu/%.o: cuda/gpu/%.cu $(wildcard cuda/gpu/*.cuh) cuda/gpu/tc_shapes.h $(COMPUTE_H)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@

# tc_resident's kernels keep every value in registers (a spilled variant is
# slower than tc_scan): ptxas fails the build on a spill
cuda/gpu/tc_resident.o: NVCC_FLAGS += -Xptxas -warn-spills,-Werror

cuda/dataset.o cuda/matmul.o cuda/compute.o cuda/fit.o cuda/hier.o cuda/seed.o cuda/columns.o cuda/parts.o cuda/farthest.o cuda/sample.o cuda/together.o cuda/route.o cuda/cpu/kmeans.o cuda/cpu/pass.o cuda/cpu/rows.o cuda/cpu/trials.o cuda/cpu/columns.o cuda/cpu/blocks.o cuda/cpu/gemm.o cuda/cpu/matmul.o cuda/knn.o cuda/cpu/knn.o cuda/gpu/stand_in.o: $(COMPUTE_H)
cuda/cpu/kmeans.o cuda/cpu/pass.o cuda/cpu/rows.o cuda/cpu/gemm.o: cuda/cpu/gemm.h
cuda/cpu/kmeans.o cuda/cpu/pass.o cuda/cpu/rows.o: cuda/cpu/state.h
cuda/cpu/kmeans.o cuda/cpu/pass.o: cuda/cpu/pass.h
cuda/cpu/kmeans.o cuda/cpu/pass.o cuda/cpu/rows.o cuda/cpu/trials.o cuda/cpu/blocks.o cuda/cpu/gemm.o cuda/cpu/knn.o: cuda/cpu/blocks.h
cuda/knn.o cuda/cpu/knn.o cuda/gpu/knn.o cuda/gpu/knn_tiles.o cuda/gpu/stand_in.o: cuda/knn.h
cuda/route.o: cuda/gpu/tc_shapes.h
# every object of src/ (taken from OBJS, so a new file cannot be left out)
$(filter src/%.o,$(OBJS)): src/pg_gpu.h src/compat.h cuda/pg_gpu_compute.h
$(patsubst %.c,%.o,$(shell grep -l '^\#include "citus.h"' src/*.c)): src/citus.h


# ---- unit tests of the compute layer (no PostgreSQL) ----
# tests/unit: one file a subject, sharing unit.h (common.c: bookkeeping, data, references)
UNIT_SRCS = $(sort $(wildcard tests/unit/*.c))
tests/unit/unit_compute: $(UNIT_SRCS) tests/unit/unit.h $(COMPUTE_OBJS) cuda/pg_gpu_compute.h
	$(CC) -O2 -std=gnu11 -Wall -ffp-contract=off -Icuda -Itests/unit -o $@ $(UNIT_SRCS) $(COMPUTE_OBJS) $(CUDA_LIBS) $(BLAS_LIBS) -lpthread -lm

.PHONY: unit
unit: tests/unit/unit_compute
	tests/unit/unit_compute $(UNIT_ARGS)

ifeq ($(WITH_CUDA),1)
BENCH_CUBLAS = -DBENCH_CUBLAS -I$(CUDA_HOME)/include -L$(CUDA_HOME)/lib64 -lcublas
endif
tests/bench/bench_matmul: tests/bench/bench_matmul.c $(COMPUTE_OBJS) cuda/pg_gpu_compute.h
	$(CC) -O2 -std=gnu11 -Wall -Icuda -o $@ tests/bench/bench_matmul.c $(COMPUTE_OBJS) $(BENCH_CUBLAS) $(CUDA_LIBS) $(BLAS_LIBS) -lm

# the lab (tests/lab): the tensor-core assignment against a float64 reference
# kernel, its shapes side by side (GPU only), built with the variants and
# hooks (PGGPU_TC_LAB) the library leaves out
TC_SRCS = cuda/gpu/tc_scan.cu cuda/gpu/tc_resident.cu cuda/gpu/tc_assign.cu
tests/lab/tc_check: tests/lab/tc_check.cu $(TC_SRCS) $(wildcard cuda/gpu/*.cuh) cuda/gpu/tc_shapes.h cuda/route.c cuda/route.h
	$(NVCC) -O3 -std=c++17 $(NVCC_ARCH) -DPGGPU_TC_LAB -Icuda -Icuda/gpu -o $@ tests/lab/tc_check.cu $(TC_SRCS) cuda/route.c

.PHONY: lab
lab: tests/lab/tc_check

tests/gpu/gpu_hog: tests/gpu/gpu_hog.c
	$(CC) -O2 -Wall -I$(CUDA_HOME)/include -o $@ $< -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lpthread

# libpq client of the GPU suite's resource checks (tests/gpu/gpu-check.sh)
tests/gpu/gpu_resources: tests/gpu/gpu_resources.c
	$(CC) -O2 -std=gnu11 -Wall -I$(shell $(PG_CONFIG) --includedir) -o $@ $< -L$(shell $(PG_CONFIG) --libdir) -lpq -lm

# The GPU suite: kernel grid, compute-sanitizer, pg_regress on the GPU,
# resource checks.  Exits non-zero on any failure.
.PHONY: gpu-check
gpu-check:
	tests/gpu/gpu-check.sh

# libFuzzer target over the compute layer (CPU backend), with ASan and UBSan:
# its C files (taken from COMPUTE_OBJS, so a new one cannot be left out)
FUZZ_SRCS = $(patsubst %.o,%.c,$(filter-out cuda/gpu/%,$(COMPUTE_OBJS))) cuda/gpu/stand_in.c
tests/fuzz/fuzz_compute: tests/fuzz/fuzz_compute.c $(FUZZ_SRCS) $(COMPUTE_H)
	clang -g -O1 -std=gnu11 -ffp-contract=off -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -Icuda $(BLAS_CFLAGS) -o $@ tests/fuzz/fuzz_compute.c $(FUZZ_SRCS) $(BLAS_LIBS) -lm

# ---- benchmark suite (tests/bench/run.sh; BENCHMARKS.md) ----
# bench_kernel: the compute layer on the suite's blobs (no database);
# bench_sql: the measurements through PostgreSQL (libpq).
BENCH_CFLAGS = -O2 -std=gnu11 -Wall -ffp-contract=off -fopenmp -Icuda -Itests/bench
ifeq ($(WITH_CUDA),1)
BENCH_CUDA = -DBENCH_CUDA -I$(CUDA_HOME)/include
endif
BENCH_COMMON = tests/bench/bench.c tests/bench/blobs.c
tests/bench/bench_kernel: tests/bench/kernel.c $(BENCH_COMMON) tests/bench/bench.h tests/bench/blobs.h $(COMPUTE_OBJS) cuda/pg_gpu_compute.h
	$(CC) $(BENCH_CFLAGS) $(BENCH_CUDA) -o $@ tests/bench/kernel.c $(BENCH_COMMON) $(COMPUTE_OBJS) $(CUDA_LIBS) $(BLAS_LIBS) -lm

tests/bench/bench_sql: tests/bench/sql.c $(BENCH_COMMON) tests/bench/bench.h tests/bench/blobs.h
	$(CC) $(BENCH_CFLAGS) -I$(shell $(PG_CONFIG) --includedir) -o $@ tests/bench/sql.c $(BENCH_COMMON) -L$(shell $(PG_CONFIG) --libdir) -lpq -lm

.PHONY: bench
bench:
	bash tests/bench/run.sh $(BENCH_ARGS)

EXTRA_CLEAN += tests/bench/bench_kernel tests/bench/bench_sql

# ---- the release archive (PGXN) ----
# make dist: pg_gpu-<META.json's version>.zip, the files git tracks at HEAD
# under pg_gpu-<version>/ (commit first: uncommitted changes are not in it)
DISTVERSION := $(shell sed -n 's/^   "version": "\([0-9.]*\)",$$/\1/p' META.json)
.PHONY: dist
dist:
	git archive --format zip --prefix=pg_gpu-$(DISTVERSION)/ -o pg_gpu-$(DISTVERSION).zip HEAD
	@echo pg_gpu-$(DISTVERSION).zip
