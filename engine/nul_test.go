package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeNUL(t *testing.T) {
	cases := []struct{ in, stored string }{
		{`{"a":"plain"}`, `{"a":"plain"}`},
		{`"\u0000"`, `"\u00010"`},
		{`"\u0001"`, `"\u0001\u0001"`},
		{`"\u0001\u0000"`, `"\u0001\u0001\u00010"`},
		{`"\\u0000"`, `"\\u0000"`}, // an escaped backslash, then the text u0000
		{`"\\\u0000"`, `"\\\u00010"`},
		{`"\u0009\u00000"`, `"\u0009\u000100"`},
		{`{"\u0000k":[1,"\u0000"]}`, `{"\u00010k":[1,"\u00010"]}`},
	}
	for _, c := range cases {
		got := escapeNUL([]byte(c.in))
		if string(got) != c.stored {
			t.Errorf("escapeNUL(%s) = %s, want %s", c.in, got, c.stored)
		}
		if back := unescapeNUL(got); string(back) != c.in {
			t.Errorf("unescapeNUL(%s) = %s, want %s", got, back, c.in)
		}
	}
	// A lone U+0001 not followed by a code (not written by the engine) is kept.
	if got := unescapeNUL([]byte(`"\u0001x"`)); string(got) != `"\u0001x"` {
		t.Errorf("lone marker: %s", got)
	}
}

// FuzzNULEscape checks, for any string, that the stored text holds no
// U+0000 and that reading it back gives the original string.
func FuzzNULEscape(f *testing.F) {
	for _, s := range []string{"", "\x00", "\x01", "\x010", "\x01\x01\x00", `\u0000`, "é\x00\"\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip() // JSON text is UTF-8; the engine rejects anything else
		}
		in, err := json.Marshal(map[string][]string{s: {s, "x" + s}})
		if err != nil {
			t.Fatal(err)
		}
		stored := escapeNUL(in)
		var decoded map[string][]string
		if err := json.Unmarshal(stored, &decoded); err != nil {
			t.Fatalf("stored text is not JSON: %s", stored)
		}
		for k, vs := range decoded {
			if strings.ContainsRune(k+strings.Join(vs, ""), 0) {
				t.Fatalf("stored text holds U+0000: %s", stored)
			}
		}
		back := unescapeNUL(stored)
		var got map[string][]string
		if err := json.Unmarshal(back, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{}
		_ = json.Unmarshal(in, &want)
		if len(got) != 1 || got[s] == nil || got[s][0] != want[s][0] || got[s][1] != want[s][1] {
			t.Fatalf("round trip of %q: got %q", s, got)
		}
	})
}
