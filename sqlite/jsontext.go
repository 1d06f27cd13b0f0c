package sqlite

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// The store keeps JSON as the text the engine handed over and works on
// that text, not on decoded values, so what it returns is made of the very
// bytes written: a whole checkpoint is returned byte for byte; a rebuilt
// one is made of the messages, keys and values as written, joined with ','
// and ':' and no spaces (see materialize).

// member is one key and value of a JSON object, as text.
type member struct {
	key  string // decoded: the identity of the key
	raw  []byte // the key as written, quotes included
	val  []byte // the value as written, without spaces around it
	gone bool   // removed while rebuilding
}

// splitArray returns the elements of a JSON array (valid JSON text), each
// as written without the spaces around it.
func splitArray(b []byte) ([][]byte, error) {
	i := jsontext.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, fmt.Errorf("%w: not a JSON array", engine.ErrInvalidJSON)
	}
	var out [][]byte
	for i = jsontext.SkipSpace(b, i+1); i < len(b) && b[i] != ']'; i = jsontext.SkipSpace(b, i+1) {
		if b[i] == ',' {
			continue
		}
		end := jsontext.ValueEnd(b, i)
		out = append(out, jsontext.TrimRight(b[i:end]))
		i = end
		if i >= len(b) || b[i] == ']' {
			break
		}
	}
	return out, nil
}

// splitObject returns the members of a JSON object (valid JSON text) in
// the order written. A key given twice appears twice; lookups take the
// last, as Postgres jsonb does.
func splitObject(b []byte) ([]member, error) {
	i := jsontext.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", engine.ErrInvalidJSON)
	}
	var out []member
	for i = jsontext.SkipSpace(b, i+1); i < len(b) && b[i] != '}'; i = jsontext.SkipSpace(b, i+1) {
		if b[i] == ',' {
			continue
		}
		end := jsontext.StringEnd(b, i)
		if end >= len(b) {
			return nil, fmt.Errorf("%w: unterminated key", engine.ErrInvalidJSON)
		}
		raw := b[i : end+1]
		key, err := objectKey(raw)
		if err != nil {
			return nil, err
		}
		i = jsontext.SkipSpace(b, end+1) // at ':'
		start := jsontext.SkipSpace(b, i+1)
		i = jsontext.ValueEnd(b, start)
		out = append(out, member{key: key, raw: raw, val: jsontext.TrimRight(b[start:i])})
		if i >= len(b) || b[i] == '}' {
			break
		}
	}
	return out, nil
}

// objectKey returns the text of a key as written (a JSON string with its
// quotes): the bytes between the quotes when they are plain (UTF-8, no
// escape, no control character), as most keys are, else what
// encoding/json decodes.
func objectKey(raw []byte) (string, error) {
	if body := raw[1 : len(raw)-1]; plainString(body) {
		return string(body), nil
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", fmt.Errorf("%w: object key %s: %v", engine.ErrInvalidJSON, raw, err)
	}
	return key, nil
}

// plainString reports whether b, a JSON string's body, reads as itself.
func plainString(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c < 0x20 {
			return false
		}
	}
	return utf8.Valid(b)
}

// concatArrays returns the elements of JSON arrays (valid JSON text), the
// first array's first, as one array. It copies the text between each
// array's brackets as written, without reading the elements: a delta's
// messages extend its base's, and a rebuilt conversation costs a copy of
// its bytes, not a parse.
func concatArrays[T ~string | ~[]byte](arrays ...T) ([]byte, error) {
	n := 2
	for _, a := range arrays {
		n += len(a)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for _, a := range arrays {
		a = jsontext.TrimRight(a[jsontext.SkipSpace(a, 0):])
		if len(a) < 2 || a[0] != '[' || a[len(a)-1] != ']' {
			return nil, fmt.Errorf("%w: not a JSON array", engine.ErrInvalidJSON)
		}
		inner := jsontext.TrimRight(a[jsontext.SkipSpace(a, 1) : len(a)-1])
		if len(inner) == 0 {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, inner...)
	}
	return append(out, ']'), nil
}

// joinArray writes elements as a JSON array.
func joinArray(elems [][]byte) []byte {
	n := 2
	for _, e := range elems {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

// joinObject writes the members not gone as a JSON object.
func joinObject(ms []member) []byte {
	n := 2
	for _, m := range ms {
		n += len(m.raw) + len(m.val) + 2
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	first := true
	for _, m := range ms {
		if m.gone {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, m.raw...)
		out = append(out, ':')
		out = append(out, m.val...)
	}
	return append(out, '}')
}

// lastByKey maps each key to the index of its last member.
func lastByKey(ms []member) map[string]int {
	idx := make(map[string]int, len(ms))
	for i, m := range ms {
		idx[m.key] = i
	}
	return idx
}
