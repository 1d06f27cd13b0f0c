package jsontext

import "bytes"

// Postgres jsonb cannot hold U+0000, so JSON strings are stored with an
// escape: U+0000 becomes U+0001 '0' and U+0001 becomes U+0001 U+0001.
// Everything else is stored as it is. Valid JSON text spells both
// characters only as the escapes \u0000 and \u0001, so both directions work
// on the text without decoding it, and cost one bytes.Contains when the
// characters are absent, which is nearly always. Both stores keep JSON this
// way: the engine escapes what it writes and unescapes what it reads, and a
// store that shows stored text (the SQLite default summary) unescapes it
// first, with UnescapeNUL.

var (
	escNUL = []byte(`\u0000`)
	escSOH = []byte(`\u0001`)
	escAny = []byte(`\u000`)
)

// EscapeNUL rewrites valid JSON text for storage in jsonb.
func EscapeNUL(b []byte) []byte {
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

// UnescapeNUL reverses EscapeNUL on JSON text read back from jsonb.
func UnescapeNUL(b []byte) []byte {
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
