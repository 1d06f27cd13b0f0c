package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// Agent content as ckpt web shows it: JSON pretty-printed as the store
// returns it (numbers and key order kept), messages as a conversation.
// Every string made here goes through termsafe.Text, so control and bidi
// characters show as escapes (shownText for content, cut to a size); the
// templates then escape it for HTML.

// webMaxJSON is the most of one JSON value, message text or tool call's
// arguments a page shows, in bytes as shown; ckpt show has the rest.
const webMaxJSON = 256 << 10

// member is one member of a JSON object, in the order written.
type member struct {
	Key   string
	Value json.RawMessage
}

// objectMembers returns the members of a JSON object in order, and false
// when raw is not an object.
func objectMembers(raw json.RawMessage) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, member{key, v})
	}
	return out, true
}

// prettyJSON is raw indented, as shownText shows it.
func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		b.Reset()
		b.Write(raw)
	}
	return shownText(b.String())
}

// shownText is agent content as a page shows it: made safe (termsafe.Text)
// and cut between characters where what is shown would pass webMaxJSON
// bytes, escapes counted (a control character shows as six), then a note
// of the bytes left out. It cuts before it escapes: a text of megabytes
// costs what is shown.
func shownText(s string) string {
	shown := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n := size
		if termsafe.Unsafe(r) {
			n = len(termsafe.Text(s[i : i+size]))
		}
		if shown+n > webMaxJSON {
			return fmt.Sprintf("%s\n… %d more bytes (ckpt show has them all)", termsafe.Text(s[:i]), len(s)-i)
		}
		shown += n
		i += size
	}
	return termsafe.Text(s)
}

// compactLine is raw on one line of at most n characters, for a preview.
func compactLine(raw json.RawMessage, n int) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return termsafe.Line(oneLine(string(raw), n))
	}
	return termsafe.Line(oneLine(b.String(), n))
}

// jsonString returns the string raw holds, and false when it holds none.
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// jsonField is one member of an object as a page shows it: the key, a
// one-line preview and the whole value.
type jsonField struct {
	Key, Preview, Value string
}

func jsonFields(raw json.RawMessage) []jsonField {
	ms, ok := objectMembers(raw)
	if !ok {
		return []jsonField{{Key: "(not an object)", Preview: compactLine(raw, 80), Value: prettyJSON(raw)}}
	}
	out := make([]jsonField, len(ms))
	for i, m := range ms {
		out[i] = jsonField{Key: termsafe.Line(m.Key), Preview: compactLine(m.Value, 100), Value: prettyJSON(m.Value)}
	}
	return out
}

// webMessage is a message of a conversation as a page shows it.
type webMessage struct {
	Role      string // as written, made safe
	RoleClass string // one of the known roles, for the style
	Text      string // the content when it is text
	Parts     []webPart
	Calls     []webCall
	Extra     []jsonField // the other members
	Raw       string      // a message that is not an object
}

// webPart is a part of a message's content (a list of parts).
type webPart struct {
	Kind string // its "type"
	Text string // its text, or
	JSON string // the whole part
}

// webCall is a tool call of a message.
type webCall struct {
	Name, Args string
}

// webMessages reads a JSON array of messages. Any shape shows: a message
// with role and content as a chat message, tool calls (OpenAI's
// tool_calls with function name and arguments, or a content part of type
// tool_use) as calls, anything else as JSON.
func webMessages(raw json.RawMessage) []webMessage {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return []webMessage{{Raw: prettyJSON(raw), RoleClass: "other"}}
	}
	out := make([]webMessage, len(list))
	for i, m := range list {
		out[i] = webMessageOf(m)
	}
	return out
}

func webMessageOf(raw json.RawMessage) webMessage {
	ms, ok := objectMembers(raw)
	if !ok {
		return webMessage{Raw: prettyJSON(raw), RoleClass: "other"}
	}
	m := webMessage{RoleClass: "other"}
	// A message of role tool_call (what engine.WrapTool writes) is a call:
	// its name and arguments are members of its own.
	var call *webCall
	for _, f := range ms {
		if f.Key == "role" {
			if s, _ := jsonString(f.Value); s == "tool_call" {
				call = &webCall{Name: "?"}
				m.RoleClass = "tool"
			}
		}
	}
	for _, f := range ms {
		if call != nil && (f.Key == "name" || f.Key == "arguments" || f.Key == "args" || f.Key == "input") {
			call.readMember(f)
			continue
		}
		switch f.Key {
		case "role":
			if s, ok := jsonString(f.Value); ok {
				m.Role = termsafe.Line(oneLine(s, 40))
				switch s {
				case "user", "assistant", "system", "tool", "function", "developer":
					m.RoleClass = s
				}
				continue
			}
		case "content":
			if s, ok := jsonString(f.Value); ok {
				m.Text = shownText(s)
				continue
			}
			var parts []json.RawMessage
			if json.Unmarshal(f.Value, &parts) == nil {
				for _, p := range parts {
					m.Parts = append(m.Parts, webPartOf(p, &m.Calls))
				}
				continue
			}
		case "tool_calls":
			var calls []json.RawMessage
			if json.Unmarshal(f.Value, &calls) == nil {
				for _, c := range calls {
					m.Calls = append(m.Calls, webCallOf(c))
				}
				continue
			}
		}
		m.Extra = append(m.Extra, jsonField{Key: termsafe.Line(f.Key), Preview: compactLine(f.Value, 100), Value: prettyJSON(f.Value)})
	}
	if call != nil {
		m.Calls = append(m.Calls, *call)
	}
	return m
}

// webPartOf reads a content part; a tool_use part becomes a call.
func webPartOf(raw json.RawMessage, calls *[]webCall) webPart {
	ms, ok := objectMembers(raw)
	if !ok {
		if s, ok := jsonString(raw); ok {
			return webPart{Kind: "text", Text: shownText(s)}
		}
		return webPart{Kind: "value", JSON: prettyJSON(raw)}
	}
	p := webPart{Kind: "part"}
	var text *string
	for _, f := range ms {
		switch f.Key {
		case "type":
			if s, ok := jsonString(f.Value); ok {
				p.Kind = termsafe.Line(oneLine(s, 40))
			}
		case "text":
			if s, ok := jsonString(f.Value); ok {
				text = &s
			}
		}
	}
	if p.Kind == "tool_use" {
		*calls = append(*calls, webCallOf(raw))
	}
	if text != nil && (p.Kind == "text" || p.Kind == "part") {
		p.Text = shownText(*text)
	} else {
		p.JSON = prettyJSON(raw)
	}
	return p
}

// webCallOf reads a tool call: {"function": {"name", "arguments"}} or
// {"name", "input" or "arguments"}.
func webCallOf(raw json.RawMessage) webCall {
	ms, ok := objectMembers(raw)
	if !ok {
		return webCall{Name: "?", Args: prettyJSON(raw)}
	}
	c := webCall{Name: "?"}
	for _, f := range ms {
		switch f.Key {
		case "function":
			if inner, ok := objectMembers(f.Value); ok {
				for _, g := range inner {
					c.readMember(g)
				}
			}
		default:
			c.readMember(f)
		}
	}
	return c
}

func (c *webCall) readMember(f member) {
	switch f.Key {
	case "name":
		if s, ok := jsonString(f.Value); ok {
			c.Name = termsafe.Line(oneLine(s, 80))
		}
	case "arguments", "input", "args":
		// OpenAI sends arguments as a string of JSON.
		if s, ok := jsonString(f.Value); ok && json.Valid([]byte(s)) {
			c.Args = prettyJSON(json.RawMessage(s))
		} else if ok {
			c.Args = shownText(s)
		} else {
			c.Args = prettyJSON(f.Value)
		}
	}
}

// humanBytes is n bytes in B, KB, MB or GB (powers of 1,024).
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KB", "MB", "GB", "TB"}[i])
}

// splitTags reads a comma-separated list of tags.
func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
