-- Reverts 000003_baseline.up.sql: drops everything it made, data included (the
-- data keys too, which erases every encrypted thread's content for good).
-- Generated with the up migration.
DROP TABLE IF EXISTS data_keys;
DROP INDEX IF EXISTS threads_branched_from_thread_idx;
DROP TABLE IF EXISTS pending_writes;
DROP TABLE IF EXISTS checkpoints;
DROP TABLE IF EXISTS threads;
