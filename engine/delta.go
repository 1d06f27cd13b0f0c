package engine

import (
	"bytes"
	"crypto/sha256"
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
