package jsontext

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The cases at numeric's limits were checked against Postgres 15
// ('...'::jsonb).
func TestJSONBRefusal(t *testing.T) {
	for text, refused := range map[string]bool{
		`{"a":1e1000}`:                  false,
		`{"a":1e131071}`:                false,
		`{"a":1E0131071}`:               false,
		`{"a":1e131072}`:                true,
		`{"a":-1e131072}`:               true,
		`{"a":0.001e131074}`:            false,
		`{"a":0.001e131075}`:            true,
		`{"a":1e-16383}`:                false,
		`{"a":1e-16384}`:                true,
		`{"a":0.5e-16383}`:              true,
		`{"a":0.0e-16383}`:              true,
		`{"a":100e-16385}`:              true,
		`{"a":0e-20000}`:                true,
		`{"a":0e999999}`:                false,
		`{"a":1e999999}`:                true,
		`{"a":0e1073741822}`:            false,
		`{"a":0e1073741823}`:            true,
		`{"a":0.0e1073741822}`:          false,
		`{"a":0e-1073741823}`:           true,
		`[0e99999999999999999999]`:      true,
		`[-0]`:                          false,
		`{"a":"\"1e999999"}`:            false,
		`{"a":"\\","b":1e999999}`:       true,
		`{"a":"\\\ud800"}`:              true,
		`{"a":"\\\\ud800"}`:             false,
		`{"a":"\uD800\uDBFF"}`:          true,
		`{"a":"\uDBFF\uDFFF"}`:          false,
		`{"a":"x\ud83d"}`:               true,
		`{"\ud800":1}`:                  true,
		"{\"a\":\"\xed\xa0\x80\"}":      true,
		`[1.0e-99999999999999999999]`:   true,
		`[123456789012345678901234567]`: false,
		`{"1e999999":"1e999999"}`:       false,
		`{"a":"\ud800"}`:                true,
		`{"a":"\udc00x"}`:               true,
		`{"a":"\ud800\u0041"}`:          true,
		`{"a":"\ud83d\ude00"}`:          false,
		`{"a":"\\ud800"}`:               false,
		`{"a":"\u0000"}`:                true,
		`{"a":"\\u0000"}`:               false,
		"{\"a\":\"\xff\"}":              true,
		`{"a":"é\u00e9"}`:               false,
	} {
		if got := JSONBRefusal([]byte(text)); (got != "") != refused {
			t.Errorf("%s: %q, want refused %v", text, got, refused)
		}
	}
	digits := `[` + strings.Repeat("9", 131072) + `]`
	if got := JSONBRefusal([]byte(digits)); got != "" {
		t.Errorf("131,072 digits: %q", got)
	}
	if got := JSONBRefusal([]byte(`[1` + digits[1:])); got == "" {
		t.Error("131,073 digits: not refused")
	}
}

func TestNumberSlack(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]int64{
		`[]`:                             0,
		`[1,22,-3.5e+10]`:                1 + 7,
		`{"a1.5e9":"12345","n":100000}`:  5,
		`[true,false,null,0,-0]`:         1,
		`{"s":"x\"1234","t":[1e5, 12 ]}`: 2 + 1,
	} {
		if got := NumberSlack([]byte(text)); got != want {
			t.Errorf("NumberSlack(%s) = %d, want %d", text, got, want)
		}
	}
}

// LeastBytes is the length of the shortest spelling of the same values:
// here encoding/json's re-encoding, which escapes no more than it must
// (given SetEscapeHTML(false)), with numbers of one digit.
func TestLeastBytes(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		`"plain"`, `"caf\u00e9"`, `"a\/b"`, `"\ud83d\ude00 x"`, `"\u0041\u0022\u005c"`, `"\n\t\"\\"`, `"\u0001\u001f"`,
		`{"k\u00e9y":"v\/","n":1}`, `["\u2028", "é", "\b\u0008"]`, `"\\u00e9"`, `"\\\u00e9"`,
	} {
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		shortest := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		// encoding/json writes U+2028 and U+2029 escaped, which JSON does
		// not need: count them raw.
		want := int64(len(shortest)) - 3*int64(bytes.Count(shortest, []byte(`\u2028`))+bytes.Count(shortest, []byte(`\u2029`)))
		// and spaces: the text's own are not the values'.
		want += int64(bytes.Count([]byte(text), []byte(" "))) - int64(bytes.Count(shortest, []byte(" ")))
		if got := LeastBytes([]byte(text)); got != want {
			t.Errorf("LeastBytes(%s) = %d, want %d (%s)", text, got, want, shortest)
		}
	}
}
