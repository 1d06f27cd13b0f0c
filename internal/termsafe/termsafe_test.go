package termsafe

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
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
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// In a JSON string the escapes stand for the same characters.
	in := "a\x1bb\u202ec\u009bd"
	enc, _ := json.Marshal(in)
	var back string
	if err := json.Unmarshal([]byte(Text(string(enc))), &back); err != nil || back != in {
		t.Errorf("escaped JSON reads back %q, %v; want %q", back, err, in)
	}
}

func TestSafeLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"row\tone\nforged\t7", `row\u0009one\u000aforged\u00097`},
		{"cr\rand esc\x1b", `cr\u000dand esc\u001b`},
		{"plain", "plain"},
	} {
		if got := Line(c.in); got != c.want {
			t.Errorf("Line(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// JSON leaves nothing a terminal acts on, and the text decodes to the
// same values.
func TestJSONSafe(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a": "plain ünïcödé 🙂"}`, `{"a": "plain ünïcödé 🙂"}`},
		{"{\"c1\": \"\u009b31m\", \"del\": \"\x7f\"}", `{"c1": "\u009b31m", "del": "\u007f"}`},
		{"[\"\u202egnp.exe\", \"iso\u2066\", \"zw\u200b\ufeff\", \"ls\u2028\"]", `["\u202egnp.exe", "iso\u2066", "zw\u200b\ufeff", "ls\u2028"]`},
		{"\"tag \U000E0041\"", `"tag \udb40\udc41"`},
		{"\"bad \xff\"", `"bad \ufffd"`},
		{"[\n\t1,\n\t\"\\\\\u009b\"\n]", "[\n\t1,\n\t\"\\\\\\u009b\"\n]"}, // an escaped backslash, then C1
	} {
		got := JSON([]byte(c.in))
		if string(got) != c.want {
			t.Errorf("JSON(%q) = %q, want %q", c.in, got, c.want)
		}
		if r := First(string(got)); r >= 0 {
			t.Errorf("JSON(%q) keeps %U", c.in, r)
		}
		var before, after any
		if err := json.Unmarshal([]byte(c.in), &before); err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if err := json.Unmarshal(got, &after); err != nil || !reflect.DeepEqual(before, after) {
			t.Errorf("JSON(%q) reads back %v (%v), want %v", c.in, after, err, before)
		}
	}
	// Every unsafe character below U+30000, in a string, reads back as it was.
	var all []rune
	for r := rune(0); r < 0x30000; r++ {
		if Unsafe(r) && r != utf8.RuneError && (r < 0xd800 || r > 0xdfff) {
			all = append(all, r)
		}
	}
	enc, _ := json.Marshal(string(all))
	var back string
	if err := json.Unmarshal(JSON(enc), &back); err != nil || back != string(all) {
		t.Errorf("the unsafe characters read back changed (%v)", err)
	}
	if r := First(string(JSON(enc))); r >= 0 {
		t.Errorf("JSON keeps %U", r)
	}
}
