package jsontext

import (
	"encoding/json"
	"testing"
)

// objectKey reads a plain key as its bytes, without encoding/json: every
// key gets the text encoding/json decodes, or an error where it fails.
func TestObjectKeyDecodesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`""`, `"plan"`, `"héllo ✓"`, `"a\"b"`, `"a\\b"`, `"\u0000"`, `"\ud83d\ude00"`, `"a/b"`,
		"\"\xff\"",         // not UTF-8: encoding/json gives U+FFFD
		"\"a\x01b\"",       // a control character: not JSON
		"\"a\tb\"",         // a tab, unescaped: not JSON either
		"\"\xed\xa0\x80\"", // a surrogate's UTF-8 encoding: not UTF-8
	} {
		var want string
		wantErr := json.Unmarshal([]byte(raw), &want)
		got, err := objectKey([]byte(raw))
		if (err != nil) != (wantErr != nil) || got != want {
			t.Errorf("objectKey(%q) = %q, %v; encoding/json: %q, %v", raw, got, err, want, wantErr)
		}
	}
}
