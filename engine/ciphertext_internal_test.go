package engine

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// holdsCiphertext finds a quote followed by envelopePrefix anywhere, and
// nothing else: the prefix without its quote, at the start, cut short, or
// after other bytes is not a ciphertext's start.
func TestHoldsCiphertextFindsTheQuotedPrefix(t *testing.T) {
	for text, want := range map[string]bool{
		``:                         false,
		`"$pgc1$`:                  true,
		`$pgc1$`:                   false,
		`["a","$pgc1$AAAA"]`:       true,
		`{"k":"x$pgc1$"}`:          false,
		`"$pgc1`:                   false,
		`"$$pgc1$`:                 false,
		`$pgc1$ $pgc1$ "$pgc1$`:    true,
		`"price: $5", "$pgc1$x"`:   true,
		`"price: $5", "$pgc0$x"`:   false,
		`\"$pgc1$ inside a string`: true, // as a plain search would: the caller then asks the store
	} {
		if got := holdsCiphertext([]byte(text)); got != want {
			t.Errorf("holdsCiphertext(%q) = %v, want %v", text, got, want)
		}
	}
	// Any text: the same answer as a plain search for the quoted prefix.
	marker := []byte(`"` + envelopePrefix)
	alphabet := []byte(`"$pgc1x`)
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if got, want := holdsCiphertext(b), bytes.Contains(b, marker); got != want {
			t.Fatalf("holdsCiphertext(%q) = %v, a plain search finds %v", b, got, want)
		}
	}
}
