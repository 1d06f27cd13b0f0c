//go:build unix

package sqlite

import (
	"errors"

	"golang.org/x/sys/unix"
)

// notWritable reports whether this process may not write path, a file or
// a directory: access(2) with W_OK, which refuses a read-only filesystem
// to root too. It opens nothing, so it cannot drop the POSIX locks SQLite
// holds on the file through other connections of this process.
func notWritable(path string) bool {
	err := unix.Access(path, unix.W_OK)
	return errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS)
}
