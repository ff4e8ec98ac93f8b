/*
 * gpus.c - the GPUs a call uses (pg_gpu.gpus) and the shares its rows are
 * dealt to (pg_gpu.parts).
 *
 * A k-means call's rows go to the shares a batch at a time, in turn, so the
 * shares are even whatever the table's statistics say; each share is one
 * data set on its GPU (or, past pg_gpu.kmeans_gpu_memory, several, streamed
 * through it), and every iteration adds their sums in share order on the
 * host (parts.c, together.c: the GPUs compute at once).  gpu_matmul cuts
 * a's rows into as many contiguous shares.  A call too small to gain from
 * several GPUs runs on the first (pg_gpu_split_kmeans, _product).  On the
 * CPU, pg_gpu.parts splits the same way, which is how the combining is
 * tested without a GPU.
 */
#include "postgres.h"

#include "utils/guc.h"

#include "pg_gpu.h"

char	   *pg_gpu_gpus = NULL;
int			pg_gpu_parts = 0;

/*
 * The GPU indexes of a pg_gpu.gpus value into out (at most max), their
 * number; -1 for "all", -2 when it does not parse (*why says why)
 */
static int
parse_gpus(const char *s, int *out, int max, const char **why)
{
	int			n = 0;

	while (*s == ' ')
		s++;
	if (pg_strcasecmp(s, "all") == 0 || *s == '\0')
		return -1;
	for (;;)
	{
		char	   *end;
		long		v;

		while (*s == ' ')
			s++;
		errno = 0;
		v = strtol(s, &end, 10);
		if (end == s || errno != 0 || v < 0 || v > 1023)
		{
			*why = "Give \"all\" or a list of GPU indexes (from gpu_info()), such as '0,1'.";
			return -2;
		}
		for (int i = 0; i < n; i++)
			if (out[i] == (int) v)
			{
				*why = "A GPU is named twice; to split the rows of one GPU, set pg_gpu.parts.";
				return -2;
			}
		if (n == max)
		{
			*why = psprintf("At most %d GPUs can be named.", max);
			return -2;
		}
		out[n++] = (int) v;
		s = end;
		while (*s == ' ')
			s++;
		if (*s == '\0')
			return n;
		if (*s++ != ',')
		{
			*why = "Separate the GPU indexes with commas, such as '0,1'.";
			return -2;
		}
	}
}

bool
pg_gpu_check_gpus(char **newval, void **extra, GucSource source)
{
	int			list[PGGPU_MAX_THREADS];
	const char *why = NULL;

	if (*newval == NULL || parse_gpus(*newval, list, PGGPU_MAX_THREADS, &why) != -2)
		return true;
	GUC_check_errdetail("%s", why);
	return false;
}

/*
 * The usable GPUs' indexes, and how many GPUs CUDA sees: asked once a
 * backend (as pg_gpu.c's count), from the GPUs' properties alone
 */
static int
usable_gpus(const int **usable, int *total)
{
	static int	list[PGGPU_MAX_THREADS];
	static int	nlist = -1,
				seen;

	if (nlist < 0)
	{
		pggpu_error err = {0};

		nlist = pggpu_gpu_list(list, PGGPU_MAX_THREADS, &seen, &err);
	}
	*usable = list;
	*total = seen;
	return nlist;
}

int
pg_gpu_shares(pggpu_backend backend, int *gpus)
{
	int			list[PGGPU_MAX_THREADS];
	int			n;
	const char *why = NULL;

	if (backend == PGGPU_BACKEND_CPU)
	{
		n = pg_gpu_parts > 0 ? pg_gpu_parts : 1;
		for (int i = 0; i < n; i++)
			gpus[i] = -1;
		return n;
	}
	n = parse_gpus(pg_gpu_gpus ? pg_gpu_gpus : "all", list, PGGPU_MAX_THREADS, &why);
	{
		const int  *usable;
		int			total;
		int			nu = usable_gpus(&usable, &total);

		if (n == -1)
		{
			/* every usable GPU */
			memcpy(list, usable, sizeof(int) * nu);
			n = nu;
		}
		for (int i = 0; i < n; i++)
		{
			bool		ok = false;

			for (int u = 0; u < nu; u++)
				ok |= usable[u] == list[i];
			if (!ok)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("pg_gpu.gpus names GPU %d, which %s", list[i],
								list[i] >= total ? "this host does not have" : "this build of pg_gpu cannot use"),
						 list[i] >= total ? errdetail("CUDA sees %d GPU%s.", total, total == 1 ? "" : "s")
						 : errdetail("Its compute capability is below the build's target."),
						 errhint("SELECT * FROM gpu_info() lists the GPUs; set pg_gpu.gpus to 'all' or to some of them.")));
		}
	}
	if (n < 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("no GPU can be used")));
	/* pg_gpu.parts shares (0: one a GPU), dealt to the GPUs in turn */
	for (int i = 0; i < (pg_gpu_parts > 0 ? pg_gpu_parts : n); i++)
		gpus[i] = list[i % n];
	return pg_gpu_parts > 0 ? pg_gpu_parts : n;
}

/*
 * Whether a k-means call of rows (as the planner estimates them; 0: not
 * known, then yes) of d columns into k clusters (0: not known) is worth
 * its rows dealt to nshares GPUs; pg_gpu.parts set: always.  Its step on
 * one GPU must be long enough to pay for the call's once costs, and what
 * each step saves must exceed what combining the shares costs a step:
 * with the FP16 product, 10^6 x 768 at k = 4096 took 29 ms a step on one
 * H200 and 58 ms over two (the estimates: 38 ms, 41 ms to combine).
 */
bool
pg_gpu_split_kmeans(double rows, int d, int k, int nshares)
{
	double		one;

	if (pg_gpu_parts > 0 || rows <= 0)
		return true;
	one = pggpu_estimate_step_ms(rows, d, k, pg_gpu_kmeans_precision == PG_GPU_PRECISION_DOUBLE);
	return one >= PG_GPU_SPLIT_MIN_MS &&
		(k <= 0 || one * (nshares - 1) / nshares > pggpu_estimate_combine_ms(k, d));
}

/* whether an m x k by k x n product is worth its rows of a split over several GPUs */
bool
pg_gpu_split_product(double m, double n, double k)
{
	return pg_gpu_parts > 0 || m * n * k / 3e10 >= PG_GPU_SPLIT_MIN_MS;
}
