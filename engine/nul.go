package engine

import (
	"bytes"
	"encoding/json"
)

// Postgres jsonb cannot hold U+0000, so JSON strings are stored with an
// escape: U+0000 becomes U+0001 '0' and U+0001 becomes U+0001 U+0001.
// Everything else is stored as it is. Valid JSON text spells both characters
// only as the escapes \u0000 and \u0001, so both directions work on the
// text without decoding it, and cost one bytes.Contains when the characters
// are absent, which is nearly always.

var (
	escNUL = []byte(`\u0000`)
	escSOH = []byte(`\u0001`)
	escAny = []byte(`\u000`)
)

// escapeNUL rewrites valid JSON text for storage in jsonb.
func escapeNUL(b []byte) []byte {
	if !bytes.Contains(b, escAny) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] != 'u' || i+6 > len(b) {
			out = append(out, b[i], b[i+1])
			i++
			continue
		}
		switch {
		case bytes.Equal(b[i:i+6], escNUL):
			out = append(out, `\u00010`...)
		case bytes.Equal(b[i:i+6], escSOH):
			out = append(out, `\u0001\u0001`...)
		default:
			out = append(out, b[i:i+6]...)
		}
		i += 5
	}
	return out
}

// unescapeNUL reverses escapeNUL on JSON text read back from jsonb.
func unescapeNUL(b []byte) []byte {
	if !bytes.Contains(b, escSOH) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] != 'u' || i+6 > len(b) {
			out = append(out, b[i], b[i+1])
			i++
			continue
		}
		if !bytes.Equal(b[i:i+6], escSOH) {
			out = append(out, b[i:i+6]...)
			i += 5
			continue
		}
		rest := b[i+6:]
		switch {
		case len(rest) > 0 && rest[0] == '0':
			out = append(out, escNUL...)
			i += 6
		case bytes.HasPrefix(rest, escSOH):
			out = append(out, escSOH...)
			i += 11
		default: // a lone U+0001 not written by the engine: keep it
			out = append(out, escSOH...)
			i += 5
		}
	}
	return out
}

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
