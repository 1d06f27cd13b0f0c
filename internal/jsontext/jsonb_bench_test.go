package jsontext

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// benchText is a message list of about 1 MB, as the SQLite benchmarks'
// conversation at step 1,000 (sqlite/bench_test.go).
func benchText() []byte {
	var b strings.Builder
	b.WriteString("[")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"role":"assistant","content":"message %05d %s","n":[1.5,2,3e4]}`, i, strings.Repeat("lorem ipsum ", 83))
	}
	b.WriteString("]")
	return []byte(b.String())
}

// BenchmarkJSONBRefusal against BenchmarkValid: the SQLite store runs both
// on every JSON value it is handed (see engine.CheckJSON), so the rule
// costs what it adds to the parse.
func BenchmarkJSONBRefusal(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if JSONBRefusal(text) != "" {
			b.Fatal("refused")
		}
	}
}

func BenchmarkValid(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if !json.Valid(text) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkBytes(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if Bytes(text) < int64(len(text)) {
			b.Fatal("short")
		}
	}
}
