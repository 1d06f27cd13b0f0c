package pgcheckpoint_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/internal/readmecheck"
)

// outputOwners are the output blocks' names and the tests that compare
// each with the real output.
var outputOwners = map[string]string{
	"ckpt demo":    "cmd/ckpt TestDocsCkptOutputs",
	"ckpt help":    "cmd/ckpt TestDocsCkptOutputs",
	"migrate help": "cmd/migrate TestDocsMigrateOutputs",
}

// external are the programs of sh blocks that no test runs, and why. Their
// words that name a file of the repository are still checked to exist.
var external = map[string]string{
	"psql":      "needs a server and a superuser: the roles script is run by integration TestRoles*",
	"initdb":    "makes a server: the speed figures' cluster",
	"pg_ctl":    "starts that server",
	"dot":       "Graphviz, draws ckpt tree's output",
	"tee":       "keeps a copy of the benchmark output",
	"head":      "part of the trailer's digest recipe",
	"sha256sum": "part of the trailer's digest recipe",
}

// Every code block of the README and docs/ is checked by a test: this one
// for Go examples, go test commands and links; integration for SQL;
// cmd/ckpt and cmd/migrate for their commands and outputs. A block of no
// known kind fails here, with how to mark it.
func TestDocsEveryBlockIsChecked(t *testing.T) {
	blocks, err := readmecheck.Blocks(".")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[readmecheck.Kind]int{}
	for _, b := range blocks {
		kinds[b.Kind()]++
		switch b.Kind() {
		case readmecheck.KindExample:
			file, fn, err := b.Example()
			if err != nil {
				t.Error(err)
				continue
			}
			want, err := readmecheck.ExampleBody(file, fn)
			if err != nil {
				t.Errorf("%s: %v", b.Where(), err)
				continue
			}
			if b.Text != want {
				t.Errorf("%s: the block differs from %s's body in %s:\n--- docs\n%s--- %s\n%s", b.Where(), fn, file, b.Text, fn, want)
			}
		case readmecheck.KindOutput:
			if _, ok := outputOwners[b.Output()]; !ok {
				t.Errorf("%s: no test compares output %q (known: %v)", b.Where(), b.Output(), keys(outputOwners))
			}
		case readmecheck.KindShell:
			checkShell(t, b)
		case readmecheck.KindSQL:
			// integration TestDocsSQLBlocksRun runs it.
		default:
			t.Errorf("%s: a ```%s block that no test checks: make it a runnable example's body (<!-- example: FILE ExampleX --> before a go block), "+
				"a sql block, a sh block of ckpt, migrate or go test commands, or the real output of a known command (<!-- output: NAME --> before a text block)", b.Where(), b.Lang)
		}
	}
	if kinds[readmecheck.KindExample] == 0 || kinds[readmecheck.KindShell] == 0 || kinds[readmecheck.KindSQL] == 0 || kinds[readmecheck.KindOutput] == 0 {
		t.Errorf("found blocks %v: a kind is missing (did the docs move?)", kinds)
	}
}

// checkShell checks the commands of a sh block it can check here: go test
// (flags, packages, test names, environment variables); ckpt and migrate
// are run by their own packages' tests; the rest must be known externals.
func checkShell(t *testing.T, b readmecheck.Block) {
	t.Helper()
	cmds, err := readmecheck.Commands(b)
	if err != nil {
		t.Error(err)
		return
	}
	if len(cmds) == 0 {
		t.Errorf("%s: a sh block with no command", b.Where())
	}
	for _, c := range cmds {
		checkEnv(t, c)
		checkPaths(t, c)
		switch {
		case c.Prog == "ckpt" || c.Prog == "migrate":
			// cmd/ckpt TestDocsCkptCommands, cmd/migrate TestDocsMigrateCommands.
		case c.Prog == "go" && len(c.Args) > 0 && c.Args[0] == "test":
			checkGoTest(t, c)
		case c.Prog == "go" && len(c.Args) > 2 && c.Args[0] == "run" && c.Args[1] == "-modfile=tools/go.mod":
			// A pinned tool: it must be required by tools/go.mod.
			mod, err := os.ReadFile("tools/go.mod")
			if err != nil {
				t.Fatal(err)
			}
			path := c.Args[2]
			found := false
			for _, l := range strings.Split(string(mod), "\n") {
				if f := strings.Fields(l); len(f) >= 2 && strings.HasPrefix(path, strings.TrimPrefix(f[0], "require ")) && f[0] != "module" && f[0] != "go" {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: %s is not a tool pinned in tools/go.mod", c.Where(), path)
			}
		default:
			if _, ok := external[c.Prog]; !ok {
				t.Errorf("%s: program %q is neither checked (ckpt, migrate, go test) nor a known external (%v)", c.Where(), c.Prog, keys(external))
			}
		}
	}
}

// checkEnv: a PGCHECKPOINT_ variable a command sets is one the code reads.
func checkEnv(t *testing.T, c readmecheck.Command) {
	t.Helper()
	for _, e := range c.Env {
		name, _, _ := strings.Cut(e, "=")
		if strings.HasPrefix(name, "PGCHECKPOINT_") && !goSourceHas(t, `"`+name+`"`) {
			t.Errorf("%s: no Go code reads %s", c.Where(), name)
		}
	}
}

// checkPaths: a word that names a path in the repository (schema/...,
// ./cmd/..., integration/...) names one that exists.
func checkPaths(t *testing.T, c readmecheck.Command) {
	t.Helper()
	for _, w := range append([]string{c.Prog}, c.Args...) {
		p := strings.TrimPrefix(w, "-modfile=")
		p = strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/...")
		first, _, ok := strings.Cut(p, "/")
		if !ok || strings.ContainsAny(p, "$:=*") || strings.HasPrefix(w, "/") {
			continue
		}
		if fi, err := os.Stat(first); err != nil || !fi.IsDir() {
			continue // not a directory of the repository: a file the command makes
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %s does not exist", c.Where(), w)
		}
	}
}

// goTestFlags are the go test flags the docs may use: true takes a value.
var goTestFlags = map[string]bool{
	"short": false, "v": false, "race": false, "c": false, "update": false, "fold": false,
	"run": true, "bench": true, "benchtime": true, "count": true, "timeout": true,
	"fuzz": true, "fuzztime": true, "fuzzminimizetime": true, "parallel": true,
}

// checkGoTest checks a go test command: known flags, packages that exist,
// and -run, -bench and -fuzz patterns that select a function there.
func checkGoTest(t *testing.T, c readmecheck.Command) {
	t.Helper()
	patterns := map[string]string{}
	var pkgs []string
	args := c.Args[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			pkgs = append(pkgs, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takes, ok := goTestFlags[name]
		if !ok {
			t.Errorf("%s: go test flag -%s is not one the docs may use (%v)", c.Where(), name, keys(goTestFlags))
			continue
		}
		if takes && !hasVal {
			i++
			if i == len(args) {
				t.Errorf("%s: -%s without a value", c.Where(), name)
				return
			}
			val = args[i]
		}
		switch name {
		case "run", "bench", "fuzz":
			patterns[name] = val
		case "update", "fold":
			patterns["-"+name] = ""
		}
	}
	if len(pkgs) == 0 {
		t.Errorf("%s: go test without a package", c.Where())
	}
	for _, p := range pkgs {
		dir := strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/")
		if dir == "..." {
			dir = "."
		}
		if dir == "" {
			dir = "."
		}
		names := testFuncs(t, strings.TrimSuffix(dir, "/..."), strings.HasSuffix(dir, "...") || p == "./...")
		if len(names) == 0 {
			t.Errorf("%s: package %s has no tests", c.Where(), p)
			continue
		}
		for flag, pat := range patterns {
			if flag == "-update" || flag == "-fold" {
				if !dirSourceHas(t, dir, `flag.Bool("`+flag[1:]+`"`) {
					t.Errorf("%s: package %s defines no %s flag", c.Where(), p, flag)
				}
				continue
			}
			if pat == "^$" {
				continue // runs none: the idiom beside -bench and -fuzz
			}
			prefix := map[string]string{"run": "Test", "bench": "Benchmark", "fuzz": "Fuzz"}[flag]
			top, _, _ := strings.Cut(pat, "/")
			re, err := regexp.Compile(top)
			if err != nil {
				t.Errorf("%s: -%s %q: %v", c.Where(), flag, pat, err)
				continue
			}
			matched := false
			for _, n := range names {
				if strings.HasPrefix(n, prefix) && re.MatchString(n) {
					matched = true
				}
			}
			if !matched {
				t.Errorf("%s: -%s %q selects no %s function in %s", c.Where(), flag, pat, prefix, p)
			}
		}
	}
}

// testFuncs lists the top-level function names of the _test.go files in
// dir (and below it, if recursive).
func testFuncs(t *testing.T, dir string, recursive bool) []string {
	t.Helper()
	var names []string
	walk := func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (!recursive || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				names = append(names, fd.Name.Name)
			}
		}
		return nil
	}
	if err := filepath.WalkDir(dir, walk); err != nil {
		t.Fatal(err)
	}
	return names
}

// goSourceHas reports whether a .go file of the repository holds s.
func goSourceHas(t *testing.T, s string) bool {
	t.Helper()
	return dirSourceHas(t, ".", s) // recursive from the root
}

// dirSourceHas reports whether a .go file under dir holds s.
func dirSourceHas(t *testing.T, dir, s string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			found = strings.Contains(string(b), s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link of the README and docs/ names a file that exists,
// and an anchor (#...) a heading of that file.
func TestDocsLinksResolve(t *testing.T) {
	files, err := readmecheck.Files(".")
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(stripCode(string(text)), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, anchor, _ := strings.Cut(target, "#")
				file := f
				if path != "" {
					file = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
				}
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d: link %s: %v", f, i+1, target, err)
					continue
				}
				if anchor != "" && !hasAnchor(t, file, anchor) {
					t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", f, i+1, target, file, anchor)
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no links found")
	}
}

// stripCode blanks the lines of fenced code blocks (keeping line numbers),
// where ](...) is code, not a link.
func stripCode(text string) string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// hasAnchor reports whether the Markdown file has a heading whose GitHub
// anchor is anchor: lower case, punctuation but - and _ dropped, spaces
// as -.
func hasAnchor(t *testing.T, file, anchor string) bool {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(stripCode(string(text)), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		if b.String() == anchor {
			return true
		}
	}
	return false
}

// The README fits on a page: under 400 lines (issue 32); the depth is in
// docs/.
func TestReadmeFitsOnAPage(t *testing.T) {
	text, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "\n"); n >= 400 {
		t.Fatalf("README.md has %d lines; keep it under 400 and move the depth to docs/", n)
	}
}

var (
	goRef   = regexp.MustCompile(`\b(engine|schema|sqlite|postgres|pgcheckpoint|eino)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	sqlRef  = regexp.MustCompile(`\bpgcheckpoint\.([a-z_]+)\b`)
	testRef = regexp.MustCompile("`((?:Test|Benchmark|Fuzz|Example)[A-Z_]\\w*)`")
)

// goPackages are the directories of the packages the docs name by their
// package name.
var goPackages = map[string]string{
	"engine": "engine", "schema": "schema", "sqlite": "sqlite", "postgres": "postgres",
	"pgcheckpoint": ".", "eino": "adapters/eino",
}

// The names the docs give are the code's: every engine.X, schema.X,
// sqlite.X, postgres.X, pgcheckpoint.X and eino.X (and X.Y, a method or
// field of X) is declared in that package (pgcheckpoint.X may also be a
// span name the code writes); every pgcheckpoint.name of SQL is in
// schema/current.sql (or, like the version table, in the Go code); every test, benchmark, fuzz target and example
// named in backquotes is a function of a _test.go file.
func TestDocsNamesExist(t *testing.T) {
	files, err := readmecheck.Files(".")
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]map[string]bool{}
	for name, dir := range goPackages {
		decls[name] = declared(t, dir)
	}
	current, err := os.ReadFile("schema/current.sql")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	for _, n := range testFuncs(t, ".", true) {
		tests[n] = true
	}
	checked := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			for _, m := range goRef.FindAllStringSubmatch(line, -1) {
				checked++
				if !decls[m[1]][m[2]] && !(m[1] == "pgcheckpoint" && goSourceHas(t, `"`+m[0])) { // or a span's name
					t.Errorf("%s:%d: %s.%s is not declared in package %s", f, i+1, m[1], m[2], m[1])
				} else if m[3] != "" && !decls[m[1]][m[2]+"."+m[3]] {
					t.Errorf("%s:%d: %s.%s has no method or field %s", f, i+1, m[1], m[2], m[3])
				}
			}
			for _, m := range sqlRef.FindAllStringSubmatch(line, -1) {
				checked++
				if !strings.Contains(string(current), "pgcheckpoint."+m[1]) && !goSourceHas(t, "pgcheckpoint."+m[1]) {
					t.Errorf("%s:%d: pgcheckpoint.%s is not in schema/current.sql", f, i+1, m[1])
				}
			}
			for _, m := range testRef.FindAllStringSubmatch(line, -1) {
				checked++
				if !tests[m[1]] {
					t.Errorf("%s:%d: no _test.go declares %s", f, i+1, m[1])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no names found")
	}
}

// declared returns the exported top-level names of the package in dir
// (not its tests), and Type.Member for each method and struct field.
func declared(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
					continue
				}
				recv := d.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if ix, ok := recv.(*ast.IndexExpr); ok {
					recv = ix.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					names[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						names[s.Name.Name] = true
						fields := func(fl *ast.FieldList) {
							for _, fd := range fl.List {
								for _, n := range fd.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
						switch ty := s.Type.(type) {
						case *ast.StructType:
							fields(ty.Fields)
						case *ast.InterfaceType:
							fields(ty.Methods)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					}
				}
			}
		}
	}
	return names
}
