-- Runs first: installs the extension for the other tests and shows its
-- functions as \df shows them, with their comments.
CREATE EXTENSION pg_gpu;
\df gpu_*
SELECT p.oid::regprocedure AS function, obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_gpu'
ORDER BY 1::text;
-- settings
SELECT name, enumvals, context FROM pg_settings WHERE name LIKE 'pg_gpu.%';
