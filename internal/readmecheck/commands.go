package readmecheck

import (
	"fmt"
	"strings"
)

// Command is one simple command of a sh block: its environment
// assignments, its program and its arguments, with quotes removed and
// redirections dropped. Variables ($DATABASE_URL) are left as written.
type Command struct {
	Block Block
	Line  int      // the command's line in the file
	Env   []string // leading NAME=value words
	Prog  string   // "ckpt" and "migrate" for their binaries or go run ./cmd/...; else the program as written
	Args  []string // the arguments after Prog ("go": after go)
	// Stdout is the file a > or >> sends the output to; "" if none.
	Stdout string
}

// Where names the command for error messages: file:line and the words.
func (c Command) Where() string {
	return fmt.Sprintf("%s:%d: %s %s", c.Block.File, c.Line, c.Prog, strings.Join(c.Args, " "))
}

// Commands splits a sh block into its simple commands: lines joined at a
// trailing backslash, comments (# after a space) removed, then split at
// |, && and ; outside quotes.
func Commands(b Block) ([]Command, error) {
	var cmds []Command
	lines := strings.Split(strings.TrimRight(b.Text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		line := lines[i]
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + lines[i]
		}
		words, err := split(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", b.File, b.Line+1+start, err)
		}
		var cur []string
		flush := func() {
			if len(cur) > 0 {
				cmds = append(cmds, command(b, b.Line+1+start, cur))
			}
			cur = nil
		}
		for _, w := range words {
			switch w.text {
			case "|", "&&", ";":
				if !w.quoted {
					flush()
					continue
				}
			}
			cur = append(cur, w.text)
		}
		flush()
	}
	return cmds, nil
}

// command makes a Command of one simple command's words.
func command(b Block, line int, words []string) Command {
	c := Command{Block: b, Line: line}
	var rest []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == ">" || w == ">>":
			if i+1 < len(words) {
				c.Stdout = words[i+1]
			}
			i++
			continue
		case w == "<" || w == "2>":
			i++ // and its target
			continue
		case strings.HasPrefix(w, ">") || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "2>"):
			continue
		case len(rest) == 0 && isAssignment(w):
			c.Env = append(c.Env, w)
			continue
		}
		rest = append(rest, w)
	}
	if len(rest) == 0 {
		return c
	}
	c.Prog, c.Args = rest[0], rest[1:]
	if c.Prog == "go" && len(c.Args) >= 2 && c.Args[0] == "run" {
		switch c.Args[1] {
		case "./cmd/ckpt":
			c.Prog, c.Args = "ckpt", c.Args[2:]
		case "./cmd/migrate":
			c.Prog, c.Args = "migrate", c.Args[2:]
		}
	}
	return c
}

// isAssignment reports whether w is NAME=value.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

type word struct {
	text   string
	quoted bool
}

// split cuts a shell line into words: quotes (single and double) removed,
// a # that starts a word ends the line, |, && and ; are words of their own.
func split(line string) ([]word, error) {
	var words []word
	var cur strings.Builder
	inWord, quoted := false, false
	end := func() {
		if inWord {
			words = append(words, word{cur.String(), quoted})
		}
		cur.Reset()
		inWord, quoted = false, false
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\'' || ch == '"':
			j := strings.IndexByte(line[i+1:], ch)
			if j < 0 {
				return nil, fmt.Errorf("unclosed %c", ch)
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, quoted = true, true
			i += j + 1
		case ch == ' ' || ch == '\t':
			end()
		case ch == '#' && !inWord:
			end()
			return words, nil
		case ch == '|' || ch == ';':
			end()
			words = append(words, word{text: string(ch)})
		case ch == '&' && i+1 < len(line) && line[i+1] == '&':
			end()
			words = append(words, word{text: "&&"})
			i++
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	end()
	return words, nil
}

// DocCommands returns the commands of prog in the sh blocks of the README
// and docs/ under root, in the order written; none is an error (a test of
// the docs' commands would check nothing).
func DocCommands(root, prog string) ([]Command, error) {
	blocks, err := Blocks(root)
	if err != nil {
		return nil, err
	}
	cmds, err := ProgCommands(blocks, prog)
	if err == nil && len(cmds) == 0 {
		err = fmt.Errorf("the docs show no %s command", prog)
	}
	return cmds, err
}

// ProgCommands returns the commands of every sh block of blocks whose
// program is prog ("ckpt", "migrate", "go", "psql", ...).
func ProgCommands(blocks []Block, prog string) ([]Command, error) {
	var out []Command
	for _, b := range blocks {
		if b.Kind() != KindShell {
			continue
		}
		cmds, err := Commands(b)
		if err != nil {
			return nil, err
		}
		for _, c := range cmds {
			if c.Prog == prog {
				out = append(out, c)
			}
		}
	}
	return out, nil
}
