package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

// Where a new checkpoint goes on its thread's line, and what writing it
// does to the thread row: the rules of pgcheckpoint.thread_head_for_write
// and thread_after_write on Postgres (schema/current.sql),
// in one place for every write that builds on a thread's line (Put,
// PutAppend, Merge).

// place is where a new checkpoint of a thread and namespace goes, as read
// inside its write transaction, whose lock keeps it true until commit.
type place struct {
	threadID, namespace string
	threadSeen          bool         // the thread row exists
	rewound             bool         // the thread has a pending rewind, which the write ends
	wanted              uuid.UUID    // the parent asked for, else the rewound-to checkpoint; zero: the newest
	parent              *link        // the wanted checkpoint, else the newest; nil: none (a first checkpoint)
	seq                 int64        // the newest checkpoint's seq + 1 (1 for a first checkpoint)
	sealed              sql.NullBool // the thread has a data key, when the first read told (see refusePlaintext)
}

// existing returns checkpoint id when it exists: a write of an id in use
// is a retry, or a conflict (the caller compares), and is answered before
// anything else.
func existing(ctx context.Context, q *queries, id uuid.UUID) (sqlitedb.Checkpoint, bool, error) {
	ex, err := q.CheckpointGetByID(ctx, id)
	if errors.Is(err, sql.ErrNoRows) {
		return sqlitedb.Checkpoint{}, false, nil
	} else if err != nil {
		return sqlitedb.Checkpoint{}, false, dbError("look up the checkpoint id", err)
	}
	return ex, true, nil
}

// placeNew reads what a new checkpoint's write reads first: whether its id
// exists (then ex is that row and found is true, and the caller answers a
// retry or a conflict before anything else), else where it goes, as a
// child of parentID (zero: of the head). A write on the newest checkpoint
// of a thread not rewound, the common case, reads it all in one statement
// (CheckpointPlaceNewest); any other then reads the id, the thread row and
// the parent wanted one by one. Errors: engine.ErrNotFound when the parent
// wanted (parentID, else the checkpoint the thread was rewound to) is not a
// checkpoint of that thread and namespace.
func placeNew(ctx context.Context, q *queries, id uuid.UUID, threadID, namespace string, parentID uuid.UUID) (
	pl place, ex sqlitedb.Checkpoint, found bool, err error) {
	pl = place{threadID: threadID, namespace: namespace, wanted: parentID, seq: 1}
	if parentID == uuid.Nil {
		r, err := q.CheckpointPlaceNewest(ctx, sqlitedb.CheckpointPlaceNewestParams{
			NewCheckpointID: id, ThreadID: threadID, Namespace: namespace,
		})
		if err == nil {
			pl.threadSeen, pl.seq, pl.sealed, pl.parent = r.ThreadSeen, r.Seq+1, sql.NullBool{Bool: r.ThreadSealed, Valid: true}, &link{
				ThreadID: r.ThreadID, Namespace: r.Namespace, Seq: r.Seq, CheckpointID: r.CheckpointID, Step: r.Step,
				Format: r.Format, BaseCheckpointID: r.BaseCheckpointID, DeltaRun: r.DeltaRun, DeltaDepth: r.DeltaDepth,
				MessagesCount: r.MessagesCount, MessagesDigest: r.MessagesDigest, StateDigests: r.StateDigests,
				ToolResultsDigests: r.ToolResultsDigests, SizeBytes: r.SizeBytes,
			}
			if !r.IDTaken && !r.RewoundTo.Valid {
				return pl, sqlitedb.Checkpoint{}, false, nil
			}
		} else if !errors.Is(err, sql.ErrNoRows) {
			return place{}, sqlitedb.Checkpoint{}, false, dbError("read the newest checkpoint", err)
		}
	}
	if ex, found, err = existing(ctx, q, id); err != nil || found {
		return place{}, ex, found, err
	}
	th, err := q.ThreadGet(ctx, sqlitedb.ThreadGetParams{ThreadID: threadID, Namespace: namespace})
	if err == nil {
		pl.threadSeen, pl.rewound = true, th.RewoundTo.Valid
		if pl.wanted == uuid.Nil && th.RewoundTo.Valid {
			pl.wanted = th.RewoundTo.UUID
		}
	} else if !errors.Is(err, sql.ErrNoRows) {
		return place{}, sqlitedb.Checkpoint{}, false, dbError("read the thread", err)
	}
	if pl.wanted == uuid.Nil {
		// The newest, read above (or none: a first checkpoint), is the
		// parent, and gives the seq.
		return pl, sqlitedb.Checkpoint{}, false, nil
	}
	l, err := linkIn(ctx, q, pl.wanted, threadID, namespace)
	if errors.Is(err, sql.ErrNoRows) {
		return place{}, sqlitedb.Checkpoint{}, false, fmt.Errorf("parent checkpoint %s not found in thread %q namespace %q: %w",
			pl.wanted, threadID, namespace, engine.ErrNotFound)
	} else if err != nil {
		return place{}, sqlitedb.Checkpoint{}, false, dbError("read the parent", err)
	}
	last, err := q.CheckpointMaxSeq(ctx, sqlitedb.CheckpointMaxSeqParams{ThreadID: threadID, Namespace: namespace})
	if err != nil {
		return place{}, sqlitedb.Checkpoint{}, false, dbError("read the last seq", err)
	}
	pl.seq, pl.parent = last+1, &l
	return pl, sqlitedb.Checkpoint{}, false, nil
}

// linkIn reads checkpoint id as a checkpoint of a thread and namespace:
// sql.ErrNoRows when it is unknown, or a checkpoint of another thread or
// namespace.
func linkIn(ctx context.Context, q *queries, id uuid.UUID, threadID, namespace string) (link, error) {
	l, err := q.CheckpointLinkByID(ctx, id)
	if err == nil && (l.ThreadID != threadID || l.Namespace != namespace) {
		return link{}, sql.ErrNoRows
	}
	return l, err
}

// newRow is the row of a new checkpoint at pl: its place, seq, parent and
// step (the parent's + 1, else 1), with the columns the writer gives. The
// content, its storage and the digests are the caller's to set.
func (pl place) newRow(id uuid.UUID, trigger engine.Trigger, tags []string, summary, nextNode string,
	sizeBytes int64, metadata json.RawMessage, now time.Time) (sqlitedb.CheckpointInsertParams, error) {
	tagsText, err := storedTags(tags)
	if err != nil {
		return sqlitedb.CheckpointInsertParams{}, err
	}
	row := sqlitedb.CheckpointInsertParams{
		ThreadID: pl.threadID, Namespace: pl.namespace, Seq: pl.seq, CheckpointID: id, Step: 1,
		CreatedAt: now.UnixMicro(), Trigger: string(trigger), Tags: tagsText, Summary: summary,
		NextNode: nextNode, SizeBytes: sizeBytes, Metadata: string(metadata),
	}
	if pl.parent != nil {
		row.ParentCheckpointID = nullID(pl.parent.CheckpointID)
		row.Step = pl.parent.Step + 1
	}
	return row, nil
}

// insert writes row (made by pl.newRow), then the thread row as
// thread_after_write does: a thread's first checkpoint in a namespace
// makes its row, and a write ends a pending rewind (the new checkpoint is
// the head now). It returns what the write returns.
func (pl place) insert(ctx context.Context, q *queries, row sqlitedb.CheckpointInsertParams) (engine.SnapshotResult, error) {
	if err := q.CheckpointInsert(ctx, row); err != nil {
		return engine.SnapshotResult{}, dbError("insert the checkpoint", err)
	}
	var err error
	if !pl.threadSeen {
		err = q.ThreadInsert(ctx, sqlitedb.ThreadInsertParams{
			ThreadID: pl.threadID, Namespace: pl.namespace, Metadata: "{}", CreatedAt: row.CreatedAt, ExpireAction: "delete",
		})
	} else if pl.rewound {
		err = q.ThreadSetRewoundTo(ctx, sqlitedb.ThreadSetRewoundToParams{ThreadID: pl.threadID, Namespace: pl.namespace})
	}
	if err != nil {
		return engine.SnapshotResult{}, dbError("update the thread", err)
	}
	return snapshotResult(sqlitedb.Checkpoint(row), true), nil
}

// snapshotResult is what a write returns of a checkpoint's row: created
// is false for a retry that found it written.
func snapshotResult(row sqlitedb.Checkpoint, created bool) engine.SnapshotResult {
	return engine.SnapshotResult{
		ID: row.CheckpointID, ThreadID: row.ThreadID, Namespace: row.Namespace, ParentID: row.ParentCheckpointID.UUID,
		Step: row.Step, CreatedAt: fromMicros(row.CreatedAt), Created: created,
	}
}

// sameRetry reports whether the existing checkpoint ex is where a retry of
// a write must find it, with what it must repeat beside the content: the
// same thread and namespace, next node and metadata (JSON-equal).
func sameRetry(ex sqlitedb.Checkpoint, threadID, namespace, nextNode string, metadata json.RawMessage) bool {
	return ex.ThreadID == threadID && ex.Namespace == namespace && ex.NextNode == nextNode &&
		jsontext.Same([]byte(ex.Metadata), metadata)
}

// storedTags is tags as the tags column holds them: a JSON array of
// strings, [] for none.
func storedTags(tags []string) (string, error) {
	b, err := json.Marshal(nonNil(tags))
	if err != nil {
		return "", fmt.Errorf("tags: %w", err)
	}
	return string(b), nil
}
