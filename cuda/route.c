/*
 * route.c - the plan of a Lloyd step on the GPU (route.h): which pass
 * labels, which sums, their shapes.  Every threshold here is a measurement
 * on the H100 (the figures beside each); the README's "How it works" has
 * the same table.  And the estimates of a step's time that choose how many
 * GPUs a k-means call uses (at the end).
 */
#include "route.h"
#include "pg_gpu_compute.h"

#include <stdio.h>
#include <string.h>

#include "gpu/tc_shapes.h"

#define DJ 32					/* lloyd_kernel: columns per centroid tile */
#define SMEM_SUMS_LIMIT (100 * 1024)	/* lloyd_kernel: per-block sums in shared memory up to this */
#define RESIDENT_LIMIT (64 * 1024)	/* lloyd_kernel: centroids stay in shared memory up to this */
#define STG_STRIDE 34			/* UPD_PRIVATE staging: doubles per column of a warp's rows */
#define WARPS (PGGPU_GPU_BLOCK / 32)
#define OWNED_BLOCKS_PER_SM 5	/* owned_update_kernel: blocks an SM (shared memory allows 5) */

/*
 * owned_update_kernel applies: 32 <= k <= BLOCK (its shares' counts fit;
 * gpu/owned_update.cu), d <= 32
 */
static bool
owned_ok(int k, int d)
{
	return k >= 32 && k <= PGGPU_GPU_BLOCK && d <= 32;
}

/* its chunk (2^lg rows: 512, 32 KB at d = 8; 256 beyond) and shared memory */
int
pggpu_owned_lg_r(int d)
{
	return d <= 8 ? 9 : 8;
}

size_t
pggpu_owned_smem(int k, int d)
{
	int			r = 1 << pggpu_owned_lg_r(d);

	return sizeof(double) * (size_t) d * r + sizeof(int) * ((size_t) WARPS * k + 2 * k) +
		sizeof(short) * 3 * (size_t) r;
}

/*
 * d > 32: a product (cuBLAS) labels from k = 64, like the tensor cores
 * below: on halves, copies of the rows and centroids, or (the user's
 * setting) in float64
 */
#define GEMM_MIN_K 64

/*
 * Against the float64 CUDA-core scan the tensor cores win from k = 64
 * (d >= 3) and k = 128 (d <= 2), up to d = TC_MAX_D (H100, N = 10^7,
 * tests/lab/tc_check --bench).
 */
static bool
tc_wanted(int k, int d)
{
	return d >= 1 && d <= TC_MAX_D && k >= (d <= 2 ? 128 : 64);
}

/*
 * f16 (m16n8k16) where it takes fewer k-steps than tf32 (d >= 3) and the
 * scan dominates: at d = 8, 15% faster at k = 1024, 6% at k = 256, 10%
 * slower at k <= 128 (its conversions); at d = 32 faster from k = 8
 */
static bool
use_f16(int d, int k)
{
	return ks_of(d, true) < ks_of(d, false) && (d > 10 || k >= 192);
}

/*
 * lloyd_kernel's sums for k x d: private copies while they fit (one lane
 * per column, as many lane groups per warp as fit, at least one; with rows
 * in registers, dr > 0, each warp's staging area too), else per-block sums
 * with atomics, else global atomics.
 */
static void
lloyd_update_mode(pggpu_route *r, int k, int d, size_t tile_bytes, bool part)
{
	size_t		slot = sizeof(double) * ((size_t) k * d + k);
	size_t		limit = SMEM_SUMS_LIMIT < r->dev.smem_optin ? SMEM_SUMS_LIMIT : (size_t) r->dev.smem_optin;
	int			lg_d = 0;
	size_t		acc;

	while ((1 << lg_d) < d && lg_d < 5)
		lg_d++;
	for (r->lg_lanes = lg_d; r->lg_lanes <= 5; r->lg_lanes++)
	{
		acc = slot * WARPS * (32 >> r->lg_lanes);
		if (tile_bytes + acc <= limit && part)
		{
			if (r->dr > 0)
				acc += sizeof(double) * WARPS * r->dr * STG_STRIDE;
			r->mode = UPD_PRIVATE;
			r->smem = tile_bytes + acc;
			return;
		}
	}
	r->lg_lanes = lg_d;
	r->mode = tile_bytes + slot <= limit ? UPD_SHARED : UPD_GLOBAL;
	r->smem = tile_bytes + (r->mode == UPD_SHARED ? slot : 0);
}

/* tc_resident's row of TC_RESIDENT_TABLE for (ks, f16, k, d); false: none */
static bool
resident_row(pggpu_route *r, int k, int d)
{
	int			nm = (k + 15) / 16;
	int			dw = r->f16 && r->ks == 2 && d <= 8 ? 8 : (r->f16 ? 16 : 8) * r->ks / 3;
	static const int rows[][6] = {
#define ROW(KS, F16, NM, DW, NW, NWF) {KS, F16, NM, DW, NW, NWF},
		TC_RESIDENT_TABLE(ROW)
#undef ROW
	};

	if (d > TC_RESIDENT_MAX_D || nm > TC_RESIDENT_MAX_NM)
		return false;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
	{
		const int  *w = rows[i];

		/* the smallest m-tile count that holds k */
		if (w[0] == r->ks && w[1] == (int) r->f16 && w[3] == dw && w[2] >= nm &&
			(r->nm == 0 || w[2] < r->nm))
		{
			r->nm = w[2];
			r->dw = dw;
			r->nw_res = w[4];
			r->nw_fused = w[5];
		}
	}
	return r->nm > 0;
}

/* whether the planner labels by the FP16 product, unforced (pggpu_plan_step, pggpu_estimate_step_ms) */
static bool
f16_planned(int d, int k, bool f16_ok)
{
	return f16_ok && d > TC_MAX_D && k >= GEMM_MIN_K;
}

void
pggpu_plan_step(int64_t n, int k, int d, const pggpu_gpu_shape *dev, double range_work,
				int max_grid, bool f16_ok, const pggpu_route_force *force, pggpu_route *r)
{
	static const pggpu_route_force none;
	size_t		smem,
				tile_bytes;
	int			pf,
				chunk;
	int			kpad;
	bool		labels_given;

	if (force == NULL)
		force = &none;
	memset(r, 0, sizeof(*r));
	r->dev = *dev;

	/* lloyd_kernel's tiles: rows in registers and centroids resident for d <= 32, while they fit */
	r->tk = k <= 8 ? 8 : 32;
	kpad = (k + r->tk - 1) / r->tk * r->tk;
	r->dr_label = d <= 4 ? 4 : d <= 8 ? 8 : d <= 16 ? 16 : d <= 32 ? 32 : 0;
	if (r->dr_label && sizeof(double) * kpad * r->dr_label > RESIDENT_LIMIT)
		r->dr_label = 0;
	r->label_smem = sizeof(double) * (r->dr_label ? (size_t) kpad * r->dr_label : (size_t) r->tk * DJ);

	/* the labelling pass */
	r->label = PGGPU_LABEL_LLOYD;
	r->why = d > TC_MAX_D ? "d > 32, k < 64: CUDA cores" : "few centroids: the CUDA cores' scan is faster";
	if (force->label == PGGPU_LABEL_GEMM_F16 ||
		(force->label == PGGPU_LABEL_AUTO && f16_planned(d, k, f16_ok)))
	{
		r->label = PGGPU_LABEL_GEMM_F16;
		r->why = "d > 32, k >= 64: an FP16 product (cuBLAS), uncertain rows measured exactly";
	}
	else if (force->label == PGGPU_LABEL_GEMM ||
			 (force->label == PGGPU_LABEL_AUTO && d > TC_MAX_D && k >= GEMM_MIN_K))
	{
		r->label = PGGPU_LABEL_GEMM;
		r->why = f16_ok ? "d > 32, k >= 64: a float64 product (cuBLAS), near ties measured exactly" :
			"d > 32, k >= 64, precision double: a float64 product (cuBLAS), near ties measured exactly";
	}
	else if (force->label != PGGPU_LABEL_LLOYD && d <= TC_MAX_D &&
			 (tc_wanted(k, d) || force->label != PGGPU_LABEL_AUTO))
	{
		r->f16 = force->tc_prec ? force->tc_prec == 2 : use_f16(d, k);
		r->ks = ks_of(d, r->f16);
		r->mt = force->tc_mt ? force->tc_mt : 2;
		r->nw = force->tc_nw ? force->tc_nw : r->ks <= (r->f16 ? 2 : 4) ? 16 : 8;
		if (tc_scan_smem(dev->smem_optin, r->ks, (k + 7) / 8, d, r->mt, r->nw, false, &chunk, &smem, &pf) &&
			tc_scan_smem(dev->smem_optin, r->ks, (k + 7) / 8, d, r->mt, r->nw, true, &chunk, &smem, &pf))
		{
			r->label = PGGPU_LABEL_TC_SCAN;
			r->why = "k >= 64 (128 at d <= 2), d <= 32: tensor cores, centroid tiles in shared memory";
			if (force->label != PGGPU_LABEL_TC_SCAN && !force->tc_mt && !force->tc_nw &&
				resident_row(r, k, d) &&
				tc_resident_smem(dev->smem_optin, r->ks, k, d, r->nw_res, false, &smem, &pf))
			{
				r->label = PGGPU_LABEL_TC_RESIDENT;
				r->why = "k <= 256 (192 at 3 k-steps), d <= 16: tensor cores, centroids in registers";
			}
		}
		else
			r->ks = r->f16 = 0, r->mt = r->nw = 0;
	}

	/* a long pass labels in ranges first, then sums by the labels given (the product polls itself) */
	r->ranged = range_work > 0 && !PGGPU_LABEL_IS_GEMM(r->label) &&
		(double) n * k * d / (r->label == PGGPU_LABEL_LLOYD ? 1 : 16) > range_work;

	/* per-block partial sums: where private copies could fit, or for owned_update_kernel */
	if (sizeof(double) * ((size_t) k * d + k) * WARPS <= SMEM_SUMS_LIMIT)
		r->part_rows = max_grid;
	else if (r->label != PGGPU_LABEL_LLOYD && owned_ok(k, d))
		r->part_rows = dev->sm_count * OWNED_BLOCKS_PER_SM;

	/* the summing pass */
	labels_given = r->label != PGGPU_LABEL_LLOYD || r->ranged;
	r->dr = labels_given ? PGGPU_LABELS_GIVEN : r->dr_label;
	tile_bytes = labels_given ? 0 : r->label_smem;
	if (r->label == PGGPU_LABEL_TC_RESIDENT && !r->ranged && r->nw_fused > 0 && !force->no_fuse &&
		owned_ok(k, d) && r->part_rows > 0 &&
		tc_resident_smem(dev->smem_optin, r->ks, k, d, r->nw_fused, true, &smem, &pf))
	{
		/* H100, N = 10^7, d = 8, k = 256: one pass 1.0 ms an iteration, two 1.3 */
		r->sum = PGGPU_SUM_IN_PASS;
		r->mode = UPD_PRIVATE;
	}
	else if (labels_given && owned_ok(k, d) && r->part_rows > 0)
	{
		r->sum = PGGPU_SUM_OWNED;
		r->mode = UPD_PRIVATE;	/* the same partial sums: reduce_finalize_kernel */
		r->smem = pggpu_owned_smem(k, d);
	}
	else
	{
		r->sum = labels_given ? PGGPU_SUM_LABELS_GIVEN : PGGPU_SUM_IN_PASS;
		lloyd_update_mode(r, k, d, tile_bytes, r->part_rows > 0);
		/*
		 * sums only global: rows sorted by label a chunk at a time, an atomic
		 * a run and column, not a value (H100, 10^6 x 768, k = 1024: 7.9 ->
		 * 2.3 ms), where the GPU gives a block its shared memory
		 */
		if (labels_given && r->mode == UPD_GLOBAL && r->dev.smem_optin >= PGGPU_SORTED_SMEM)
		{
			r->sum = PGGPU_SUM_SORTED;
			r->smem = 0;
		}
	}
}

void
pggpu_plan_weighted(pggpu_route *r)
{
	if (r->label == PGGPU_LABEL_LLOYD)
		r->ranged = true;
	r->dr = PGGPU_LABELS_GIVEN;
	r->mode = UPD_GLOBAL;
	r->smem = 0;
	r->sum = r->dev.smem_optin >= PGGPU_SORTED_SMEM ? PGGPU_SUM_SORTED : (pggpu_sum_route) 0;
	r->why = "weighted rows: labels, then sums sorted by label, each value times its weight";
}

const char *
pggpu_label_route_name(pggpu_label_route label)
{
	switch (label)
	{
		case PGGPU_LABEL_LLOYD:
			return "lloyd";
		case PGGPU_LABEL_TC_SCAN:
			return "tc_scan";
		case PGGPU_LABEL_TC_RESIDENT:
			return "tc_resident";
		case PGGPU_LABEL_GEMM:
			return "gemm";
		case PGGPU_LABEL_GEMM_F16:
			return "gemm_f16";
		default:
			return "auto";
	}
}

const char *
pggpu_route_describe(const pggpu_route *r, char *buf, size_t len)
{
	static const char *const sums[] = {"", "in the pass", "owned_update", "lloyd, labels given", "sorted by label"};
	static const char *const modes[] = {"none", "private", "shared", "global"};
	char		shape[64] = "";

	if (r->label == PGGPU_LABEL_TC_SCAN)
		snprintf(shape, sizeof(shape), " %s ks=%d mt=%d nw=%d", r->f16 ? "f16" : "tf32", r->ks, r->mt, r->nw);
	else if (r->label == PGGPU_LABEL_TC_RESIDENT)
		snprintf(shape, sizeof(shape), " %s ks=%d nm=%d dw=%d nw=%d", r->f16 ? "f16" : "tf32", r->ks,
				 r->nm, r->dw, r->sum == PGGPU_SUM_IN_PASS ? r->nw_fused : r->nw_res);
	else if (r->label == PGGPU_LABEL_GEMM)
		snprintf(shape, sizeof(shape), " float64");
	else if (r->label == PGGPU_LABEL_GEMM_F16)
		snprintf(shape, sizeof(shape), " f16, certified");
	else
		snprintf(shape, sizeof(shape), " tk=%d dr=%d", r->tk, r->dr_label);
	snprintf(buf, len, "route %s%s%s, sums %s (%s), because %s", pggpu_label_route_name(r->label), shape,
			 r->ranged ? ", labelled in ranges" : "", sums[r->sum], modes[r->mode], r->why);
	return buf;
}

/*
 * The estimates of pg_gpu_compute.h, from H200s' steps (BENCHMARKS.md
 * sections 5 and 9): a pass reads a gigabyte of rows in about 1 ms; the
 * float64 product makes about 2 x 10^10 multiply-adds of rows by
 * centroids a ms, the FP16 product (the route above for d > 32, k >= 64,
 * unless double_only) about 10^11 with its labelling (29 ms a step at
 * 10^6 x 768, k = 4096).  A step of shares moves each GPU's k x d
 * centroids in and sums out through the host, where the sums are added
 * and the centroids updated: about 13 ns an element of k x d (41 of the
 * 58 ms of that step split over 2 GPUs; 6 ms at k = 1000 over 4).
 */
double
pggpu_estimate_step_ms(double rows, int d, int k, bool double_only)
{
	return rows * d * 8 / 1e9 + rows * d * (k > 0 ? k : 1) / (f16_planned(d, k, !double_only) ? 1e11 : 2e10);
}

double
pggpu_estimate_combine_ms(int k, int d)
{
	return 1.3e-5 * (double) k * d;
}
