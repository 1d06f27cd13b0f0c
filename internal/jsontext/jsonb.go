package jsontext

import (
	"strconv"
	"unicode/utf8"
)

// Postgres numeric's limits, which bound a jsonb number: 131,072 digits
// before the decimal point, 16,383 after it (trailing zeros count).
const (
	numericMaxDigitsBefore = 131072
	numericMaxScale        = 16383
)

// JSONBRefusal returns why Postgres jsonb refuses JSON text that
// encoding/json accepts, or "" when it finds no reason: bytes that are not
// UTF-8, an escaped UTF-16 surrogate that is not half of a pair, the escape
// \u0000, or a number beyond numeric's range. (Nesting deeper than
// encoding/json reads, 10,000 levels, is refused by json.Valid first;
// Postgres's own limit, from its stack, is deeper.)
//
// The stores do not call it: Postgres finds these itself, before it
// writes. The engine calls it after a refusal, to say which field the
// refused value was in. text must be valid JSON text.
func JSONBRefusal(text []byte) string {
	if !utf8.Valid(text) {
		return "text that is not UTF-8"
	}
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '"':
			end, why := stringRefusal(text, i)
			if why != "" {
				return why
			}
			i = end
		case c == '-' || ('0' <= c && c <= '9'):
			end, ok := numberFits(text, i)
			if !ok {
				return "a number out of range"
			}
			i = end - 1
		}
	}
	return ""
}

// stringRefusal checks the escapes of the string whose opening quote is at
// open; it returns the index of the closing quote.
func stringRefusal(b []byte, open int) (int, string) {
	for i := open + 1; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i, ""
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r, ok := hex4(b, i+2)
				switch {
				case !ok:
				case r == 0:
					return i, `the escape \u0000`
				case r >= 0xdc00 && r <= 0xdfff:
					return i, "an unpaired surrogate escape"
				case r >= 0xd800 && r <= 0xdbff:
					low, ok := rune(0), i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u'
					if ok {
						low, ok = hex4(b, i+8)
					}
					if !ok || low < 0xdc00 || low > 0xdfff {
						return i, "an unpaired surrogate escape"
					}
					i += 6
				}
				i += 5
				continue
			}
			i++
		}
	}
	return len(b), ""
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// numberFits reads the JSON number at start and reports whether numeric
// holds it; it returns the index after the number.
func numberFits(b []byte, start int) (end int, ok bool) {
	i := start
	if i < len(b) && b[i] == '-' {
		i++
	}
	// before: the digits before the decimal point from the first non-zero
	// one (negative: zeros after the point before it); frac: the digits
	// after the point.
	zero, before, frac := true, int64(0), int64(0)
	for ; i < len(b) && isDigit(b[i]); i++ {
		if zero && b[i] != '0' {
			zero = false
		}
		if !zero {
			before++
		}
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && isDigit(b[i]); i++ {
			frac++
			if zero && b[i] != '0' {
				zero, before = false, 1-frac
			}
		}
	}
	exp := int64(0)
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
			if exp < 1<<40 { // far past either limit; stops overflow
				exp = exp*10 + int64(b[i]-'0')
			}
		}
		if neg {
			exp = -exp
		}
	}
	return i, max(frac-exp, 0) <= numericMaxScale && (zero || before+exp <= numericMaxDigitsBefore)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
