#include "unit.h"

/* ---- errors ------------------------------------------------------------------- */

void
expect_error(pggpu_status st, const pggpu_error *err, pggpu_status want, const char *what)
{
	CHECK(st == want && err->code == want && err->msg[0] != 0,
		  "%s: status %d (code %d, message \"%s\"), expected %d with a message",
		  what, (int) st, (int) err->code, err->msg, (int) want);
}

void
test_errors_on(pggpu_backend be)
{
	pggpu_error err;
	pggpu_data *ds = NULL;
	pggpu_status st;
	pggpu_kmeans_params p = {0};
	pggpu_kmeans_result r = {0};
	double		C[3 * 2];
	int64_t		sizes[4];
	int32_t		labels[4];
	double	   *buf;
	int64_t		B;

	set_case("errors %s", be_name(be));
	memset(&err, 0, sizeof(err));
	ds = (pggpu_data *) 1;
	st = pggpu_data_open(&ds, be, 0, 0, 0, &err);
	expect_error(st, &err, PGGPU_ERR_INVALID, "open with d = 0");
	CHECK(ds == NULL, "open with d = 0 left *out set");

	memset(&err, 0, sizeof(err));
	st = pggpu_data_open(&ds, be, 0, 2, 3, &err);
	if (!CHECK(st == PGGPU_OK, "open: %s", err.msg))
		return;
	B = pggpu_data_batch_rows(ds);

	/* pushes of 0, negative and too many rows: refused, nothing stored */
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_data_push(ds, 0, &err), &err, PGGPU_ERR_INVALID, "push of 0 rows");
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_data_push(ds, -5, &err), &err, PGGPU_ERR_INVALID, "push of -5 rows");
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_data_push(ds, B + 1, &err), &err, PGGPU_ERR_INVALID, "push of batch_rows + 1");
	CHECK(pggpu_data_rows(ds) == 0, "rows = %lld after refused pushes", (long long) pggpu_data_rows(ds));

	/* k-means / assign on an empty set */
	p.k = 1;
	p.max_iter = 10;
	p.init = PGGPU_INIT_KMEANSPP;
	r.centroids = C;
	r.sizes = sizes;
	r.labels = labels;
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_kmeans(ds, &p, &r, &err), &err, PGGPU_ERR_INVALID, "k-means on 0 rows");

	/* three rows in one partial batch */
	buf = pggpu_data_batch(ds);
	for (int r0 = 0; r0 < 3; r0++)
	{
		buf[r0] = r0 * 10.0;
		buf[B + r0] = -r0;
	}
	memset(&err, 0, sizeof(err));
	CHECK(pggpu_data_push(ds, 3, &err) == PGGPU_OK, "push of 3 rows: %s", err.msg);
	memset(&err, 0, sizeof(err));
	expect_error(pggpu_data_push(ds, 1, &err), &err, PGGPU_ERR_INVALID, "push after a partial batch");
	CHECK(pggpu_data_rows(ds) == 3, "rows = %lld after a refused push", (long long) pggpu_data_rows(ds));

	/* invalid parameters: refused before the data are touched */
	{
		static const struct
		{
			const char *what;
			int			k,
						max_iter;
			double		tol;
			pggpu_init	init;
		}			bad[] = {
			{"k = 0", 0, 10, 0, PGGPU_INIT_KMEANSPP},
			{"k = -1", -1, 10, 0, PGGPU_INIT_KMEANSPP},
			{"k > N", 4, 10, 0, PGGPU_INIT_RANDOM},
			{"max_iter = 0", 2, 0, 0, PGGPU_INIT_KMEANSPP},
			{"tol < 0", 2, 10, -0.5, PGGPU_INIT_KMEANSPP},
			{"tol NaN", 2, 10, NAN, PGGPU_INIT_KMEANSPP},
			{"given without centroids", 2, 10, 0, PGGPU_INIT_GIVEN},
		};

		for (size_t t = 0; t < sizeof(bad) / sizeof(bad[0]); t++)
		{
			p.k = bad[t].k;
			p.max_iter = bad[t].max_iter;
			p.tol = bad[t].tol;
			p.init = bad[t].init;
			p.init_centroids = NULL;
			memset(&err, 0, sizeof(err));
			expect_error(pggpu_kmeans(ds, &p, &r, &err), &err, PGGPU_ERR_INVALID, bad[t].what);
		}
		memset(&err, 0, sizeof(err));
		expect_error(pggpu_assign(ds, C, 0, labels, NULL, &err), &err, PGGPU_ERR_INVALID,
					 "assign with k = 0");
	}

	/* the set is still good after all that: k = N = 3 */
	p.k = 3;
	p.max_iter = 10;
	p.tol = 0;
	p.init = PGGPU_INIT_KMEANSPP;
	p.seed = 1;
	memset(&err, 0, sizeof(err));
	st = pggpu_kmeans(ds, &p, &r, &err);
	if (CHECK(st == PGGPU_OK, "k-means after refused calls: %s", err.msg))
	{
		/* one row each, in canonical order: (0,0), (10,-1), (20,-2) */
		CHECK(sizes[0] == 1 && sizes[1] == 1 && sizes[2] == 1 && labels[0] == 0 &&
			  labels[1] == 1 && labels[2] == 2 && C[0] == 0 && C[1] == 0 && C[2] == 10 &&
			  C[3] == -1 && C[4] == 20 && C[5] == -2 && r.inertia == 0 && r.converged,
			  "k = N = 3 gave sizes %lld %lld %lld, labels %d %d %d, inertia %g",
			  (long long) sizes[0], (long long) sizes[1], (long long) sizes[2],
			  labels[0], labels[1], labels[2], r.inertia);
	}
	pggpu_data_close(ds);
	pggpu_data_close(NULL);		/* documented as fine */
	CHECK(true, "close(NULL) returned");
}

void
test_errors(void)
{
	pggpu_error err;
	pggpu_data *ds = NULL;
	pggpu_status st;

	test_errors_on(PGGPU_BACKEND_CPU);
	set_case("errors gpu");
	if (have_gpu)
	{
		pggpu_device_info info;
		int			count;

		test_errors_on(PGGPU_BACKEND_GPU);
		set_case("errors gpu");
		memset(&err, 0, sizeof(err));
		count = pggpu_gpu_count(&err);
		memset(&err, 0, sizeof(err));
		st = pggpu_gpu_info(0, &info, &err);
		CHECK(st == PGGPU_OK && info.name[0] && info.cc_major >= 9 && info.multiprocessors > 0 &&
			  info.memory_total > 0 && info.memory_free > 0 && info.memory_free <= info.memory_total &&
			  info.driver_version > 0 && info.runtime_version > 0,
			  "gpu_info(0): status %d (%s), name \"%s\", cc %d.%d, %d SMs, %lld of %lld bytes free",
			  (int) st, err.msg, info.name, info.cc_major, info.cc_minor, info.multiprocessors,
			  (long long) info.memory_free, (long long) info.memory_total);
		memset(&err, 0, sizeof(err));
		st = pggpu_gpu_info(count + 7, &info, &err);
		CHECK(st != PGGPU_OK && err.msg[0], "gpu_info(%d) of %d GPUs: status %d", count + 7, count, (int) st);
		memset(&err, 0, sizeof(err));
		ds = (pggpu_data *) 1;
		st = pggpu_data_open(&ds, PGGPU_BACKEND_GPU, count + 7, 2, 0, &err);
		expect_error(st, &err, PGGPU_ERR_NO_GPU, "open on a GPU that does not exist");
		CHECK(ds == NULL, "failed open left *out set");
	}
	else
	{
		/* no GPU: opening a GPU data set fails cleanly */
		memset(&err, 0, sizeof(err));
		ds = (pggpu_data *) 1;
		st = pggpu_data_open(&ds, PGGPU_BACKEND_GPU, 0, 2, 0, &err);
		CHECK(st != PGGPU_OK && err.msg[0] && ds == NULL,
			  "GPU open without a GPU: status %d, message \"%s\"", (int) st, err.msg);
		CHECK(st == PGGPU_ERR_NO_GPU, "GPU open without a GPU: status %d (\"%s\"), expected PGGPU_ERR_NO_GPU",
			  (int) st, err.msg);
		gpu_skipped++;
	}
}
