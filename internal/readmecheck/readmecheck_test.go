package readmecheck

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseKinds(t *testing.T) {
	text := strings.Join([]string{
		"# t",
		"<!-- example: a_test.go ExampleA -->",
		"```go",
		"x := 1",
		"```",
		"```go",
		"y := 2",
		"```",
		"```sql",
		"SELECT 1;",
		"```",
		"<!-- output: ckpt help -->",
		"```text",
		"usage",
		"```",
		"```text",
		"free text",
		"```",
		"```sh",
		"ckpt demo",
		"```",
		"```",
		"no language",
		"```",
	}, "\n")
	blocks, err := Parse("x.md", text)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []Kind
	for _, b := range blocks {
		kinds = append(kinds, b.Kind())
	}
	want := []Kind{KindExample, KindUnchecked, KindSQL, KindOutput, KindUnchecked, KindShell, KindUnchecked}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	if f, fn, err := blocks[0].Example(); err != nil || f != "a_test.go" || fn != "ExampleA" || blocks[0].Text != "x := 1\n" || blocks[0].Line != 3 {
		t.Fatalf("example block: %q %q %v %+v", f, fn, err, blocks[0])
	}
	if blocks[3].Output() != "ckpt help" {
		t.Fatalf("output name %q", blocks[3].Output())
	}
	if _, err := Parse("x.md", "```sh\nckpt demo\n"); err == nil {
		t.Fatal("an unclosed block parsed")
	}
}

func TestCommands(t *testing.T) {
	b := Block{File: "x.md", Line: 10, Lang: "sh", Text: strings.Join([]string{
		`go run ./cmd/ckpt --database "$DATABASE_URL" log run-42 --graph   # a comment | not a pipe`,
		`ckpt tree run-42 --format dot | dot -Tsvg > run-42.svg`,
		`A=1 B='two words' \`,
		`  go test -run '^$' -bench 'Speed|Tree' ./integration/ && echo "a;b"`,
		`ckpt export run-42 > out.jsonl`,
		`ckpt import </dev/null`,
		`echo '|' ";"`,
	}, "\n") + "\n"}
	cmds, err := Commands(b)
	if err != nil {
		t.Fatal(err)
	}
	type c struct {
		Line   int
		Env    []string
		Prog   string
		Args   []string
		Stdout string
	}
	var got []c
	for _, x := range cmds {
		got = append(got, c{x.Line, x.Env, x.Prog, x.Args, x.Stdout})
	}
	want := []c{
		{11, nil, "ckpt", []string{"--database", "$DATABASE_URL", "log", "run-42", "--graph"}, ""},
		{12, nil, "ckpt", []string{"tree", "run-42", "--format", "dot"}, ""},
		{12, nil, "dot", []string{"-Tsvg"}, "run-42.svg"},
		{13, []string{"A=1", "B=two words"}, "go", []string{"test", "-run", "^$", "-bench", "Speed|Tree", "./integration/"}, ""},
		{13, nil, "echo", []string{"a;b"}, ""},
		{15, nil, "ckpt", []string{"export", "run-42"}, "out.jsonl"},
		{16, nil, "ckpt", []string{"import"}, ""},
		{17, nil, "echo", []string{"|", ";"}, ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}
