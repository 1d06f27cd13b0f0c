package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	pgcheckpoint "github.com/pgcheckpoint/pgcheckpoint"
	"github.com/pgcheckpoint/pgcheckpoint/engine"
)

// tenantDB is a SQLite file with thread "t" in the default tenant and in
// tenant "acme", each with its own state.
func tenantDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	url := "sqlite:" + filepath.Join(t.TempDir(), "tenants.db")
	eng, err := pgcheckpoint.Open(ctx, url, pgcheckpoint.Options{Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	acme, err := eng.ForTenant("acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		eng *engine.Engine
		who string
	}{{eng, "default"}, {acme, "acme"}, {acme, "acme"}} {
		if _, err := w.eng.Snapshot(ctx, engine.SnapshotInput{ThreadID: "t", Summary: "written by " + w.who,
			State: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	return url
}

// --tenant (or PGCHECKPOINT_TENANT) binds every command to a tenant: the
// same thread id reads that tenant's history alone; a bad name is
// engine.ErrInvalidInput before anything is opened.
func TestTenantFlag(t *testing.T) {
	url := tenantDB(t)
	logOf := func(args ...string) []map[string]any {
		t.Helper()
		out, _ := runCkpt(t, terminals{}, append([]string{"--database", url, "--json"}, args...)...)
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("ckpt %q: %v\n%s", args, err, out)
		}
		return rows
	}
	if n := len(logOf("log", "t")); n != 1 {
		t.Errorf("default tenant: %d checkpoints of t, want 1", n)
	}
	if n := len(logOf("--tenant", "acme", "log", "t")); n != 2 {
		t.Errorf("--tenant acme: %d checkpoints of t, want 2", n)
	}
	if n := len(logOf("log", "t", "--tenant", "acme")); n != 2 {
		t.Errorf("--tenant after the command: %d checkpoints of t, want 2", n)
	}
	if n := len(logOf("--tenant", "globex", "threads")); n != 0 {
		t.Errorf("--tenant globex lists %d threads, want none", n)
	}
	t.Setenv("PGCHECKPOINT_TENANT", "acme")
	if n := len(logOf("log", "t")); n != 2 {
		t.Errorf("PGCHECKPOINT_TENANT=acme: %d checkpoints of t, want 2", n)
	}
	if n := len(logOf("--tenant", engine.DefaultTenant, "log", "t")); n != 1 {
		t.Errorf("--tenant default over PGCHECKPOINT_TENANT: %d checkpoints of t, want 1", n)
	}
	// acme deletes its thread: the default tenant's stays.
	runCkpt(t, terminals{}, "--database", url, "delete", "t")
	t.Setenv("PGCHECKPOINT_TENANT", "")
	if n := len(logOf("log", "t")); n != 1 {
		t.Errorf("after acme's delete the default tenant has %d checkpoints of t, want 1", n)
	}

	missing := "sqlite:" + filepath.Join(t.TempDir(), "missing.db")
	for _, bad := range []string{"a\x01b", "nul\x00", strings.Repeat("x", 256)} {
		err := run(context.Background(), []string{"--database", missing, "--tenant", bad, "threads"}, io.Discard, io.Discard, terminals{})
		if !errors.Is(err, engine.ErrInvalidInput) || !strings.Contains(err.Error(), "tenant") {
			t.Errorf("--tenant %q: %v, want ErrInvalidInput naming the tenant", bad, err)
		}
	}
	if err := run(context.Background(), []string{"--database", url, "--tenant", "", "threads"}, io.Discard, io.Discard, terminals{}); err != nil {
		t.Errorf("--tenant \"\" (the default): %v", err)
	}
}

// fetchOnURL fetches a page of the server ckpt web runs once it prints its
// URL, then stops it.
type fetchOnURL struct {
	mu     sync.Mutex
	b      strings.Builder
	page   string
	body   string
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

func (f *fetchOnURL) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.b.Write(p)
	if !strings.Contains(f.b.String(), "Ctrl-C stops it.") || f.done != nil {
		return len(p), nil
	}
	var link string
	for _, line := range strings.Split(f.b.String(), "\n") {
		if strings.HasPrefix(line, "http://") {
			link = strings.TrimSpace(line)
		}
	}
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		defer f.cancel()
		jar, _ := cookiejar.New(nil)
		client := &http.Client{Jar: jar}
		res, err := client.Get(link) // sets the cookie, redirects to /
		if err != nil {
			f.err = err
			return
		}
		res.Body.Close()
		res, err = client.Get(strings.SplitN(link, "?", 2)[0] + strings.TrimPrefix(f.page, "/"))
		if err != nil {
			f.err = err
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		f.body, f.err = string(b), err
	}()
	return len(p), nil
}

// ckpt web --tenant shows that tenant's threads alone.
func TestWebTenant(t *testing.T) {
	t.Parallel()
	url := tenantDB(t)
	for _, c := range []struct {
		tenant string
		want   string
		not    string
	}{{"acme", "written by acme", "written by default"}, {"", "written by default", "written by acme"}} {
		ctx, cancel := context.WithCancel(context.Background())
		f := &fetchOnURL{cancel: cancel, page: "/thread?id=t"}
		var errOut strings.Builder
		args := []string{"--database", url, "web"}
		if c.tenant != "" {
			args = append(args, "--tenant", c.tenant)
		}
		err := run(ctx, args, f, &errOut, terminals{})
		cancel()
		if err != nil {
			t.Fatalf("ckpt web %q: %v\n%s", args, err, errOut.String())
		}
		if f.done == nil {
			t.Fatalf("ckpt web printed no URL:\n%s", f.b.String())
		}
		<-f.done
		if f.err != nil {
			t.Fatal(f.err)
		}
		if !strings.Contains(f.body, c.want) || strings.Contains(f.body, c.not) {
			t.Errorf("ckpt web --tenant %q shows thread t as\n%s\nwant %q and not %q", c.tenant, f.body, c.want, c.not)
		}
	}
}
