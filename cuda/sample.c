/*
 * sample.c - a uniform sample of m rows drawn by their content, kept while
 * the rows stream past (a fit's `sample => m`: the rows the iterations run
 * on, without holding the table).
 *
 * Each row gets a priority, a hash of its values and the seed; the sample
 * is the m rows of least priority (ties: by value), which is m rows drawn
 * uniformly without replacement, and the same rows in the same order
 * whatever order they are offered in, by one reader or several: one answer
 * wherever the rows are.  The running m best live in a max-heap, so a row
 * costs its hash and one comparison with the heap's top; only the rows that
 * enter it (about m (1 + ln(n / m)) of n) are copied.  The heap's entries
 * hold their priorities (a row's values are looked at only on a tie), and
 * the hashing loop is built for each x86-64 level (target_clones).
 *
 * Weighted rows (pggpu_sample_weigh): each kept row keeps its weight; a
 * weight other than 1 is mixed into the row's priority (a row of weight 1
 * has its unweighted priority: all weights 1 draw the unweighted sample),
 * and rows of equal values are told apart by their weights.
 *
 * Host only, on both backends: the rows pass through the host anyway.  A
 * sample of float32 values (pggpu_sample_set_dtype) keeps them as floats,
 * half the memory, and compares them as the doubles they are: the same
 * sample, in the same order, as kept in doubles.
 */
#include "compute_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

/* a heap entry: a kept row's priority and slot */
typedef struct entry
{
	uint64_t	prio;
	int64_t		slot;
} entry;

struct pggpu_sample
{
	int			d;
	int64_t		m;				/* rows wanted */
	uint64_t	seed;
	int64_t		offered;
	int64_t		kept;			/* rows in the heap (<= m) */
	int64_t		cap;			/* slots allocated */
	double	   *rows;			/* cap x d, row-major, by slot (NULL: f32) */
	float	   *rows32;			/* the same as floats (f32) */
	bool		f32;
	double	   *w;				/* cap weights, by slot (weighted), else NULL */
	const double *ow;			/* the offer's weights (pggpu_sample_weigh), row r's at ow[r], or NULL: 1 */
	bool		weighted;
	entry	   *heap;			/* max-heap of (prio, values) */
	int64_t    *order;			/* the result's slots, least first */
	uint64_t   *hash;			/* an offer's priorities (scratch) */
	int64_t		hash_cap;
	bool		sorted;			/* heap[] holds the result's order */
	pggpu_interrupt_fn interrupt;	/* polled while the result is sorted (may longjmp) */
	void	   *interrupt_arg;
	/*
	 * An offer's rows that entered, not yet copied: row pend_r[i] of the
	 * offer into slot pend_slot[i] (a slot's index in the list: pidx, valid
	 * where stamp is the offer's).  Copied a few columns at a time at the
	 * offer's end (gathering a row from column-major rows touches a page a
	 * value), or before a tie needs a kept row's values.
	 */
	const double *x;			/* the offer's rows: value j of row r at x[r * rs + j * cs] */
	int64_t		rs;
	int64_t		cs;
	int64_t    *pend_slot;
	int64_t    *pend_r;
	int64_t		npend;
	int64_t    *stamp;			/* by slot */
	int64_t    *pidx;			/* by slot */
	int64_t		offers;
};

/* value j of the row kept in slot, as a double */
static inline double
kept_value(const pggpu_sample *s, int64_t slot, int j)
{
	return s->f32 ? (double) s->rows32[slot * s->d + j] : s->rows[slot * s->d + j];
}

/* the pending rows into their slots */
static void
flush_pending(pggpu_sample *s)
{
	int			d = s->d;

	for (int64_t i = 0; s->weighted && i < s->npend; i++)
		s->w[s->pend_slot[i]] = s->ow ? s->ow[s->pend_r[i]] : 1.0;
	if (s->cs == 1 && !s->f32)
		for (int64_t i = 0; i < s->npend; i++)
			memcpy(s->rows + s->pend_slot[i] * d, s->x + s->pend_r[i] * s->rs, sizeof(double) * d);
	else
		for (int j0 = 0; j0 < d; j0 += 8)
		{
			int			j1 = j0 + 8 < d ? j0 + 8 : d;

			for (int64_t i = 0; i < s->npend; i++)
			{
				const double *src = s->x + s->pend_r[i] * s->rs;

				if (s->f32)
				{
					float	   *dst = s->rows32 + s->pend_slot[i] * d;

					for (int j = j0; j < j1; j++)
						dst[j] = (float) src[(int64_t) j * s->cs];
				}
				else
				{
					double	   *dst = s->rows + s->pend_slot[i] * d;

					for (int j = j0; j < j1; j++)
						dst[j] = src[(int64_t) j * s->cs];
				}
			}
		}
	s->npend = 0;
	s->offers++;				/* every stamp stale */
}

/*
 * A row's priority: a hash of its values (0 and -0 alike: they are equal)
 * and their places, mixed with the seed.  Summed column by column, so an
 * offer of column-major rows streams through memory.
 */
static inline uint64_t
value_term(double v, int j)
{
	uint64_t	b;

	memcpy(&b, &v, sizeof(b));
	b &= -(uint64_t) (v != 0);
	b += 0x9e3779b97f4a7c15ULL * (uint64_t) (j + 1);
	b ^= b >> 31;
	return b * 0xbf58476d1ce4e5b9ULL;
}

/* equal rows: the lighter first (weighted samples; else equal) */
static int
weight_order(const pggpu_sample *s, double wa, const entry *b)
{
	double		wb = s->w ? s->w[b->slot] : 1.0;

	return wa < wb ? -1 : wa > wb;
}

/* <0, 0, >0 as entry a comes before, with, after entry b (priority, then values, then bits, then weights) */
static int
compare_entries(pggpu_sample *s, const entry *a, const entry *b)
{
	if (a->prio != b->prio)
		return a->prio < b->prio ? -1 : 1;
	flush_pending(s);
	for (int j = 0; j < s->d; j++)
	{
		double		x = kept_value(s, a->slot, j),
					y = kept_value(s, b->slot, j);

		if (x != y)
			return x < y ? -1 : 1;
	}
	for (int j = 0; j < s->d; j++)
	{
		double		x = kept_value(s, a->slot, j),
					y = kept_value(s, b->slot, j);
		int			c = memcmp(&x, &y, sizeof(double));

		if (c != 0)
			return c;
	}
	return weight_order(s, s->w ? s->w[a->slot] : 1.0, b);
}

/* the same against a row not yet in a slot: value j at x[j * stride], weighing w */
static int
compare_row(pggpu_sample *s, uint64_t prio, const double *x, int64_t stride, double w, const entry *b)
{
	if (prio != b->prio)
		return prio < b->prio ? -1 : 1;
	flush_pending(s);
	for (int j = 0; j < s->d; j++)
	{
		double		y = kept_value(s, b->slot, j);

		if (x[j * stride] != y)
			return x[j * stride] < y ? -1 : 1;
	}
	for (int j = 0; j < s->d; j++)
	{
		double		y = kept_value(s, b->slot, j);
		int			c = memcmp(&x[j * stride], &y, sizeof(double));

		if (c != 0)
			return c;
	}
	return weight_order(s, w, b);
}

static void
sift_down(pggpu_sample *s, int64_t pos, int64_t n)
{
	entry	   *h = s->heap;
	entry		e = h[pos];

	for (;;)
	{
		int64_t		l = 2 * pos + 1;
		int64_t		big;

		if (l >= n)
			break;
		big = l + 1 < n && compare_entries(s, &h[l + 1], &h[l]) > 0 ? l + 1 : l;
		if (compare_entries(s, &h[big], &e) <= 0)
			break;
		h[pos] = h[big];
		pos = big;
	}
	h[pos] = e;
}

static void
sift_up(pggpu_sample *s, int64_t pos)
{
	entry	   *h = s->heap;
	entry		e = h[pos];

	while (pos > 0)
	{
		int64_t		up = (pos - 1) / 2;

		if (compare_entries(s, &e, &h[up]) <= 0)
			break;
		h[pos] = h[up];
		pos = up;
	}
	h[pos] = e;
}

pggpu_status
pggpu_sample_open(pggpu_sample **out, int d, int64_t m, uint64_t seed, pggpu_error *err)
{
	pggpu_sample *s;

	*out = NULL;
	if (d < 1 || m < 1)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a sample needs at least one column and one row");
	s = (pggpu_sample *) calloc(1, sizeof(pggpu_sample));
	if (s == NULL)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	s->d = d;
	s->m = m;
	s->seed = seed;
	*out = s;
	return PGGPU_OK;
}

pggpu_status
pggpu_sample_set_dtype(pggpu_sample *s, pggpu_dtype dtype, pggpu_error *err)
{
	if (dtype != PGGPU_FLOAT64 && dtype != PGGPU_FLOAT32)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "no such value type: %d", (int) dtype);
	if (s->offers > 0)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "the value type of a sample is set before its first offer");
	s->f32 = dtype == PGGPU_FLOAT32;
	return PGGPU_OK;
}

/* room for at least want slots (doubling, up to m) */
static pggpu_status
grow(pggpu_sample *s, int64_t want, pggpu_error *err)
{
	int64_t		cap = s->cap ? s->cap : 1024;
	size_t		vb = s->f32 ? sizeof(float) : sizeof(double);
	void	   *rows;
	entry	   *heap;
	int64_t    *stamp;
	int64_t    *pidx;

	while (cap < want)
		cap *= 2;
	if (cap > s->m)
		cap = s->m;
	if (cap <= s->cap)
		return PGGPU_OK;
	if ((uint64_t) cap > SIZE_MAX / sizeof(double) / (uint64_t) (s->d + 4))
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "a sample of %lld rows of %d values is too large",
						  (long long) s->m, s->d);
	rows = realloc(s->f32 ? (void *) s->rows32 : (void *) s->rows, vb * (size_t) cap * s->d);
	if (rows && s->f32)
		s->rows32 = (float *) rows;
	else if (rows)
		s->rows = (double *) rows;
	heap = (entry *) realloc(s->heap, sizeof(entry) * cap);
	if (heap)
		s->heap = heap;
	if (s->weighted)
	{
		double	   *w = (double *) realloc(s->w, sizeof(double) * cap);

		if (w == NULL)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a sample of %lld rows",
							  (long long) cap);
		s->w = w;
	}
	stamp = (int64_t *) realloc(s->stamp, sizeof(int64_t) * cap);
	if (stamp)
		s->stamp = stamp;
	pidx = (int64_t *) realloc(s->pidx, sizeof(int64_t) * cap);
	if (pidx)
		s->pidx = pidx;
	if (!rows || !heap || !stamp || !pidx)
		return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory for a sample of %lld rows",
						  (long long) cap);
	for (int64_t i = s->cap; i < cap; i++)
		s->stamp[i] = -1;
	s->cap = cap;
	return PGGPU_OK;
}

/* hash[r] := the sum of row r's value terms, column by column */
CLONES static void
hash_rows(uint64_t *restrict hash, const double *x, int64_t stride, int64_t n, int d)
{
	memset(hash, 0, sizeof(uint64_t) * n);
	for (int j = 0; j < d; j++)
	{
		const double *col = x + (int64_t) j * stride;

		for (int64_t r = 0; r < n; r++)
			hash[r] += value_term(col[r], j);
	}
}

static uint64_t
salt_of(uint64_t seed)
{
	return pggpu_mix64(seed ^ 0x3c6ef372fe94f82bULL);
}

void
pggpu_sample_weigh_priorities(uint64_t *prio, const double *w, int64_t n)
{
	for (int64_t r = 0; w && r < n; r++)
		if (w[r] != 1.0)
		{
			uint64_t	b;

			memcpy(&b, &w[r], sizeof(b));
			prio[r] = pggpu_mix64(prio[r] ^ pggpu_mix64(b ^ 0x2f2a7fd5c8b7e6a1ULL));
		}
}

pggpu_status
pggpu_sample_weigh(pggpu_sample *s, const double *w, pggpu_error *err)
{
	if (!s->weighted && s->kept > 0)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "a sample is weighted from its first offer");
	if (!s->weighted && s->cap > 0)
	{
		if ((s->w = (double *) malloc(sizeof(double) * s->cap)) == NULL)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
	}
	s->weighted = true;
	s->ow = w;
	return PGGPU_OK;
}

const double *
pggpu_sample_weights(const pggpu_sample *s)
{
	return s->weighted ? s->w : NULL;
}

void
pggpu_sample_priorities(uint64_t *prio, const double *x, int64_t stride, int64_t n, int d,
						uint64_t seed)
{
	uint64_t	salt = salt_of(seed);

	hash_rows(prio, x, stride, n, d);
	for (int64_t r = 0; r < n; r++)
		prio[r] = pggpu_mix64(prio[r] ^ salt);
}

static pggpu_status offer(pggpu_sample *s, const double *x, int64_t rs, int64_t cs, int64_t n,
						  const uint64_t *given, pggpu_error *err);

pggpu_status
pggpu_sample_offer(pggpu_sample *s, const double *x, int64_t stride, int64_t n, pggpu_error *err)
{
	return pggpu_sample_offer_prio(s, x, stride, n, NULL, err);
}

pggpu_status
pggpu_sample_offer_prio(pggpu_sample *s, const double *x, int64_t stride, int64_t n,
						const uint64_t *prio, pggpu_error *err)
{
	return offer(s, x, 1, stride, n, prio, err);
}

pggpu_status
pggpu_sample_offer_rows(pggpu_sample *s, const double *x, int64_t n, const uint64_t *prio,
						pggpu_error *err)
{
	if (prio == NULL)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "rows offered row by row need their priorities");
	return offer(s, x, s->d, 1, n, prio, err);
}

/* n rows, value j of row r at x[r * rs + j * cs] (priorities given, else rs = 1: column-major) */
static pggpu_status
offer(pggpu_sample *s, const double *x, int64_t rs, int64_t cs, int64_t n, const uint64_t *given,
	  pggpu_error *err)
{
	const uint64_t *prio;
	int			d = s->d;

	if (s->sorted)
		return pggpu_fail(err, PGGPU_ERR_INVALID, "rows offered to a sample already taken");
	if (n <= 0)
		return PGGPU_OK;
	if (n > s->hash_cap)
	{
		uint64_t   *h = (uint64_t *) realloc(s->hash, sizeof(uint64_t) * n);
		int64_t    *ps,
				   *pr;

		if (h)
			s->hash = h;
		ps = (int64_t *) realloc(s->pend_slot, sizeof(int64_t) * n);
		if (ps)
			s->pend_slot = ps;
		pr = (int64_t *) realloc(s->pend_r, sizeof(int64_t) * n);
		if (pr)
			s->pend_r = pr;
		if (!h || !ps || !pr)
			return pggpu_fail(err, PGGPU_ERR_HOST_MEMORY, "out of host memory");
		s->hash_cap = n;
	}
	s->x = x;
	s->rs = rs;
	s->cs = cs;
	s->npend = 0;
	s->offers++;
	if (given == NULL)
	{
		pggpu_sample_priorities(s->hash, x, cs, n, d, s->seed);
		pggpu_sample_weigh_priorities(s->hash, s->ow, n);
	}
	prio = given ? given : s->hash;
	for (int64_t r = 0; r < n; r++)
	{
		uint64_t	p = prio[r];
		const double *row = x + r * rs;
		int64_t		slot;

		if (s->kept == s->m)
		{
			/* the heap's top is the worst kept: a row must come before it */
			if (p > s->heap[0].prio ||
				(p == s->heap[0].prio &&
				 compare_row(s, p, row, cs, s->ow ? s->ow[r] : 1.0, &s->heap[0]) >= 0))
				continue;
			slot = s->heap[0].slot;
		}
		else
		{
			if (s->kept == s->cap && grow(s, s->kept + 1, err) != PGGPU_OK)
				return err ? err->code : PGGPU_ERR_HOST_MEMORY;
			slot = s->kept;
		}
		/* (copied at the end: a row that enters a slot taken this offer replaces its row) */
		if (s->stamp[slot] == s->offers)
			s->pend_r[s->pidx[slot]] = r;
		else
		{
			s->stamp[slot] = s->offers;
			s->pidx[slot] = s->npend;
			s->pend_slot[s->npend] = slot;
			s->pend_r[s->npend++] = r;
		}
		if (s->kept == s->m)
		{
			s->heap[0].prio = p;
			sift_down(s, 0, s->kept);
		}
		else
		{
			s->heap[s->kept].prio = p;
			s->heap[s->kept].slot = slot;
			sift_up(s, s->kept++);
		}
	}
	flush_pending(s);
	s->offered += n;
	s->ow = NULL;				/* (the weights were this offer's) */
	return PGGPU_OK;
}

void
pggpu_sample_set_interrupts(pggpu_sample *s, pggpu_interrupt_fn fn, void *arg)
{
	s->interrupt = fn;
	s->interrupt_arg = arg;
}

int64_t
pggpu_sample_offered(const pggpu_sample *s)
{
	return s->offered;
}

int64_t
pggpu_sample_result(pggpu_sample *s, const void **rows, const int64_t **order)
{
	/* heapsort: the largest to the end, so heap[] ends ascending */
	if (!s->sorted)
	{
		for (int64_t end = s->kept - 1; end > 0; end--)
		{
			entry		t = s->heap[0];

			if (s->interrupt && (end & 65535) == 0)
				s->interrupt(s->interrupt_arg);

			s->heap[0] = s->heap[end];
			s->heap[end] = t;
			sift_down(s, 0, end);
		}
		s->order = (int64_t *) malloc(sizeof(int64_t) * (s->kept > 0 ? s->kept : 1));
		if (s->order == NULL)
			return -1;
		for (int64_t t = 0; t < s->kept; t++)
			s->order[t] = s->heap[t].slot;
		s->sorted = true;
	}
	*rows = s->f32 ? (const void *) s->rows32 : (const void *) s->rows;
	*order = s->order;
	return s->kept;
}

void
pggpu_sample_close(pggpu_sample *s)
{
	if (s == NULL)
		return;
	free(s->rows);
	free(s->rows32);
	free(s->w);
	free(s->heap);
	free(s->order);
	free(s->stamp);
	free(s->pidx);
	free(s->pend_slot);
	free(s->pend_r);
	free(s->hash);
	free(s);
}
