package engine

import (
	"encoding/json"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// escapeNUL rewrites valid JSON text for storage: jsonb cannot hold U+0000
// (see jsontext.EscapeNUL for the escape, which both stores use).
func escapeNUL(b []byte) []byte { return jsontext.EscapeNUL(b) }

// unescapeNUL reverses escapeNUL on JSON text read back from a store.
func unescapeNUL(b []byte) []byte { return jsontext.UnescapeNUL(b) }

// storedString is s as a JSON string value of stored JSON holds it (see
// escapeNUL), for comparing text with what SQL reads out of stored JSON
// (e.g. metadata->>'run_id'). The rule is escapeNUL's, applied through the
// JSON spelling of s.
func storedString(s string) string {
	text, _ := json.Marshal(s) // a string always encodes
	var out string
	if err := json.Unmarshal(escapeNUL(text), &out); err != nil {
		return s
	}
	return out
}
