package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// Harness says how to get databases of the store under test.
type Harness struct {
	// Name names the store in messages, e.g. "postgres" or "sqlite".
	Name string
	// NewURL returns the URL (as pgcheckpoint.Open takes it) of a new,
	// empty database that only the calling test uses, and removes the
	// database when the test ends (t.Cleanup). The suite migrates it.
	NewURL func(t testing.TB) string
	// TenantURL, when set, returns the URL of a new database, as NewURL
	// does, reached by the role an installation with tenants gives the
	// application: for Postgres one without superuser or BYPASSRLS, which
	// row-level security holds as well as the store's tenant views. The
	// tenant tests use it; nil: NewURL. (RunTenants runs them again with
	// another harness, e.g. as a superuser.)
	TenantURL func(t testing.TB) string
}

// conformanceTest is one test of the suite.
type conformanceTest struct {
	name string
	// serial tests run alone, before the parallel ones: they count the
	// goroutines of the whole test binary.
	serial bool
	// tenant tests are those RunTenants runs.
	tenant bool
	fn     func(t *testing.T, e *env)
}

// tests is the suite, in the order Run starts them.
var tests = []conformanceTest{
	// snapshot.go
	{name: "SnapshotRoundTrip", fn: testSnapshotRoundTrip},
	{name: "DefaultSummary", fn: testDefaultSummary},
	{name: "DefaultSummaryShowsTextAsWritten", fn: testDefaultSummaryAsWritten},
	{name: "NULAndUnicodeRoundTripExactly", fn: testNULAndUnicode},
	{name: "RetryIsIdempotent", fn: testRetryIsIdempotent},
	{name: "ExplicitParentStartsANewLine", fn: testExplicitParent},
	{name: "BadInputIsTypedAndWritesNothing", fn: testBadInput},
	{name: "BadJSONIsNamedInEveryMode", fn: testBadJSONNamed},
	{name: "UnknownIDsAreNotFound", fn: testUnknownIDs},
	{name: "PendingWrites", fn: testPendingWrites},
	{name: "ListCheckpointsPagesAndFilters", fn: testListCheckpoints},
	{name: "MetadataContainmentFilter", fn: testMetadataFilter},
	{name: "ListThreadsPages", fn: testListThreads},
	{name: "TimesAreUTC", fn: testTimesAreUTC},
	{name: "ThreadIDsSortByTheirBytes", fn: testThreadIDsSortByBytes},
	{name: "NamespacesHaveTheirOwnHeads", fn: testNamespaces},
	{name: "DeleteThreadsRemovesEverything", fn: testDeleteThread},
	{name: "DeleteCheckpointsBeforeStepKeepsTheHead", fn: testBeforeStep},
	{name: "NoSilentMisreadings", fn: testNoSilentMisreadings},
	// values.go
	{name: "ValuesPostgresRefusesAreRefusedEverywhere", fn: testRefusedValues},
	{name: "BoundaryValuesAreKeptAndMove", fn: testBoundaryValues},
	// timetravel.go
	{name: "RewindMovesTheHeadAndDeletesNothing", fn: testRewind},
	{name: "RewindAndTruncateDeletesOnlyTheOldLine", fn: testRewindAndTruncate},
	{name: "RewindToStepFollowsTheHeadLine", fn: testRewindToStep},
	{name: "TimeTravelPointsPage", fn: testTimeTravelPoints},
	{name: "TimeTravelPointsStayInTheThread", fn: testTimeTravelPointsStayInTheThread},
	{name: "AnIDReusedAfterItsDeleteIsNoOnesParent", fn: testReusedIDIsNoOnesParent},
	{name: "ListingsFillEveryField", fn: testListingsFillEveryField},
	{name: "BranchMergeTreeAndLineage", fn: testBranchMergeTreeLineage},
	{name: "TimeTravelBadInputWritesNothing", fn: testTimeTravelBadInput},
	{name: "ConcurrentSnapshotAndRewind", fn: testConcurrentSnapshotAndRewind},
	{name: "ClearMemoryAppendsAMarker", fn: testClearMemory},
	{name: "Diff", fn: testDiff},
	{name: "CopyThread", fn: testCopyThread},
	{name: "CopyThreadMapsIDs", fn: testCopyThreadMapsIDs},
	{name: "DeleteCheckpointsForRunsAndPruneThreads", fn: testForRunsAndPruneThreads},
	{name: "DeletesClearARewindToWhatTheyDelete", fn: testDeletesClearARewind},
	// retention.go
	{name: "RetentionPolicies", fn: testRetentionPolicies},
	{name: "MilestonesOfEverySize", fn: testMilestonesOfEverySize},
	{name: "RetentionKeepsHeadsAndBranchSources", fn: testRetentionKeepsHeadsAndBranchSources},
	{name: "RetentionAfterEachSnapshot", fn: testRetentionAfterEachSnapshot},
	{name: "RetentionBadInputDeletesNothing", fn: testRetentionBadInput},
	{name: "SweepAppliesPoliciesAndExpiry", fn: testSweep},
	{name: "SweepExpiresBeforeItsPolicy", fn: testSweepExpiresBeforeItsPolicy},
	{name: "DeletesAndSweepsRaceWriters", fn: testDeletesAndSweepsRaceWriters},
	{name: "SweepsKeepSourcesOfBranchesMadeMeanwhile", fn: testSweepsKeepSourcesOfBranchesMadeMeanwhile},
	// deletes.go
	{name: "DeletesMatchTheModel", fn: testDeletesMatchTheModel},
	{name: "PruneThreadsMatchesTheModel", fn: testPruneThreadsMatchesTheModel},
	{name: "DeletesBadInputIsTypedAndDeletesNothing", fn: testDeletesBadInput},
	{name: "ExpiryKeepsWhatItsPolicySays", fn: testExpiryPolicies},
	{name: "PreviewPruneDeletesNothing", fn: testPreviewPrune},
	{name: "PreviewSweepDeletesNothing", fn: testPreviewSweep},
	{name: "ThreadExpiryReadsWhatWasSet", fn: testThreadExpiry},
	{name: "RetentionKeepLatestAfterEachWrite", fn: testRetentionKeepLatestAfterEachWrite},
	// delta.go
	{name: "RandomHistoriesReadBackAsWritten", fn: testRandomHistories},
	{name: "SizeLimitIsOnTheWholeSnapshot", fn: testSizeLimitOnWholeSnapshot},
	{name: "DeltasStayExactAcrossTimeTravel", fn: testDeltasAcrossTimeTravel},
	{name: "AHugeDeltaRunIsTheLongest", fn: testHugeDeltaRun},
	{name: "SmallSnapshotsAreStoredWhole", fn: testSmallSnapshotsWhole},
	{name: "ADeltaCountsTheKeysItRemoves", fn: testDeltaCountsRemovedKeys},
	{name: "AMergeIsStoredWhole", fn: testMergeStoredWhole},
	// limit.go
	{name: "SizeLimitCoversEveryField", fn: testSizeLimitCoversEveryField},
	{name: "SizeLimitOnAppendedHeads", fn: testSizeLimitOnAppendedHeads},
	{name: "AnAppendIsMeasuredAsItsContentIsSent", fn: testAppendMeasuredAsSent},
	{name: "TextFieldBounds", fn: testTextFieldBounds},
	{name: "SizeLimitOnPendingWrites", fn: testSizeLimitOnPendingWrites},
	{name: "SizeLimitOnImport", fn: testSizeLimitOnImport},
	{name: "ImportMeasuresUnderstatedSizes", fn: testImportMeasuresUnderstatedSizes},
	{name: "ImportKeepsHonestSizes", fn: testImportKeepsHonestSizes},
	{name: "NumbersCountAsPostgresSpellsThem", fn: testNumbersCountAsSpelled},
	// append.go
	{name: "AppendHistoriesReadBackAsWrittenWhole", fn: testAppendHistories},
	{name: "RunEndAcrossARewind", fn: testRunEndAcrossARewind},
	{name: "AppendGuardOnTheHead", fn: testAppendGuard},
	{name: "AppendRetryAndBadInput", fn: testAppendRetryAndBadInput},
	{name: "IntervalWithCaptureChangeAppends", fn: testIntervalAppends},
	// concurrency.go
	{name: "ConcurrentWritersOneThread", fn: testConcurrentWritersOneThread},
	{name: "ConcurrentWritersDistinctThreads", fn: testConcurrentWritersDistinctThreads},
	{name: "WriterProcessesOneThread", fn: testWriterProcesses},
	{name: "OneIDOneCheckpointAcrossThreads", fn: testOneIDOneCheckpoint},
	{name: "ImportAndWritersShareOneID", fn: testImportAndWritersShareOneID},
	{name: "KilledWriterProcessLeavesWholeCheckpoints", fn: testKilledWriter},
	{name: "ResumeAfterKilledAgentProcess", fn: testResumeAfterKill},
	// export.go
	{name: "ExportImportRoundTrip", fn: testExportImport},
	{name: "ImportBadInputWritesNothing", fn: testImportBadInput},
	{name: "ExportDeltasRoundTripAsDeltas", fn: testExportDeltaRoundTrip},
	{name: "ExportBranchesKeepsMergeEdges", fn: testExportBranches},
	{name: "ImportRefusesFormatsWithoutATrailer", fn: testImportOldFormats},
	{name: "ImportBadDeltasWriteNothing", fn: testImportBadDeltas},
	// importcheck.go
	{name: "ImportRefusesWhatNoWriteMakes", fn: testImportRefusesWhatNoWriteMakes},
	{name: "ImportRefusesAFileCutShort", fn: testImportIncomplete},
	{name: "ImportReadsABoundedLine", fn: testImportLongLine},
	// agent.go
	{name: "IntervalSnapshotter", serial: true, fn: testInterval},
	{name: "DisabledTriggerWritesNothing", fn: testDisabledTrigger},
	{name: "SnapshotSafeCountsAndLogsFailures", fn: testSnapshotSafe},
	{name: "WrapToolSnapshotsBeforeAndAfter", fn: testWrapTool},
	{name: "ScopeSnapshotsOnEnterAndExit", fn: testScope},
	{name: "Resume", fn: testResume},
	// namespaces.go
	{name: "RewindToStepInActsOnOneNamespace", fn: testRewindToStepIn},
	{name: "TimeTravelPointsOfOneNamespace", fn: testTimeTravelPointsIn},
	{name: "ResumeInActsOnOneNamespace", fn: testResumeIn},
	{name: "MergeBranchInActsOnOneNamespace", fn: testMergeBranchIn},
	{name: "ClearMemoryInActsOnOneNamespace", fn: testClearMemoryIn},
	{name: "BeforeStepInActsOnOneNamespace", fn: testBeforeStepIn},
	{name: "ScopeWrapToolAndIntervalInOneNamespace", fn: testAgentHelpersIn},
	{name: "BadNamespaceIsInvalidInputAndWritesNothing", fn: testNamespaceBadInput},
	// tenant.go
	{name: "TenantsKeptApart", tenant: true, fn: testTenantsKeptApart},
	{name: "SameThreadIDsAreKeptApart", tenant: true, fn: testSameThreadIDsKeptApart},
	{name: "TenantNamesAreChecked", tenant: true, fn: testTenantNamesAreChecked},
	{name: "TenantStoreRefusesBadNames", tenant: true, fn: testTenantStoreRefusesBadNames},
}

// Run runs the conformance suite against the store h names, each test as
// a subtest of t with a database of its own. The tests that need writer
// processes re-execute the test binary, whose TestMain must call Main.
func Run(t *testing.T, h Harness) {
	if h.NewURL == nil {
		t.Fatal("enginetest: Harness.NewURL is nil")
	}
	for _, c := range tests {
		if c.serial {
			t.Run(c.name, func(t *testing.T) { c.fn(t, newEnv(t, h)) })
		}
	}
	for _, c := range tests {
		if !c.serial {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.fn(t, newEnv(t, h))
			})
		}
	}
}

// RunTenants runs the suite's tenant tests alone: those of Run and the
// encryption suite's TenantsKeepTheirKeys, each with a database of its
// own from h.TenantURL (nil: h.NewURL). A store runs them once more for
// each kind of session its isolation must hold besides Run's: for
// Postgres, a superuser's, which row-level security does not hold and
// the store's own tenant filters must.
func RunTenants(t *testing.T, h Harness) {
	if h.NewURL == nil {
		t.Fatal("enginetest: Harness.NewURL is nil")
	}
	for _, c := range tests {
		if c.tenant {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.fn(t, newEnv(t, h))
			})
		}
	}
	for _, c := range encryptionTests {
		if c.tenant {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.fn(t, &cryptEnv{t: t, h: EncryptionHarness{Harness: h}, url: h.NewURL(t), ctx: context.Background(), keys: newKeys(t, "k1")})
			})
		}
	}
}

// deltas is the configuration of a test's main engine: every snapshot that
// extends its parent is stored as a delta, however small, so the code that
// reads, copies, rewinds and deletes meets delta chains.
var deltas = engine.Config{DeltaMinBytes: -1}

// env is what one test works with: its database and an engine over it.
type env struct {
	t   *testing.T
	h   Harness
	url string
	eng *engine.Engine // Config deltas
	ctx context.Context
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	e := &env{t: t, h: h, url: h.NewURL(t), ctx: context.Background()}
	e.eng = e.open(deltas)
	return e
}

// open returns an Engine with cfg over the test's database, closed when
// the test ends.
func (e *env) open(cfg engine.Config) *engine.Engine {
	return e.openWith(pgcheckpoint.Options{Config: cfg})
}

// openWith returns an Engine opened with opts over the test's database,
// closed when the test ends.
func (e *env) openWith(opts pgcheckpoint.Options) *engine.Engine {
	e.t.Helper()
	if e.url == "" {
		e.t.Fatalf("enginetest: harness %q gave an empty URL", e.h.Name)
	}
	return openURL(e.t, e.url, opts)
}

// openURL opens an Engine over url with opts, migrating it, closed when t
// ends.
func openURL(t testing.TB, url string, opts pgcheckpoint.Options) *engine.Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.Migrate = true
	eng, err := pgcheckpoint.Open(ctx, url, opts)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Errorf("close engine: %v", err)
		}
	})
	return eng
}

// snap writes a snapshot with the test's main engine; any error is fatal.
func (e *env) snap(in engine.SnapshotInput) engine.SnapshotResult {
	e.t.Helper()
	return snapWith(e.t, e.ctx, e.eng, in)
}

func snapWith(t testing.TB, ctx context.Context, eng *engine.Engine, in engine.SnapshotInput) engine.SnapshotResult {
	t.Helper()
	res, err := eng.Snapshot(ctx, in)
	if err != nil {
		t.Fatalf("snapshot on %q: %v", in.ThreadID, err)
	}
	return res
}

// get reads a checkpoint; any error is fatal.
func (e *env) get(id uuid.UUID) *engine.Checkpoint {
	e.t.Helper()
	cp, err := e.eng.Get(e.ctx, id)
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return cp
}

// head returns the head of a thread's root namespace; any error is fatal.
func (e *env) head(thread string) *engine.Checkpoint {
	e.t.Helper()
	cp, err := e.eng.Latest(e.ctx, thread)
	if err != nil {
		e.t.Fatalf("latest of %q: %v", thread, err)
	}
	return cp
}
