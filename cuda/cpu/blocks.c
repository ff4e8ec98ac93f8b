/*
 * cpu/blocks.c - the CPU backend's arithmetic on blocks of RB rows
 * (blocks.h): each distance summed over columns 0..d-1 from 0.0, each term
 * (x - c) * (x - c) rounded on its own, RB rows at once in vector lanes; and
 * the rows' content keys, pggpu_row_key's integer arithmetic lane by lane.
 * Built once for each x86-64 level (target_clones), the best one picked
 * when the library loads.
 */
#include "blocks.h"

#include <math.h>
#include <string.h>

typedef double vd __attribute__((vector_size(VW * sizeof(double))));
typedef int64_t vl __attribute__((vector_size(VW * sizeof(int64_t))));
typedef uint64_t vu __attribute__((vector_size(VW * sizeof(uint64_t))));

/* (CLONES: blocks.h) */

/* a vector from 8 doubles at any alignment (a macro: no vector-valued calls) */
#define LOAD_VD(v, p) memcpy(&(v), (p), sizeof(vd))

/* lanewise m ? a : b, m all ones or all zeros per lane */
#define SELECT(m, a, b) ((vd) (((vl) (a) & (m)) | ((vl) (b) & ~(m))))

/*
 * acc[]: the squared distance of each row of a block to centroid cc, summed
 * over columns 0..d-1 from 0.0, each term rounded on its own.  Inlined into
 * each copy of its callers, built for that copy's instructions.
 */
static inline __attribute__((always_inline)) void
block_sqdist(vd *acc, const double *x, int64_t b, int d, const double *cc)
{
#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
		acc[v] = (vd) {0};
	for (int j = 0; j < d; j++)
	{
		const double *xj = x + j * b;
		double		cj = cc[j];

#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
		{
			vd			t;

			LOAD_VD(t, xj + v * VW);
			t -= cj;
			acc[v] += t * t;
		}
	}
}

/*
 * Nearest of the k centroids (lowest index on ties) and its squared distance
 * for each row of a block: best[RB], lab[RB].
 */
CLONES void
nearest_block(const double *x, int64_t b, int d, const double *C, int k,
			  double *best_out, int32_t *lab_out)
{
	vd			best[NV];
	vl			lab[NV];

#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
	{
		best[v] = (vd) {0} + INFINITY;
		lab[v] = (vl) {0};
	}
	for (int c = 0; c < k; c++)
	{
		vd			acc[NV];

		block_sqdist(acc, x, b, d, C + (int64_t) c * d);
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
		{
			vl			m = (vl) (acc[v] < best[v]);

			best[v] = SELECT(m, acc[v], best[v]);
			lab[v] = (lab[v] & ~m) | (((vl) {0} + c) & m);
		}
	}
	for (int v = 0; v < NV; v++)
		for (int q = 0; q < VW; q++)
		{
			best_out[v * VW + q] = best[v][q];
			lab_out[v * VW + q] = (int32_t) lab[v][q];
		}
}

/*
 * The squared distance d of each row of a block to centroid cc, into the
 * block's w[RB]: w := d (set) or w := min(w, d).
 */
CLONES void
point_block(const double *x, int64_t b, int d, const double *cc, double *w, bool set)
{
	vd			acc[NV];

	block_sqdist(acc, x, b, d, cc);
#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
	{
		vd			old;
		vl			m;

		LOAD_VD(old, w + v * VW);
		m = set ? (vl) {0} - 1 : (vl) (acc[v] < old);
		acc[v] = SELECT(m, acc[v], old);
		memcpy(w + v * VW, &acc[v], sizeof(vd));
	}
}

/* *z := pggpu_mix64(*z), lanewise (a pointer: no vector-valued calls) */
static inline __attribute__((always_inline)) void
mix_lanes(vu *z)
{
	*z += 0x9e3779b97f4a7c15ULL;
	*z = (*z ^ (*z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	*z = (*z ^ (*z >> 27)) * 0x94d049bb133111ebULL;
	*z ^= *z >> 31;
}

/*
 * The content keys of a block's rows, pggpu_row_key's arithmetic a row a
 * lane (integer operations only: the same bits); false where a value is
 * subnormal, whose exponent needs frexp
 */
CLONES bool
keys_block(const double *x, int64_t b, int d, uint64_t *keys)
{
	vl			emax[NV];
	vu			h[NV];
	vl			sub = (vl) {0};
	uint64_t	dk = 0xc2b2ae3d27d4eb4fULL * (uint64_t) d;

#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
		emax[v] = (vl) {0} + INT32_MIN;
	/* the row's largest exponent of its non-zero values */
	for (int j = 0; j < d; j++)
#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
		{
			vd			t;
			vl			bits,
						field,
						nz,
						ex,
						gt;

			LOAD_VD(t, x + j * b + v * VW);
			bits = (vl) t;
			field = (bits >> 52) & 0x7ff;
			nz = (vl) (t != 0);
			sub |= nz & (vl) (field == 0);
			/* (a zero counts as INT32_MIN: below every exponent) */
			ex = ((field - 1022) & nz) | (((vl) {0} + INT32_MIN) & ~nz);
			gt = (vl) (ex > emax[v]);
			emax[v] = (ex & gt) | (emax[v] & ~gt);
		}
	for (int q = 0; q < VW; q++)
		if (sub[q])
			return false;
#pragma GCC unroll 4
	for (int v = 0; v < NV; v++)
		h[v] = (vu) {0};
	/* each value's term: sign, fraction and the exponent of [0.5, 1), keyed by emax - ex and j */
	for (int j = 0; j < d; j++)
	{
		uint64_t	jk = 0x9e3779b97f4a7c15ULL * (uint64_t) (j + 1);

#pragma GCC unroll 4
		for (int v = 0; v < NV; v++)
		{
			vd			t;
			vu			bits,
						m,
						e;
			vl			nz,
						ex;

			LOAD_VD(t, x + j * b + v * VW);
			bits = (vu) t;
			nz = (vl) (t != 0);
			ex = (vl) ((bits >> 52) & 0x7ff) - 1022;
			e = (vu) ((emax[v] - ex) & 0xffffffff);
			mix_lanes(&e);
			m = ((bits & 0x800fffffffffffffULL) | (1022ULL << 52)) ^ e;
			m = (m & (vu) nz) ^ jk;
			mix_lanes(&m);
			h[v] += m;
		}
	}
	for (int v = 0; v < NV; v++)
	{
		vu			k = h[v] ^ dk;

		mix_lanes(&k);
		memcpy(keys + v * VW, &k, sizeof(vu));
	}
	return true;
}
