package engine

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/s2"

	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// Encryption turns on encryption at rest (Config.Encryption): the content
// of every checkpoint (each message, each top-level value of the state and
// of the tool results) and every pending write's value is encrypted by the
// Engine before it reaches the store, with AES-256-GCM under a data key of
// its own per tenant and thread. The data keys are kept in the database
// wrapped (encrypted) by a key-encryption key that Keys holds, so the
// database alone reads nothing.
//
// What stays plaintext, so that listings, filters and the SQL functions
// work: thread ids, namespaces, checkpoint ids, steps, parents, triggers,
// tags, summaries given by the caller (an Engine that encrypts writes
// EncryptedSummary where the default summary would quote a message),
// next nodes, sizes, metadata (but see MetadataKeys), pending writes' task
// ids and channels, and the top-level key names of the state and tool
// results.
//
// Reads fail closed with ErrEncrypted: no key, a wrong or revoked
// key-encryption key, a shredded thread (ShredThread), an altered
// ciphertext, one moved from another row, thread, field or position, or a
// plaintext value where a ciphertext must be.
type Encryption struct {
	// Keys wraps and unwraps the data keys; nil turns encryption off.
	Keys KeyProvider
	// MetadataKeys names top-level metadata keys whose values are
	// encrypted too; such keys cannot be used in a ListOptions.Metadata
	// filter (their stored values are ciphertexts). Every other metadata
	// key stays plaintext and filterable.
	MetadataKeys []string
	// NoCompress turns off the compression of values before they are
	// encrypted. By default a value of 32 bytes or more is compressed, on
	// its own, when that makes it smaller (an S2 block below 1 KiB, which
	// costs a fraction of a µs each way; DEFLATE from 1 KiB): a ciphertext
	// does not compress, so without it an encrypted thread loses what the
	// stores' compression saves (1.7x the storage of an unencrypted thread
	// in docs/performance.md's 1,000-step benchmark, against 1.1x
	// compressed), and writes several times the bytes to the WAL.
	// The cost is a side channel: a compressed value's length depends on
	// how much of its text repeats. Whoever can see the sizes of stored
	// values (not the keys) and can also put text into the same value as
	// a secret (a prompt injection into a message or tool result), over
	// many writes, may guess the secret a little at a time, as the CRIME
	// and BREACH attacks did on HTTPS. Set NoCompress when such an
	// observer is part of your threat model; each value's exact length
	// then stays visible instead.
	NoCompress bool
	// KeyCacheTTL is how long an Engine keeps a thread's unwrapped data
	// key in memory: zero means DefaultKeyCacheTTL, a negative value no
	// cache (every call reads the key row and calls Keys). A key shredded
	// or re-wrapped by another process is still used by this one for up
	// to KeyCacheTTL.
	KeyCacheTTL time.Duration
}

// DefaultKeyCacheTTL is the default Encryption.KeyCacheTTL.
const DefaultKeyCacheTTL = time.Minute

// EncryptedSummary is the summary an Engine that encrypts writes when the
// caller gives none: the default summary would quote the last message in
// plaintext.
const EncryptedSummary = "(encrypted)"

// KeyProvider holds key-encryption keys (KEKs) and wraps data keys with
// them: a cloud KMS, Vault's transit engine, or LocalKeys for development
// and tests. The application implements it. Both methods must be safe for
// concurrent use.
type KeyProvider interface {
	// WrapKey encrypts dataKey under the provider's current KEK, bound to
	// aad (the same aad must be given to UnwrapKey), and returns that
	// KEK's id with the wrapped key.
	WrapKey(ctx context.Context, dataKey, aad []byte) (kekID string, wrapped []byte, err error)
	// UnwrapKey decrypts what WrapKey returned under kekID with aad. It
	// fails for a KEK it does not hold (or no longer: revoked, rotated
	// out) and for a wrapped key that does not open with aad.
	UnwrapKey(ctx context.Context, kekID string, wrapped, aad []byte) ([]byte, error)
}

// WrappedKey is a thread's data key as a store keeps it.
type WrappedKey struct {
	ThreadID string
	KEKID    string // the key-encryption key that wrapped it
	Wrapped  []byte // nil once shredded
	// ShreddedAt is when the key was shredded (ShredThread); zero while
	// it exists.
	ShreddedAt time.Time
}

// envelopePrefix starts every ciphertext's JSON string: "$pgc1$" then the
// standard base64 of origin (16 bytes, the id of the checkpoint that wrote
// the value), nonce (12) and the AES-GCM ciphertext with its tag.
const envelopePrefix = "$pgc1$"

const (
	nonceSize    = 12
	envelopeHead = 16 + nonceSize
)

// dataKey is a thread's data key, unwrapped, with the keys derived from
// it: one per purpose, so no key serves two.
type dataKey struct {
	tenant, thread string
	aead           cipher.AEAD
	nonceKey       []byte // synthetic nonces: HMAC of the associated data and plaintext
	digestKey      []byte // the keyed digests that drive delta storage
	compress       bool   // !Encryption.NoCompress
}

// A value's plaintext is a byte that says how the rest is encoded, then
// the value's JSON text as it is or compressed.
const (
	encodingRaw   = 0
	encodingFlate = 1
	encodingS2    = 2
	// s2Min: from here a value is compressed as an S2 block (no setup, a
	// fraction of a µs each way); smaller ones save too little.
	s2Min = 32
	// flateMin: from here DEFLATE, which compresses text further than S2
	// but costs a few µs per value to read (its decoder's tables) and
	// to write (its encoder's reset).
	flateMin = 1024
)

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// inflater is a decompressor kept for reuse: a new one allocates tens of
// KB.
type inflater struct {
	src bytes.Reader
	r   io.ReadCloser
}

var inflaters sync.Pool

// inflate appends to dst what DEFLATE data src holds.
func inflate(dst, src []byte) ([]byte, error) {
	f, _ := inflaters.Get().(*inflater)
	if f == nil {
		f = &inflater{}
		f.src.Reset(src)
		f.r = flate.NewReader(&f.src)
	} else {
		f.src.Reset(src)
		if err := f.r.(flate.Resetter).Reset(&f.src, nil); err != nil {
			return nil, err
		}
	}
	defer inflaters.Put(f)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := f.r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// encode appends a value's plaintext as it is encrypted to dst.
func (k *dataKey) encode(dst, value []byte) []byte {
	if k.compress && len(value) >= s2Min && len(value) < flateMin {
		n := s2.MaxEncodedLen(len(value))
		dst = slices.Grow(dst, 1+n)
		if out := s2.Encode(dst[len(dst)+1:len(dst)+1+n], value); len(out) < len(value) {
			dst = append(dst, encodingS2)
			return dst[:len(dst)+len(out)]
		}
	}
	if k.compress && len(value) >= flateMin {
		buf := bytes.NewBuffer(dst)
		buf.Grow(len(value)/2 + 16)
		buf.WriteByte(encodingFlate)
		w := flateWriters.Get().(*flate.Writer)
		w.Reset(buf)
		_, _ = w.Write(value)
		_ = w.Close()
		flateWriters.Put(w)
		if buf.Len()-len(dst) < len(value)+1 {
			return buf.Bytes()
		}
		dst = buf.Bytes()[:len(dst)]
	}
	dst = append(dst, encodingRaw)
	return append(dst, value...)
}

// decode appends to dst the value whose plaintext is body (see encode).
func decode(dst []byte, what func() string, body []byte) ([]byte, error) {
	switch {
	case len(body) > 0 && body[0] == encodingRaw:
		return append(dst, body[1:]...), nil
	case len(body) > 0 && body[0] == encodingFlate:
		if out, err := inflate(dst, body[1:]); err == nil {
			return out, nil
		}
	case len(body) > 0 && body[0] == encodingS2:
		if n, err := s2.DecodedLen(body[1:]); err == nil {
			dst = slices.Grow(dst, n)
			if out, err := s2.Decode(dst[len(dst):len(dst)+n], body[1:]); err == nil && len(out) == n {
				return dst[:len(dst)+n], nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %s: an unknown encoding inside the ciphertext", ErrEncrypted, what())
}

func newDataKey(tenant, thread string, dek []byte) (*dataKey, error) {
	if len(dek) != 32 {
		return nil, fmt.Errorf("%w: a data key of %d bytes; data keys are 32", ErrEncrypted, len(dek))
	}
	derive := func(info string) []byte {
		k, err := hkdf.Key(sha256.New, dek, nil, "pgcheckpoint "+info+" v1", 32)
		if err != nil {
			panic(err) // only for lengths out of range
		}
		return k
	}
	block, err := aes.NewCipher(derive("content"))
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &dataKey{tenant: tenant, thread: thread, aead: aead, nonceKey: derive("nonce"), digestKey: derive("digest")}, nil
}

// appendAD appends the associated data of one value to dst: the tenant,
// the thread, the field, the value's place in it (a message's index, a
// key, a pending write's task, index and channel) and the checkpoint that
// wrote it, each length-prefixed.
func appendAD[S string | []byte](dst []byte, k *dataKey, origin uuid.UUID, field string, place ...S) []byte {
	dst = append(dst, adVersion...)
	dst = appendLP(dst, k.tenant)
	dst = appendLP(dst, k.thread)
	dst = appendLP(dst, field)
	for _, s := range place {
		dst = appendLP(dst, s)
	}
	return append(dst, origin[:]...)
}

// ad is appendAD into new memory.
func (k *dataKey) ad(origin uuid.UUID, field string, place ...string) []byte {
	return appendAD(nil, k, origin, field, place...)
}

const adVersion = "pgcheckpoint value v1"

// appendLP appends s with its length before it.
func appendLP[S string | []byte](dst []byte, s S) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

// sealer encrypts the values of one call: its MAC and scratch memory
// serve value after value (a dataKey is shared by goroutines, a sealer
// is not).
type sealer struct {
	k           *dataKey
	mac         hash.Hash
	ad, pt, raw []byte
	sum         [sha256.Size]byte
}

func (k *dataKey) sealer() *sealer {
	return &sealer{k: k, mac: hmac.New(sha256.New, k.nonceKey)}
}

// seal appends the JSON string that stands for value, written by
// checkpoint origin, with associated data ad. The nonce is synthetic (an
// HMAC of the associated data and the plaintext), so the same value
// written at the same place by the same checkpoint encrypts the same way:
// a retried write is recognized as the same content, and a nonce repeats
// only with its whole input.
func (s *sealer) seal(dst []byte, origin uuid.UUID, ad, value []byte) []byte {
	s.pt = s.k.encode(s.pt[:0], value)
	s.mac.Reset()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(ad)))
	s.mac.Write(n[:])
	s.mac.Write(ad)
	s.mac.Write(s.pt)
	raw := append(s.raw[:0], origin[:]...)
	raw = append(raw, s.mac.Sum(s.sum[:0])[:nonceSize]...)
	raw = s.k.aead.Seal(raw, raw[16:envelopeHead], s.pt, ad)
	s.raw = raw
	dst = append(dst, '"')
	dst = append(dst, envelopePrefix...)
	dst = base64.StdEncoding.AppendEncode(dst, raw)
	return append(dst, '"')
}

// sealAt is seal with the associated data of a value of field at place.
func sealAt[S string | []byte](s *sealer, dst []byte, origin uuid.UUID, field string, place S, value []byte) []byte {
	s.ad = appendAD(s.ad[:0], s.k, origin, field, place)
	return s.seal(dst, origin, s.ad, value)
}

// envelope is a value read back: its origin and the raw envelope.
type envelope struct {
	origin uuid.UUID
	raw    []byte
}

// parseEnvelope reads a stored value that must be a ciphertext.
func parseEnvelope(what string, v []byte) (envelope, error) {
	return parseEnvelopeInto(nil, what, v)
}

// parseEnvelopeInto is parseEnvelope decoding into buf's memory.
func parseEnvelopeInto(buf []byte, what string, v []byte) (envelope, error) {
	// An envelope's text has no escapes: take it as it is when it has no
	// backslash, else decode the JSON string.
	s := v
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		s = nil
	} else if bytes.IndexByte(v, '\\') < 0 {
		s = v[1 : len(v)-1]
	} else {
		var str string
		if json.Unmarshal(v, &str) != nil {
			s = nil
		} else {
			s = []byte(str)
		}
	}
	if len(s) < len(envelopePrefix) || string(s[:len(envelopePrefix)]) != envelopePrefix {
		return envelope{}, fmt.Errorf("%w: %s is not encrypted in a thread that must be", ErrEncrypted, what)
	}
	b64 := s[len(envelopePrefix):]
	raw := slices.Grow(buf[:0], base64.StdEncoding.DecodedLen(len(b64)))[:base64.StdEncoding.DecodedLen(len(b64))]
	n, err := base64.StdEncoding.Decode(raw, b64)
	raw = raw[:n]
	if err != nil || len(raw) < envelopeHead+16 {
		return envelope{}, fmt.Errorf("%w: %s: the ciphertext is malformed", ErrEncrypted, what)
	}
	return envelope{origin: uuid.UUID(raw[:16]), raw: raw}, nil
}

// open appends to dst the value env holds, decrypted with associated
// data ad; pt is scratch memory, returned grown. what names the value in
// an error.
func (k *dataKey) open(dst, pt []byte, what func() string, env envelope, ad []byte) (_, _ []byte, err error) {
	pt, err = k.aead.Open(pt[:0], env.raw[16:envelopeHead], env.raw[envelopeHead:], ad)
	if err != nil {
		return nil, pt, fmt.Errorf("%w: %s does not open under thread %q's key (altered, moved from another place, or another key)", ErrEncrypted, what(), k.thread)
	}
	dst, err = decode(dst, what, pt)
	return dst, pt, err
}

// Fields, as named in the associated data.
const (
	fieldMessages    = "messages"
	fieldState       = "state"
	fieldToolResults = "tool_results"
	fieldMetadata    = "metadata"
	fieldWrite       = "pending_write"
)

// sealArray encrypts each element of a JSON array (valid text).
func (k *dataKey) sealArray(origin uuid.UUID, field string, arr []byte) []byte {
	return k.sealArrayFrom(origin, field, arr, 0)
}

// sealObject encrypts each top-level value of a JSON object (valid
// text), or only those whose key only names, when only is not nil. Keys
// keep their spelling and order.
func (k *dataKey) sealObject(origin uuid.UUID, field string, obj []byte, only map[string]bool) []byte {
	s := k.sealer()
	out, _ := mapMembers(make([]byte, 0, len(obj)*4/3+64), obj, only, nil, func(out, key, value []byte) ([]byte, error) {
		return sealAt(s, out, origin, field, key, value), nil
	})
	return out
}

// mapMembers appends to out the JSON object obj with each member's value
// replaced by what fn appends for it (those only names, when only is not
// nil, and those pick takes, when pick is not nil; the others as they
// are), keys in their spelling and order: the one walk of sealObject and
// openObject. It stops at fn's first error.
func mapMembers(out, obj []byte, only map[string]bool, pick func(value []byte) bool, fn func(out, key, value []byte) ([]byte, error)) ([]byte, error) {
	out = append(out, '{')
	start := len(out)
	var err error
	eachMember(obj, func(keyText, key, value []byte) {
		if err != nil {
			return
		}
		if len(out) > start {
			out = append(out, ',')
		}
		out = append(out, keyText...)
		out = append(out, ':')
		if only != nil && !only[string(key)] && (pick == nil || !pick(value)) {
			out = append(out, value...)
			return
		}
		out, err = fn(out, key, value)
	})
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// eachElement calls fn with the text of each element of a JSON array.
func eachElement(arr []byte, fn func(elem []byte)) {
	i := jsontext.SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	for i = jsontext.SkipSpace(arr, i+1); i < len(arr) && arr[i] != ']'; {
		end := jsontext.ValueEnd(arr, i)
		fn(jsontext.TrimRight(arr[i:end]))
		if end >= len(arr) || arr[end] == ']' {
			return
		}
		i = jsontext.SkipSpace(arr, end+1)
	}
}

// eachMember calls fn with each member of a JSON object: the key's text
// (with its quotes), the key decoded, and the value's text.
func eachMember(obj []byte, fn func(keyText, key, value []byte)) {
	i := jsontext.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	for i = jsontext.SkipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; {
		end := jsontext.StringEnd(obj, i)
		if end >= len(obj) {
			return
		}
		keyText := obj[i : end+1]
		key := keyText[1 : len(keyText)-1]
		if bytes.IndexByte(keyText, '\\') >= 0 {
			var decoded string
			_ = json.Unmarshal(keyText, &decoded) // valid JSON text: a string
			key = []byte(decoded)
		}
		i = jsontext.SkipSpace(obj, end+1) + 1
		start := jsontext.SkipSpace(obj, i)
		stop := jsontext.ValueEnd(obj, start)
		fn(keyText, key, jsontext.TrimRight(obj[start:stop]))
		if stop >= len(obj) || obj[stop] == '}' {
			return
		}
		i = jsontext.SkipSpace(obj, stop+1)
	}
}

// isEnvelope reports whether a stored value has a ciphertext's form.
func isEnvelope(v []byte) bool {
	return len(v) > len(envelopePrefix) && v[0] == '"' && string(v[1:1+len(envelopePrefix)]) == envelopePrefix
}

// keyFunc returns the data keys that may open a value written by
// checkpoint origin, to be tried in order: its thread's, or, for an
// origin deleted since, those of the threads it may have been on.
type keyFunc func(origin uuid.UUID) ([]*dataKey, error)

// peekOrigin returns the origin of a stored value that looks like a
// ciphertext, without decoding the rest.
func peekOrigin(v []byte) (uuid.UUID, bool) {
	const head = 1 + len(envelopePrefix)
	if len(v) < head+24 || v[0] != '"' || string(v[1:head]) != envelopePrefix {
		return uuid.Nil, false
	}
	var b [18]byte
	if _, err := base64.StdEncoding.Decode(b[:], v[head:head+24]); err != nil {
		return uuid.Nil, false
	}
	return uuid.UUID(b[:16]), true
}

// buffers are the scratch memory of a read's values: each value is
// decoded, given its associated data and decrypted there, then appended to
// the result.
type buffers struct{ raw, ad, pt []byte }

// openValue appends to out the value stored as v, decrypted; what names it
// in an error, ad appends its associated data for a key and an origin.
func openValue(out []byte, b *buffers, what func() string, v []byte, keyFor keyFunc, ad func(dst []byte, k *dataKey, origin uuid.UUID) []byte) ([]byte, error) {
	env, err := parseEnvelopeInto(b.raw, "", v)
	if err != nil {
		_, err = parseEnvelope(what(), v)
		return nil, err
	}
	b.raw = env.raw
	keys, err := keyFor(env.origin)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		b.ad = ad(b.ad[:0], k, env.origin)
		var res []byte
		if res, b.pt, err = k.open(out, b.pt, what, env, b.ad); err == nil || i == len(keys)-1 {
			return res, err
		}
	}
	return nil, fmt.Errorf("%w: %s: no key for its origin", ErrEncrypted, what())
}

// openArray decrypts each element of a stored array.
func openArray(field string, arr []byte, keyFor keyFunc) ([]byte, error) {
	var bufs buffers
	out := make([]byte, 0, len(arr))
	out = append(out, '[')
	var err error
	i := 0
	var place []byte
	eachElement(arr, func(elem []byte) {
		if err != nil {
			return
		}
		place = strconv.AppendInt(place[:0], int64(i), 10)
		if i > 0 {
			out = append(out, ',')
		}
		out, err = openValue(out, &bufs, func() string { return field + "[" + string(place) + "]" }, elem, keyFor, func(dst []byte, k *dataKey, origin uuid.UUID) []byte {
			return appendAD(dst, k, origin, field, place)
		})
		i++
	})
	if err != nil {
		return nil, err
	}
	return append(out, ']'), nil
}

// openObject decrypts the values of a stored object (those only names,
// when only is not nil, and every value that is a ciphertext).
func openObject(field string, obj []byte, only map[string]bool, keyFor keyFunc) ([]byte, error) {
	var bufs buffers
	return mapMembers(make([]byte, 0, len(obj)), obj, only, isEnvelope, func(out, key, value []byte) ([]byte, error) {
		return openValue(out, &bufs, func() string { return fmt.Sprintf("%s key %q", field, key) }, value, keyFor, func(dst []byte, k *dataKey, origin uuid.UUID) []byte {
			return appendAD(dst, k, origin, field, key)
		})
	})
}

// writeAD is the associated data of a pending write's value.
func (k *dataKey) writeAD(dst []byte, checkpoint uuid.UUID, taskID string, idx int, channel string) []byte {
	return appendAD(dst, k, checkpoint, fieldWrite, taskID, strconv.Itoa(idx), channel)
}

// crypter is an Engine's encryption: its configuration and the data keys
// it has unwrapped, shared by the Engines WithTx and ForTenant make.
type crypter struct {
	keys     KeyProvider
	log      *slog.Logger    // Config.Logger: failures of best-effort work
	metadata map[string]bool // nil: no metadata key is encrypted
	ttl      time.Duration
	compress bool

	mu    sync.Mutex
	cache map[string]cachedKey // by tenant + "\x00" + thread
	// forgets counts forget's calls: a key read while one ran (a read
	// racing ShredThread) is not cached, or the key forgotten would come
	// back.
	forgets uint64

	// links are parent links read from the store (see knownOrigins).
	linksMu sync.Mutex
	links   map[linkKey]link
}

// linkKey names a checkpoint: ids are unique within a tenant.
type linkKey struct {
	tenant string
	id     uuid.UUID
}

// link is a checkpoint's thread and parents: facts that do not change
// once the checkpoint is written.
type link struct {
	thread        string
	parent, merge uuid.UUID
}

// maxLinks bounds crypter.links; past it the map starts over.
const maxLinks = 1 << 16

// maxLinkWalk bounds knownOrigins' walk; past it the store is asked.
const maxLinkWalk = 1 << 12

// rememberLineage keeps the parent links of a lineage the store returned
// (outside a caller's transaction).
func (c *crypter) rememberLineage(tenant string, line []CheckpointInfo) {
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	if c.links == nil || len(c.links)+len(line) > maxLinks {
		c.links = make(map[linkKey]link, len(line))
	}
	for _, l := range line {
		c.links[linkKey{tenant, l.ID}] = link{thread: l.ThreadID, parent: l.ParentID, merge: l.MergeParentID}
	}
}

// knownOrigins walks c's ancestors, across branches and merges, through
// the parent links remembered from earlier reads, adding each to threads,
// until every origin is found: then it reports true, and the read of an
// encrypted delta needs no lineage from the store (its values' origins
// are the checkpoints its chain was written by). It reports false when
// the walk leaves what is remembered, or takes maxLinkWalk steps, first.
func (c *crypter) knownOrigins(tenant string, cp CheckpointInfo, origins map[uuid.UUID]bool, threads map[uuid.UUID]string) bool {
	left := 0
	for o := range origins {
		if _, ok := threads[o]; !ok {
			left++
		}
	}
	if left == 0 {
		return true
	}
	c.linksMu.Lock()
	defer c.linksMu.Unlock()
	queue := []uuid.UUID{cp.ParentID, cp.MergeParentID}
	for steps := 0; len(queue) > 0 && left > 0; steps++ {
		if steps == maxLinkWalk {
			return false
		}
		id := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if id == uuid.Nil {
			continue
		}
		if _, ok := threads[id]; ok {
			continue
		}
		l, ok := c.links[linkKey{tenant, id}]
		if !ok {
			return false
		}
		threads[id] = l.thread
		if origins[id] {
			left--
		}
		queue = append(queue, l.parent, l.merge)
	}
	return left == 0
}

type cachedKey struct {
	key *dataKey
	at  time.Time
}

func newCrypter(c Encryption, log *slog.Logger) *crypter {
	if c.Keys == nil {
		return nil
	}
	cr := &crypter{keys: c.Keys, log: log, ttl: c.KeyCacheTTL, compress: !c.NoCompress, cache: map[string]cachedKey{}}
	if cr.ttl == 0 {
		cr.ttl = DefaultKeyCacheTTL
	}
	if len(c.MetadataKeys) > 0 {
		cr.metadata = map[string]bool{}
		for _, k := range c.MetadataKeys {
			cr.metadata[k] = true
		}
	}
	return cr
}

// metadataKeys is the set of metadata keys to open besides those that hold
// a ciphertext: MetadataKeys, never nil (nil would open every key).
func (c *crypter) metadataKeys() map[string]bool {
	if c.metadata == nil {
		return map[string]bool{}
	}
	return c.metadata
}

const wrapADPrefix = "pgcheckpoint data key v1"

// wrapAD is the associated data a data key is wrapped with: a wrapped key
// copied to another tenant's or thread's row does not unwrap.
func wrapAD(tenant, thread string) []byte {
	out := []byte(wrapADPrefix)
	for _, s := range []string{tenant, thread} {
		out = binary.BigEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	return out
}

// wrapADTenant returns the tenant a wrapAD names; false for associated
// data of another form.
func wrapADTenant(aad []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(aad, []byte(wrapADPrefix))
	var parts []string
	for range 2 {
		if !ok || len(rest) < 4 {
			return "", false
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(len(rest)) < uint64(n) {
			return "", false
		}
		parts = append(parts, string(rest[:n]))
		rest = rest[n:]
	}
	return parts[0], len(rest) == 0
}

// forget drops a thread's key from the cache, and keeps a key read
// meanwhile out of it.
func (c *crypter) forget(tenant, thread string) {
	c.mu.Lock()
	delete(c.cache, tenant+"\x00"+thread)
	c.forgets++
	c.mu.Unlock()
}

// newKey makes a new data key for a thread and wraps it with the
// provider's current key-encryption key. Errors: ErrEncrypted when the
// provider does not wrap it.
func (c *crypter) newKey(ctx context.Context, tenant, thread string) ([]byte, WrappedKey, error) {
	dek := make([]byte, 32)
	_, _ = rand.Read(dek)
	kek, wrapped, err := c.keys.WrapKey(ctx, dek, wrapAD(tenant, thread))
	if err != nil {
		return nil, WrappedKey{}, fmt.Errorf("%w: wrap a new data key for thread %q: %v", ErrEncrypted, thread, err)
	}
	return dek, WrappedKey{ThreadID: thread, KEKID: kek, Wrapped: wrapped}, nil
}

// shreddedError is ErrEncrypted for a thread whose key w was shredded.
func shreddedError(w WrappedKey) error {
	return fmt.Errorf("%w: thread %q's data key was shredded at %s: its content is erased", ErrEncrypted, w.ThreadID, w.ShreddedAt.UTC().Format(time.RFC3339))
}

// shredUnused has a KeyShredder destroy a wrapping that no key row holds
// (a new key that lost the race to be a thread's first, a wrapping a
// rotation replaced or made too late); other providers keep nothing to
// destroy.
func (c *crypter) shredUnused(ctx context.Context, k WrappedKey, tenant string) error {
	if sh, held := c.keys.(KeyShredder); held {
		return sh.ShredKey(ctx, k.KEKID, k.Wrapped, wrapAD(tenant, k.ThreadID))
	}
	return nil
}

// unwrapRow unwraps w, a thread's key row as read. A KeyShredder destroys
// a wrapping once a rotation or a shredding replaced it in the row: when
// w does not unwrap and the row changed since it was read, the row is
// read again, up to maxKeyRowAttempts times. It returns the key and the
// row it unwrapped; for a row found shredded, no key and no error.
// Errors: ErrEncrypted when the row, unchanged, does not unwrap;
// ErrNotFound when the row is gone; the store's errors.
func (c *crypter) unwrapRow(ctx context.Context, s Store, tenant string, w WrappedKey) ([]byte, WrappedKey, error) {
	ad := wrapAD(tenant, w.ThreadID)
	for attempt := 0; ; attempt++ {
		if w.Wrapped == nil {
			return nil, w, nil
		}
		dek, err := c.keys.UnwrapKey(ctx, w.KEKID, w.Wrapped, ad)
		if err == nil {
			return dek, w, nil
		}
		now, rerr := s.DataKey(ctx, w.ThreadID)
		switch {
		case errors.Is(rerr, ErrNotFound):
			return nil, w, fmt.Errorf("thread %q's key row: %w", w.ThreadID, rerr)
		case rerr != nil:
			return nil, w, fmt.Errorf("read the data key of thread %q: %w", w.ThreadID, rerr)
		case sameWrapping(now, w) || attempt == maxKeyRowAttempts:
			return nil, w, fmt.Errorf("%w: the key provider does not unwrap thread %q's data key (key-encryption key %q): %v", ErrEncrypted, w.ThreadID, w.KEKID, err)
		}
		w = now
	}
}

// key returns a thread's data key: from the cache, else the store's row
// unwrapped by the provider; with create, a thread without one gets a new
// key (the first writer's, when several race). inTx: s runs in a caller's
// transaction, and what it reads is not cached. Errors: ErrEncrypted for a
// thread without a key (when !create), a shredded key, a key the provider
// does not unwrap; the store's errors.
func (c *crypter) key(ctx context.Context, s Store, tenant, thread string, create, inTx bool) (*dataKey, error) {
	id := tenant + "\x00" + thread
	c.mu.Lock()
	ck, ok := c.cache[id]
	forgets := c.forgets
	c.mu.Unlock()
	if ok && time.Since(ck.at) < c.ttl {
		return ck.key, nil
	}
	w, err := s.DataKey(ctx, thread)
	var fresh []byte
	switch {
	case errors.Is(err, ErrNotFound) && create:
		var mine WrappedKey
		if fresh, mine, err = c.newKey(ctx, tenant, thread); err != nil {
			return nil, err
		}
		if w, err = s.PutDataKey(ctx, mine); err != nil {
			return nil, fmt.Errorf("store the data key of thread %q: %w", thread, err)
		}
		if !sameWrapping(w, mine) {
			// Another writer's key came first: no row holds mine.
			fresh = nil
			// Should the provider fail to, the key is left for
			// Engine.PruneKeys and the failure logged: the write goes on.
			if err := c.shredUnused(ctx, mine, tenant); err != nil {
				c.log.LogAttrs(ctx, slog.LevelWarn, "pgcheckpoint: the key provider did not destroy a new data key that lost the race to be its thread's first; Engine.PruneKeys will",
					slog.String("tenant", termsafe.Text(tenant)), slog.String("thread_id", termsafe.Text(thread)), slog.Any("error", loggedError{err}))
			}
		}
	case errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("%w: thread %q has no data key", ErrEncrypted, thread)
	case err != nil:
		return nil, fmt.Errorf("read the data key of thread %q: %w", thread, err)
	}
	if w.Wrapped == nil || !w.ShreddedAt.IsZero() {
		return nil, shreddedError(w)
	}
	dek := fresh
	if dek == nil {
		dek, w, err = c.unwrapRow(ctx, s, tenant, w)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, fmt.Errorf("%w: thread %q has no data key", ErrEncrypted, thread)
		case err != nil:
			return nil, err
		case dek == nil:
			return nil, shreddedError(w)
		}
	}
	k, err := newDataKey(tenant, thread, dek)
	if err != nil {
		return nil, err
	}
	k.compress = c.compress
	if c.ttl > 0 && !inTx {
		// A key read or made in a caller's transaction may be rolled back
		// with it: kept, it would encrypt later writes under a key that
		// is nowhere.
		c.mu.Lock()
		if c.forgets == forgets {
			c.cache[id] = cachedKey{key: k, at: time.Now()}
		}
		c.mu.Unlock()
	}
	return k, nil
}
