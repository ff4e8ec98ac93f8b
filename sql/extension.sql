-- Runs first: installs the extension for the other tests and shows its
-- functions as \df shows them, with their comments.  extension/ holds one
-- install script (1.0) and the upgrades, so every install takes the path
-- from 1.0, which the listing below pins; an installation at 1.0 updated in
-- place ends at the same version.
CREATE EXTENSION pg_gpu VERSION '1.0';
ALTER EXTENSION pg_gpu UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'pg_gpu';
DROP EXTENSION pg_gpu;
CREATE EXTENSION pg_gpu;
SELECT extversion FROM pg_extension WHERE extname = 'pg_gpu';
\df gpu_*
SELECT p.oid::regprocedure AS function, obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_gpu'
ORDER BY p.oid::regprocedure::text COLLATE "C";
-- settings
SELECT name, enumvals, context, unit, boot_val FROM pg_settings WHERE name LIKE 'pg_gpu.%' ORDER BY name;
