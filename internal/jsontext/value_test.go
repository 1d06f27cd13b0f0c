package jsontext

import (
	"strings"
	"testing"
	"time"
)

func containsText(t *testing.T, doc, pat string) bool {
	t.Helper()
	d, err := Decode([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Decode([]byte(pat))
	if err != nil {
		t.Fatal(err)
	}
	return Contains(d, p)
}

func TestContainment(t *testing.T) {
	t.Parallel()
	cases := []struct {
		doc, pat string
		want     bool
	}{
		{`{"a":1,"b":2}`, `{"a":1}`, true},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`{"a":1.0}`, `{"a":1}`, true},
		{`{"a":"1"}`, `{"a":1}`, false},
		{`{"a":{"b":{"c":true,"d":null}}}`, `{"a":{"b":{"c":true}}}`, true},
		{`{"a":{"b":{"c":true}}}`, `{"a":{"b":{"c":false}}}`, false},
		{`{"a":[1,2,3]}`, `{"a":[3,1]}`, true},
		{`{"a":[1,2,3]}`, `{"a":[1,1]}`, true},
		{`{"a":[1,2]}`, `{"a":[4]}`, false},
		{`{"a":[1,2]}`, `{"a":1}`, false}, // only a top-level array contains a scalar
		{`[1,2]`, `1`, true},
		{`{"a":[{"x":1,"y":2},{"z":3}]}`, `{"a":[{"x":1}]}`, true},
		{`{"a":[{"x":1}]}`, `{"a":[{"x":1,"y":2}]}`, false},
		{`{"a":null}`, `{"a":null}`, true},
		{`{}`, `{}`, true},
		{`{"a":1}`, `{}`, true},
		{`{"a":[]}`, `{"a":[]}`, true},
		{`{"a":1,"a":2}`, `{"a":2}`, true}, // the last of duplicate keys
		{`{"memory_cleared":true}`, `{"memory_cleared":true}`, true},
		{`{"s":"x\u0001\u0001y"}`, `{"s":"x\u0001\u0001y"}`, true},
	}
	for _, c := range cases {
		if got := containsText(t, c.doc, c.pat); got != c.want {
			t.Errorf("%s @> %s = %v, want %v", c.doc, c.pat, got, c.want)
		}
	}
}

func TestSame(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1 }`, true},
		{`{"a":1.0}`, `{"a":1}`, true},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`"x\u0000"`, `"x\u0000"`, true},
		{`"x\u0000"`, `"x"`, false},
		{`{"a":1,"a":2}`, `{"a":2}`, true},
		{`[1, 1.0, 10e-1, 0.1e1, 0.00100e3, 1E+0]`, `[1, 1, 1, 1, 1, 1]`, true},
		{`[0, -0, 0.000, 0e999999, -0E-5]`, `[0, 0, 0, 0, 0]`, true},
		{`[-1.5, 150e-2, 1e999999, 10e999998, 1e-999999, 12345678901234567890123]`, `[-1.50, 1.5, 1e999999, 1e999999, 0.1e-999998, 1.2345678901234567890123e22]`, true},
		{`[1.5]`, `[-1.5]`, false},
		{`[1e999999]`, `[1e999998]`, false},
		{`[1e-999999]`, `[0]`, false},
		{`[12345678901234567890123]`, `[12345678901234567890124]`, false},
		{`[1e` + strings.Repeat("9", 101) + `]`, `[1e` + strings.Repeat("9", 101) + `]`, true},
		{`[1e` + strings.Repeat("9", 101) + `]`, `[10e` + strings.Repeat("9", 100) + `8]`, false}, // compared as written
	} {
		if got := Same([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("Same(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// Numbers with large exponents compare in time proportional to their
// text: a store's metadata filter compares one per row.
func TestSameLargeExponentsAreCheap(t *testing.T) {
	start := time.Now()
	for i := range 1000 {
		if !Same([]byte(`[1e999999]`), []byte(`[10e999998]`)) {
			t.Fatal("1e999999 != 10e999998")
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%d comparisons of 1e999999 took %v", i+1, d)
		}
	}
}
