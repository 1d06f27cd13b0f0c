// Package enginetest is the conformance suite of pgcheckpoint's stores:
// every guarantee of the engine API (the invariants of DESIGN.md), checked
// through the public API alone, so that one suite runs against Postgres and
// SQLite and holds both to the same behaviour.
//
// A store's test package runs it with a Harness that gives each test a new,
// empty database, and a TestMain that lets the suite re-execute the test
// binary as writer and agent processes:
//
//	func TestMain(m *testing.M) { os.Exit(enginetest.Main(m)) }
//
//	func TestConformance(t *testing.T) {
//		enginetest.Run(t, enginetest.Harness{
//			Name: "sqlite",
//			NewURL: func(t testing.TB) string {
//				return "sqlite:" + filepath.Join(t.TempDir(), "test.db")
//			},
//		})
//	}
//
// The suite opens engines with pgcheckpoint.Open and never looks at tables:
// rows are counted through ListThreads, ListCheckpoints, Get and Export.
// JSON is compared as values (see jsonEqual), since stores may spell the
// same value differently; strings, NUL characters included, must come back
// exactly.
package enginetest
