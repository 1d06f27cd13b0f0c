package jsontext

import (
	"bytes"
	"unicode/utf8"
)

// Postgres numeric's limits, which bound a jsonb number: 131,072 digits
// before the decimal point, 16,383 after it (trailing zeros count), and an
// exponent under INT_MAX/2 either way, which Postgres checks before it looks
// at the digits (so 0e1073741823 is refused though it is zero).
const (
	numericMaxDigitsBefore = 131072
	numericMaxScale        = 16383
	numericMaxExponent     = 1<<30 - 1
)

// JSONBRefusal returns why Postgres jsonb refuses JSON text that
// encoding/json accepts, or "" when it finds no reason: bytes that are not
// UTF-8, an escaped UTF-16 surrogate that is not half of a pair, the escape
// \u0000, or a number beyond numeric's range. (Nesting deeper than
// encoding/json reads, 10,000 levels, is refused by Valid first;
// Postgres's own limit, from its stack, is deeper at the default
// max_stack_depth.) text must be valid JSON text.
//
// It is the rule of what a store may hold as JSON, applied through
// engine.CheckJSON. Postgres applies it itself before it writes; the
// SQLite store checks every JSON value it is handed, so both stores hold
// the same values and an export moves between them. The engine also calls
// it after a refusal, to say which field the refused value was in.
//
// It reads text at about the speed of a byte search: in valid JSON a
// backslash is always in a string and starts an escape, and a number is
// always outside strings.
func JSONBRefusal(text []byte) string {
	if !utf8.Valid(text) {
		return "text that is not UTF-8"
	}
	if why := escapeRefusal(text); why != "" {
		return why
	}
	if !betweenStrings(text, numbersFit) {
		return "a number out of range"
	}
	return ""
}

// betweenStrings calls fn with each stretch of valid JSON text between
// strings (where numbers are) until fn returns false, and reports whether
// none did.
func betweenStrings(text []byte, fn func([]byte) bool) bool {
	for i := 0; i < len(text); {
		open := bytes.IndexByte(text[i:], '"')
		if open < 0 {
			open = len(text)
		} else {
			open += i
		}
		if !fn(text[i:open]) {
			return false
		}
		if open == len(text) {
			break
		}
		i = StringEnd(text, open) + 1
	}
	return true
}

// NumberSlack is how many bytes the numbers of valid JSON text take beyond
// one each. A measure that subtracts it counts each number as one byte,
// the least any spelling of it takes: Postgres spells a number its own way
// (1e5 as 100000), so its length as stored says nothing of its length as
// sent.
func NumberSlack(text []byte) int64 {
	var n int64
	betweenStrings(text, func(b []byte) bool {
		for i := 0; i < len(b); i++ {
			if c := b[i]; c == '-' || isDigit(c) {
				end := readNumber(b, i).end
				n += int64(end - i - 1)
				i = end - 1
			}
		}
		return true
	})
	return n
}

// numbersFit reports whether numeric holds every number in b, text
// between strings.
func numbersFit(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if c := b[i]; c == '-' || isDigit(c) {
			n := readNumber(b, i)
			if !n.fits() {
				return false
			}
			i = n.end - 1
		}
	}
	return true
}

// escapeRefusal checks the escapes of valid JSON text.
func escapeRefusal(s []byte) string {
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 || i+1 >= len(s) {
			return ""
		}
		s = s[i:]
		if s[1] != 'u' {
			s = s[2:]
			continue
		}
		r, ok := hex4(s, 2)
		switch {
		case !ok:
		case r == 0:
			return `the escape \u0000`
		case r >= 0xdc00 && r <= 0xdfff:
			return "an unpaired surrogate escape"
		case r >= 0xd800 && r <= 0xdbff:
			low, ok := rune(0), len(s) >= 12 && s[6] == '\\' && s[7] == 'u'
			if ok {
				low, ok = hex4(s, 8)
			}
			if !ok || low < 0xdc00 || low > 0xdfff {
				return "an unpaired surrogate escape"
			}
			s = s[6:]
		}
		s = s[min(6, len(s)):]
	}
}

// hex4 reads the four hex digits at b[at:].
func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// LeastBytes is the least any spelling of valid JSON text takes, as it
// is now spelled but for its strings' escapes and its numbers: each
// escape that may be written shorter counted at its shortest (\u00e9 as
// é, \/ as /), each number as one byte (see NumberSlack). What a store
// returns may spell a value longer than it was sent (Postgres numbers, a
// SQLite key kept as its first writer spelled it), never shorter than
// this.
func LeastBytes(text []byte) int64 {
	return int64(len(text)) - NumberSlack(text) - escapeSlack(text)
}

// escapeSlack is how many bytes the escapes in valid JSON text take
// beyond the shortest spelling of the characters they stand for.
func escapeSlack(s []byte) int64 {
	var n int64
	for {
		i := bytes.IndexByte(s, '\\')
		if i < 0 || i+1 >= len(s) {
			return n
		}
		s = s[i:]
		switch s[1] {
		case '/':
			n++ // a slash needs no escape
		case 'u':
			r, ok := hex4(s, 2)
			if !ok {
				break
			}
			if r >= 0xd800 && r <= 0xdbff && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
				n += 12 - 4 // a pair: one character of 4 bytes
				s = s[6:]
				break
			}
			switch {
			case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
				n += 6 - 2
			case r < 0x20:
			default:
				n += int64(6 - utf8.RuneLen(r))
			}
			s = s[min(6, len(s)):]
			continue
		}
		s = s[2:]
	}
}

// numberText is what the text of a JSON number says of its value.
type numberText struct {
	end       int // the index after the number
	neg, zero bool
	// before: the digits before the decimal point from the first non-zero
	// one (negative: zeros after the point before it); frac: the digits
	// after the point; exp: the exponent (bounded far past either limit).
	before, frac, exp int64
}

// readNumber reads the JSON number at b[start:].
func readNumber(b []byte, start int) numberText {
	n := numberText{zero: true}
	i := start
	if i < len(b) && b[i] == '-' {
		n.neg = true
		i++
	}
	for ; i < len(b) && isDigit(b[i]); i++ {
		if n.zero && b[i] != '0' {
			n.zero = false
		}
		if !n.zero {
			n.before++
		}
	}
	if i < len(b) && b[i] == '.' {
		for i++; i < len(b) && isDigit(b[i]); i++ {
			n.frac++
			if n.zero && b[i] != '0' {
				n.zero, n.before = false, 1-n.frac
			}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			neg = b[i] == '-'
			i++
		}
		for ; i < len(b) && isDigit(b[i]); i++ {
			if n.exp < 1<<40 { // far past either limit; stops overflow
				n.exp = n.exp*10 + int64(b[i]-'0')
			}
		}
		if neg {
			n.exp = -n.exp
		}
	}
	n.end = i
	return n
}

// fits reports whether numeric holds the number.
func (n numberText) fits() bool {
	return -numericMaxExponent < n.exp && n.exp < numericMaxExponent &&
		max(n.frac-n.exp, 0) <= numericMaxScale && (n.zero || n.before+n.exp <= numericMaxDigitsBefore)
}

// spelled is the length of the number as Postgres spells it (numeric's
// text: no exponent, as many digits after the point as the text's scale,
// its digits after the point less its exponent): 1e5 is 100000, 1.5e-3
// 0.0015, -0 0.
func (n numberText) spelled() int64 {
	l := int64(1) // "0", or the first digit
	if !n.zero && n.before+n.exp > 1 {
		l = n.before + n.exp
	}
	if n.neg && !n.zero {
		l++
	}
	if scale := max(n.frac-n.exp, 0); scale > 0 {
		l += 1 + scale
	}
	return l
}

// Bytes is the size of valid JSON text as the size limit counts it: its
// length, each number at the longer of its text and Postgres's spelling
// of it, which a Postgres store keeps and returns (1e131071 is 131,072
// bytes read back), so both stores hold a value to the same limit and no
// read returns thousands of times what was counted. Numbers outside
// numeric's range (see JSONBRefusal) count as written.
func Bytes(text []byte) int64 {
	n := int64(len(text))
	betweenStrings(text, func(b []byte) bool {
		for i := 0; i < len(b); i++ {
			if c := b[i]; c == '-' || isDigit(c) {
				num := readNumber(b, i)
				if num.fits() {
					n += max(num.spelled()-int64(num.end-i), 0)
				}
				i = num.end - 1
			}
		}
		return true
	})
	return n
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
