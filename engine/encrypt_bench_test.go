package engine

import (
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
)

// benchKey is a data key as an Engine with the default Encryption makes it.
func benchKey(b *testing.B) *dataKey {
	k, err := newDataKey(DefaultTenant, "t", make([]byte, 32))
	if err != nil {
		b.Fatal(err)
	}
	k.compress = true
	return k
}

// BenchmarkOpenState measures the engine's side of reading an encrypted
// 3.8 KB state: parsing and opening its 32 values.
func BenchmarkOpenState(b *testing.B) {
	k := benchKey(b)
	id := uuid.Must(uuid.NewV7())
	sealed := k.sealObject(id, fieldState, benchratio.State(), nil)
	keys := []*dataKey{k}
	keyFor := func(uuid.UUID) ([]*dataKey, error) { return keys, nil }
	b.SetBytes(int64(len(sealed)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := openObject(fieldState, sealed, nil, keyFor); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(sealed)), "sealed-bytes")
	b.ReportMetric(float64(len(benchratio.State())), "plain-bytes")
}

// BenchmarkSealState measures the engine's side of writing an encrypted
// 3.8 KB state: encrypting its 32 values.
func BenchmarkSealState(b *testing.B) {
	k := benchKey(b)
	id := uuid.Must(uuid.NewV7())
	state := benchratio.State()
	b.SetBytes(int64(len(state)))
	b.ReportAllocs()
	for range b.N {
		k.sealObject(id, fieldState, state, nil)
	}
}
