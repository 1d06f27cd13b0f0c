// Package cliflags parses the command lines of ckpt and migrate one way:
// flags may come before, between or after the positional arguments, as
// users type them (`migrate up --database URL`).
package cliflags

import (
	"flag"
	"regexp"
	"strings"
)

// Parse parses args with fs, flags anywhere, and returns the positional
// arguments in order. "--" ends the flags: what follows is positional. A
// negative number where a flag could start (`migrate force -1`) is a
// positional argument, unless fs has a flag of that name; as a flag's value
// (`--limit -1`) it stays the value.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		// Up to the next negative number in a flag's place, the flag
		// package parses; that number is positional.
		head, number, tail := args, "", []string(nil)
		if i := negativeNumberAt(fs, args); i >= 0 {
			head, number, tail = args[:i], args[i], args[i+1:]
		}
		p, err := parse(fs, head)
		if err != nil {
			return nil, err
		}
		pos = append(pos, p...)
		if number == "" {
			return pos, nil
		}
		pos = append(pos, number)
		args = tail
	}
}

// parse is Parse for args in which no negative number stands in a flag's
// place.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// negativeNumberAt returns the index of the first argument before any "--"
// that is a negative number (digits, with a decimal point or not: not
// -inf, -1e5 or -0x1) where the flag package would read a flag, or -1 if
// there is none.
var negativeNumber = regexp.MustCompile(`^-[0-9]+(\.[0-9]+)?$`)

func negativeNumberAt(fs *flag.FlagSet, args []string) int {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return -1
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		if negativeNumber.MatchString(a) && fs.Lookup(a[1:]) == nil {
			return i
		}
		// A flag; skip its value when it is the next argument.
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
				i++
			}
		}
	}
	return -1
}
