/*
 * gpu/knn.cuh - nearest neighbours' GPU state (knn.cu compares the tiles,
 * knn_tiles.cu puts the rows into them) and device memory that grows.
 */
#ifndef PG_GPU_KNN_CUH
#define PG_GPU_KNN_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "common.cuh"
#include "knn.h"

struct knn_gpu
{
	int			dev;
	cudaStream_t s;
	cudaStream_t ctl;			/* close's, to stop a tile */
	cudaStream_t put;			/* the tiles' rows on their way in */
	bool		s_ok;
	cublasHandle_t handle;
	bool		handle_ok;
	double	   *Q;				/* nq x d, or qrows x d: a batch's, from the host's pinned copy */
	int64_t		qrows;
	bool		q_registered,
				qf_registered;
	float	   *Qf;				/* the product's: nq x d, and norms */
	double	   *qn,
			   *qs,
			   *mu;
	void	   *in[2];			/* the two tiles as put (knn.h), incap bytes each */
	int64_t		incap[2];
	void	   *bounce;			/* pinned: rows put from unpinned memory on their way */
	size_t		bounce_bytes;
	void	   *rows;			/* rows put by rows, before they are turned (rowscap bytes) */
	int64_t		rowscap;
	double	   *B;				/* a tile's rows, bcap x d */
	float	   *Bf;				/* and as centred floats, with their norms */
	double	   *bn,
			   *bs;
	int64_t		bcap,
				fcap,
				ncap,
				scap_rows;
	float	   *S;				/* a batch's products */
	int64_t		scap;
	double	   *bound;			/* the caller's bound (nq) */
	int32_t    *rank;			/* the caller's ranks (bcap rows), and pinned on their way */
	int32_t    *hrank;
	int64_t		rcap,
				hrcap;
	double	   *D;				/* a batch's distances, and sorted (plain) */
	double	   *Ds;
	int32_t    *I;				/* their rows, and sorted */
	int32_t    *Is;
	int64_t		pcap;
	int64_t    *off;			/* the batch's segments (queries + 1) */
	int64_t		offcap;
	void	   *tmp;			/* CUB's */
	size_t		tmpcap;
	double	   *od;				/* the tile's results (nq x m), on the device and pinned here */
	int32_t    *oi;
	double	   *hd;
	int32_t    *hi;
	double	   *hbound;			/* pinned: the bound on its way */
	unsigned long long *measured;	/* the product's pairs measured, on the device and here */
	unsigned long long *hmeasured;
	int		   *stop;			/* the kernels' flag, and its pinned 1 */
	int		   *hone;
	/* the started tile: its rows, results a query (0: none), whether ranked and bounded, its next batch */
	int64_t		nb;
	int64_t		m;
	bool		ranked;
	bool		bounded;
	int64_t		q_next;
	int64_t		plain_measured;
};

/* (re)allocates *p for want elements of size bytes, where it holds fewer */
static inline pggpu_status
room(void **p, int64_t *cap, int64_t want, size_t size, pggpu_error *err)
{
	if (*cap >= want)
		return PGGPU_OK;
	if (*p)
		cudaFree(*p);
	*p = NULL;
	*cap = 0;
	CU(cudaMalloc(p, (size_t) want * size));
	*cap = want;
	return PGGPU_OK;
}

#endif							/* PG_GPU_KNN_CUH */
