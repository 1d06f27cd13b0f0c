-- Queries about checkpoints. The table's current DDL is in
-- ../migrations/ (the baseline, and any migration after it), which sqlc
-- reads. Every statement is about one tenant: it filters
-- every table it reads by tenant_id = @tenant_id (joins included) and
-- writes that tenant_id; the store fills @tenant_id from the tenant it is
-- bound to, in one place (tenantQueries in the package). The head of a
-- thread and namespace (what Head reads) is the thread's rewound_to when
-- it names a checkpoint of that thread and of that namespace, else the one
-- with the highest seq: the same rule as pgcheckpoint.thread_head_seq on
-- Postgres. CheckpointLinkHead holds it for one thread and namespace;
-- ThreadTree and ThreadListHeads, which need it for every thread row they
-- read, spell it out again (SQLite has no functions, and a view would take
-- a migration). A write finds its parent in Go (placeNew in the package).

-- name: CheckpointInsert :exec
-- Writes one row, every column given: the store decides each (seq, step,
-- format, delta columns) inside its write transaction.
INSERT INTO checkpoints (
    tenant_id, thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id, step, created_at,
    trigger, tags, summary, next_node, size_bytes, format, base_checkpoint_id, delta_run, delta_depth,
    messages_count, messages_digest, state_digests, tool_results_digests, metadata, state_removed,
    tool_results_removed, messages, state, tool_results)
VALUES (
    @tenant_id, @thread_id, @namespace, @seq, @checkpoint_id, @parent_checkpoint_id, @merge_parent_id, @step, @created_at,
    @trigger, @tags, @summary, @next_node, @size_bytes, @format, @base_checkpoint_id, @delta_run, @delta_depth,
    @messages_count, @messages_digest, @state_digests, @tool_results_digests, @metadata, @state_removed,
    @tool_results_removed, @messages, @state, @tool_results);

-- name: CheckpointGetByID :one
-- A whole row (content possibly a delta: see materialize in the package).
SELECT * FROM checkpoints WHERE tenant_id = @tenant_id AND checkpoint_id = @checkpoint_id;

-- name: CheckpointRead :one
-- What a read of a checkpoint needs first, in one statement: the columns a
-- reader gets, content as stored, and whether it has pending writes (a
-- full row without pending writes needs nothing more). The columns only
-- writes use (digests, delta run) are left out: the driver's cost grows
-- with every column a statement returns.
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, c.next_node, c.size_bytes, c.format, c.metadata,
       c.messages, c.state, c.tool_results,
       EXISTS (SELECT 1 FROM pending_writes p
               WHERE p.tenant_id = c.tenant_id AND p.thread_id = c.thread_id
                 AND p.namespace = c.namespace AND p.checkpoint_seq = c.seq) AS has_pending_writes
FROM checkpoints c WHERE c.tenant_id = @tenant_id AND c.checkpoint_id = @checkpoint_id;

-- name: CheckpointLinkByID :one
-- What a write needs of its parent or base: place, step, delta columns and
-- size, without the content.
SELECT thread_id, namespace, seq, checkpoint_id, step, format, base_checkpoint_id, delta_run, delta_depth,
       messages_count, messages_digest, state_digests, tool_results_digests, size_bytes
FROM checkpoints WHERE tenant_id = @tenant_id AND checkpoint_id = @checkpoint_id;

-- name: CheckpointLinkHead :one
-- CheckpointLinkByID for the head of a thread and namespace: the one query
-- a read of the head goes through (the whole row is then read by id).
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.step, c.format, c.base_checkpoint_id, c.delta_run,
       c.delta_depth, c.messages_count, c.messages_digest, c.state_digests, c.tool_results_digests, c.size_bytes
FROM checkpoints c
WHERE c.tenant_id = @tenant_id AND c.thread_id = @thread_id AND c.namespace = @namespace
  AND c.seq = coalesce(
        (SELECT r.seq FROM threads t JOIN checkpoints r
           ON r.tenant_id = t.tenant_id AND r.checkpoint_id = t.rewound_to
         WHERE t.tenant_id = @tenant_id AND t.thread_id = @thread_id AND t.namespace = @namespace
           AND r.thread_id = t.thread_id AND r.namespace = t.namespace),
        (SELECT max(m.seq) FROM checkpoints m
         WHERE m.tenant_id = @tenant_id AND m.thread_id = @thread_id AND m.namespace = @namespace));

-- name: CheckpointPlaceNewest :one
-- What a write that names no parent reads first, in one statement where
-- three would do: CheckpointLinkByID's columns for the newest checkpoint
-- of the thread and namespace (the highest seq: the write's parent on a
-- thread not rewound, and the seq the write's follows), whether the
-- write's id is taken (in the tenant), the thread row's pending rewind,
-- and whether the thread has a data key (see refusePlaintext). No row when
-- the thread has no checkpoint there.
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.step, c.format, c.base_checkpoint_id, c.delta_run,
       c.delta_depth, c.messages_count, c.messages_digest, c.state_digests, c.tool_results_digests, c.size_bytes,
       EXISTS (SELECT 1 FROM checkpoints x
               WHERE x.tenant_id = @tenant_id AND x.checkpoint_id = @new_checkpoint_id) AS id_taken,
       EXISTS (SELECT 1 FROM data_keys k
               WHERE k.tenant_id = @tenant_id AND k.thread_id = @thread_id) AS thread_sealed,
       t.thread_id IS NOT NULL AS thread_seen, t.rewound_to
FROM checkpoints c
LEFT JOIN threads t ON t.tenant_id = @tenant_id AND t.thread_id = c.thread_id AND t.namespace = c.namespace
WHERE c.tenant_id = @tenant_id AND c.thread_id = @thread_id AND c.namespace = @namespace
ORDER BY c.seq DESC
LIMIT 1;

-- name: CheckpointMaxSeq :one
-- The highest seq of a thread and namespace, 0 when it has none: what the
-- seq of a write on a parent other than the newest follows.
SELECT CAST(coalesce(max(seq), 0) AS INTEGER) AS max_seq
FROM checkpoints WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace;

-- name: CheckpointListByThread :many
-- Newest first, from below a seq (the cursor's), without content.
-- max_rows -1 reads on until the caller stops (the metadata and tag
-- filters are applied by the caller, in Go).
SELECT thread_id, namespace, seq, checkpoint_id, parent_checkpoint_id, merge_parent_id, step, created_at,
       trigger, tags, summary, next_node, size_bytes, format, metadata
FROM checkpoints
WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace AND seq < @before_seq
ORDER BY seq DESC
LIMIT @max_rows;

-- name: CheckpointListForRetention :many
-- Every checkpoint of a thread, in namespace then write order, with what
-- retention decides on.
SELECT namespace, seq, checkpoint_id, step, created_at
FROM checkpoints
WHERE tenant_id = @tenant_id AND thread_id = @thread_id
ORDER BY namespace, seq;

-- name: CheckpointListWhole :many
-- Every row of a thread, content as stored, in namespace then write order
-- (copy and export).
SELECT * FROM checkpoints WHERE tenant_id = @tenant_id AND thread_id = @thread_id ORDER BY namespace, seq;

-- name: CheckpointListDeltasOn :many
-- The delta checkpoints of a thread and namespace based on one of ids
-- (candidates for a rebase before ids are deleted). ids is a JSON array
-- of ids (see idList in the package): one statement text whatever their
-- number, prepared once, where a list of parameters would be compiled
-- again on every call.
SELECT checkpoint_id FROM checkpoints
WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace AND format = 'delta'
  AND base_checkpoint_id IN (SELECT value FROM json_each(CAST(@ids AS TEXT)));

-- name: CheckpointRewriteWhole :exec
-- Stores a checkpoint whole (a rebase): its content was rebuilt by the
-- caller from its delta chain.
UPDATE checkpoints
SET format = 'full', base_checkpoint_id = NULL, delta_run = 0, delta_depth = 0,
    state_removed = '[]', tool_results_removed = '[]',
    messages = @messages, state = @state, tool_results = @tool_results
WHERE tenant_id = @tenant_id AND checkpoint_id = @checkpoint_id;

-- name: CheckpointDeleteMany :execrows
-- Deletes checkpoints by id, with their pending writes (ON DELETE CASCADE).
-- ids is a JSON array of ids, as for CheckpointListDeltasOn.
DELETE FROM checkpoints
WHERE tenant_id = @tenant_id AND checkpoint_id IN (SELECT value FROM json_each(CAST(@ids AS TEXT)));

-- name: CheckpointDeleteByThread :execrows
DELETE FROM checkpoints WHERE tenant_id = @tenant_id AND thread_id = @thread_id;

-- name: CheckpointListWithRunID :many
-- Checkpoints whose metadata has a top-level run_id, for DeleteForRuns
-- (which tests containment in Go).
SELECT checkpoint_id, metadata FROM checkpoints
WHERE tenant_id = @tenant_id AND json_extract(metadata, '$.run_id') IS NOT NULL;

-- name: CheckpointsBuiltOn :many
-- What a truncating rewind must keep (see rewind in the package): of the
-- JSON array ids (the line it would delete, of a thread and namespace),
-- those that another checkpoint of the thread and namespace has as
-- parent; and the checkpoints a branch of the thread was forked from.
SELECT CAST(c.parent_checkpoint_id AS TEXT) AS id FROM checkpoints c
WHERE c.tenant_id = @tenant_id AND c.thread_id = @thread_id AND c.namespace = @namespace
  AND c.parent_checkpoint_id IN (SELECT value FROM json_each(CAST(@ids AS TEXT)))
  AND c.checkpoint_id NOT IN (SELECT value FROM json_each(CAST(@ids AS TEXT)))
UNION
SELECT CAST(t.branched_from AS TEXT) FROM threads t
WHERE t.tenant_id = @tenant_id AND t.branched_from_thread = @thread_id AND t.branched_from IS NOT NULL;

-- name: CheckpointLineage :many
-- A checkpoint and its ancestors, newest first (depth 0 is the checkpoint),
-- following parent links across threads (a branch's first checkpoint has
-- its source as parent) within the tenant. max_depth -1: no bound. A
-- parent that was deleted ends the walk, and so does a later checkpoint
-- that took a deleted parent's id: a parent is one step before its child,
-- in its namespace, in its thread or the checkpoint its thread was
-- branched from (steps fall by one a link, so the walk ends). CROSS JOIN
-- keeps the join order (SQLite's rule): each step looks a parent up by
-- (tenant_id, checkpoint_id), where the planner would otherwise read the
-- tenant's checkpoints.
WITH RECURSIVE walk AS (
    SELECT 0 AS depth, c.checkpoint_id AS id, c.parent_checkpoint_id AS parent, c.step, c.namespace, c.thread_id
    FROM checkpoints c WHERE c.tenant_id = @tenant_id AND c.checkpoint_id = @checkpoint_id
    UNION ALL
    SELECT w.depth + 1, p.checkpoint_id, p.parent_checkpoint_id, p.step, p.namespace, p.thread_id
    FROM walk w CROSS JOIN checkpoints p ON p.tenant_id = @tenant_id AND p.checkpoint_id = w.parent
    WHERE p.step = w.step - 1 AND p.namespace = w.namespace
      AND (p.thread_id = w.thread_id OR EXISTS (
          SELECT 1 FROM threads t
          WHERE t.tenant_id = @tenant_id AND t.thread_id = w.thread_id AND t.namespace = w.namespace
            AND t.branched_from = p.checkpoint_id))
      AND (CAST(@max_depth AS INTEGER) < 0 OR w.depth < CAST(@max_depth AS INTEGER))
)
SELECT CAST(w.depth AS INTEGER) AS depth, c.thread_id, c.namespace, c.seq, c.checkpoint_id,
       c.parent_checkpoint_id, c.merge_parent_id, c.step, c.created_at, c.trigger, c.tags, c.summary,
       c.next_node, c.size_bytes, c.format, c.metadata
FROM walk w CROSS JOIN checkpoints c ON c.tenant_id = @tenant_id AND c.checkpoint_id = w.id
ORDER BY w.depth;

-- name: CheckpointLineRange :many
-- A checkpoint and the checkpoints written before it in its thread and
-- namespace, newest first, at most max_rows: its lineage while each row is
-- the parent of the one before (a thread never rewound, or not within the
-- rows read), where CheckpointLineage looks each parent up on its own.
-- The caller checks the links (engine.LinePage).
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, c.next_node, c.size_bytes, c.format, c.metadata
FROM checkpoints s CROSS JOIN checkpoints c
  ON c.tenant_id = s.tenant_id AND c.thread_id = s.thread_id AND c.namespace = s.namespace AND c.seq <= s.seq
WHERE s.tenant_id = @tenant_id AND s.checkpoint_id = @checkpoint_id
ORDER BY c.seq DESC
LIMIT @max_rows;

-- name: ThreadTree :many
-- Every checkpoint of a thread and of the branches forked from it,
-- recursively, with both parents and whether it is its namespace's head,
-- in thread, namespace and write order. CROSS JOIN keeps the planner's
-- order (SQLite's rule): each step looks up the threads forked from the
-- ones found, and each namespace's checkpoints, by index.
WITH RECURSIVE family AS (
    SELECT CAST(@thread_id AS TEXT) AS thread_id
    UNION
    SELECT t.thread_id FROM family f CROSS JOIN threads t
      ON t.tenant_id = @tenant_id AND t.branched_from_thread = f.thread_id
), heads AS (
    SELECT t.thread_id, t.namespace,
           coalesce((SELECT r.seq FROM checkpoints r
                     WHERE r.tenant_id = @tenant_id AND r.checkpoint_id = t.rewound_to
                       AND r.thread_id = t.thread_id AND r.namespace = t.namespace),
                    (SELECT max(m.seq) FROM checkpoints m
                     WHERE m.tenant_id = @tenant_id AND m.thread_id = t.thread_id AND m.namespace = t.namespace)) AS head_seq
    FROM family f CROSS JOIN threads t ON t.tenant_id = @tenant_id AND t.thread_id = f.thread_id
)
SELECT c.thread_id, c.namespace, c.seq, c.checkpoint_id, c.parent_checkpoint_id, c.merge_parent_id, c.step,
       c.created_at, c.trigger, c.tags, c.summary, CAST(c.seq = h.head_seq AS INTEGER) AS is_head
FROM heads h
CROSS JOIN checkpoints c ON c.tenant_id = @tenant_id AND c.thread_id = h.thread_id AND c.namespace = h.namespace
ORDER BY c.thread_id, c.namespace, c.seq;

-- name: CheckpointCount :one
SELECT count(*) FROM checkpoints WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace;

-- name: CheckpointRunRange :many
-- The checkpoints of a thread and namespace whose seq is from from_seq to
-- to_seq, with what runOf (delta.go in the package) walks a delta run by:
-- id, base and delta_run. The content (messages, state, tool results and
-- removed keys) only of deltas in a run (delta_run above 0), never of an
-- anchor, which may be a whole conversation. A run written without a
-- rewind in between is the to_seq - from_seq + 1 rows before it, read by
-- the key in one statement, where a walk by id looks each base up twice.
SELECT seq, checkpoint_id, base_checkpoint_id, delta_run,
       CAST(CASE WHEN delta_run > 0 THEN state_removed ELSE '[]' END AS TEXT) AS state_removed,
       CAST(CASE WHEN delta_run > 0 THEN tool_results_removed ELSE '[]' END AS TEXT) AS tool_results_removed,
       CAST(CASE WHEN delta_run > 0 THEN messages ELSE '[]' END AS TEXT) AS messages,
       CAST(CASE WHEN delta_run > 0 THEN state ELSE '{}' END AS TEXT) AS state,
       CAST(CASE WHEN delta_run > 0 THEN tool_results ELSE '{}' END AS TEXT) AS tool_results
FROM checkpoints
WHERE tenant_id = @tenant_id AND thread_id = @thread_id AND namespace = @namespace
  AND seq >= @from_seq AND seq <= @to_seq;

-- name: CheckpointDeltaChain :many
-- A delta checkpoint's chain: the checkpoint, its base, the base's base,
-- and so on to a full one, each in the same thread and namespace, with its
-- depth; what materialize rebuilds it from, in one statement. The caller
-- orders the rows by depth: an ORDER BY here would copy every row, the
-- full snapshot's whole content included, through a sorter. CROSS JOIN
-- keeps the join order: each base is looked up by (tenant_id,
-- checkpoint_id). Only the columns materialize reads: the driver's cost
-- is per column and row.
WITH RECURSIVE chain AS (
    SELECT 0 AS depth, c.checkpoint_id AS id, c.base_checkpoint_id AS next_id
    FROM checkpoints c WHERE c.tenant_id = @tenant_id AND c.checkpoint_id = @checkpoint_id
    UNION ALL
    SELECT ch.depth + 1, b.checkpoint_id, b.base_checkpoint_id
    FROM chain ch CROSS JOIN checkpoints b ON b.tenant_id = @tenant_id AND b.checkpoint_id = ch.next_id
    WHERE b.thread_id = @thread_id AND b.namespace = @namespace AND ch.depth < 65536
)
SELECT ch.depth, b.format, b.state_removed, b.tool_results_removed, b.messages, b.state, b.tool_results
FROM chain ch CROSS JOIN checkpoints b ON b.tenant_id = @tenant_id AND b.checkpoint_id = ch.id;
