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
#include "access/detoast.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "funcapi.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
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

/*
 * The model is built as a JsonbValue tree and converted once
 * (JsonbValueToJsonb), not printed as text and parsed back by jsonb_in: no
 * JSON text of the whole model (over 250 MB for 13 million values), no
 * lexing.  Each double is still turned into a numeric through its shortest
 * exact decimal (numeric_in on a buffer of at most 25 characters):
 * PostgreSQL 15 has no exact float8 -> numeric (float8_numeric rounds to 15
 * digits), and the shortest decimal is what makes a stored model hold the
 * very doubles that were fit.
 *
 * jsonb's own limit: a container's children are addressed by 28-bit
 * offsets (JENTRY_OFFLENMASK), so the centroids, like the whole object,
 * must take under 256 MB.  A double takes about 20 bytes in jsonb (4 of
 * JEntry, 4 of varlena header, 2 of numeric header, 17 digits in 5 base-10000
 * digits of 2 bytes; up to 3 more of alignment, 2 more of header for
 * exponents beyond +-63 decimal places): about 13 million values, 6.5
 * million centroids' values with scale 'standard' (centroids and
 * scaled_centroids).  pg_gpu_model_fits estimates that before a fit;
 * ModelWriter counts the exact bytes while the tree is built, so that the
 * conversion is never attempted where it would fail (54000 after the whole
 * fit).
 */
#define MODEL_BYTES_PER_VALUE 20
#define MODEL_MAX_BYTES ((int64) JENTRY_OFFLENMASK)

typedef struct ModelWriter
{
	JsonbParseState *st;
	int64		bytes;			/* the jsonb's size so far (a close upper bound) */
	int64		n;				/* values written (for interrupts) */
} ModelWriter;

static void
push_key(ModelWriter *w, const char *key)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) key;
	v.val.string.len = strlen(key);
	pushJsonbValue(&w->st, WJB_KEY, &v);
	w->bytes += 4 + v.val.string.len;
}

/* a scalar: as an array element (in_array) or an object's value */
static void
push_scalar(ModelWriter *w, JsonbValue *v, bool in_array)
{
	pushJsonbValue(&w->st, in_array ? WJB_ELEM : WJB_VALUE, v);
	/*
	 * its JEntry, then the value; a numeric is aligned to 4 bytes (JEntries
	 * and headers are multiples of 4, so bytes % 4 follows the buffer's)
	 */
	w->bytes += 4;
	if (v->type == jbvNumeric)
		w->bytes = INTALIGN(w->bytes) + VARSIZE(v->val.numeric);
	else if (v->type == jbvString)
		w->bytes += v->val.string.len;
}

static void
push_string(ModelWriter *w, const char *str, bool in_array)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) str;
	v.val.string.len = strlen(str);
	push_scalar(w, &v, in_array);
}

static void
push_bool(ModelWriter *w, bool b)
{
	JsonbValue	v;

	v.type = jbvBool;
	v.val.boolean = b;
	push_scalar(w, &v, false);
}

static void
push_int(ModelWriter *w, int64 i, bool in_array)
{
	JsonbValue	v;

	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(i);
	push_scalar(w, &v, in_array);
}

/* a double in its shortest exact decimal form; not finite: null */
static void
push_double(ModelWriter *w, double d, bool in_array)
{
	JsonbValue	v;

	if (!isfinite(d))
		v.type = jbvNull;
	else
	{
		char		buf[DOUBLE_SHORTEST_DECIMAL_LEN];

		double_to_shortest_decimal_buf(d, buf);
		v.type = jbvNumeric;
		v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(buf),
															ObjectIdGetDatum(InvalidOid),
															Int32GetDatum(-1)));
	}
	push_scalar(w, &v, in_array);
	/* a large model takes seconds: answer a cancel or statement_timeout */
	if ((++w->n & 4095) == 0)
		CHECK_FOR_INTERRUPTS();
}

static void
begin_array(ModelWriter *w, bool in_array)
{
	pushJsonbValue(&w->st, WJB_BEGIN_ARRAY, NULL);
	/* its JEntry in the parent, aligned, its header */
	w->bytes = INTALIGN(w->bytes + 4) + 4;
	(void) in_array;
}

static void
end_array(ModelWriter *w)
{
	pushJsonbValue(&w->st, WJB_END_ARRAY, NULL);
}

static void
push_doubles(ModelWriter *w, const double *v, int n, bool in_array)
{
	begin_array(w, in_array);
	for (int i = 0; i < n; i++)
		push_double(w, v[i], true);
	end_array(w);
}

static void
push_matrix(ModelWriter *w, const double *m, int rows, int cols)
{
	begin_array(w, false);
	for (int r = 0; r < rows; r++)
		push_doubles(w, m + (int64) r * cols, cols, true);
	end_array(w);
}

static void
push_strings(ModelWriter *w, char *const *v, int n)
{
	begin_array(w, false);
	for (int i = 0; i < n; i++)
		push_string(w, v[i], true);
	end_array(w);
}

static const char *
input_name(PgGpuVecKind kind)
{
	return kind == PG_GPU_VEC_NONE ? "columns" : kind == PG_GPU_VEC_GEOMETRY ? "geometry" : "vector";
}

int64
pg_gpu_model_estimate(int64 k, int d, bool standard)
{
	return ((standard ? 2 : 1) * k * d + (standard ? 2 : 0) * (int64) d) * MODEL_BYTES_PER_VALUE;
}

bool
pg_gpu_model_fits(int64 k, int d, bool standard)
{
	/* a margin of 1 MB for the other keys (sizes, columns, figures) */
	return pg_gpu_model_estimate(k, d, standard) + k * 28 + (int64) d * 80 + (1 << 20) <= MODEL_MAX_BYTES;
}

/*
 * Whether the model of k clusters (d values each) would pass
 * jsonb's limit of 256 MB (about 13 million values, 6.5 million with scale
 * 'standard', which keeps the centroids twice); a NOTICE if so (before:
 * before the fit).  A NOTICE and a NULL model, not an error: the fit's
 * centroids, sizes and memberships are still right and returned (a k x d
 * double precision[] holds up to 134 million values), and the README allows
 * k = 1000 at d = 16000, so an error would leave such fits without any
 * result, after having run them.  Said before the fit, so that whoever
 * waits for the model knows at once.
 */
bool
pg_gpu_model_too_large(const char *fname, int k, int d, bool standard, bool before)
{
	if (before && pg_gpu_model_fits(k, d, standard))
		return false;
	ereport(NOTICE,
			(errmsg("%s: the model of k = %d clusters of %d values %s jsonb's limit of 256 MB; its model %s NULL",
					fname, k, d, before ? "would exceed" : "exceeds", before ? "will be" : "is"),
			 errdetail("A model holds k x d centroids%s, about 20 bytes a value in jsonb (%lld MB by that estimate).",
					   standard ? " twice (scaled_centroids, for scale => 'standard')" : "",
					   (long long) (pg_gpu_model_estimate(k, d, standard) >> 20)),
			 errhint("The centroids column holds the fit: store it and use gpu_kmeans_assign, or lower k or the number of columns.")));
	return true;
}

Datum
pg_gpu_model_to_jsonb(const PgGpuModel *m, bool *toolarge)
{
	ModelWriter w = {0};
	JsonbValue *res;
	MemoryContext cxt,
				old;
	Jsonb	   *jb = NULL;

	/* the tree (twice or three times the jsonb) goes with this context */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_gpu model", ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	pushJsonbValue(&w.st, WJB_BEGIN_OBJECT, NULL);
	push_key(&w, "kind");
	push_string(&w, MODEL_KIND, false);
	push_key(&w, "version");
	push_int(&w, MODEL_VERSION, false);
	push_key(&w, "k");
	push_int(&w, m->k, false);
	push_key(&w, "dims");
	push_int(&w, m->d, false);
	push_key(&w, "input");
	push_string(&w, input_name(m->veckind), false);
	push_key(&w, "columns");
	push_strings(&w, m->columns, m->ncols);
	push_key(&w, "column_types");
	push_strings(&w, m->types, m->ncols);
	push_key(&w, "metric");
	push_string(&w, m->metric == PGGPU_METRIC_COSINE ? "cosine" : "euclidean", false);
	push_key(&w, "scale");
	push_string(&w, m->standard ? "standard" : "none", false);
	if (m->standard)
	{
		push_key(&w, "mean");
		push_doubles(&w, m->mean, m->d, false);
		push_key(&w, "std");
		push_doubles(&w, m->std, m->d, false);
	}
	push_key(&w, "centroids");
	push_matrix(&w, m->centroids, m->k, m->d);
	if (m->standard)
	{
		push_key(&w, "scaled_centroids");
		push_matrix(&w, m->scaled, m->k, m->d);
	}
	push_key(&w, "sizes");
	begin_array(&w, false);
	for (int c = 0; c < m->k; c++)
		push_int(&w, m->sizes[c], true);
	end_array(&w);
	push_key(&w, "inertia");
	push_double(&w, m->inertia, false);
	push_key(&w, "iterations");
	push_int(&w, m->iterations, false);
	push_key(&w, "converged");
	push_bool(&w, m->converged);
	push_key(&w, "rows");
	push_int(&w, m->rows, false);
	if (m->sample > 0)
	{
		push_key(&w, "sample");
		push_int(&w, m->sample, false);
	}
	if (m->hierarchical)
	{
		push_key(&w, "algorithm");
		push_string(&w, "hierarchical", false);
		push_key(&w, "groups");
		push_int(&w, m->groups, false);
		push_key(&w, "trained");
		push_int(&w, m->trained, false);
	}
	if (m->weights)
	{
		push_key(&w, "weights");
		push_string(&w, m->weights, false);
	}
	push_key(&w, "relation");
	push_string(&w, m->relation, false);
	push_key(&w, "init");
	push_string(&w, m->init, false);
	push_key(&w, "seed");
	push_int(&w, m->seed, false);
	push_key(&w, "n_init");
	push_int(&w, m->n_init, false);
	push_key(&w, "max_iter");
	push_int(&w, m->max_iter, false);
	push_key(&w, "tol");
	push_double(&w, m->tol, false);
	push_key(&w, "device");
	push_string(&w, m->device, false);
	res = pushJsonbValue(&w.st, WJB_END_OBJECT, NULL);
	*toolarge = w.bytes > MODEL_MAX_BYTES;
	MemoryContextSwitchTo(old);
	if (!*toolarge)
		jb = JsonbValueToJsonb(res);	/* in the caller's context */
	MemoryContextDelete(cxt);
	return PointerGetDatum(jb);
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
			{
				out[(int64) r * cols + j] = num_value(getIthJsonbValueFromContainer(row, j), key);
				/* a large model takes seconds: answer a cancel or statement_timeout */
				if ((j & 4095) == 4095)
					CHECK_FOR_INTERRUPTS();
			}
		}
		if ((r & 4095) == 4095 || cols >= 4096)
			CHECK_FOR_INTERRUPTS();
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

const char *
pg_gpu_model_fit_on(const PgGpuModel *m)
{
	return m->veckind == PG_GPU_VEC_NONE ? "numeric columns" :
		m->veckind == PG_GPU_VEC_GEOMETRY ? "geometry points" : "a vector column";
}

/* src's columns must be of the kinds m was fit on (42804) */
static void
check_source(const PgGpuModel *m, const PgGpuSource *src)
{
	bool		ok = m->veckind == PG_GPU_VEC_NONE ? src->veckind == PG_GPU_VEC_NONE :
		m->veckind == PG_GPU_VEC_GEOMETRY ? src->veckind == PG_GPU_VEC_GEOMETRY :
		src->veckind != PG_GPU_VEC_NONE && src->veckind != PG_GPU_VEC_GEOMETRY;

	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of \"%s\" is of type %s, but the model was fit on %s",
						src->colnames[0], src->relname, format_type_be(src->coltypes[0]), pg_gpu_model_fit_on(m)),
				 errhint("Apply the model to a relation whose columns named in model->'columns' are of the kinds it was fit on.")));
	if (src->ncols != m->d)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of \"%s\" has %d values a row; the model has %d dimensions",
						src->colnames[0], src->relname, src->ncols, m->d)));
}

void
pg_gpu_model_source(const PgGpuModel *m, Oid relid, text *id_column, Oid keytype, PgGpuSource *src)
{
	Datum	   *names = palloc(sizeof(Datum) * m->ncols);

	for (int i = 0; i < m->ncols; i++)
		names[i] = CStringGetTextDatum(m->columns[i]);
	pg_gpu_resolve_sample(relid, construct_array(names, m->ncols, TEXTOID, -1, false, TYPALIGN_INT),
						  id_column, keytype, true, m->metric == PGGPU_METRIC_COSINE, -1, src);
	check_source(m, src);
}
