//go:build !unix

package localpg

import (
	"fmt"
	"os"
	"os/exec"
)

// serverOwner returns nil: only Unix has root to avoid.
func serverOwner(string) (*osUser, error) { return nil, nil }

// runAs does nothing: binaries run as this process's user.
func runAs(*exec.Cmd, *osUser) {}

// detach does nothing on this OS.
func detach(*exec.Cmd) {}

// killServer kills the server process pid.
func killServer(pid int, _ string) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil // gone
	}
	if err := p.Kill(); err != nil {
		return fmt.Errorf("kill server process %d: %w", pid, err)
	}
	return nil
}

// killAllIn does nothing: without /proc there is no telling which
// processes run in a directory.
func killAllIn(string) error { return nil }
