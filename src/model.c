/*
 * model.c - a k-means model as a jsonb value: everything needed to apply it
 * (its columns by name and their kinds, the metric, the scaling, the
 * centroids) and the figures of its fit.  A jsonb value can be stored in any
 * table, dumped and restored, read in psql (model->'centroids') and checked
 * with jsonb's operators; pg_gpu reads it back here, and refuses a value
 * that is not one of its models with a message naming what is wrong.
 *
 * Doubles are written in their shortest exact decimal form (as float8out
 * with extra_float_digits > 0), whatever the session's settings, so a model
 * read back holds the very doubles that were fit: applied to the rows it
 * was fit on, it gives the fit's clusters.
 */
#include "postgres.h"

#include <math.h>

#include "common/shortest_dec.h"
#include "lib/stringinfo.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/fmgrprotos.h"

#include "pg_gpu.h"

#define MODEL_KIND "pg_gpu k-means model"
#define MODEL_VERSION 1

/* ---- writing ---------------------------------------------------------------- */

static void
put_double(StringInfo s, double v)
{
	char		buf[DOUBLE_SHORTEST_DECIMAL_LEN];

	if (!isfinite(v))
	{
		appendStringInfoString(s, "null");
		return;
	}
	double_to_shortest_decimal_buf(v, buf);
	appendStringInfoString(s, buf);
}

static void
put_key(StringInfo s, const char *key)
{
	appendStringInfoString(s, s->len > 1 ? ", " : "");
	escape_json(s, key);
	appendStringInfoString(s, ": ");
}

static void
put_doubles(StringInfo s, const double *v, int n)
{
	appendStringInfoChar(s, '[');
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(s, ", ");
		put_double(s, v[i]);
	}
	appendStringInfoChar(s, ']');
}

static void
put_matrix(StringInfo s, const double *m, int rows, int cols)
{
	appendStringInfoChar(s, '[');
	for (int r = 0; r < rows; r++)
	{
		if (r > 0)
			appendStringInfoString(s, ", ");
		put_doubles(s, m + (int64) r * cols, cols);
	}
	appendStringInfoChar(s, ']');
}

static void
put_strings(StringInfo s, char *const *v, int n)
{
	appendStringInfoChar(s, '[');
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(s, ", ");
		escape_json(s, v[i]);
	}
	appendStringInfoChar(s, ']');
}

static const char *
input_name(PgGpuVecKind kind)
{
	return kind == PG_GPU_VEC_NONE ? "columns" : kind == PG_GPU_VEC_GEOMETRY ? "geometry" : "vector";
}

Datum
pg_gpu_model_to_jsonb(const PgGpuModel *m)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '{');
	put_key(&s, "kind");
	escape_json(&s, MODEL_KIND);
	put_key(&s, "version");
	appendStringInfo(&s, "%d", MODEL_VERSION);
	put_key(&s, "k");
	appendStringInfo(&s, "%d", m->k);
	put_key(&s, "dims");
	appendStringInfo(&s, "%d", m->d);
	put_key(&s, "input");
	escape_json(&s, input_name(m->veckind));
	put_key(&s, "columns");
	put_strings(&s, m->columns, m->ncols);
	put_key(&s, "column_types");
	put_strings(&s, m->types, m->ncols);
	put_key(&s, "metric");
	escape_json(&s, m->metric == PGGPU_METRIC_COSINE ? "cosine" : "euclidean");
	put_key(&s, "scale");
	escape_json(&s, m->standard ? "standard" : "none");
	if (m->standard)
	{
		put_key(&s, "mean");
		put_doubles(&s, m->mean, m->d);
		put_key(&s, "std");
		put_doubles(&s, m->std, m->d);
	}
	put_key(&s, "centroids");
	put_matrix(&s, m->centroids, m->k, m->d);
	if (m->standard)
	{
		put_key(&s, "scaled_centroids");
		put_matrix(&s, m->scaled, m->k, m->d);
	}
	put_key(&s, "sizes");
	appendStringInfoChar(&s, '[');
	for (int c = 0; c < m->k; c++)
		appendStringInfo(&s, "%s" INT64_FORMAT, c > 0 ? ", " : "", m->sizes[c]);
	appendStringInfoChar(&s, ']');
	put_key(&s, "inertia");
	put_double(&s, m->inertia);
	put_key(&s, "iterations");
	appendStringInfo(&s, "%d", m->iterations);
	put_key(&s, "converged");
	appendStringInfoString(&s, m->converged ? "true" : "false");
	put_key(&s, "rows");
	appendStringInfo(&s, INT64_FORMAT, m->rows);
	put_key(&s, "relation");
	escape_json(&s, m->relation);
	put_key(&s, "init");
	escape_json(&s, m->init);
	put_key(&s, "seed");
	appendStringInfo(&s, INT64_FORMAT, m->seed);
	put_key(&s, "n_init");
	appendStringInfo(&s, "%d", m->n_init);
	put_key(&s, "max_iter");
	appendStringInfo(&s, "%d", m->max_iter);
	put_key(&s, "tol");
	put_double(&s, m->tol);
	put_key(&s, "device");
	escape_json(&s, m->device);
	appendStringInfoChar(&s, '}');
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data));
}

/* ---- reading ---------------------------------------------------------------- */

pg_noreturn static void
bad_model(const char *fmt,...) pg_attribute_printf(1, 2);

static void
bad_model(const char *fmt,...)
{
	va_list		ap;
	char		buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("model is not a pg_gpu k-means model"),
			 errdetail("%s", buf),
			 errhint("Pass the model column of gpu_kmeans_fit (or gpu_kmeans_choose_k), unchanged.")));
}

static JsonbValue *
get_key(JsonbContainer *c, const char *key, enum jbvType want, bool required)
{
	JsonbValue *v = getKeyJsonValueFromContainer(c, key, strlen(key), NULL);

	if (v == NULL || v->type == jbvNull)
	{
		if (required)
			bad_model("Key \"%s\" is missing.", key);
		return NULL;
	}
	if (v->type != want)
		bad_model("Key \"%s\" has the wrong type.", key);
	return v;
}

static double
num_value(const JsonbValue *v, const char *what)
{
	if (v->type != jbvNumeric)
		bad_model("%s is not a number.", what);
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

static int64
int_key(JsonbContainer *c, const char *key, int64 lo, int64 hi)
{
	JsonbValue *v = get_key(c, key, jbvNumeric, true);
	int64		i = DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));

	if (i < lo || i > hi)
		bad_model("Key \"%s\" is out of range.", key);
	return i;
}

static char *
str_key(JsonbContainer *c, const char *key, bool required)
{
	JsonbValue *v = get_key(c, key, jbvString, required);

	return v ? pnstrdup(v->val.string.val, v->val.string.len) : NULL;
}

/* an array of n elements (jbvBinary container), else bad_model */
static JsonbContainer *
array_key(JsonbContainer *c, const char *key, int n, bool required)
{
	JsonbValue *v = get_key(c, key, jbvBinary, required);

	if (v == NULL)
		return NULL;
	if (!JsonContainerIsArray(v->val.binary.data) || (int) JsonContainerSize(v->val.binary.data) != n)
		bad_model("Key \"%s\" is not an array of %d elements.", key, n);
	return v->val.binary.data;
}

/* n finite doubles from an array (of arrays when cols > 0: rows x cols) */
static double *
doubles_key(JsonbContainer *c, const char *key, int rows, int cols, bool required)
{
	JsonbContainer *a = array_key(c, key, rows, required);
	double	   *out;

	if (a == NULL)
		return NULL;
	out = palloc(sizeof(double) * rows * Max(cols, 1));
	for (int r = 0; r < rows; r++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(a, r);

		if (cols == 0)
			out[r] = num_value(v, key);
		else
		{
			JsonbContainer *row;

			if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data) ||
				(int) JsonContainerSize(v->val.binary.data) != cols)
				bad_model("Row %d of \"%s\" is not an array of %d numbers.", r + 1, key, cols);
			row = v->val.binary.data;
			for (int j = 0; j < cols; j++)
				out[(int64) r * cols + j] = num_value(getIthJsonbValueFromContainer(row, j), key);
		}
	}
	for (int64 i = 0; i < (int64) rows * Max(cols, 1); i++)
		if (!isfinite(out[i]))
			bad_model("\"%s\" holds a value that is not finite.", key);
	return out;
}

PgGpuModel *
pg_gpu_model_from_jsonb(Jsonb *jb)
{
	JsonbContainer *c = &jb->root;
	PgGpuModel *m = palloc0(sizeof(PgGpuModel));
	char	   *s;
	JsonbContainer *a;

	if (!JB_ROOT_IS_OBJECT(jb))
		bad_model("It is not a JSON object.");
	s = str_key(c, "kind", true);
	if (strcmp(s, MODEL_KIND) != 0)
		bad_model("Its kind is \"%s\".", s);
	if (int_key(c, "version", 1, INT_MAX) != MODEL_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("model version %lld is not supported by this pg_gpu",
						(long long) int_key(c, "version", 1, INT_MAX)),
				 errhint("Update pg_gpu, or fit the model again.")));
	m->k = (int) int_key(c, "k", 1, INT_MAX);
	m->d = (int) int_key(c, "dims", 1, PG_GPU_MAX_VECTOR_DIMS);
	s = str_key(c, "input", true);
	if (strcmp(s, "columns") == 0)
		m->veckind = PG_GPU_VEC_NONE;
	else if (strcmp(s, "vector") == 0)
		m->veckind = PG_GPU_VEC_FLOAT8;
	else if (strcmp(s, "geometry") == 0)
		m->veckind = PG_GPU_VEC_GEOMETRY;
	else
		bad_model("Its input is \"%s\".", s);
	m->ncols = m->veckind == PG_GPU_VEC_NONE ? m->d : 1;
	a = array_key(c, "columns", m->ncols, true);
	m->columns = palloc(sizeof(char *) * m->ncols);
	for (int i = 0; i < m->ncols; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(a, i);

		if (v->type != jbvString)
			bad_model("Element %d of \"columns\" is not a string.", i + 1);
		m->columns[i] = pnstrdup(v->val.string.val, v->val.string.len);
	}
	s = str_key(c, "metric", true);
	if (strcmp(s, "euclidean") == 0)
		m->metric = PGGPU_METRIC_EUCLIDEAN;
	else if (strcmp(s, "cosine") == 0)
		m->metric = PGGPU_METRIC_COSINE;
	else
		bad_model("Its metric is \"%s\".", s);
	s = str_key(c, "scale", true);
	if (strcmp(s, "standard") == 0)
		m->standard = true;
	else if (strcmp(s, "none") != 0)
		bad_model("Its scale is \"%s\".", s);
	m->centroids = doubles_key(c, "centroids", m->k, m->d, true);
	m->scaled = m->centroids;
	if (m->standard)
	{
		m->mean = doubles_key(c, "mean", m->d, 0, true);
		m->std = doubles_key(c, "std", m->d, 0, true);
		m->scaled = doubles_key(c, "scaled_centroids", m->k, m->d, true);
		for (int j = 0; j < m->d; j++)
			if (!(m->std[j] > 0))
				bad_model("Element %d of \"std\" is not positive.", j + 1);
	}
	if (m->metric == PGGPU_METRIC_COSINE)
		for (int c2 = 0; c2 < m->k; c2++)
		{
			bool		zero = true;

			for (int j = 0; j < m->d; j++)
				zero &= m->scaled[(int64) c2 * m->d + j] == 0;
			if (zero)
				bad_model("Centroid %d is zero, which has no direction for metric cosine.", c2 + 1);
		}
	m->relation = str_key(c, "relation", false);
	return m;
}

/* ---- applying -------------------------------------------------------------- */

static const char *
fit_on(const PgGpuModel *m)
{
	return m->veckind == PG_GPU_VEC_NONE ? "numeric columns" :
		m->veckind == PG_GPU_VEC_GEOMETRY ? "geometry points" : "a vector column";
}

void
pg_gpu_model_check_source(const PgGpuModel *m, const PgGpuSource *src)
{
	bool		ok = m->veckind == PG_GPU_VEC_NONE ? src->veckind == PG_GPU_VEC_NONE :
		m->veckind == PG_GPU_VEC_GEOMETRY ? src->veckind == PG_GPU_VEC_GEOMETRY :
		src->veckind != PG_GPU_VEC_NONE && src->veckind != PG_GPU_VEC_GEOMETRY;

	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of \"%s\" is of type %s, but the model was fit on %s",
						src->colnames[0], src->relname, format_type_be(src->coltypes[0]), fit_on(m)),
				 errhint("Apply the model to a relation whose columns named in model->'columns' are of the kinds it was fit on.")));
	if (src->ncols != m->d)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of \"%s\" has %d values a row; the model has %d dimensions",
						src->colnames[0], src->relname, src->ncols, m->d)));
}

/* what gpu_kmeans_predict keeps across the rows of a query (fn_extra) */
typedef struct PredictCache
{
	MemoryContext cxt;			/* what follows; reset when the model changes */
	Jsonb	   *jb;				/* the model's bytes, to know it again */
	PgGpuModel *m;
	double	   *x;
	/* a row argument: its type, and the model's columns in it */
	Oid			rowtype;
	int32		rowtypmod;
	int		   *atts;
	Oid		   *types;
	PgGpuVecKind colkind;		/* of a vector model's column */
} PredictCache;

static PredictCache *
predict_cache(FunctionCallInfo fcinfo, Jsonb *jb)
{
	PredictCache *pc = fcinfo->flinfo->fn_extra;
	MemoryContext old;

	if (pc && pc->jb && VARSIZE(pc->jb) == VARSIZE(jb) && memcmp(pc->jb, jb, VARSIZE(jb)) == 0)
		return pc;
	/* another model (a join of models and rows): the last one's memory goes */
	if (pc == NULL)
	{
		pc = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(PredictCache));
		pc->cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "gpu_kmeans_predict model",
										ALLOCSET_SMALL_SIZES);
		fcinfo->flinfo->fn_extra = pc;
	}
	MemoryContextReset(pc->cxt);
	memset((char *) pc + offsetof(PredictCache, jb), 0, sizeof(PredictCache) - offsetof(PredictCache, jb));
	old = MemoryContextSwitchTo(pc->cxt);
	pc->m = pg_gpu_model_from_jsonb(jb);
	pc->x = palloc(sizeof(double) * pc->m->d);
	if (pc->m->metric == PGGPU_METRIC_COSINE)
	{
		/* as the assignment pass normalises them */
		double	   *c = palloc(sizeof(double) * pc->m->k * pc->m->d);

		memcpy(c, pc->m->scaled, sizeof(double) * pc->m->k * pc->m->d);
		pggpu_unit_rows(c, pc->m->k, pc->m->d);
		pc->m->scaled = c;
	}
	/* last: a model that fails to parse is never taken for a known one */
	pc->jb = palloc(VARSIZE(jb));
	memcpy(pc->jb, jb, VARSIZE(jb));
	MemoryContextSwitchTo(old);
	return pc;
}

/* the row's columns the model needs, into pc->x; false: one is NULL */
static bool
row_values(PredictCache *pc, HeapTupleHeader th, MemoryContext mcxt)
{
	PgGpuModel *m = pc->m;
	Oid			type = HeapTupleHeaderGetTypeId(th);
	int32		typmod = HeapTupleHeaderGetTypMod(th);
	if (pc->atts == NULL || pc->rowtype != type || pc->rowtypmod != typmod)
	{
		TupleDesc	td = lookup_rowtype_tupdesc(type, typmod);
		int		   *atts = MemoryContextAlloc(mcxt, sizeof(int) * m->ncols);
		Oid		   *types = MemoryContextAlloc(mcxt, sizeof(Oid) * m->ncols);

		for (int i = 0; i < m->ncols; i++)
		{
			int			a = pg_gpu_find_column(td, m->columns[i]);
			Oid			t;
			PgGpuVecKind kind;

			if (a < 0)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("the row has no column \"%s\", which the model needs", m->columns[i]),
						 errhint("Pass a row with the model's columns (model->'columns'), or an array of their values in that order.")));
			t = getBaseType(TupleDescAttr(td, a)->atttypid);
			kind = pg_gpu_vector_kind(t);
			if (m->veckind == PG_GPU_VEC_NONE ? !pg_gpu_is_numeric_type(t) :
				(kind == PG_GPU_VEC_NONE || (kind == PG_GPU_VEC_GEOMETRY) != (m->veckind == PG_GPU_VEC_GEOMETRY)))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of the row is of type %s, but the model was fit on %s",
								m->columns[i], format_type_be(TupleDescAttr(td, a)->atttypid), fit_on(m))));
			atts[i] = a + 1;
			types[i] = t;
			pc->colkind = kind;
		}
		ReleaseTupleDesc(td);
		pc->atts = atts;
		pc->types = types;
		pc->rowtype = type;
		pc->rowtypmod = typmod;
	}
	for (int i = 0; i < m->ncols; i++)
	{
		bool		isnull;
		Datum		v = GetAttributeByNum(th, pc->atts[i], &isnull);

		if (isnull)
			return false;
		if (m->veckind == PG_GPU_VEC_NONE)
			pc->x[i] = pg_gpu_datum_to_double(v, pc->types[i]);
		else if (pg_gpu_vector_values(pc->colkind, v, m->d, pc->x, m->columns[i]) < 0)
			return false;
	}
	return true;
}

/* a bare value: an array or a vector of the model's dimensions, or one number */
static bool
bare_values(PredictCache *pc, Datum v, Oid argtype)
{
	PgGpuModel *m = pc->m;
	Oid			base = getBaseType(argtype);
	PgGpuVecKind kind = pg_gpu_vector_kind(base);
	Oid			elem = get_element_type(base);

	if (kind != PG_GPU_VEC_NONE)
	{
		if ((kind == PG_GPU_VEC_GEOMETRY) != (m->veckind == PG_GPU_VEC_GEOMETRY))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("a value of type %s cannot be assigned to a model fit on %s",
							format_type_be(argtype), fit_on(m))));
		return pg_gpu_vector_values(kind, v, m->d, pc->x, "the vector") >= 0;
	}
	if (OidIsValid(elem) && pg_gpu_is_numeric_type(getBaseType(elem)))
	{
		ArrayType  *a = DatumGetArrayTypeP(v);
		int16		len;
		bool		byval;
		char		align;
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		if (ARR_NDIM(a) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("the array has %d dimensions; a row's values are one", ARR_NDIM(a))));
		get_typlenbyvalalign(elem, &len, &byval, &align);
		deconstruct_array(a, elem, len, byval, align, &elems, &nulls, &n);
		if (n != m->d)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("the array has %d values; the model has %d dimensions", n, m->d),
					 errhint("Pass the values in the order of model->'columns'.")));
		for (int j = 0; j < n; j++)
		{
			if (nulls[j])
				return false;
			pc->x[j] = pg_gpu_datum_to_double(elems[j], getBaseType(elem));
		}
		return true;
	}
	if (pg_gpu_is_numeric_type(base) && m->d == 1 && m->veckind == PG_GPU_VEC_NONE)
	{
		pc->x[0] = pg_gpu_datum_to_double(v, base);
		return true;
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("gpu_kmeans_predict takes a row, an array of numbers, a vector or a point, not %s",
					format_type_be(argtype)),
			 errhint("Pass the table's row (gpu_kmeans_predict(model, t) FROM t), or ARRAY[...] of the values in the order of model->'columns'.")));
}

PG_FUNCTION_INFO_V1(gpu_kmeans_predict);

/*
 * gpu_kmeans_predict(model jsonb, x anyelement) -> integer: the cluster
 * (1..k) of one row under a model, on the CPU; NULL where the row has a
 * NULL, NaN or infinite value (or is zero, for cosine), as gpu_kmeans_assign
 * leaves it out.
 */
Datum
gpu_kmeans_predict(PG_FUNCTION_ARGS)
{
	PredictCache *pc = predict_cache(fcinfo, PG_GETARG_JSONB_P(0));
	PgGpuModel *m = pc->m;
	Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, 1);
	bool		ok;

	if (!OidIsValid(argtype))
		elog(ERROR, "gpu_kmeans_predict: the argument's type is not known");
	if (type_is_rowtype(argtype))
		ok = row_values(pc, PG_GETARG_HEAPTUPLEHEADER(1), pc->cxt);
	else
		ok = bare_values(pc, PG_GETARG_DATUM(1), argtype);
	for (int j = 0; ok && j < m->d; j++)
		ok = isfinite(pc->x[j]);
	if (ok && m->metric == PGGPU_METRIC_COSINE)
		ok = pg_gpu_unit_row(pc->x, 1, m->d);
	if (!ok)
		PG_RETURN_NULL();
	if (m->standard)
		for (int j = 0; j < m->d; j++)
			pc->x[j] = (pc->x[j] - m->mean[j]) / m->std[j];
	PG_RETURN_INT32(pggpu_nearest(pc->x, m->scaled, m->k, m->d, NULL) + 1);
}
