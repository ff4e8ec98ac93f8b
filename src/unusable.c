/*
 * unusable.c - the NOTICE of the rows a read left out, and the ERROR of a
 * read that found no usable row, its detail naming the columns at fault
 * (found by reading the columns once more, on this path only)
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "pg_gpu.h"

/* the words of the notice below for a weighted read's rows skipped by their weight */
static const char *
weight_words(const PgGpuSource *src)
{
	return src->wname ? psprintf(" (or weight \"%s\")", src->wname) : src->mweights ? " (or M)" : "";
}

/* a NOTICE of the rows left out (NULL, NaN, infinite; zero for cosine) and what becomes of them */
void
pg_gpu_notice_skipped(const PgGpuSource *src, const PgGpuRows *rows, const char *skipped)
{
	if (rows->ninvalid > 0 && src->veckind == PG_GPU_VEC_GEOMETRY)
		ereport(NOTICE,
				(errmsg("%lld of %lld rows of \"%s\" have a NULL or empty point, or NaN or infinite coordinates%s; %s",
						(long long) rows->ninvalid, (long long) (rows->ninvalid + rows->nvalid),
						src->relname, weight_words(src), skipped)));
	else if (rows->ninvalid > 0 && src->veckind != PG_GPU_VEC_NONE)
		ereport(NOTICE,
				(errmsg("%lld of %lld rows of \"%s\" have a NULL vector, or NULL, NaN or infinite elements%s%s; %s",
						(long long) rows->ninvalid, (long long) (rows->ninvalid + rows->nvalid),
						src->relname, src->normalize ? ", or a zero vector" : "", weight_words(src), skipped)));
	else if (rows->ninvalid > 0)
		ereport(NOTICE,
				(errmsg("%lld of %lld rows of \"%s\" have NULL, NaN or infinite values in the used columns%s%s; %s",
						(long long) rows->ninvalid, (long long) (rows->ninvalid + rows->nvalid),
						src->relname, src->normalize ? ", or are zero in all of them" : "", weight_words(src), skipped)));
}

/*
 * The ERROR for a read that found no usable row.  Its detail names the
 * columns at fault: those NULL, NaN or infinite in every row, else those
 * that are so in some row.  They are found by reading the columns once more
 * (only on this path), the values converted as the read converts them.
 */
void
pg_gpu_no_usable_rows(const PgGpuSource *src, const PgGpuRows *rows)
{
	int64	   *bad = palloc0(sizeof(int64) * src->ncols);
	int64		total = 0;
	char	  **all = palloc(sizeof(char *) * src->ncols);
	char	  **some = palloc(sizeof(char *) * src->ncols);
	int			nall = 0,
				nsome = 0;
	Portal		portal;
	char	   *cols;

	if (rows->ninvalid == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" has no usable rows", src->relname),
				 errdetail("It has no rows.")));
	if (src->veckind != PG_GPU_VEC_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" has no usable rows", src->relname),
				 errdetail("Every vector of column \"%s\" is NULL or has a NULL, NaN or infinite element%s%s.",
						   src->colnames[0], src->normalize ? ", or is zero (no direction for metric cosine)" : "",
						   src->wname ? psprintf(", or its row's weight (\"%s\") is NULL, NaN or infinite", src->wname) :
						   src->mweights ? ", or its M (its weight) is NaN or infinite" : ""),
				 errhint("Rows with such vectors are skipped; filter or fill them in a view.")));
	if (src->normalize)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" has no usable rows", src->relname),
				 errdetail("Every row has a NULL, NaN or infinite value in the columns %s, or is zero in all of them (no direction for metric cosine).",
						   pg_gpu_column_list(src->colnames, src->natts, false)),
				 errhint("Rows with NULL, NaN or infinite values, and with metric cosine zero rows, are skipped.")));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	portal = SPI_cursor_open_with_args(NULL, pg_gpu_source_select(src, false), 0, NULL, NULL, NULL,
									   true, 0);
	for (;;)
	{
		CHECK_FOR_INTERRUPTS();
		SPI_cursor_fetch(portal, true, 10000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
			for (int j = 0; j < src->ncols; j++)
			{
				bool		isnull;
				Datum		v = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
											  j + 1, &isnull);

				if (isnull || !isfinite(pg_gpu_datum_to_double(v, src->coltypes[j])))
					bad[j]++;
			}
		total += SPI_processed;
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_finish();

	for (int j = 0; j < src->ncols; j++)
	{
		if (bad[j] == total)
			all[nall++] = src->colnames[j];
		if (bad[j] > 0)
			some[nsome++] = src->colnames[j];
	}
	/* the values all usable: the rows' weights are not */
	if (nall == 0 && nsome == 0 && PG_GPU_WEIGHTED(src))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relation \"%s\" has no usable rows", src->relname),
				 src->wname ?
				 errdetail("Every row's weight (column \"%s\") is NULL, NaN or infinite.", src->wname) :
				 errdetail("Every point's M (its weight) is NaN or infinite."),
				 errhint("A row weighs 0 or more; fill the weights, or pass weight_column => another column.")));
	cols = nall > 0 ? pg_gpu_column_list(all, nall, false) : pg_gpu_column_list(some, nsome, false);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("relation \"%s\" has no usable rows", src->relname),
			 nall > 0 ?
			 errdetail_plural("Column %s is NULL, NaN or infinite in every row.",
							  "Columns %s are NULL, NaN or infinite in every row.", nall, cols) :
			 errdetail("Every row has a NULL, NaN or infinite value in one of the columns %s.", cols),
			 src->defaulted ?
			 errhint("The columns were chosen by default (every numeric column); pass columns => ARRAY['...'] naming those to use.") :
			 errhint("Rows with NULL, NaN or infinite values in the used columns are skipped; filter or fill them in a view.")));
}
