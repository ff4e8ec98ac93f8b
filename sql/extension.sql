-- Runs first: installs the extension for the other tests and shows its
-- functions as \df shows them, with their comments.
-- The upgrade path from 1.0 gives the same objects as a fresh install.
CREATE EXTENSION pg_gpu VERSION '1.0';
ALTER EXTENSION pg_gpu UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_gpu';
CREATE TEMP TABLE upgraded AS
SELECT p.oid::regprocedure::text AS function, pg_get_function_result(p.oid) AS result,
       p.provolatile, p.proparallel, p.proisstrict, obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_gpu';
DROP EXTENSION pg_gpu;
CREATE EXTENSION pg_gpu;
SELECT extversion FROM pg_extension WHERE extname = 'pg_gpu';
(SELECT p.oid::regprocedure::text AS function, pg_get_function_result(p.oid) AS result,
        p.provolatile, p.proparallel, p.proisstrict, obj_description(p.oid, 'pg_proc') AS comment
 FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
 JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_gpu'
 EXCEPT SELECT * FROM upgraded)
UNION ALL
(SELECT * FROM upgraded
 EXCEPT
 SELECT p.oid::regprocedure::text, pg_get_function_result(p.oid),
        p.provolatile, p.proparallel, p.proisstrict, obj_description(p.oid, 'pg_proc')
 FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
 JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_gpu');
DROP TABLE upgraded;
\df gpu_*
SELECT p.oid::regprocedure AS function, obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_gpu'
ORDER BY p.oid::regprocedure::text COLLATE "C";
-- settings
SELECT name, enumvals, context, unit, boot_val FROM pg_settings WHERE name LIKE 'pg_gpu.%' ORDER BY name;
