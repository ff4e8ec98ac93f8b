/*
 * knn.h - nearest neighbours' state (struct pggpu_knn) and the product's
 * bound, shared by the front door (knn.c) and the backends (cpu/knn.c,
 * gpu/knn.cu).  Plain C, PGGPU_HD for what the GPU computes too.
 */
#ifndef PG_GPU_KNN_H
#define PG_GPU_KNN_H

#include "compute_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* nearest neighbours (knn.c): the front door; the CPU's in cpu/knn.c, the GPU's in gpu/knn.cu */
struct pggpu_knn
{
	pggpu_backend backend;
	char		device_name[256];
	int			d;
	int			n;
	pggpu_metric metric;
	int64_t		nq;
	pggpu_knn_route route;		/* the tiles' (PLAIN or PRODUCT), chosen at open */
	double	   *Q;				/* the queries, nq x d (freed once the GPU holds them, unless keep_queries) */
	bool		keep_queries;	/* the GPU takes them a batch at a time from Q and Qf */
	/* the product's: the queries less mu (EUCLIDEAN, COSINE; else mu 0) as floats, their norms */
	double	   *mu;				/* d */
	float	   *Qf;				/* nq x d */
	double	   *qn;				/* nq: |q'|^2, in double */
	double	   *qs;				/* nq: |q'| (inf: too large for the product) */
	/*
	 * the tiles: two (by columns, ld apart), one being compared while the
	 * other fills; the CPU's in buf, the GPU's in the device's memory
	 */
	void	   *buf[2];
	size_t		bufbytes[2];
	bool		f32[2];			/* its values are floats */
	int64_t		ld[2];			/* rows a column, as last asked */
	int			cur;			/* the tile pggpu_knn_fill began last */
	bool		filling;		/* and it is not started yet */
	bool		busy;			/* a tile started, not finished */
	int64_t		nb;				/* its rows, in buf[tile_buf] */
	int			tile_buf;
	const int32_t *rank;		/* its ranks and bound (copies; NULL: none) */
	const double *bound;
	int32_t    *rank_copy;
	int64_t		rank_cap;
	double	   *bound_copy;
	int64_t		pairs;			/* (query, row) pairs compared, and measured by the plain loop */
	int64_t		measured;
	int			threads;		/* the CPU's OpenBLAS threads */
	double	   *ws;				/* the CPU's workspace */
	int64_t		ws_doubles;
	double	   *wide;			/* the CPU's: a float tile widened */
	int64_t		wide_doubles;
	void	   *impl;			/* the GPU backend's state */
	int			gpu;			/* the GPU it is on, -1: the CPU */
	pggpu_interrupt_fn interrupt;
	void	   *interrupt_arg;
};

/* the tests' forcing: the GPU holds at most this many queries at once (0: as they fit) */
extern int64_t pggpu_knn_resident_queries;

/*
 * The product's rows: a row's norm beyond this (centred, as floats), or not
 * finite, and its pairs are measured by the plain loop (its float products
 * could overflow).  The product's columns a slice (its sums' depth: below).
 */
#define PGGPU_KNN_MAX_NORM 0x1p39
#define PGGPU_KNN_KC 128

/*
 * The depth of the product's sums over d columns taken PGGPU_KNN_KC at a
 * time, each slice added into the float result: a term is rounded at most
 * this often whatever order the BLAS sums a slice in.
 */
PGGPU_HD double
pggpu_knn_depth(int d)
{
	int			slices = (d + PGGPU_KNN_KC - 1) / PGGPU_KNN_KC;

	return (double) (d < PGGPU_KNN_KC ? d : PGGPU_KNN_KC) + slices - 1;
}

/*
 * The product's margin for a pair whose centred float rows have norms a, b:
 * |A - D| <= this, A the proposal (|q'|^2 + |b'|^2 - 2 q'.b', or -q'.b'),
 * D the plain loop's distance.  cpu/gemm.c's bound with s = a + b: the
 * rounding of the rows to float moves the distance by 2 u s^2, the float
 * product by h u s^2 / 2, the norms (double sums of float squares) and D
 * itself by (d + 2) 2^-53 s^2 each; twice the sum, (h + 6) u s^2 (u =
 * 2^-24), a little over for the rounding of this sum, plus d 2^-120 (1 +
 * s)^2 for values and products that underflow.  The negative inner
 * product (no centring) is within a quarter of it.
 */
PGGPU_HD double
pggpu_knn_margin(double a, double b, double h, int d)
{
	double		s = a + b;

	return (h + 6) * 0x1p-24 * (1 + 0x1p-10) * s * s + d * 0x1p-120 * (1 + s) * (1 + s);
}

/* a tile: B by columns, ld apart, doubles or (f32) floats; rank and bound as pggpu_knn_start's */
pggpu_status pggpu_cpu_knn_run(pggpu_knn *kn, const void *B, bool f32, int64_t ld, int64_t nb, const int32_t *rank,
							   const double *bound, int64_t *idx, double *dist, pggpu_error *err);
pggpu_status pggpu_gpu_knn_open(pggpu_knn *kn, int gpu_index, pggpu_error *err);
/* the GPU's tile b: room for rows, rows put into it, and started (as pggpu_knn_fill, put and start) */
pggpu_status pggpu_gpu_knn_fill(pggpu_knn *kn, int b, pggpu_error *err);
pggpu_status pggpu_gpu_knn_put(pggpu_knn *kn, int b, int64_t at, const void *v, int64_t pitch, int64_t n,
							   bool by_rows, bool pinned, pggpu_error *err);
pggpu_status pggpu_gpu_knn_start(pggpu_knn *kn, int b, int64_t nb, const int32_t *rank, const double *bound,
								 pggpu_error *err);
pggpu_status pggpu_gpu_knn_finish(pggpu_knn *kn, int64_t *idx, double *dist, pggpu_error *err);
void		pggpu_gpu_knn_close(pggpu_knn *kn);

#ifdef __cplusplus
}
#endif

#endif							/* PG_GPU_KNN_H */
