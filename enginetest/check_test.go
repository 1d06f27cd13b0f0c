package enginetest

import "testing"

func TestJSONDiff(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{`{"a":1,"b":[1,2]}`, `{ "b" : [1, 2], "a" : 1 }`, true},
		{`{"n":1.50}`, `{"n":1.5}`, true},
		{`{"n":1e2}`, `{"n":100}`, true},
		{`{"n":12345678901234567890}`, `{"n":12345678901234567891}`, false},
		{`1`, `"1"`, false},
		{`"\u00e9"`, `"é"`, true},
		{`"\ud83d\ude42"`, `"🙂"`, true},
		{`"\u0000"`, `"\u0001"`, false},
		{`"\u0000"`, "\"\\u0000\"", true},
		{`"\ud800"`, `"\ufffd"`, false},
		{`"\ud800"`, `"\uD800"`, true},
		{`"\udc00\ud800"`, `"\ufffd\ufffd"`, false},
		{`"\\ud800"`, `"\\ud800"`, true},
		{`"\\ud800"`, `"\ud800"`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":null}`, `{}`, false},
		{`{"a":1} {}`, `{"a":1}`, false},
	} {
		err := jsonDiff([]byte(c.a), []byte(c.b))
		if (err == nil) != c.same {
			t.Errorf("jsonDiff(%s, %s) = %v, want same=%v", c.a, c.b, err, c.same)
		}
	}
}
