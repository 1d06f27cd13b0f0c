package main

import (
	"encoding/json"
	"testing"
)

func TestSafeText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain text, ünïcödé, 日本語, emoji 🙂", "plain text, ünïcödé, 日本語, emoji 🙂"},
		{"tab\tand\nnewline", "tab\tand\nnewline"},
		{"\x1b]0;owned\x07\x1b[2J", `\u001b]0;owned\u0007\u001b[2J`},
		{"over\rwrite", `over\u000dwrite`},
		{"del\x7f", `del\u007f`},
		{"c1 \u009b31m csi", `c1 \u009b31m csi`},
		{"\u202egnp.exe", `\u202egnp.exe`},
		{"iso\u2066late\u2069", `iso\u2066late\u2069`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"tag \U000E0041", `tag \U000e0041`},
		{"nul\x00", `nul\u0000`},
	} {
		if got := safeText(c.in); got != c.want {
			t.Errorf("safeText(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// In a JSON string the escapes stand for the same characters.
	in := "a\x1bb\u202ec\u009bd"
	enc, _ := json.Marshal(in)
	var back string
	if err := json.Unmarshal([]byte(safeText(string(enc))), &back); err != nil || back != in {
		t.Errorf("escaped JSON reads back %q, %v; want %q", back, err, in)
	}
}
