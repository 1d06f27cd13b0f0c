// Package cliflags parses the command lines of ckpt and migrate one way:
// flags may come before, between or after the positional arguments, as
// users type them (`migrate up --database URL`).
package cliflags

import "flag"

// Parse parses args with fs, flags anywhere, and returns the positional
// arguments in order. "--" ends the flags: what follows is positional.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
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
