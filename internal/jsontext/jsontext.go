// Package jsontext reads JSON text without decoding it: where values start
// and end, and the digests by which a store tells what changed between two
// snapshots. Both stores and the engine use it, so a digest is computed one
// way everywhere. Every function expects valid JSON text; given other
// bytes, the digest functions return meaningless digests or an error, never
// panic, so a caller may compute them before the text is parsed (the
// Postgres store leaves parsing to the server, which refuses what does not
// parse).
package jsontext

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
)

// DigestSize is the length of one message digest: the first 16 bytes of the
// SHA-256 of the message's JSON text.
const DigestSize = 16

// MessageDigests returns the digests of the elements of a JSON array, in
// order, concatenated: what a store compares with the parent's to tell an
// appended message list (stored as a delta) from an edited one
// (stored whole). arr must be valid JSON text of an array; each element's
// text is taken as it is, without the spaces around it.
//
// The digests are of the bytes as sent, so the same message sent with other
// spacing or key order counts as edited: the checkpoint is stored whole,
// which costs space, never correctness.
func MessageDigests(arr []byte) []byte {
	return messageDigests(arr, plainSum)
}

// KeyedMessageDigests is MessageDigests with each digest the first 16
// bytes of the HMAC-SHA-256 under key of the message's text: what the
// engine sends under encryption, so that equal messages of two threads
// (under two keys) have unrelated digests.
func KeyedMessageDigests(arr, key []byte) []byte {
	return messageDigests(arr, keyedSum(key))
}

// KeyedKeyDigests is KeyDigests with HMAC-SHA-256 under key (see
// KeyedMessageDigests).
func KeyedKeyDigests(obj, key []byte) ([]byte, error) {
	return keyDigests(obj, keyedSum(key))
}

// sumFunc appends the digest of text to dst.
type sumFunc func(dst, text []byte) []byte

func plainSum(dst, text []byte) []byte {
	sum := sha256.Sum256(text)
	return append(dst, sum[:DigestSize]...)
}

func keyedSum(key []byte) sumFunc {
	mac := hmac.New(sha256.New, key)
	var buf [sha256.Size]byte
	return func(dst, text []byte) []byte {
		mac.Reset()
		mac.Write(text)
		return append(dst, mac.Sum(buf[:0])[:DigestSize]...)
	}
}

func messageDigests(arr []byte, sum sumFunc) []byte {
	out := make([]byte, 0, 64*DigestSize)
	depth, start := 0, -1
	emit := func(end int) {
		if start < 0 {
			return
		}
		for end > start && IsSpace(arr[end-1]) {
			end--
		}
		out = sum(out, arr[start:end])
		start = -1
	}
	for i := 0; i < len(arr); i++ {
		c := arr[i]
		switch c {
		case '"':
			if depth == 1 && start < 0 {
				start = i
			}
			i = StringEnd(arr, i)
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

// StringEnd returns the index of the quote that closes the JSON string
// opened at arr[open] (len(arr) if none): the next quote not escaped by an
// odd run of backslashes.
func StringEnd(arr []byte, open int) int {
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

// IsSpace reports whether c is JSON whitespace.
func IsSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// KeyDigests returns, as a JSON object, a digest of each top-level value of
// a JSON object (valid JSON text): {"key": base64 of the first 16 bytes of
// the SHA-256 of the value's text}, keys spelled as in obj and in its order.
// A key given twice appears twice, so that jsonb keeps the last of both, as
// it does for the object itself. A store compares these with the
// parent's to find the keys a delta must store.
func KeyDigests(obj []byte) ([]byte, error) {
	return keyDigests(obj, plainSum)
}

func keyDigests(obj []byte, sum sumFunc) ([]byte, error) {
	out := make([]byte, 0, 64)
	var digest []byte
	out = append(out, '{')
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	for i = SkipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; i = SkipSpace(obj, i+1) {
		if obj[i] == ',' {
			continue
		}
		end := StringEnd(obj, i)
		if end >= len(obj) {
			return nil, errors.New("unterminated key")
		}
		key := obj[i : end+1]     // with its quotes, valid JSON as it is
		i = SkipSpace(obj, end+1) // at ':'
		if i >= len(obj) {
			return nil, errors.New("a key without a value")
		}
		start := SkipSpace(obj, i+1)
		i = ValueEnd(obj, start)
		stop := i
		for stop > start && IsSpace(obj[stop-1]) {
			stop--
		}
		digest = sum(digest[:0], obj[start:stop])
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, key...)
		out = append(out, ':', '"')
		out = base64.StdEncoding.AppendEncode(out, digest)
		out = append(out, '"')
		if i >= len(obj) || obj[i] == '}' {
			break
		}
	}
	return append(out, '}'), nil
}

// ValueEnd returns the index of the ',' or '}' (or ']') that ends the JSON
// value starting at start.
func ValueEnd(b []byte, start int) int {
	depth := 0
	for i := start; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = StringEnd(b, i)
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

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace[T ~string | ~[]byte](b T, i int) int {
	for i < len(b) && IsSpace(b[i]) {
		i++
	}
	return i
}

// TrimRight returns b without the JSON whitespace at its end.
func TrimRight[T ~string | ~[]byte](b T) T {
	for len(b) > 0 && IsSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// ChainSize is the length of one value of a message list's digest chain.
const ChainSize = sha256.Size

// MessageChain returns the running digests of a message list, ChainSize
// bytes per message: L(i) = SHA-256(L(i-1) || d_i), where d_i is the i-th
// message's digest (MessageDigests) and L(0) is prev, or ChainSize zero
// bytes when prev is nil. L(n) is the list digest of the first n messages
// (ListDigestAt), so an append computes its list's digest from its base's
// and the appended messages' digests alone, and a store tells whether a
// base's n messages are a prefix of a list by comparing one value.
func MessageChain(prev, messageDigests []byte) []byte {
	n := len(messageDigests) / DigestSize
	out := make([]byte, 0, n*ChainSize)
	last := prev
	if last == nil {
		last = make([]byte, ChainSize)
	}
	var block [ChainSize + DigestSize]byte
	for i := 0; i < n; i++ {
		copy(block[:ChainSize], last)
		copy(block[ChainSize:], messageDigests[i*DigestSize:(i+1)*DigestSize])
		sum := sha256.Sum256(block[:])
		out = append(out, sum[:]...)
		last = out[len(out)-ChainSize:]
	}
	return out
}

// ListDigestAt returns L(n), the digest of the first n messages of the list
// whose MessageChain (from nil) is chain: ChainSize zero bytes for n = 0.
// It returns nil when chain is shorter than n messages.
func ListDigestAt(chain []byte, n int64) []byte {
	if n == 0 {
		return make([]byte, ChainSize)
	}
	if n < 0 || int64(len(chain)) < n*ChainSize {
		return nil
	}
	return chain[(n-1)*ChainSize : n*ChainSize]
}

// ListDigest returns the digest of the whole list whose chain is chain.
func ListDigest(chain []byte) []byte {
	return ListDigestAt(chain, int64(len(chain)/ChainSize))
}
