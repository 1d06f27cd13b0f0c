// Package termsafe keeps untrusted text from driving a terminal. Text
// from agents, LLMs and tools is untrusted: a summary, a thread id or a
// state key may hold bytes that drive a terminal (ESC sequences retitle or
// clear it, a carriage return overwrites a line, bidi overrides reorder
// what is shown). What ckpt writes for people goes through Writer, which
// shows such characters as visible escapes; a table cell or a one-line
// message goes through Line too, so that a tab or a newline in agent text
// cannot draw a row of its own. JSON for people (ckpt --json, show) goes
// through JSON: the same values, every such character a JSON escape. The
// engine's log lines name a thread or namespace through Text.
package termsafe

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unsafe reports whether r must not reach a terminal as it is: control
// characters (C0 but tab and newline, DEL, C1), format characters (bidi
// overrides and isolates, zero-width characters), line and paragraph
// separators, and invalid UTF-8.
func Unsafe(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	case r == utf8.RuneError, r == '\u2028', r == '\u2029':
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// First returns the first character of s that Unsafe reports (U+FFFD
// for a byte that is not UTF-8), or -1 when there is none.
func First(s string) rune {
	for _, r := range s {
		if Unsafe(r) {
			return r
		}
	}
	return -1
}

// Text returns s with every unsafe character (see Unsafe) written
// as \uXXXX (\UXXXXXXXX above U+FFFF) and every invalid UTF-8 byte as \xXX.
// Within JSON strings the \u form is itself valid JSON for the same
// character.
func Text(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if Unsafe(r) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !Unsafe(r):
			b.WriteString(s[i : i+size])
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// Line is Text for text that must stay on one line, such as a
// label in a graph: a newline or tab is escaped too, so agent text cannot
// draw rows of its own.
func Line(s string) string {
	return strings.NewReplacer("\n", `\u000a`, "\t", `\u0009`).Replace(Text(s))
}

// Writer escapes what it writes to W with Text. Every write must hold
// whole characters, as fmt and text/tabwriter write them.
type Writer struct{ W io.Writer }

func (s Writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.W, Text(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// JSON returns JSON text with every character Unsafe reports
// written as a JSON escape, \uXXXX (a surrogate pair above U+FFFF), and
// every byte that is not UTF-8 as \ufffd, as a JSON decoder reads it. In
// JSON text such characters can only be inside strings, where an escape
// stands for the same character (tab and newline, which Unsafe lets
// through, are whitespace between tokens there), so the result holds the
// same values and nothing a terminal acts on.
func JSON(text []byte) []byte {
	i := 0
	for i < len(text) {
		r, size := utf8.DecodeRune(text[i:])
		if Unsafe(r) {
			break
		}
		i += size
	}
	if i == len(text) {
		return text
	}
	out := make([]byte, 0, len(text)+16)
	out = append(out, text[:i]...)
	for i < len(text) {
		r, size := utf8.DecodeRune(text[i:])
		switch {
		case !Unsafe(r):
			out = append(out, text[i:i+size]...)
		case r > 0xffff:
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
		default: // an invalid byte decodes as utf8.RuneError, U+FFFD
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}
