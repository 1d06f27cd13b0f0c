package jsontext

import (
	"encoding/json"
	"strings"
	"testing"
)

// validCases are texts at the edges of JSON's grammar, each judged by
// json.Valid.
var validCases = []string{
	``, ` `, `1`, ` 1 `, `-`, `-0`, `-01`, `01`, `0.`, `0.5`, `.5`, `1e`, `1e+`, `1E-7`, `1e5.0`, `-1.5e+10`,
	`+1`, `1 2`, `tru`, `true`, `truex`, `false`, `null`, `nul`, `NaN`, `"`, `""`, `"a`, `"\"`, `"\\"`, `"\/"`,
	`"\b\f\n\r\t"`, `"\x"`, `"\u"`, `"\u12"`, `"\u12g4"`, `"\u00e9"`, `"\uD800"`, "\"\x1f\"", "\"\x7f\"",
	"\"\xff\xfe\"", "\"tab\there\"", `{}`, `{ }`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{a:1}`,
	`{"a":1}`, `{"a" : [1, {"b": null}] }`, `[]`, `[ ]`, `[,]`, `[1,]`, `[1 2]`, `[1,2]`, `[[[]]]`, `[`, `]`,
	`{`, `}`, `[}`, `{]`, "\t\n\r [1]\r\n", "\f1", "\v1", `"\u0000"`, `{"a":1}{}`, `1,`,
}

func TestValid(t *testing.T) {
	for _, c := range validCases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", c, got, want)
		}
	}
	// encoding/json reads 10,000 levels of nesting and no more.
	for _, depth := range []int{9999, 10000, 10001} {
		for _, open := range []string{"[", `{"k":`} {
			close := "]"
			if open != "[" {
				close = "}"
			}
			text := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			if got, want := Valid(text), json.Valid(text); got != want {
				t.Errorf("Valid of %d levels of %s = %v, json.Valid says %v", depth, open, got, want)
			}
		}
	}
	if !Valid(benchText()) {
		t.Error("the benchmark's message list is refused")
	}
}

// FuzzValid holds Valid equal to json.Valid on any bytes.
func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

func BenchmarkValidFast(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if !Valid(text) {
			b.Fatal("invalid")
		}
	}
}
