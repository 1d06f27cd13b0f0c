-- Removes everything 000001_init.up.sql made, data included.
DROP TABLE IF EXISTS pending_writes;
DROP TABLE IF EXISTS checkpoints;
DROP INDEX IF EXISTS threads_branched_from_thread_idx;
DROP TABLE IF EXISTS threads;
