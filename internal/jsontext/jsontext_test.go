package jsontext

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// wantDigests digests the elements encoding/json finds.
func wantDigests(t testing.TB, arr []byte) []byte {
	var elems []json.RawMessage
	if err := json.Unmarshal(arr, &elems); err != nil {
		t.Fatalf("unmarshal %q: %v", arr, err)
	}
	var out []byte
	for _, e := range elems {
		sum := sha256.Sum256(e)
		out = append(out, sum[:DigestSize]...)
	}
	return out
}

func TestMessageDigests(t *testing.T) {
	for _, arr := range []string{
		`[]`, ` [ ] `, `[1]`, `[ 1 , "a" ,null,true , false ]`,
		`[{"role":"user","content":"hi, [there]"}, {"a":{"b":[1,2,{"c":"]}"}]}}]`,
		`["quote \" inside", "back\\\\", "\\\"]"]`,
		"[\n\t{\"k\": \"v\"}\n,\n[ ]\r\n]",
		`[-1.5e3,0,"\u0000"]`,
	} {
		if got, want := MessageDigests([]byte(arr)), wantDigests(t, []byte(arr)); !bytes.Equal(got, want) {
			t.Errorf("MessageDigests(%q): %d bytes, want %d bytes (%x vs %x)", arr, len(got), len(want), got, want)
		}
	}
	// Same content, other spacing: other digests (stored whole, never wrong).
	if bytes.Equal(MessageDigests([]byte(`[{"a":1}]`)), MessageDigests([]byte(`[{"a": 1}]`))) {
		t.Error("digests ignore the bytes inside an element")
	}
}

func FuzzMessageDigests(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":"x"},[1,2],"s\"]",3]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var elems []json.RawMessage
		if json.Unmarshal(b, &elems) != nil || !json.Valid(b) {
			return
		}
		arr := bytes.TrimSpace(b)
		if got, want := MessageDigests(arr), wantDigests(t, arr); !bytes.Equal(got, want) {
			t.Fatalf("MessageDigests(%q) = %x, want %x", arr, got, want)
		}
	})
}

// wantKeyDigests digests the values encoding/json finds (the last of a
// repeated key wins, as in jsonb).
func wantKeyDigests(t testing.TB, obj []byte) map[string]string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatalf("unmarshal %q: %v", obj, err)
	}
	out := map[string]string{}
	for k, v := range m {
		sum := sha256.Sum256(v)
		out[k] = base64.StdEncoding.EncodeToString(sum[:DigestSize])
	}
	return out
}

func checkKeyDigests(t testing.TB, obj []byte) {
	got, err := KeyDigests(obj)
	if err != nil {
		t.Fatalf("KeyDigests(%q): %v", obj, err)
	}
	var g map[string]string
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("KeyDigests(%q) = %q: %v", obj, got, err)
	}
	if want := wantKeyDigests(t, obj); !reflect.DeepEqual(g, want) {
		t.Fatalf("KeyDigests(%q) = %v, want %v", obj, g, want)
	}
}

func TestKeyDigests(t *testing.T) {
	for _, obj := range []string{
		`{}`, ` { } `, `{"a":1}`, `{ "a" : [1, {"b": "}"}] , "c":"x\"y" }`,
		`{"k\u0041":true,"kA":false}`, `{"dup":1,"dup":2}`, "{\n\"n\":\tnull\n}",
		`{"\\":"\\","q\"":{"x":[]}}`,
	} {
		checkKeyDigests(t, []byte(obj))
	}
}

func FuzzKeyDigests(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,"}"]},"c\"":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) != nil || m == nil || !json.Valid(b) || !utf8.Valid(b) {
			return
		}
		checkKeyDigests(t, bytes.TrimSpace(b))
	})
}

// FuzzDigestsOfAnyBytes: text that is not JSON gives meaningless digests
// or an error, never a panic (the engine computes digests before Postgres
// parses the text).
func FuzzDigestsOfAnyBytes(f *testing.F) {
	for _, s := range []string{`{"a"`, `{"a":`, `{"a" `, `{"a":}`, `{"a" 1}`, `[1,`, `]]`, `[[1]`, `{"a":1,`, `{"`, `{`, `[`, `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		MessageDigests(b)
		_, _ = KeyDigests(b)
	})
}

// TestMessageChainContinues: the chain of a list is the chain of a prefix
// followed by the chain of the rest started from the prefix's list digest,
// and L(n) is the n-th value (zero bytes for n = 0).
func TestMessageChainContinues(t *testing.T) {
	whole := MessageDigests([]byte(`[1,"a",{"b":2},[3],null]`))
	chain := MessageChain(nil, whole)
	if len(chain) != 5*ChainSize {
		t.Fatalf("chain of 5 messages: %d bytes", len(chain))
	}
	if !bytes.Equal(ListDigestAt(chain, 0), make([]byte, ChainSize)) {
		t.Errorf("L(0) is not zero")
	}
	for n := 0; n <= 5; n++ {
		head := MessageChain(nil, whole[:n*DigestSize])
		rest := MessageChain(ListDigest(head), whole[n*DigestSize:])
		if got := append(head, rest...); !bytes.Equal(got, chain) {
			t.Errorf("chain split at %d differs from the whole chain", n)
		}
		block := append(append([]byte{}, ListDigestAt(chain, int64(n))...), whole[n*DigestSize:min(len(whole), (n+1)*DigestSize)]...)
		if sum := sha256.Sum256(block); n < 5 && !bytes.Equal(sum[:], ListDigestAt(chain, int64(n+1))) {
			t.Errorf("L(%d) != sha256(L(%d) || d_%d)", n+1, n, n+1)
		}
	}
	if ListDigestAt(chain, 6) != nil {
		t.Errorf("L(6) of a 5-message chain is not nil")
	}
}
