package jsontext

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
)

// Values compared as Postgres jsonb compares them, for the stores and the
// engine alike.

// Decode decodes JSON text keeping numbers as written (json.Number).
func Decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Contains reports whether doc contains pat with the semantics of
// Postgres jsonb @>: an object contains another when each of the other's
// keys is present with a contained value; an array contains another when
// each of the other's elements is contained in some element of it (in any
// order, duplicates allowed); at the top level only, an array contains a
// scalar that is one of its elements; scalars contain what equals them
// (numbers by value). Objects are decoded with the last of duplicate keys.
func Contains(doc, pat any) bool {
	return contains(doc, pat, true)
}

func contains(doc, pat any, top bool) bool {
	switch p := pat.(type) {
	case map[string]any:
		d, ok := doc.(map[string]any)
		if !ok {
			return false
		}
		for k, pv := range p {
			dv, ok := d[k]
			if !ok || !contains(dv, pv, false) {
				return false
			}
		}
		return true
	case []any:
		d, ok := doc.([]any)
		if !ok {
			return false
		}
		for _, pe := range p {
			found := false
			for _, de := range d {
				if contains(de, pe, false) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	default:
		if d, ok := doc.([]any); ok && top {
			for _, de := range d {
				if scalarEqual(de, pat) {
					return true
				}
			}
			return false
		}
		return scalarEqual(doc, pat)
	}
}

func scalarEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		dx, okx := parseDecimal(string(x))
		dy, oky := parseDecimal(string(y))
		if !okx || !oky {
			return x == y
		}
		return dx == dy
	case string, bool, nil:
		return a == b
	}
	return false
}

// Equal reports whether two JSON values are equal as Postgres jsonb
// compares them: objects by keys (order aside, the last of duplicates),
// arrays in order, numbers by value.
func Equal(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !Equal(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if _, ok := b.(map[string]any); ok {
		return false
	}
	if _, ok := b.([]any); ok {
		return false
	}
	return scalarEqual(a, b)
}

// Same reports whether two JSON texts hold equal values (see Equal);
// identical bytes need no decoding.
func Same(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	x, err := Decode(a)
	if err != nil {
		return false
	}
	y, err := Decode(b)
	if err != nil {
		return false
	}
	return Equal(x, y)
}

// decimal is a number in a form where equal values are equal: value =
// 0.digits * 10^point, digits without leading or trailing zeros (zero: all
// empty). Comparing these costs the length of the text, where big.Rat would
// raise 10 to the exponent: 1e999999 took 170 ms a comparison.
type decimal struct {
	neg    bool
	digits string
	point  string // an integer, in decimal
}

// maxExponentDigits bounds the exponents parseDecimal reads exactly. Larger
// ones are beyond what any store holds as a number (Postgres refuses
// exponents past about a billion) and are compared as written.
const maxExponentDigits = 100

// parseDecimal reads a JSON number; ok is false when s is not one, or its
// exponent is over maxExponentDigits long.
func parseDecimal(s string) (d decimal, ok bool) {
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	mantissa, exponent := s, "0"
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mantissa, exponent = s[:i], s[i+1:]
	}
	if len(exponent) > maxExponentDigits {
		return decimal{}, false
	}
	exp, ok := new(big.Int).SetString(exponent, 10)
	if !ok {
		return decimal{}, false
	}
	whole, frac, _ := strings.Cut(mantissa, ".")
	digits := whole + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return decimal{}, false
	}
	point := len(whole)
	trimmed := strings.TrimLeft(digits, "0")
	point -= len(digits) - len(trimmed)
	d.digits = strings.TrimRight(trimmed, "0")
	if d.digits == "" {
		return decimal{}, true // zero, whatever its sign and exponent
	}
	d.point = exp.Add(exp, big.NewInt(int64(point))).String()
	return d, true
}
