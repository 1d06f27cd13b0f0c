package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/sqlite/sqlitedb"
)

var _ engine.TenantStore = (*Store)(nil)

// ForTenant returns s bound to tenant: every call of the store returned
// reads and writes that tenant's rows alone. It shares s's connections and
// prepared statements: close s, not it. A name engine.CheckTenant refuses
// gives a store whose every call fails with that error
// (engine.ErrInvalidInput) and writes nothing; Engine.ForTenant checks the
// name first.
func (s *Store) ForTenant(tenant string) engine.Store {
	c := *s
	c.tenant, c.tenantErr = tenant, nil
	if err := engine.CheckTenant(tenant); err != nil {
		c.tenantErr = fmt.Errorf("sqlite store: %w", err)
	}
	return &c
}

// Tenant returns the tenant s reads and writes: engine.DefaultTenant
// unless s was made by ForTenant.
func (s *Store) Tenant() string { return s.tenant }

// queries is the only way the store's code runs a query: the generated
// queries (package sqlitedb), each of which takes a tenant_id and filters
// every table it reads by it, with tenant_id filled here, from the tenant
// the store is bound to, and never by a caller. The methods keep the
// generated names; a caller's params have no say in the tenant (it is
// overwritten). TestEveryQueryIsAboutOneTenant checks that every generated
// query takes a tenant_id and has its method here.
type queries struct {
	db     *sqlitedb.Queries
	tenant string
}

// readQueries returns the queries of the store's readers, outside a
// transaction (for reads of one statement).
func (s *Store) readQueries() (*queries, error) {
	if s.tenantErr != nil {
		return nil, s.tenantErr
	}
	return &queries{db: s.rq, tenant: s.tenant}, nil
}

func (q *queries) CheckpointCount(ctx context.Context, p sqlitedb.CheckpointCountParams) (int64, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointCount(ctx, p)
}

func (q *queries) CheckpointDeleteByThread(ctx context.Context, threadID string) (int64, error) {
	return q.db.CheckpointDeleteByThread(ctx, sqlitedb.CheckpointDeleteByThreadParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) CheckpointDeleteMany(ctx context.Context, ids []uuid.UUID) (int64, error) {
	return q.db.CheckpointDeleteMany(ctx, sqlitedb.CheckpointDeleteManyParams{TenantID: q.tenant, Ids: idList(ids)})
}

func (q *queries) CheckpointDeltaChain(ctx context.Context, p sqlitedb.CheckpointDeltaChainParams) ([]sqlitedb.CheckpointDeltaChainRow, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointDeltaChain(ctx, p)
}

func (q *queries) CheckpointExportPage(ctx context.Context, p sqlitedb.CheckpointExportPageParams) ([]sqlitedb.Checkpoint, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointExportPage(ctx, p)
}

func (q *queries) CheckpointGetByID(ctx context.Context, id uuid.UUID) (sqlitedb.Checkpoint, error) {
	return q.db.CheckpointGetByID(ctx, sqlitedb.CheckpointGetByIDParams{TenantID: q.tenant, CheckpointID: id})
}

func (q *queries) CheckpointInsert(ctx context.Context, p sqlitedb.CheckpointInsertParams) error {
	p.TenantID = q.tenant
	return q.db.CheckpointInsert(ctx, p)
}

func (q *queries) CheckpointLineRange(ctx context.Context, p sqlitedb.CheckpointLineRangeParams) ([]sqlitedb.CheckpointLineRangeRow, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointLineRange(ctx, p)
}

func (q *queries) CheckpointLineage(ctx context.Context, p sqlitedb.CheckpointLineageParams) ([]sqlitedb.CheckpointLineageRow, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointLineage(ctx, p)
}

func (q *queries) CheckpointsBuiltOn(ctx context.Context, threadID, namespace string, ids []uuid.UUID) ([]string, error) {
	return q.db.CheckpointsBuiltOn(ctx, sqlitedb.CheckpointsBuiltOnParams{
		TenantID: q.tenant, ThreadID: threadID, Namespace: namespace, Ids: idList(ids),
	})
}

func (q *queries) CheckpointLinkByID(ctx context.Context, id uuid.UUID) (sqlitedb.CheckpointLinkByIDRow, error) {
	return q.db.CheckpointLinkByID(ctx, sqlitedb.CheckpointLinkByIDParams{TenantID: q.tenant, CheckpointID: id})
}

func (q *queries) CheckpointRunRange(ctx context.Context, p sqlitedb.CheckpointRunRangeParams) ([]sqlitedb.CheckpointRunRangeRow, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointRunRange(ctx, p)
}

func (q *queries) CheckpointLinkHead(ctx context.Context, p sqlitedb.CheckpointLinkHeadParams) (sqlitedb.CheckpointLinkHeadRow, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointLinkHead(ctx, p)
}

func (q *queries) CheckpointListByThread(ctx context.Context, p sqlitedb.CheckpointListByThreadParams) ([]sqlitedb.CheckpointListByThreadRow, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointListByThread(ctx, p)
}

func (q *queries) CheckpointListDeltasOn(ctx context.Context, threadID, namespace string, ids []uuid.UUID) ([]uuid.UUID, error) {
	return q.db.CheckpointListDeltasOn(ctx, sqlitedb.CheckpointListDeltasOnParams{
		TenantID: q.tenant, ThreadID: threadID, Namespace: namespace, Ids: idList(ids),
	})
}

func (q *queries) CheckpointListForRetention(ctx context.Context, threadID string) ([]sqlitedb.CheckpointListForRetentionRow, error) {
	return q.db.CheckpointListForRetention(ctx, sqlitedb.CheckpointListForRetentionParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) CheckpointListWhole(ctx context.Context, threadID string) ([]sqlitedb.Checkpoint, error) {
	return q.db.CheckpointListWhole(ctx, sqlitedb.CheckpointListWholeParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) CheckpointListWithRunID(ctx context.Context) ([]sqlitedb.CheckpointListWithRunIDRow, error) {
	return q.db.CheckpointListWithRunID(ctx, q.tenant)
}

func (q *queries) CheckpointMaxSeq(ctx context.Context, p sqlitedb.CheckpointMaxSeqParams) (int64, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointMaxSeq(ctx, p)
}

func (q *queries) CheckpointPlaceNewest(ctx context.Context, p sqlitedb.CheckpointPlaceNewestParams) (sqlitedb.CheckpointPlaceNewestRow, error) {
	p.TenantID = q.tenant
	return q.db.CheckpointPlaceNewest(ctx, p)
}

func (q *queries) CheckpointRead(ctx context.Context, id uuid.UUID) (sqlitedb.CheckpointReadRow, error) {
	return q.db.CheckpointRead(ctx, sqlitedb.CheckpointReadParams{TenantID: q.tenant, CheckpointID: id})
}

func (q *queries) CheckpointRewriteWhole(ctx context.Context, p sqlitedb.CheckpointRewriteWholeParams) error {
	p.TenantID = q.tenant
	return q.db.CheckpointRewriteWhole(ctx, p)
}

func (q *queries) PendingWriteInsert(ctx context.Context, p sqlitedb.PendingWriteInsertParams) (int64, error) {
	p.TenantID = q.tenant
	return q.db.PendingWriteInsert(ctx, p)
}

func (q *queries) PendingWriteListByCheckpoint(ctx context.Context, p sqlitedb.PendingWriteListByCheckpointParams) ([]sqlitedb.PendingWriteListByCheckpointRow, error) {
	p.TenantID = q.tenant
	return q.db.PendingWriteListByCheckpoint(ctx, p)
}

func (q *queries) PendingWriteListByThread(ctx context.Context, threadID string) ([]sqlitedb.PendingWrite, error) {
	return q.db.PendingWriteListByThread(ctx, sqlitedb.PendingWriteListByThreadParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) ThreadClearExpiry(ctx context.Context, threadID string) error {
	return q.db.ThreadClearExpiry(ctx, sqlitedb.ThreadClearExpiryParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) ThreadClearRewoundTo(ctx context.Context, threadID, namespace string, ids []uuid.UUID) error {
	return q.db.ThreadClearRewoundTo(ctx, sqlitedb.ThreadClearRewoundToParams{
		TenantID: q.tenant, ThreadID: threadID, Namespace: namespace, Ids: idList(ids),
	})
}

func (q *queries) ThreadDelete(ctx context.Context, threadID string) error {
	return q.db.ThreadDelete(ctx, sqlitedb.ThreadDeleteParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) ThreadExists(ctx context.Context, threadID string) (int64, error) {
	return q.db.ThreadExists(ctx, sqlitedb.ThreadExistsParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) ThreadExpiriesDue(ctx context.Context, p sqlitedb.ThreadExpiriesDueParams) ([]sqlitedb.ThreadExpiriesDueRow, error) {
	p.TenantID = q.tenant
	return q.db.ThreadExpiriesDue(ctx, p)
}

func (q *queries) ThreadExportTree(ctx context.Context, p sqlitedb.ThreadExportTreeParams) ([]string, error) {
	p.TenantID = q.tenant
	return q.db.ThreadExportTree(ctx, p)
}

func (q *queries) ThreadGet(ctx context.Context, p sqlitedb.ThreadGetParams) (sqlitedb.Thread, error) {
	p.TenantID = q.tenant
	return q.db.ThreadGet(ctx, p)
}

func (q *queries) ThreadGetExpiry(ctx context.Context, threadID string) (sqlitedb.ThreadGetExpiryRow, error) {
	return q.db.ThreadGetExpiry(ctx, sqlitedb.ThreadGetExpiryParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) ThreadIDsAfter(ctx context.Context, p sqlitedb.ThreadIDsAfterParams) ([]string, error) {
	p.TenantID = q.tenant
	return q.db.ThreadIDsAfter(ctx, p)
}

func (q *queries) ThreadInsert(ctx context.Context, p sqlitedb.ThreadInsertParams) error {
	p.TenantID = q.tenant
	return q.db.ThreadInsert(ctx, p)
}

func (q *queries) ThreadListBranches(ctx context.Context, threadID sql.NullString) ([]sqlitedb.ThreadListBranchesRow, error) {
	return q.db.ThreadListBranches(ctx, sqlitedb.ThreadListBranchesParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) ThreadListHeads(ctx context.Context, p sqlitedb.ThreadListHeadsParams) ([]sqlitedb.ThreadListHeadsRow, error) {
	p.TenantID = q.tenant
	return q.db.ThreadListHeads(ctx, p)
}

func (q *queries) ThreadListRows(ctx context.Context, threadID string) ([]sqlitedb.Thread, error) {
	return q.db.ThreadListRows(ctx, sqlitedb.ThreadListRowsParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) ThreadSetExpiry(ctx context.Context, p sqlitedb.ThreadSetExpiryParams) (int64, error) {
	p.TenantID = q.tenant
	return q.db.ThreadSetExpiry(ctx, p)
}

func (q *queries) ThreadSetRewoundTo(ctx context.Context, p sqlitedb.ThreadSetRewoundToParams) error {
	p.TenantID = q.tenant
	return q.db.ThreadSetRewoundTo(ctx, p)
}

func (q *queries) ThreadSetSwept(ctx context.Context, p sqlitedb.ThreadSetSweptParams) error {
	p.TenantID = q.tenant
	return q.db.ThreadSetSwept(ctx, p)
}

func (q *queries) ThreadTree(ctx context.Context, threadID string) ([]sqlitedb.ThreadTreeRow, error) {
	return q.db.ThreadTree(ctx, sqlitedb.ThreadTreeParams{TenantID: q.tenant, ThreadID: threadID})
}

func (q *queries) DataKeyGet(ctx context.Context, p sqlitedb.DataKeyGetParams) (sqlitedb.DataKeyGetRow, error) {
	p.TenantID = q.tenant
	return q.db.DataKeyGet(ctx, p)
}

func (q *queries) DataKeyImport(ctx context.Context, p sqlitedb.DataKeyImportParams) (int64, error) {
	p.TenantID = q.tenant
	return q.db.DataKeyImport(ctx, p)
}

func (q *queries) DataKeyInsert(ctx context.Context, p sqlitedb.DataKeyInsertParams) error {
	p.TenantID = q.tenant
	return q.db.DataKeyInsert(ctx, p)
}

func (q *queries) DataKeyList(ctx context.Context, p sqlitedb.DataKeyListParams) ([]sqlitedb.DataKeyListRow, error) {
	p.TenantID = q.tenant
	return q.db.DataKeyList(ctx, p)
}

func (q *queries) DataKeyRewrap(ctx context.Context, p sqlitedb.DataKeyRewrapParams) (int64, error) {
	p.TenantID = q.tenant
	return q.db.DataKeyRewrap(ctx, p)
}

func (q *queries) DataKeyShred(ctx context.Context, p sqlitedb.DataKeyShredParams) (int64, error) {
	p.TenantID = q.tenant
	return q.db.DataKeyShred(ctx, p)
}

func (q *queries) DataKeyTombstone(ctx context.Context, p sqlitedb.DataKeyTombstoneParams) (int64, error) {
	p.TenantID = q.tenant
	return q.db.DataKeyTombstone(ctx, p)
}

func (q *queries) ThreadBranchSource(ctx context.Context, threadID string) ([]string, error) {
	return q.db.ThreadBranchSource(ctx, sqlitedb.ThreadBranchSourceParams{TenantID: q.tenant, ThreadID: threadID})
}
