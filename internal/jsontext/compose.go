package jsontext

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Composing content from JSON text, without decoding values: the SQLite
// store rebuilds checkpoints this way (a rebuilt one is made of the
// messages, keys and values as written, joined with ',' and ':' and no
// spaces), and an append's result is composed and measured this way on
// SQLite and under encryption (Content.Apply, Content.Size). Every
// function expects valid JSON text of the kind it names; given another
// kind it returns ErrNotComposite.

// ErrNotComposite is returned for text that is not the JSON array or
// object a function expects.
var ErrNotComposite = errors.New("not the JSON array or object expected")

// Member is one key and value of a JSON object, as text.
type Member struct {
	Key  string // decoded: the identity of the key
	Raw  []byte // the key as written, quotes included
	Val  []byte // the value as written, without spaces around it
	Gone bool   // removed while composing
}

// SplitArray returns the elements of a JSON array, each as written without
// the spaces around it.
func SplitArray(b []byte) ([][]byte, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, fmt.Errorf("%w: not a JSON array", ErrNotComposite)
	}
	var out [][]byte
	for i = SkipSpace(b, i+1); i < len(b) && b[i] != ']'; i = SkipSpace(b, i+1) {
		if b[i] == ',' {
			continue
		}
		end := ValueEnd(b, i)
		out = append(out, TrimRight(b[i:end]))
		i = end
		if i >= len(b) || b[i] == ']' {
			break
		}
	}
	return out, nil
}

// SplitObject returns the members of a JSON object in the order written.
// A key given twice appears twice; lookups take the last, as Postgres
// jsonb does (see ObjectMembers).
func SplitObject(b []byte) ([]Member, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrNotComposite)
	}
	var out []Member
	for i = SkipSpace(b, i+1); i < len(b) && b[i] != '}'; i = SkipSpace(b, i+1) {
		if b[i] == ',' {
			continue
		}
		end := StringEnd(b, i)
		if end >= len(b) {
			return nil, fmt.Errorf("%w: an unterminated key", ErrNotComposite)
		}
		raw := b[i : end+1]
		key, err := objectKey(raw)
		if err != nil {
			return nil, err
		}
		i = SkipSpace(b, end+1) // at ':'
		start := SkipSpace(b, i+1)
		i = ValueEnd(b, start)
		out = append(out, Member{Key: key, Raw: raw, Val: TrimRight(b[start:i])})
		if i >= len(b) || b[i] == '}' {
			break
		}
	}
	return out, nil
}

// ObjectMembers is SplitObject with all but the last of each key marked
// Gone.
func ObjectMembers(obj []byte) ([]Member, error) {
	ms, err := SplitObject(obj)
	if err != nil {
		return nil, err
	}
	last := LastByKey(ms)
	for i := range ms {
		ms[i].Gone = last[ms[i].Key] != i
	}
	return ms, nil
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
		return "", fmt.Errorf("%w: object key %s: %v", ErrNotComposite, raw, err)
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

// ConcatArrays returns the elements of JSON arrays, the first array's
// first, as one array. It copies the text between each array's brackets as
// written, without reading the elements: a delta's messages extend its
// base's, and a rebuilt conversation costs a copy of its bytes, not a
// parse.
func ConcatArrays[T ~string | ~[]byte](arrays ...T) ([]byte, error) {
	n := 2
	for _, a := range arrays {
		n += len(a)
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for _, a := range arrays {
		a = TrimRight(a[SkipSpace(a, 0):])
		if len(a) < 2 || a[0] != '[' || a[len(a)-1] != ']' {
			return nil, fmt.Errorf("%w: not a JSON array", ErrNotComposite)
		}
		inner := TrimRight(a[SkipSpace(a, 1) : len(a)-1])
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

// ArraySize is the length of a JSON array of n elements of bytes bytes in
// all, as JoinArray and ConcatArrays write it.
func ArraySize(n, bytes int64) int64 {
	return 2 + bytes + max(n-1, 0)
}

// JoinArray writes elements as a JSON array.
func JoinArray(elems [][]byte) []byte {
	var n int64
	for _, e := range elems {
		n += int64(len(e))
	}
	out := make([]byte, 0, ArraySize(int64(len(elems)), n))
	out = append(out, '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

// Size is the length of a member as JoinObject writes it: its key as
// written, ':' and its value.
func (m Member) Size() int64 {
	return int64(len(m.Raw) + 1 + len(m.Val))
}

// ObjectSize is the length of a JSON object of n members of bytes bytes in
// all (each its Size), as JoinObject writes it.
func ObjectSize(n, bytes int64) int64 {
	return ArraySize(n, bytes)
}

// JoinObject writes the members not Gone as a JSON object.
func JoinObject(ms []Member) []byte {
	var n, size int64
	for _, m := range ms {
		if !m.Gone {
			n, size = n+1, size+m.Size()
		}
	}
	out := make([]byte, 0, ObjectSize(n, size))
	out = append(out, '{')
	first := true
	for _, m := range ms {
		if m.Gone {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, m.Raw...)
		out = append(out, ':')
		out = append(out, m.Val...)
	}
	return append(out, '}')
}

// LastByKey maps each key to the index of its last member.
func LastByKey(ms []Member) map[string]int {
	idx := make(map[string]int, len(ms))
	for i, m := range ms {
		idx[m.Key] = i
	}
	return idx
}

// ApplyKeys applies set members (a JSON object) and removed keys (a JSON
// array of strings) to ms, as jsonb's (ms - removed) || set does: a
// removed key is marked Gone, a key set again takes the new value in its
// place, a new key comes last.
func ApplyKeys(ms []Member, set, removed []byte) ([]Member, error) {
	idx := make(map[string]int, len(ms))
	for i, m := range ms {
		if !m.Gone {
			idx[m.Key] = i
		}
	}
	var rm []string
	if err := json.Unmarshal(removed, &rm); err != nil {
		return nil, fmt.Errorf("removed keys: %w", err)
	}
	for _, k := range rm {
		if i, ok := idx[k]; ok {
			ms[i].Gone = true
			delete(idx, k)
		}
	}
	sets, err := SplitObject(set)
	if err != nil {
		return nil, err
	}
	for _, m := range sets {
		if i, ok := idx[m.Key]; ok {
			ms[i].Val = m.Val
			continue
		}
		idx[m.Key] = len(ms)
		ms = append(ms, m)
	}
	return ms, nil
}

// Content is a checkpoint's content as JSON text: its messages (an array),
// state and tool results (objects).
type Content struct {
	Messages, State, ToolResults []byte
}

// Size is the size of content as the size limit counts it: the Bytes of
// its three parts.
func (c Content) Size() int64 {
	return Bytes(c.Messages) + Bytes(c.State) + Bytes(c.ToolResults)
}

// Change is what an append changes: messages appended (an array), keys
// set (objects) and keys removed.
type Change struct {
	Messages, SetState, SetToolResults []byte
	RemoveState, RemoveToolResults     []string
}

// Apply returns c with the change applied: messages appended, removed keys
// dropped, set keys replaced in place or added last (a key given twice
// keeps its last value), each part composed without spaces.
func (c Content) Apply(ch Change) (Content, error) {
	msgs, err := ConcatArrays(c.Messages, ch.Messages)
	if err != nil {
		return Content{}, err
	}
	out := Content{Messages: msgs}
	for _, part := range []struct {
		obj, set []byte
		removed  []string
		out      *[]byte
	}{{c.State, ch.SetState, ch.RemoveState, &out.State}, {c.ToolResults, ch.SetToolResults, ch.RemoveToolResults, &out.ToolResults}} {
		ms, err := ObjectMembers(part.obj)
		if err != nil {
			return Content{}, err
		}
		if part.removed == nil {
			part.removed = []string{}
		}
		removed, err := json.Marshal(part.removed)
		if err != nil {
			return Content{}, err
		}
		if ms, err = ApplyKeys(ms, part.set, removed); err != nil {
			return Content{}, err
		}
		*part.out = JoinObject(ms)
	}
	return out, nil
}
