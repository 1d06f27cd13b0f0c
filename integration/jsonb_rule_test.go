package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgcheckpoint/pgcheckpoint/integration/pgtest"
	"github.com/pgcheckpoint/pgcheckpoint/internal/jsontext"
)

// TestJSONBRefusalMatchesPostgres holds jsontext.JSONBRefusal, the rule
// the SQLite store applies to every JSON value, to what this server's
// jsonb refuses, over numbers built around numeric's limits (digits before
// and after the point, exponents, zero) and strings with escapes around
// surrogates.
func TestJSONBRefusalMatchesPostgres(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t).Pool
	ctx := context.Background()
	values := edgeNumbers()
	for _, s := range []string{`\ud800`, `\udbff\udfff`, `\ud800\udc00`, `\udc00\ud800`, `\ud800\ud800`, `\ud83dx`, `x\udfff`,
		`\\ud800`, `\\\ud800`, `\u0041\ud83d\ude00`, `\uD83D\uDE00`, `\ud83d\u0041`, `\"\ud800`, "\xff", "\xed\xa0\x80", "é\u00e9"} {
		values = append(values, `"`+s+`"`)
	}
	for _, v := range values {
		text := `{"k":[` + v + `]}`
		if !json.Valid([]byte(text)) {
			t.Fatalf("%.80s is not JSON", v)
		}
		_, pgErr := pool.Exec(ctx, "SELECT $1::text::jsonb", text)
		why := jsontext.JSONBRefusal([]byte(text))
		if (pgErr != nil) != (why != "") {
			t.Errorf("%.80s: Postgres: %v; JSONBRefusal: %q", v, pgErr, why)
		}
	}
	t.Logf("%d values compared", len(values))
}

// edgeNumbers are JSON numbers around numeric's limits: digits before and
// after the point, exponents, zero, each also negative.
func edgeNumbers() []string {
	zeros := func(n int) string { return strings.Repeat("0", n) }
	mantissas := []string{"0", "0.0", "1", "9", "1.5", "0.001", "100", "12.34", "0.10", "0.5", "10.0200",
		"1" + zeros(131071), "1" + zeros(131072), "0." + zeros(16382) + "1", "0." + zeros(16383) + "1",
		"0." + zeros(16383), "0." + zeros(16384), "1" + zeros(131071) + "." + zeros(16383)}
	exponents := []string{"", "e0", "E+1", "e-1", "e2", "e-3", "E+25", "e131070", "e131071", "e131072", "e-16382", "e-16383", "e-16384",
		"e1073741822", "e1073741823", "e-1073741822", "e-1073741823", "e99999999999999999999", "e-0000016383"}
	var values []string
	for _, m := range mantissas {
		for _, e := range exponents {
			values = append(values, m+e, "-"+m+e)
		}
	}
	return values
}

// TestNumberBytesMatchPostgres holds jsontext.Bytes, the size the limit
// counts, to this server's spelling of each number jsonb keeps: an array
// of one number counts the longer of its text and the text Postgres
// returns for it.
func TestNumberBytesMatchPostgres(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDB(t).Pool
	ctx := context.Background()
	compared := 0
	for _, v := range edgeNumbers() {
		text := "[" + v + "]"
		var spelled int64
		if err := pool.QueryRow(ctx, "SELECT octet_length($1::text::jsonb::text)", text).Scan(&spelled); err != nil {
			continue // refused: TestJSONBRefusalMatchesPostgres
		}
		if got, want := jsontext.Bytes([]byte(text)), max(int64(len(text)), spelled); got != want {
			t.Errorf("%.60s (%d bytes): Bytes %d, want %d (Postgres spells it in %d)", v, len(v), got, want, spelled)
		}
		compared++
	}
	t.Logf("%d numbers compared", compared)
}
