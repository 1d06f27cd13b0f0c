package engine

import (
	"testing"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/internal/benchratio"
)

// BenchmarkOpenState measures the engine's side of reading an encrypted
// 3.8 KB state: parsing and opening its 32 values.
func BenchmarkOpenState(b *testing.B) {
	k, err := newDataKey(DefaultTenant, "t", make([]byte, 32))
	if err != nil {
		b.Fatal(err)
	}
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
