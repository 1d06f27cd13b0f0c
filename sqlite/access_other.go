//go:build !unix

package sqlite

import "os"

// notWritable reports whether path is a file marked read-only (on
// Windows, the read-only attribute). Directories count as writable.
func notWritable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode().Perm()&0o200 == 0
}
