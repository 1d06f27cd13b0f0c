//go:build unix

package localpg

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverOwner returns the OS user the binaries run as: nil (this process's
// own) unless this process is root, which initdb and postgres refuse.
func serverOwner(name string) (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if name == "" {
		name = DefaultUser
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("localpg: this process runs as root, which initdb and postgres refuse, "+
			"so they run as the OS user %q, and that user does not exist here (%v): "+
			"create it (e.g. useradd --system %s) or run as another user", name, err, name)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("localpg: user %s has uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("localpg: user %s has gid %q: %w", name, u.Gid, err)
	}
	return &osUser{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
}

// runAs makes cmd run as u (nil: as this process's user).
func runAs(cmd *exec.Cmd, u *osUser) {
	if u == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
}

// detach puts cmd, and so the server it launches, in a process group of
// its own: a Ctrl-C at the terminal then reaches only the caller, which
// stops the server in order.
func detach(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killServer ends the server process pid of dataDir: SIGQUIT (immediate
// shutdown), then SIGKILL if it is still there. Where /proc shows a
// process's working directory (Linux), a process that is not in dataDir is
// left alone: the pid file may be stale and the number reused.
func killServer(pid int, dataDir string) error {
	if !alive(pid) {
		return nil
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil {
		want, _ := filepath.EvalSymlinks(dataDir)
		if cwd != want && cwd != dataDir {
			return fmt.Errorf("process %d of the pid file runs in %s, not in %s: not killed", pid, cwd, dataDir)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL} {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %v to server process %d: %w", sig, pid, err)
		}
		if waitFor(5*time.Second, func() bool { return !alive(pid) }) {
			return nil
		}
	}
	return fmt.Errorf("server process %d is still running after SIGKILL", pid)
}

// killAllIn ends the processes whose working directory is dataDir (a
// server whose pid file is empty), where /proc shows it (Linux); elsewhere
// there is nothing to go by, and it does nothing.
func killAllIn(dataDir string) error {
	want, _ := filepath.EvalSymlinks(dataDir)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && (cwd == want || cwd == dataDir) {
			errs = append(errs, killServer(pid, dataDir))
		}
	}
	return errors.Join(errs...)
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc (not Linux): the signal check has to do
	}
	// The state follows the command name, which is in parentheses.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
