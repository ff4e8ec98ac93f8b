/*
 * keys.c - the ids of rows, of any type: a table keyed by uuid, text or a
 * composite (through a view) gets its keys back as they are, in a column of
 * their type that joins back to it without a cast.
 *
 * SQL cannot type a result column by a relation named at run time, so the
 * keyed overloads of gpu_kmeans, gpu_kmeans_fit, gpu_kmeans_assign and
 * gpu_kmeans_apply take the type as a value, `id_type => NULL::uuid`
 * (anyelement), and return `id anyelement` (`ids anyarray`); the others keep
 * returning bigint ids of integer columns.  A keyed call runs the same C
 * function as the other (pg_gpu_call_keyed leaves its id_type out).
 * gpu_knn's keyed overload takes two, query_id_type anyelement and
 * base_id_type anycompatible (two independent polymorphic families).
 *
 * An id travels through the read, the parallel workers' parts and the
 * results as an int64 (PgGpuKeys): a key passed by value is its Datum; one
 * passed by reference is an offset to its bytes, in the part's key area
 * (rows.c) and then in the call's store, where the leader copies them as it
 * takes each part.  The compute layer never sees ids.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/typcache.h"

#include "pg_gpu.h"

void
pg_gpu_keys_init(PgGpuKeys *keys, Oid type)
{
	memset(keys, 0, sizeof(*keys));
	keys->type = type;
	keys->cxt = CurrentMemoryContext;
	get_typlenbyvalalign(type, &keys->typlen, &keys->typbyval, &keys->typalign);
}

int64
pg_gpu_keys_add(PgGpuKeys *keys, Datum key)
{
	Size		n,
				at;

	if (keys->typbyval)
		return (int64) key;
	n = datumGetSize(key, false, keys->typlen);
	at = MAXALIGN(keys->used);
	if (at + n > keys->cap)
	{
		Size		cap = Max(keys->cap * 2, Max(at + n, (Size) 64 * 1024));

		keys->bytes = keys->bytes ? repalloc_huge(keys->bytes, cap) :
			MemoryContextAllocHuge(keys->cxt, cap);
		keys->cap = cap;
	}
	memcpy(keys->bytes + at, DatumGetPointer(key), n);
	keys->used = at + n;
	return (int64) at;
}

void
pg_gpu_keys_take(PgGpuKeys *keys, const PgGpuPart *part, const int64 *ids, int64 n, int64 *out)
{
	if (part->keylen == 0)
	{
		memcpy(out, ids, sizeof(int64) * n);
		return;
	}
	for (int64 i = 0; i < n; i++)
	{
		if (ids[i] < 0 || (Size) ids[i] >= part->keyused)
			elog(ERROR, "pg_gpu: a part's id at %lld of %zu bytes", (long long) ids[i], part->keyused);
		out[i] = pg_gpu_keys_add(keys, pg_gpu_part_key(part, ids[i]));
	}
}

double
pg_gpu_key_bytes(const PgGpuSource *src)
{
	int16		typlen;
	bool		typbyval;
	int32		width;

	if (src->idname == NULL)
		return 0;
	get_typlenbyval(src->idtype, &typlen, &typbyval);
	if (typbyval)
		return 8;
	if (typlen > 0)
		return 8 + MAXALIGN(typlen);
	/* a varlena: its average width where the table has statistics */
	width = src->idatt >= 0 ? get_attavgwidth(src->relid, (AttrNumber) (src->idatt + 1)) : 0;
	return 8 + MAXALIGN(VARHDRSZ + (width > 0 ? width : 32));
}

/*
 * ERROR: the id column idcol (named, or the primary key) is not of the
 * type the ids are returned as (keytype: see pg_gpu_resolve_source)
 */
void
pg_gpu_key_mismatch(const PgGpuSource *src, TupleDesc td, int idcol, Oid keytype, bool named)
{
	Oid			type = TupleDescAttr(td, idcol)->atttypid;
	const char *name = NameStr(TupleDescAttr(td, idcol)->attname);
	char	   *what = named ? psprintf("id column \"%s\"", name) :
		psprintf("the primary key \"%s\" of \"%s\"", name, src->relname);

	if (!OidIsValid(keytype))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s is of type %s, not an integer type", what, format_type_be(type)),
				 errhint("Pass id_type => NULL::%s to have the ids returned as %s (without it, they are the "
						 "bigint of an integer column).", format_type_be(type), format_type_be(type))));
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("%s is of type %s, not %s (id_type)", what, format_type_be(type), format_type_be(keytype)),
			 errhint("Pass id_type => NULL::%s.", format_type_be(type))));
}

/* whether an id column of (base) type suits ids returned as keytype */
bool
pg_gpu_key_fits(Oid type, Oid keytype)
{
	return !OidIsValid(keytype) ? pg_gpu_is_integer_type(type) :
		keytype == ANYELEMENTOID || type == keytype;
}

Oid
pg_gpu_key_type_arg(FunctionCallInfo fcinfo, int n)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, n);
	Oid			base;
	TypeCacheEntry *tc;

	if (!OidIsValid(type))
		ereport(ERROR,
				(errcode(ERRCODE_INDETERMINATE_DATATYPE),
				 errmsg("could not determine the type of id_type"),
				 errhint("Pass id_type => NULL::uuid (the id column's type).")));
	base = getBaseType(type);
	if (get_typtype(base) == TYPTYPE_PSEUDO)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("id_type cannot be of type %s", format_type_be(type)),
				 errhint("Pass NULL cast to the id column's type; for a key of several columns, a view "
						 "whose id column is of a composite type made with CREATE TYPE.")));
	tc = lookup_type_cache(base, TYPECACHE_EQ_OPR);
	if (!OidIsValid(tc->eq_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("ids of type %s cannot be returned: the type has no equality operator", format_type_be(type)),
				 errhint("The ids identify rows to join back to: use a column whose type has one (uuid, text, bigint, ...).")));
	return base;
}

Datum
pg_gpu_call_keyed(FunctionCallInfo fcinfo, int at, int count, PgGpuKeyedFn fn)
{
	Oid			keytypes[2] = {InvalidOid, InvalidOid};
	LOCAL_FCINFO(sub, FUNC_MAX_ARGS);
	Datum		result;
	int			j = 0;

	Assert(count >= 1 && count <= 2);
	/*
	 * The types are wanted by a call's first run only: a value-per-call
	 * result's later calls (fn_extra set) only hand out its rows
	 */
	if (fcinfo->flinfo->fn_extra == NULL)
		for (int i = 0; i < count; i++)
			keytypes[i] = pg_gpu_key_type_arg(fcinfo, at + i);

	/*
	 * The same function information (the call's expression, its
	 * value-per-call state in fn_extra) and result information: only the
	 * arguments move down past the id types.
	 */
	InitFunctionCallInfoData(*sub, fcinfo->flinfo, fcinfo->nargs - count, fcinfo->fncollation,
							 fcinfo->context, fcinfo->resultinfo);
	for (int i = 0; i < fcinfo->nargs; i++)
		if (i < at || i >= at + count)
			sub->args[j++] = fcinfo->args[i];
	result = fn(sub, keytypes);
	fcinfo->isnull = sub->isnull;
	return result;
}
