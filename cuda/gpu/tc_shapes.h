/*
 * tc_shapes.h - the tensor-core passes' shapes and shared-memory layouts,
 * computed the same way by the planner (route.c, plain C, every build) and
 * by the kernels (tc_scan.cu, tc_resident.cu): one definition for host and
 * device.  Also the table of tc_resident's kernels (TC_RESIDENT_TABLE).
 */
#ifndef PG_GPU_TC_SHAPES_H
#define PG_GPU_TC_SHAPES_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __CUDACC__
#define TC_HD static __host__ __device__ __forceinline__
#else
#define TC_HD static inline
#endif

#define TC_MAX_D 32				/* rows kept as A fragments in registers */
#define GROUP_NT 16				/* n-tiles per packing group: index in 4 bits */
#define CSLOTS 16				/* candidate slots of a lane (its 2 MT row halves) */
#define TC_RESIDENT_MAX_D 16	/* tc_resident: f16 KS <= 3 */
#define TC_RESIDENT_MAX_NM 16	/* tc_resident: m-tiles, 4-bit index */
#define TC_RESIDENT_XS 36		/* row slots per 8-byte unit of the rows' B fragments (32 + 4) */
#define TC_PREFETCH_MAX 4		/* most stages of rows in flight (cp.async) */

/*
 * tc_resident's kernels, one row each: K-steps KS, f16, m-tiles NM, K
 * segment DW (columns), warps NW of the labelling kernel, NWF of the fused
 * one (labels and sums; 0: none).  The warps are as many as 64K registers
 * hold once the centroids take NM (4 KS + 4) a thread; each row's kernels
 * compile without spills (the build checks it: ptxas -warn-spills
 * -Werror on tc_resident.cu).  Rows that spilled at 8 warps are left out
 * (KS = 3 with NM = 12: tc_scan runs there), and their fused kernels where
 * only those spilled (NWF 0).
 */
#define TC_RESIDENT_TABLE(X) \
	X(1, 0, 4, 2, 16, 16) \
	X(1, 0, 8, 2, 16, 12) \
	X(1, 0, 16, 2, 12, 8) \
	X(2, 0, 4, 5, 16, 16) \
	X(2, 0, 8, 5, 12, 8) \
	X(2, 0, 16, 5, 8, 0) \
	X(3, 0, 4, 8, 16, 12) \
	X(3, 0, 8, 8, 8, 8) \
	X(1, 1, 4, 5, 16, 16) \
	X(1, 1, 8, 5, 16, 12) \
	X(1, 1, 16, 5, 12, 8) \
	X(2, 1, 4, 8, 16, 16) \
	X(2, 1, 4, 10, 16, 16) \
	X(2, 1, 8, 8, 12, 12) \
	X(2, 1, 8, 10, 12, 10) \
	X(2, 1, 16, 8, 8, 8) \
	X(2, 1, 16, 10, 8, 0) \
	X(3, 1, 4, 16, 16, 12) \
	X(3, 1, 8, 16, 8, 8)

/* k-steps of the mma for d columns: 3d elements in steps of 8 (tf32) or 16 (f16) */
TC_HD int
ks_of(int d, bool f16)
{
	return f16 ? (3 * d + 15) / 16 : (3 * d + 7) / 8;
}

/*
 * A rows in shared memory, one row per lane of phase 1, words permuted within
 * each k-step (w = 8 ks + r at 8 ks + 2 (r % 4) + r / 4) so that a lane of
 * phase 2 reads its (t, t + 4) pair with one 8-byte load; the row stride is
 * 8 (mod 16) words: conflict-free.  Elements q: [0, d) big, [d, 2d) small,
 * [2d, 3d) big, then zeros (tf32: a word each; f16: a half each).
 */
TC_HD int
a_stride(int ks)
{
	return 8 * ks + (ks & 1 ? 0 : 8);
}

/* tc_scan's per-warp shared memory, in 4-byte words */
TC_HD int
warp_words(int rows_w, int stride, bool cand)
{
	/* main: A rows, e2, best, second, index; cand: A rows, T, row min (u64),
	 * row index, overflow flag, counter, candidates (index, row, distance) */
	return cand ? rows_w * (stride + 7) + 32 + CSLOTS * 40 : rows_w * (stride + 4);
}

/*
 * The rows of a warp's tile and their labels into staging buffer sb, each
 * lane its own rows: per rr, d x 32 doubles ([j][lane]) then 32 labels.
 */
TC_HD int
stage_doubles(int d)
{
	return d * 32 + 16;
}

/* tc_resident: bytes of a warp's shared memory: rows as B fragments, the lanes' (best, second), nb stages */
TC_HD int
tcr_warp_bytes(int ks, int d, int nb)
{
	return 4 * ks * TC_RESIDENT_XS * 8 + 4 * 4 * 8 * 16 + nb * stage_doubles(d) * 8;
}

/* bytes before the warps' areas: the shift (zeros to TC_RESIDENT_MAX_D), the centroids in float64 by pairs */
TC_HD int
tcr_fixed_bytes(int k, int d)
{
	return TC_RESIDENT_MAX_D * 8 + (k + 1) / 2 * (d | 1) * 16;
}

/*
 * tc_resident with the update: a warp's sums [j][c] (k d doubles: lanes of
 * distinct labels hit distinct banks) and counts [c]
 */
TC_HD int
tcr_acc_bytes(int k, int d)
{
	return (k * d * 8 + k * 4 + 15) / 16 * 16;
}

/*
 * tc_scan's shared memory, one layout for tc_kernel (tcs_carve) and for
 * tc_scan_smem's bytes: 4-byte words from the start.  The centroids' tiles
 * (buffer 0, and buffer 1 where they stream: chunk_nt n-tiles of ks 64 + 16
 * floats each), the shift (d doubles, to a whole pair), each warp's area
 * (warp_words), then each warp's nb staging buffers of stage doubles.
 */
typedef struct tcs_places
{
	int			b1;				/* buffer 1 (streamed tiles) */
	int			shift;
	int			warps;			/* warp w's area at warps + w words_w */
	int			stages;			/* warp w's buffers at stages + 2 w nb stage_doubles */
} tcs_places;

TC_HD tcs_places
tcs_place(int ks, int chunk_nt, bool resident, int d, int nw, int words_w)
{
	tcs_places	pl;

	pl.b1 = chunk_nt * (ks * 64 + 16);
	pl.shift = (resident ? 1 : 2) * pl.b1;
	pl.warps = pl.shift + 2 * ((d + 1) / 2 * 2);
	pl.stages = pl.warps + nw * words_w;
	return pl;
}

/*
 * tc_scan's shared memory of its main pass (cand false) or candidate pass;
 * false when it cannot be laid out.  The centroids' tiles resident when
 * they fit (then the main pass also stages the next rows: *pf stages, 2 to
 * TC_PREFETCH_MAX, where they fit), else streamed in two buffers of
 * *chunk_nt n-tiles.
 */
TC_HD bool
tc_scan_smem(int smem_optin, int ks, int ntiles, int d, int mt, int nw, bool cand,
			 int *chunk_nt, size_t *smem, int *pf)
{
	size_t		ntf_bytes = sizeof(float) * (ks * 64 + 16);
	/* (the layout's words past the tiles: the shift and the warps' areas) */
	size_t		fixed = 4 * (size_t) tcs_place(ks, 0, true, d, nw, warp_words(16 * mt, a_stride(ks), cand)).stages;
	size_t		stage = sizeof(double) * (size_t) nw * (mt / 2) * stage_doubles(d);
	int			c;

	*pf = 0;
	if ((size_t) ntiles * ntf_bytes + fixed <= (size_t) smem_optin)
	{
		*chunk_nt = ntiles;		/* resident: loaded once per CTA */
		*smem = (size_t) ntiles * ntf_bytes + fixed;
		if (!cand)
		{
			int			nb = (int) (((size_t) smem_optin - *smem) / stage);

			if (nb > TC_PREFETCH_MAX)
				nb = TC_PREFETCH_MAX;
			if (nb >= 2)
			{
				*pf = nb;
				*smem += nb * stage;
			}
		}
		return true;
	}
	if (fixed >= (size_t) smem_optin)
		return false;
	/* two buffers, whole packing groups where they fit */
	c = (int) (((size_t) smem_optin - fixed) / 2 / ntf_bytes);
	if (c > 4 * GROUP_NT)
		c = 4 * GROUP_NT;
	if (c >= GROUP_NT)
		c = c / GROUP_NT * GROUP_NT;
	if (c < 1)
		return false;
	*chunk_nt = c;
	*smem = 2 * (size_t) c * ntf_bytes + fixed;
	return true;
}

/*
 * tc_resident's shared memory with as many stages (2..TC_PREFETCH_MAX) as
 * fit, and with fuse the warps' sums; false: none fit
 */
TC_HD bool
tc_resident_smem(int smem_optin, int ks, int k, int d, int nw, bool fuse, size_t *smem, int *pf)
{
	for (int nb = TC_PREFETCH_MAX; nb >= 2; nb--)
	{
		size_t		s = (size_t) tcr_fixed_bytes(k, d) + (size_t) nw * tcr_warp_bytes(ks, d, nb) +
			(fuse ? (size_t) nw * tcr_acc_bytes(k, d) : 0);

		if (s <= (size_t) smem_optin)
		{
			*smem = s;
			*pf = nb;
			return true;
		}
	}
	return false;
}

#endif							/* PG_GPU_TC_SHAPES_H */
