package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// digestSize is the length of one message digest: the first 16 bytes of the
// SHA-256 of the message's JSON text.
const digestSize = 16

// messageDigests returns the digests of the elements of a JSON array, in
// order, concatenated: what checkpoint_put compares with the parent's to
// tell an appended message list (stored as a delta) from an edited one
// (stored whole). arr must be valid JSON text of an array; each element's
// text is taken as it is, without the spaces around it.
//
// The digests are of the bytes as sent, so the same message sent with other
// spacing or key order counts as edited: the checkpoint is stored whole,
// which costs space, never correctness.
func messageDigests(arr []byte) []byte {
	out := make([]byte, 0, 64*digestSize)
	depth, start := 0, -1
	emit := func(end int) {
		if start < 0 {
			return
		}
		for end > start && isSpace(arr[end-1]) {
			end--
		}
		sum := sha256.Sum256(arr[start:end])
		out = append(out, sum[:digestSize]...)
		start = -1
	}
	for i := 0; i < len(arr); i++ {
		c := arr[i]
		switch c {
		case '"':
			if depth == 1 && start < 0 {
				start = i
			}
			i = stringEnd(arr, i)
		case '[', '{':
			if depth == 1 && start < 0 {
				start = i
			}
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				emit(i)
			}
		case ',':
			if depth == 1 {
				emit(i)
			}
		case ' ', '\t', '\n', '\r':
		default:
			if depth == 1 && start < 0 {
				start = i
			}
		}
	}
	return out
}

// stringEnd returns the index of the quote that closes the JSON string
// opened at arr[open] (len(arr) if none): the next quote not escaped by an
// odd run of backslashes.
func stringEnd(arr []byte, open int) int {
	i := open + 1
	for {
		q := bytes.IndexByte(arr[i:], '"')
		if q < 0 {
			return len(arr)
		}
		i += q
		n := 0
		for j := i - 1; j > open && arr[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
		i++
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// keyDigests returns, as a JSON object, a digest of each top-level value of
// a JSON object (valid JSON text): {"key": base64 of the first 16 bytes of
// the SHA-256 of the value's text}, keys spelled as in obj and in its order.
// A key given twice appears twice, so that jsonb keeps the last of both, as
// it does for the object itself. checkpoint_put compares these with the
// parent's to find the keys a delta must store.
func keyDigests(obj []byte) ([]byte, error) {
	out := make([]byte, 0, 64)
	out = append(out, '{')
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidJSON)
	}
	for i = skipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; i = skipSpace(obj, i+1) {
		if obj[i] == ',' {
			continue
		}
		end := stringEnd(obj, i)
		if end >= len(obj) {
			return nil, fmt.Errorf("%w: unterminated key", ErrInvalidJSON)
		}
		key := obj[i : end+1]     // with its quotes, valid JSON as it is
		i = skipSpace(obj, end+1) // at ':'
		start := skipSpace(obj, i+1)
		i = valueEnd(obj, start)
		stop := i
		for stop > start && isSpace(obj[stop-1]) {
			stop--
		}
		sum := sha256.Sum256(obj[start:stop])
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, key...)
		out = append(out, ':', '"')
		out = base64.StdEncoding.AppendEncode(out, sum[:digestSize])
		out = append(out, '"')
		if i >= len(obj) || obj[i] == '}' {
			break
		}
	}
	return append(out, '}'), nil
}

// valueEnd returns the index of the ',' or '}' (or ']') that ends the JSON
// value starting at start.
func valueEnd(b []byte, start int) int {
	depth := 0
	for i := start; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i)
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
	}
	return len(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}
