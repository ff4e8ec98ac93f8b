-- gpu_info(): a row per visible GPU, none (not an error) where there is none.
-- Holds on any machine: every row it gives is sane.
SELECT count(*) = count(name) AS named,
       bool_and(compute_capability ~ '^[0-9]+\.[0-9]+$') IS NOT FALSE AS cc_format,
       bool_and(memory_total_mb > 0 AND memory_free_mb BETWEEN 0 AND memory_total_mb) IS NOT FALSE AS memory_sane,
       bool_and(multiprocessors > 0) IS NOT FALSE AS sms,
       bool_and(driver_version ~ '^[0-9]+\.[0-9]+$' AND runtime_version ~ '^[0-9]+\.[0-9]+$') IS NOT FALSE AS versions
FROM gpu_info();
SELECT pg_get_function_result('gpu_info'::regproc);
