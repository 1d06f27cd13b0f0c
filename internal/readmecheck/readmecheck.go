// Package readmecheck reads the code blocks of the README and of docs/ so
// that tests can check each one: a Go block against the runnable example
// it shows, a SQL block by running it, a shell block by running or parsing
// its commands, an output block against the program's real output.
//
// Every fenced block must be one of the kinds of Kind; a block of none is
// an error of Blocks' caller (TestDocsEveryBlockIsChecked in the root
// package). A block's kind comes from its language and from an HTML comment
// on the line just before it:
//
//	<!-- example: engine/example_test.go ExampleEngine_Snapshot -->
//	```go
//
//	<!-- output: ckpt help -->
//	```text
//
// A sql block needs no comment (integration/docs_sql_test.go runs each),
// nor does a sh block (its commands are checked by the tests of the
// commands they run; see Commands).
package readmecheck

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Kind is what checks a code block.
type Kind string

// The kinds of code block. A block of any other kind fails the docs test.
const (
	// KindExample: a go block that is the body of a runnable example
	// (Block.Example names its file and function), compared line by line.
	KindExample Kind = "example"
	// KindSQL: a sql block, run against a migrated Postgres database.
	KindSQL Kind = "sql"
	// KindShell: a sh block, whose ckpt, migrate and go test commands are
	// run or parsed by the tests of those commands.
	KindShell Kind = "shell"
	// KindOutput: a text block marked "<!-- output: NAME -->", compared with
	// the real output of NAME by the test that owns NAME.
	KindOutput Kind = "output"
	// KindUnchecked: anything else (a block without a marker, a go block
	// that is no example, an unknown language). Not allowed.
	KindUnchecked Kind = "unchecked"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	File   string // path relative to the repository root, e.g. docs/cli.md
	Line   int    // line of the opening fence, from 1
	Lang   string // the fence's info string: go, sql, sh, text, ...
	Marker string // the HTML comment on the line before, without <!-- -->, trimmed; "" if none
	Text   string // the block's lines, each ending in "\n"
}

// Where names the block for error messages: file:line.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Kind says what checks b; KindUnchecked if nothing does.
func (b Block) Kind() Kind {
	key, _, _ := strings.Cut(b.Marker, ":")
	switch {
	case b.Lang == "go" && strings.TrimSpace(key) == "example":
		return KindExample
	case b.Lang == "sql" && b.Marker == "":
		return KindSQL
	case b.Lang == "sh" && b.Marker == "":
		return KindShell
	case b.Lang == "text" && strings.TrimSpace(key) == "output":
		return KindOutput
	}
	return KindUnchecked
}

// Example returns the file and function of a KindExample block's marker.
func (b Block) Example() (file, fn string, err error) {
	_, v, _ := strings.Cut(b.Marker, ":")
	f := strings.Fields(v)
	if b.Kind() != KindExample || len(f) != 2 {
		return "", "", fmt.Errorf("%s: want <!-- example: FILE FUNCTION --> before a go block, got %q", b.Where(), b.Marker)
	}
	return f[0], f[1], nil
}

// Output returns the NAME of a KindOutput block's marker.
func (b Block) Output() string {
	_, v, _ := strings.Cut(b.Marker, ":")
	return strings.TrimSpace(v)
}

// Files lists the documentation whose blocks are checked: README.md and
// docs/*.md under root, sorted.
func Files(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	var files []string
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		files = append(files, filepath.ToSlash(rel))
	}
	sort.Strings(files)
	return append([]string{"README.md"}, files...), nil
}

// Blocks returns every fenced code block of the files Files lists under
// root, in file order.
func Blocks(root string) ([]Block, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var all []Block
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		bs, err := Parse(f, string(text))
		if err != nil {
			return nil, err
		}
		all = append(all, bs...)
	}
	return all, nil
}

// Parse returns the fenced code blocks (``` at the start of a line) of
// one Markdown text; name is the file name the blocks carry.
func Parse(name, text string) ([]Block, error) {
	lines := strings.Split(text, "\n")
	var blocks []Block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "```") {
			continue
		}
		b := Block{File: name, Line: i + 1, Lang: strings.TrimSpace(strings.TrimPrefix(l, "```"))}
		if i > 0 {
			prev := strings.TrimSpace(lines[i-1])
			if strings.HasPrefix(prev, "<!--") && strings.HasSuffix(prev, "-->") {
				b.Marker = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(prev, "<!--"), "-->"))
			}
		}
		var body strings.Builder
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				closed = true
				break
			}
			body.WriteString(lines[i] + "\n")
		}
		if !closed {
			return nil, fmt.Errorf("%s: the code block does not end", b.Where())
		}
		b.Text = body.String()
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// ExampleBody returns the body of function fn in the Go file example, as
// a docs block shows it: from its first line to the line before
// "// Output:", one tab of indentation removed and tabs inside shown as
// four spaces.
func ExampleBody(example, fn string) (string, error) {
	src, err := os.ReadFile(example)
	if err != nil {
		return "", err
	}
	ex := string(src)
	head := "\nfunc " + fn + "() {\n"
	start := strings.Index(ex, head)
	if start < 0 {
		return "", fmt.Errorf("%s has no func %s()", example, fn)
	}
	ex = ex[start+len(head):]
	end := strings.Index(ex, "\t// Output:")
	if end < 0 {
		return "", fmt.Errorf("%s: %s has no // Output: comment", example, fn)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(ex[:end], "\n"), "\n") {
		l = strings.TrimPrefix(l, "\t")
		lines = append(lines, strings.ReplaceAll(l, "\t", "    "))
	}
	return strings.Join(lines, "\n") + "\n", nil
}
