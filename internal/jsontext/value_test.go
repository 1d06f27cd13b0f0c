package jsontext

import "testing"

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
	} {
		if got := Same([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("Same(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
