/*
 * cpu/gemm.c - the CPU backend's labelling through OpenBLAS's GEMM (gemm.h).
 *
 * For d and k where it pays (cpu_gemm_wanted, measured), a Lloyd pass labels
 * a panel of rows at a time: the rows less the column means mu (so that the
 * error is that of the spread, not of the distance from the origin), one
 * dgemm with the centroids less mu, then per row the two least
 * A_c = |x|^2 - 2 x.c + |c|^2.  A bound E on |A_c - D_c|, D_c the plain
 * loop's |x - c|^2 (blocks.c: over columns in order, each term rounded),
 * settles the row when the runner-up is more than 2E above the least;
 * else every centroid within 2E of the least is measured by the plain loop
 * (lowest index on ties).  The winner's distance is always the plain
 * loop's (where wanted: a Lloyd step leaves it to cpu_gemm_dists, when a
 * repair reads it).  So labels and distances are those of nearest_block,
 * bit for bit, and the sums and counts that follow are the same.
 *
 * The bound.  With u = 2^-53, for rows and centroids less mu held as x', c'
 * (each element rounded once, relative u): the product, the norms and the
 * two additions are each within (d + 2) u (|x'| + |c'|)^2 of their exact
 * values, the rounding of x', c' moves the distance by at most
 * 2u (|x'| + |c'|)^2 + O(u^2), and D_c itself is within (d + 2) u D_c
 * <= (d + 2) u (|x'| + |c'|)^2 (1 + 2u) of |x - c|^2 (d terms >= 0, each
 * rounded twice).  So |A_c - D_c| <= (2d + 8) u s^2 (1 + O(u)), s = |x'| +
 * max |c'|; E takes twice that, (d + 4) 2^-51 s^2.  Any order of summation
 * in the BLAS keeps the product's part of it (d u per product at most).
 *
 * Rows held as float32 (a FLOAT32 set) take sgemm, as scikit-learn does,
 * on x' = fl32(x - mu) and c' = fl32(c - mu) with mu rounded to float, and
 * the same certification with u_f = 2^-24: the rounding of x' and c' moves
 * the distance by at most 2 u_f s^2 (1 + u_f), the float product by h u_f
 * |x'| |c'| <= h u_f s^2 / 4 a term (2 x.c: h u_f s^2 / 2), the norms (in
 * double, of float values) by (d + 2) 2^-53 s^2, and A_c itself is taken
 * in floats, fl(fl(|c'|^2) - 2 x.c), two roundings of values at most s^2
 * and 1.5 s^2 (|x'| |c'| <= s^2 / 4): 2.5 u_f s^2 more; so |A_c - D_c| <=
 * (h / 2 + 5.5) u_f s^2 (1 + O(u_f)), and E takes (h + 11) u_f s^2 plus
 * d 2^-120 for products that underflow.  h is the depth of the product's sums: the
 * product is taken SGEMM_KC columns at a time, each slice added into the
 * float result (beta 1), so that a term is rounded at most h = SGEMM_KC +
 * (slices - 1) times, whatever order the BLAS sums a slice in (d taken at
 * once: h = d, 768 at d = 768 where slices of 128 give 133; on the suite's
 * blobs at d = 768, k = 256 that left 42 % of rows near-tied, measured
 * pair by pair).  Only for rows of magnitude under 2^40 (known from the
 * set's range): the products cannot overflow a float.
 */
#include "blocks.h"
#include "gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Where the plain loop (blocks.c, 8 rows a vector, k d multiply-adds a row)
 * is as fast.  Measured on the H100 machine's 16-core Xeon (AVX-512), 10^5
 * rows, k = 256, seconds an iteration, plain / GEMM on one thread and on
 * 16: d = 64 0.215 / 0.232 and 0.0187 / 0.0215; d = 128 0.355 / 0.420
 * and 0.0380 / 0.0384; d = 384 2.18 / 1.07 and 0.152 / 0.122; d = 768
 * 4.11 / 1.98 and 0.371 / 0.243.  At k = 64 the plain loop wins from d =
 * 16 to 64 too.
 */
#define GEMM_MIN_D 256
#define GEMM_MIN_K 32
/*
 * Float32 rows (sgemm, twice as fast, half the bytes; the plain loop the
 * same): measured on the CI machine's 2-core Xeon (AVX-512), 10^5 rows, one
 * thread, seconds an iteration plain / sgemm: d = 64, k = 128 0.072 /
 * 0.075 and k = 256 0.132 / 0.110; d = 128, k = 64 0.074 / 0.104, k = 128
 * 0.146 / 0.117, k = 256 0.271 / 0.193; d = 256, k = 32 0.154 / 0.219, k =
 * 64 0.187 / 0.189; d = 384, k = 256 (0.41 with sgemm); d = 32, k = 256
 * 0.065 / 0.071.
 */
#define SGEMM_MIN_D 64
#define SGEMM_MIN_K 128
#define SGEMM_WIDE_D 256		/* and from this d, k from 64 */
#define SGEMM_WIDE_K 64
/* most doubles of a panel's products (per thread) */
#define GEMM_PANEL_DOUBLES ((int64_t) 1 << 20)
/* rows whose column means centre the product */
#define MU_ROWS 65536
/* a panel's work at most, in polls' budgets (GEMM is that much faster) */
#define GEMM_POLL_FACTOR 64
/* float32 rows take sgemm up to this magnitude (2^40: no product overflows) */
#define SGEMM_MAX_ABS 0x1p40
/*
 * the float product's columns a slice (the bound's depth, above): on one
 * core of the CI machine 10^5 rows x 256 centroids at d = 768 took 0.49 s
 * taken at once, 0.46-0.51 s by slices of 128 and 0.50-0.53 s by 64
 */
#define SGEMM_KC 128

bool
cpu_gemm_wanted(int d, int k, bool f32, int force)
{
	if (force == PGGPU_LABEL_LLOYD)
		return false;
	if (force == PGGPU_LABEL_GEMM)
		return true;
	if (f32)
		return (d >= SGEMM_MIN_D && k >= SGEMM_MIN_K) || (d >= SGEMM_WIDE_D && k >= SGEMM_WIDE_K);
	return d >= GEMM_MIN_D && k >= GEMM_MIN_K;
}

int
cpu_gemm_panel_rows(int d, int k, double poll_budget)
{
	int			p = GEMM_PANEL;

	while (p > 32 && ((int64_t) p * k > GEMM_PANEL_DOUBLES ||
					  (double) p * k * d > GEMM_POLL_FACTOR * poll_budget))
		p >>= 1;
	/* even 32 rows would hold off interrupts too long: the plain loop (it cuts k) */
	if ((double) p * k * d > GEMM_POLL_FACTOR * poll_budget || (int64_t) p * k > 4 * GEMM_PANEL_DOUBLES)
		return 0;
	return p;
}

/* (row, centroid) pairs of near-tied rows measured at once, at most */
#define PAIRS (8 * GEMM_PANEL)
/* and their rows, at most (gathered into rows of doubles first: PAIR_ROWS x d) */
#define PAIR_ROWS 32

/*
 * A thread's workspace: xc (panel x d) and G (panel x k), column-major with
 * leading dimension panel; xn, m1, m2 (panel each); c1 (panel ints), then
 * cand (k ints); the pairs' rows gathered (PAIR_ROWS x d); the pairs'
 * distances, rows, centroids and rows' places among those gathered
 * (PAIRS + 8 each), as doubles' room.
 */
static int64_t
ws_doubles(int d, int k, int panel)
{
	return (int64_t) panel * d + (int64_t) panel * k + 4 * panel + (panel + k + 1) / 2 + 8 +
		(int64_t) PAIR_ROWS * d + 3 * (PAIRS + 8);
}

bool
cpu_gemm_open(cpu_gemm *g, pggpu_data *ds, int k, int threads, int panel)
{
	const char *why;
	int			d = ds->d;
	int64_t		n = ds->n;
	const double *X = pggpu_cpu_rows(ds);
	const float *Xf = pggpu_cpu_rows_f32(ds);
	const uint16_t *Xh = pggpu_cpu_rows_f16(ds);

	memset(g, 0, sizeof(*g));
	/* float32 rows (and halves, widened a panel at a time): sgemm where no product can overflow, else the plain loop */
	if ((Xf || Xh) && !(ds->range_known && ds->range_hi <= SGEMM_MAX_ABS))
		return false;
	if ((g->ob = pggpu_openblas_load(&why)) == NULL || panel < 1)
		return false;
	g->f32 = Xf != NULL || Xh != NULL;
	g->panel = panel;
	g->threads = threads;
	g->ws_doubles = ws_doubles(d, k, panel);
	g->mu = (double *) calloc(d, sizeof(double));
	g->Cc = (double *) malloc(sizeof(double) * k * d);
	g->cn = (double *) malloc((sizeof(double) + sizeof(float)) * k);
	g->cnf = g->cn ? (float *) (g->cn + k) : NULL;
	g->ws = (double *) malloc(sizeof(double) * g->ws_doubles * threads);
	if (!g->mu || !g->Cc || !g->cn || !g->ws)
	{
		cpu_gemm_close(g);
		return false;
	}
	/*
	 * mu: any value keeps the answers exact; the column means make E small.
	 * Those of the first MU_ROWS rows: no pass over all of them (it would
	 * need interrupt checks of its own at 10^8 rows).
	 */
	if (n > MU_ROWS)
		n = MU_ROWS;
	for (int j = 0; j < d; j++)
	{
		double		s = 0;

		for (int64_t i = 0; i < n; i++)
			s += pggpu_cpu_value(X, Xf, Xh, pggpu_at(i, j, d, ds->log_b));
		g->mu[j] = n > 0 ? s / n : 0;
		/* (float32 rows are centred in float: mu a float) */
		if (g->f32)
			g->mu[j] = (float) g->mu[j];
	}
	return true;
}

void
cpu_gemm_close(cpu_gemm *g)
{
	free(g->mu);
	free(g->Cc);
	free(g->cn);
	free(g->ws);
	memset(g, 0, sizeof(*g));
}

void
cpu_gemm_centroids(cpu_gemm *g, const double *C, int k, int d)
{
	float	   *Cf = (float *) g->Cc;

	g->cmax = 0;
	for (int c = 0; c < k; c++)
	{
		double		s = 0;

		for (int j = 0; j < d; j++)
		{
			double		v = C[(int64_t) c * d + j] - g->mu[j];

			/* float32 rows: c' = fl32(c - mu), its norm that of the float values */
			if (g->f32)
				v = Cf[(int64_t) c * d + j] = (float) v;
			else
				g->Cc[(int64_t) c * d + j] = v;
			s += v * v;
		}
		g->cn[c] = s;
		g->cnf[c] = (float) s;
		g->cmax = fmax(g->cmax, sqrt(s));
	}
	g->C = C;
}

/* 8 doubles (or floats), a row a lane (as blocks.c) */
typedef double vd __attribute__((vector_size(8 * sizeof(double))));
typedef float vf __attribute__((vector_size(8 * sizeof(float))));

#define LOAD_VD(v, p) memcpy(&(v), (p), sizeof(vd))
#define STORE_VD(p, v) memcpy((p), &(v), sizeof(vd))
#define LOAD_VF(v, p) memcpy(&(v), (p), sizeof(vf))
#define STORE_VF(p, v) memcpy((p), &(v), sizeof(vf))

/* 8 rows' values of column j as doubles: from doubles, or floats (exact) */
#define LOAD_ROWS(v, x, xf, at) \
	do { \
		if (xf) \
		{ \
			vf			f_; \
			LOAD_VF(f_, (xf) + (at)); \
			(v) = __builtin_convertvector(f_, vd); \
		} \
		else \
			LOAD_VD(v, (x) + (at)); \
	} while (0)

/* (CLONES: blocks.h) */

/*
 * The plain loop's |x - c|^2 (over columns in order, each term rounded on
 * its own) for rows 0 .. rows8 - 1 of a tile (x: column j at x + j b, or
 * xf; rows8 a multiple of 8) to each row's own centroid, lab[q] of C (k x
 * d, row-major), into out[q]: a row a lane, each its own chain in the
 * plain order.
 */
CLONES static void
winner_dists(const double *x, const float *xf, int64_t b, int rows8, const int32_t *lab,
			 const double *C, int d, double *out)
{
	/*
	 * 8 rows at a time over every column, their sums in a register, each
	 * lane reading its centroid's row in order: a column at a time for all
	 * the rows (the centroids by columns) stored and loaded the sums at each
	 * column, 10 % of a float32 iteration at d = 384, k = 256 (3 % so)
	 */
	for (int q = 0; q < rows8; q += 8)
	{
		const double *c8[8];
		vd			acc = {0};

		for (int l = 0; l < 8; l++)
			c8[l] = C + (int64_t) lab[q + l] * d;
		for (int j = 0; j < d; j++)
		{
			vd			t,
						c;

			for (int l = 0; l < 8; l++)
				c[l] = c8[l][j];
			LOAD_ROWS(t, x, xf, j * b + q);
			t -= c;
			acc += t * t;
		}
		STORE_VD(out + q, acc);
	}
}

/*
 * The two least a_c = |c|^2 - 2 x.c of rows 0 .. rows8 - 1 (products of
 * centroid c at G + c P; rows8 a multiple of 8) and the least's
 * centroid, the lowest on ties (NaN never less): 8 rows at a time over
 * every centroid, their minima in registers (a centroid at a time for all
 * the rows kept them in memory, the loop scalar: 7 % of a float32
 * iteration at d = 384, k = 256)
 */
typedef int64_t vl __attribute__((vector_size(8 * sizeof(int64_t))));

/* m ? a : b lane by lane (m: a comparison's lanes, all ones or zeros) */
#define SEL(m, a, b) ((vd) (((m) & (vl) (a)) | (~(m) & (vl) (b))))

CLONES static void
two_least(const double *G, int64_t P, int rows8, int k, const double *cn,
		  double *m1, double *m2, int *c1)
{
	for (int q = 0; q < rows8; q += 8)
	{
		vd			b1,
					b2;
		vl			i1 = {0};

		for (int l = 0; l < 8; l++)
			b1[l] = b2[l] = INFINITY;
		for (int c = 0; c < k; c++)
		{
			vd			a;
			vl			lt1,
						lt2;

			LOAD_VD(a, G + (int64_t) c * P + q);
			a = cn[c] - 2 * a;
			lt1 = a < b1;
			lt2 = a < b2;
			b2 = SEL(lt1, b1, SEL(lt2, a, b2));
			i1 = (lt1 & (vl) {c, c, c, c, c, c, c, c}) | (~lt1 & i1);
			b1 = SEL(lt1, a, b1);
		}
		STORE_VD(m1 + q, b1);
		STORE_VD(m2 + q, b2);
		for (int l = 0; l < 8; l++)
			c1[q + l] = (int) i1[l];
	}
}

/*
 * The same from a float product, in floats: a_c = fl(fl(|c|^2) - 2 x.c),
 * 8 rows a vector of floats (half the vectors of doubles: two_least on
 * doubles took 10 % of a float32 iteration at d = 768, k = 256 on the CI
 * machine's EPYC, without AVX-512); the minima widened into m1 and m2.
 * The two roundings are within the bound (see the head of this file).
 */
typedef int32_t vi __attribute__((vector_size(8 * sizeof(int32_t))));

#define SELF(m, a, b) ((vf) (((m) & (vi) (a)) | (~(m) & (vi) (b))))

CLONES static void
two_least_f32(const float *Gf, int64_t P, int rows8, int k, const float *cnf, double *m1,
			  double *m2, int *c1)
{
	for (int q = 0; q < rows8; q += 8)
	{
		vf			b1,
					b2;
		vi			i1 = {0};

		for (int l = 0; l < 8; l++)
			b1[l] = b2[l] = INFINITY;
		for (int c = 0; c < k; c++)
		{
			vf			a;
			vi			lt1,
						lt2;

			LOAD_VF(a, Gf + (int64_t) c * P + q);
			a = cnf[c] - 2 * a;
			lt1 = a < b1;
			lt2 = a < b2;
			b2 = SELF(lt1, b1, SELF(lt2, a, b2));
			i1 = (lt1 & (vi) {c, c, c, c, c, c, c, c}) | (~lt1 & i1);
			b1 = SELF(lt1, a, b1);
		}
		for (int l = 0; l < 8; l++)
		{
			m1[q + l] = b1[l];
			m2[q + l] = b2[l];
			c1[q + l] = i1[l];
		}
	}
}

/*
 * xr (row-major, nr x d) := rows rq[0 .. nr - 1] of a tile (column j at
 * x + j b, or xf) as doubles: a column at a time, the rows' values of one
 * column a few cache lines (read a pair at a time, each value of a row
 * was a line of its own: pair_dists took 14 % of a float32 iteration at d
 * = 768, k = 256 on the CI machine's EPYC)
 */
static void
gather_rows(const double *x, const float *xf, int64_t b, int d, const int32_t *rq, int nr,
			double *xr)
{
	for (int j = 0; j < d; j++)
		for (int i = 0; i < nr; i++)
			xr[(int64_t) i * d + j] = x ? x[j * b + rq[i]] : (double) xf[j * b + rq[i]];
}

/*
 * The same distances of np8 (row, centroid) pairs (a multiple of 8): pair
 * p's row xr + pr[p] d, centroid pc[p] of C; 8 pairs a vector, as
 * winner_dists: 8 chains of additions at once, where a near-tied row
 * measured alone is one
 */
CLONES static void
pair_dists(const double *xr, int np8, const int32_t *pr, const int32_t *pc, const double *C, int d,
		   double *out)
{
	for (int p = 0; p < np8; p += 8)
	{
		const double *c8[8],
				   *x8[8];
		vd			acc = {0};

		for (int l = 0; l < 8; l++)
		{
			c8[l] = C + (int64_t) pc[p + l] * d;
			x8[l] = xr + (int64_t) pr[p + l] * d;
		}
		for (int j = 0; j < d; j++)
		{
			vd			t,
						c;

			for (int l = 0; l < 8; l++)
			{
				t[l] = x8[l][j];
				c[l] = c8[l][j];
			}
			t -= c;
			acc += t * t;
		}
		STORE_VD(out + p, acc);
	}
}

/* a thread's room for the pairs (see ws_doubles) */
typedef struct pairs_room
{
	double	   *xr;				/* PAIR_ROWS x d */
	double	   *pv;				/* PAIRS + 8 each */
	int32_t    *pq;
	int32_t    *pc;
	int32_t    *pr;
} pairs_room;

/*
 * The near-tied rows of np pairs (each row's candidates in order, together;
 * PAIR_ROWS rows at most) labelled by the least of their distances, lowest
 * centroid on ties
 */
static void
resolve_pairs(const double *x, const float *xf, int64_t b, int np, const pairs_room *pr,
			  const double *C, int d, int32_t *lab)
{
	int			np8 = (np + 7) & ~7;
	int32_t		rq[PAIR_ROWS];
	int			nr = 0;

	for (int p = 0; p < np; p++)
	{
		if (p == 0 || pr->pq[p] != pr->pq[p - 1])
			rq[nr++] = pr->pq[p];
		pr->pr[p] = nr - 1;
	}
	for (int p = np; p < np8; p++)
		pr->pr[p] = pr->pr[0], pr->pc[p] = pr->pc[0];
	gather_rows(x, xf, b, d, rq, nr, pr->xr);
	pair_dists(pr->xr, np8, pr->pr, pr->pc, C, d, pr->pv);
	for (int p = 0; p < np;)
	{
		int			q = pr->pq[p];
		double		bv = INFINITY;

		lab[q] = 0;
		for (; p < np && pr->pq[p] == q; p++)
			if (pr->pv[p] < bv)
			{
				bv = pr->pv[p];
				lab[q] = pr->pc[p];
			}
	}
}


/*
 * xc (column-major, leading dimension P) := the rows8 rows at src (a
 * multiple of 8, within the tile) less mu, and xn their squared norms
 */
CLONES static void
centre_rows(const double *src, int64_t b, int d, int rows8, const double *mu, double *xc,
			int P, double *xn)
{
	for (int q = 0; q < rows8; q++)
		xn[q] = 0.0;
	for (int j = 0; j < d; j++)
		for (int q = 0; q < rows8; q += 8)
		{
			vd			v,
						s;

			LOAD_VD(v, src + j * b + q);
			LOAD_VD(s, xn + q);
			v -= mu[j];
			STORE_VD(xc + (int64_t) j * P + q, v);
			s += v * v;
			STORE_VD(xn + q, s);
		}
}

/* the same for float32 rows: xc := fl32(x - mu) (mu a float), xn in double */
CLONES static void
centre_rows_f32(const float *src, int64_t b, int d, int rows8, const double *mu, float *xc,
				int P, double *xn)
{
	for (int q = 0; q < rows8; q++)
		xn[q] = 0.0;
	for (int j = 0; j < d; j++)
	{
		float		m = (float) mu[j];

		for (int q = 0; q < rows8; q += 8)
		{
			vf			v;
			vd			w,
						s;

			LOAD_VF(v, src + j * b + q);
			v -= m;
			STORE_VF(xc + (int64_t) j * P + q, v);
			w = __builtin_convertvector(v, vd);
			LOAD_VD(s, xn + q);
			s += w * w;
			STORE_VD(xn + q, s);
		}
	}
}

/* a product's entry: of the double product, or the float one */
static inline double
entry(const double *G, const float *Gf, int64_t i)
{
	return Gf ? (double) Gf[i] : G[i];
}

void
cpu_gemm_label(const cpu_gemm *g, int t, const double *src, const float *src32, int64_t b, int d,
			   int rows, int k, double *best, int32_t *lab)
{
	int			P = g->panel;
	int			rows8 = (rows + 7) & ~7;
	double	   *ws = g->ws + g->ws_doubles * t;
	/* (float32 rows: xc and G floats, in the first half of their room) */
	double	   *xc = src32 ? NULL : ws;
	float	   *xcf = src32 ? (float *) ws : NULL;
	double	   *G = src32 ? NULL : ws + (int64_t) P * d;
	float	   *Gf = src32 ? (float *) (ws + (int64_t) P * d) : NULL;
	double	   *xn = ws + (int64_t) P * d + (int64_t) P * k;
	double	   *m1 = xn + P;
	double	   *m2 = m1 + P;
	int		   *c1 = (int *) (m2 + P);
	int		   *cand = c1 + P;
	double	   *xr = ws + g->ws_doubles - 3 * (PAIRS + 8) - (int64_t) PAIR_ROWS * d;
	double	   *pv = ws + g->ws_doubles - 3 * (PAIRS + 8);
	int32_t    *pq = (int32_t *) (pv + PAIRS + 8);
	pairs_room	room = {xr, pv, pq, pq + PAIRS + 8, pq + 2 * (PAIRS + 8)};
	int32_t    *pc = room.pc;
	int			np = 0,
				nr = 0;
	/* the float product's depth, and 2E (see the head of this file) */
	const int	slices = (d + SGEMM_KC - 1) / SGEMM_KC,
				depth = (d < SGEMM_KC ? d : SGEMM_KC) + slices - 1;
	double		ef = src32 ? 2 * (depth + 11) * 0x1p-24 : 2 * (d + 4) * 0x1p-51,
				e0 = src32 ? 2 * d * 0x1p-120 : 0;

	/*
	 * the rows less mu, column-major as the tile holds them (whole vectors:
	 * the tile goes on); G = xc Cc^T: Cc row-major k x d is Cc^T
	 * column-major (d x k, ld d)
	 */
	if (src32)
	{
		centre_rows_f32(src32, b, d, rows8, g->mu, xcf, P, xn);
		/* by slices of SGEMM_KC columns, each added to the last (the bound's depth) */
		for (int j0 = 0; j0 < d; j0 += SGEMM_KC)
			g->ob->sgemm(PGGPU_CBLAS_COL_MAJOR, PGGPU_CBLAS_NO_TRANS, PGGPU_CBLAS_NO_TRANS, rows, k,
						 d - j0 < SGEMM_KC ? d - j0 : SGEMM_KC, 1.0f, xcf + (int64_t) j0 * P, P,
						 (const float *) g->Cc + j0, d, j0 == 0 ? 0.0f : 1.0f, Gf, P);
	}
	else
	{
		centre_rows(src, b, d, rows8, g->mu, xc, P, xn);
		g->ob->dgemm(PGGPU_CBLAS_COL_MAJOR, PGGPU_CBLAS_NO_TRANS, PGGPU_CBLAS_NO_TRANS, rows, k, d,
					 1.0, xc, P, g->Cc, d, 0.0, G, P);
	}
	if (Gf)
		two_least_f32(Gf, P, rows8, k, g->cnf, m1, m2, c1);
	else
		two_least(G, P, rows8, k, g->cn, m1, m2, c1);
	for (int q = 0; q < rows; q++)
	{
		double		s = sqrt(xn[q]) + g->cmax,
					e2 = ef * s * s + e0;
		int			nc = 0;
		double		bv = INFINITY;

		lab[q] = c1[q];
		if (m2[q] - m1[q] > e2)
			continue;
		/* near-tied (or not finite): every centroid within 2E of the least, measured */
		for (int c = 0; c < k; c++)
			if (!(g->cn[c] - 2 * entry(G, Gf, (int64_t) c * P + q) > m1[q] + e2))
				cand[nc++] = c;
		/* as pairs, with other rows' (the usual case), or alone (more than PAIRS) */
		if (nc <= PAIRS)
		{
			if (np + nc > PAIRS || nr == PAIR_ROWS)
			{
				resolve_pairs(src, src32, b, np, &room, g->C, d, lab);
				np = nr = 0;
			}
			for (int i = 0; i < nc; i++)
				pq[np] = q, pc[np++] = cand[i];
			nr++;
			continue;
		}
		/* (the pairs waiting first: the room is taken a buffer at a time) */
		if (np > 0)
			resolve_pairs(src, src32, b, np, &room, g->C, d, lab);
		np = nr = 0;
		lab[q] = 0;
		gather_rows(src, src32, b, d, &q, 1, xr);
		for (int i0 = 0; i0 < nc; i0 += PAIRS)
		{
			int			n1 = nc - i0 < PAIRS ? nc - i0 : PAIRS;

			for (int i = 0; i < ((n1 + 7) & ~7); i++)
				room.pr[i] = 0, pc[i] = cand[i0 + (i < n1 ? i : 0)];
			pair_dists(xr, (n1 + 7) & ~7, room.pr, pc, g->C, d, pv);
			for (int i = 0; i < n1; i++)
				if (pv[i] < bv)
				{
					bv = pv[i];
					lab[q] = cand[i0 + i];
				}
		}
	}
	if (np > 0)
		resolve_pairs(src, src32, b, np, &room, g->C, d, lab);
	if (best)
		cpu_gemm_dists(src, src32, b, d, rows, lab, g->C, best, (int32_t *) c1, m1);
}

void
cpu_gemm_dists(const double *src, const float *src32, int64_t b, int d, int rows,
			   const int32_t *lab, const double *C, double *best, int32_t *own, double *out)
{
	int			rows8 = (rows + 7) & ~7;

	/* (past rows: centroid 0, unused) */
	for (int q = 0; q < rows8; q++)
		own[q] = q < rows ? lab[q] : 0;
	winner_dists(src, src32, b, rows8, own, C, d, out);
	for (int q = 0; q < rows; q++)
		best[q] = out[q];
}
