-- gpu_matmul reads tables as SELECT would: table and column privileges
-- (42501) and row-level security.  It is not SECURITY DEFINER.
SELECT p.oid::regprocedure, prosecdef FROM pg_proc p WHERE proname = 'gpu_matmul' ORDER BY p.oid::regprocedure::text COLLATE "C";
CREATE ROLE regress_mm_reader;
CREATE TABLE m_a (row_id int, row_vec float8[], owner text);
INSERT INTO m_a VALUES (1, '{1,2}', 'alice'), (2, '{3,4}', 'bob');
CREATE TABLE m_s (row_id int, col_id int, value float8, owner text);
INSERT INTO m_s VALUES (1, 1, 1, 'alice'), (2, 2, 1, 'alice'), (1, 2, 100, 'bob');

SET ROLE regress_mm_reader;
SELECT * FROM gpu_matmul('m_a'::regclass, 'm_s'::regclass);
RESET ROLE;
-- a privilege on only some of the used columns is not enough
GRANT SELECT (row_id, owner) ON m_a TO regress_mm_reader;
GRANT SELECT (row_id, col_id, value) ON m_s TO regress_mm_reader;
SET ROLE regress_mm_reader;
SELECT * FROM gpu_matmul('m_a'::regclass, 'm_s'::regclass);
SELECT * FROM gpu_matmul('m_s'::regclass, 'm_s'::regclass);
RESET ROLE;
GRANT SELECT (row_vec) ON m_a TO regress_mm_reader;
SET ROLE regress_mm_reader;
SELECT * FROM gpu_matmul('m_a'::regclass, 'm_s'::regclass);
RESET ROLE;

-- row-level security filters the entries used: bob's entry of m_s is hidden
ALTER TABLE m_s ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_alice ON m_s FOR SELECT TO regress_mm_reader USING (owner = 'alice');
SET ROLE regress_mm_reader;
SELECT * FROM gpu_matmul('m_a'::regclass, 'm_s'::regclass);
RESET ROLE;
SELECT * FROM gpu_matmul('m_a'::regclass, 'm_s'::regclass);
-- a policy hiding a row of a dense matrix makes the matrix incomplete
ALTER TABLE m_a ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_alice ON m_a FOR SELECT TO regress_mm_reader USING (owner = 'alice');
SET ROLE regress_mm_reader;
SELECT * FROM gpu_matmul('m_s'::regclass, 'm_a'::regclass);
RESET ROLE;

DROP TABLE m_a, m_s;
DROP ROLE regress_mm_reader;
