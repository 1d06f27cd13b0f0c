package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/dburl"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// ckpt web serves a viewer of the database's threads to a browser on this
// machine. Agent text is untrusted, and so is every other page the browser
// has open, so the server:
//
//   - renders every page with html/template, which escapes agent text for
//     the context it lands in, and its script comes from a file of its own:
//     the Content-Security-Policy (webCSP) forbids inline script, so text
//     that slipped through escaping still could not run;
//   - answers only requests whose path begins with the token of the URL it
//     printed: every page is under /<token>/ (a <base> element makes the
//     pages' links relative to it). Not a cookie: a browser sends a cookie
//     of 127.0.0.1 to every port of it, so any other local user's server the
//     browser visits would get the token;
//   - when bound to loopback (the default), answers only requests whose Host
//     is a loopback name, so a DNS name rebound to 127.0.0.1 gets nothing;
//   - writes only when started with --allow-writes, and then only on a POST
//     from its own pages (the Origin header, a form token and a field the
//     confirmation page sets).

//go:embed web
var webFiles embed.FS

// webCSP is the Content-Security-Policy of every response: the page's own
// files and nothing inline, no plugins, no frames, forms posted only here.
const webCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'self'"

// webTreePage is how many rows of a tree one thread page draws.
const webTreePage = 200

// webHelp is what ckpt web --help says beyond the flags.
const webHelp = `ckpt web serves a viewer on 127.0.0.1, on a free port, and prints its
URL: open it in a browser. The URL's path begins with a random token that
every request needs (every page's address carries it, and no cookie does),
so other users of this machine, and other sites open in the browser, cannot
read it. Pages: the threads (search by id prefix, checkpoint metadata and
tags), a thread's tree with its branches, merges and rewinds, each
checkpoint (messages, state, tool results, pending writes, lineage), the
diff of two checkpoints, and what a retention policy would delete.

It only reads, unless started with --allow-writes: then rewind, branch,
merge, delete a thread and apply a retention policy, each after a
confirmation page. --listen ADDR binds elsewhere (e.g. 0.0.0.0:8080, for a
machine you reach over a network you trust); it warns, as the pages are then
open to anyone who can reach the port and has the URL.
Ctrl-C stops it.`

// webServer is ckpt web's HTTP handler.
type webServer struct {
	eng         *engine.Engine
	allowWrites bool
	token       string // the URL's token: every path begins with /<token>/
	csrf        string // the token of every write form
	port        string
	loopback    bool // bound to loopback: check the Host header
	pages       map[string]*template.Template
	mux         *http.ServeMux
}

// randomToken returns 32 random bytes in URL-safe base64.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on the systems Go supports
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func runWeb(ctx context.Context, c *cli, _ []string) error {
	addr := c.listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("web: --listen %q: want HOST:PORT, e.g. 127.0.0.1:8080 (port 0: any free port)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("web: %w", err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	s, err := newWebServer(c.eng, c.allowWrites, tcp)
	if err != nil {
		ln.Close()
		return err
	}
	if !s.loopback {
		can := "read every thread"
		if c.allowWrites {
			can = "read and change every thread"
		}
		fmt.Fprintf(c.stderr, "ckpt web: warning: listening on %s, beyond this machine's loopback: anyone who can reach that port and has the URL below can %s\n",
			ln.Addr(), can)
	}
	shown := host
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		shown = "127.0.0.1"
	}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(shown, s.port), Path: s.base()}
	mode := "read-only (start it with --allow-writes to rewind, branch, merge, delete and prune)"
	if c.allowWrites {
		mode = "writes allowed, each after a confirmation page"
	}
	fmt.Fprintf(c.stdout, "ckpt web: serving %s, %s\nopen this URL in a browser (its token is the key: do not share it):\n%s\nCtrl-C stops it.\n",
		dburl.Redact(c.dbURL), mode, u.String())

	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("web: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("web: %w", err)
	}
	return nil
}

// newWebServer makes the handler of a server listening on addr.
func newWebServer(eng *engine.Engine, allowWrites bool, addr *net.TCPAddr) (*webServer, error) {
	port := fmt.Sprint(addr.Port)
	s := &webServer{
		eng: eng, allowWrites: allowWrites,
		token: randomToken(), csrf: randomToken(), port: port,
		loopback: addr.IP.IsLoopback(),
	}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(webFiles, "web/static")
	if err != nil {
		return nil, err
	}
	m := http.NewServeMux()
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /{$}", s.page(s.threadsPage))
	m.HandleFunc("GET /thread", s.page(s.threadPage))
	m.HandleFunc("GET /thread/stats", s.statsJSON)
	m.HandleFunc("GET /checkpoint", s.page(s.checkpointPage))
	m.HandleFunc("GET /diff", s.page(s.diffPage))
	m.HandleFunc("GET /retention", s.page(s.retentionPage))
	m.HandleFunc("GET /confirm", s.page(s.confirmPage))
	m.HandleFunc("/do/{action}", s.write)
	s.mux = m
	return s, nil
}

// ServeHTTP sets the security headers, checks the Host header and the
// token, and hands the request to its page.
func (s *webServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", webCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with a form's POST, which the write check refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if s.loopback && !s.loopbackHost(r.Host) {
		s.forbid(w, "this server answers to 127.0.0.1, localhost and [::1] on port "+s.port+" only")
		return
	}
	tok, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) != 1 {
		s.forbid(w, "no token: open the URL that ckpt web printed (its path begins with the token)")
		return
	}
	if r.URL.Path == "/"+s.token {
		to := url.URL{Path: s.base(), RawQuery: r.URL.RawQuery}
		http.Redirect(w, r, to.String(), http.StatusSeeOther)
		return
	}
	// The page's own path, as the mux knows it; a redirect the mux makes
	// (a path it cleans, /static without its slash) goes under the token's
	// path too.
	inner := *r.URL
	inner.Path, inner.RawPath = "/"+rest, ""
	in := r.Clone(r.Context())
	in.URL = &inner
	s.mux.ServeHTTP(underBase{ResponseWriter: w, base: s.base()}, in)
}

// underBase puts a redirect to a path of this server (a Location that
// begins with one slash) under base.
type underBase struct {
	http.ResponseWriter
	base string
}

func (u underBase) WriteHeader(code int) {
	if loc := u.Header().Get("Location"); strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "//") {
		u.Header().Set("Location", u.base+loc[1:])
	}
	u.ResponseWriter.WriteHeader(code)
}

// base is the path every page is under, and the pages' <base>.
func (s *webServer) base() string { return "/" + s.token + "/" }

// loopbackHost reports whether a Host header names this server by a
// loopback name and its port.
func (s *webServer) loopbackHost(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port != s.port {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// forbid answers 403 with a line of text (never agent text).
func (s *webServer) forbid(w http.ResponseWriter, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "403 forbidden: %s\n", why)
}

// sameOrigin reports whether a write comes from this server's own pages:
// its Origin is this server's, and the browser did not call it cross-site.
func (s *webServer) sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	return r.Header.Get("Origin") == "http://"+r.Host
}

// webError is an error a page shows with its HTTP status.
type webError struct {
	status int
	msg    string
}

func (e webError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return webError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// pageData is what every page's template gets: the page's own data and
// the server's state.
type pageData struct {
	Title       string
	Base        string // the token's path, which the pages' links are relative to
	AllowWrites bool
	CSRF        string
	Data        any
}

// page makes a handler from a function that returns a page's template
// name, title and data. Errors render as an error page (renderError).
func (s *webServer) page(fn func(r *http.Request) (string, string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, title, data, err := fn(r)
		if err != nil {
			s.renderError(w, err)
			return
		}
		s.render(w, http.StatusOK, name, title, data)
	}
}

func (s *webServer) render(w http.ResponseWriter, status int, name, title string, data any) {
	var b strings.Builder
	if err := s.pages[name].ExecuteTemplate(&b, "layout", pageData{Title: title, Base: s.base(), AllowWrites: s.allowWrites, CSRF: s.csrf, Data: data}); err != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "500: rendering the page failed: %s\n", termsafe.Text(err.Error()))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprint(w, b.String())
}

// renderError shows err as an error page: 404 for engine.ErrNotFound,
// 400 for bad input, 403 for a role that may not write and for encrypted
// content (with what to pass to ckpt web, as ckpt says it), 500 otherwise.
func (s *webServer) renderError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	msg := termsafe.Text(err.Error())
	var we webError
	switch {
	case errors.As(err, &we):
		status = we.status
	case errors.Is(err, engine.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, engine.ErrInvalidInput):
		status = http.StatusBadRequest
	case errors.Is(err, engine.ErrPermission):
		status = http.StatusForbidden
	case errors.Is(err, engine.ErrEncrypted):
		status = http.StatusForbidden
		if s.eng.Encrypted() {
			msg += " (" + encryptedHint + ")"
		} else {
			// The engine's text then tells a Go program to configure
			// encryption: the keys are what this server lacks.
			msg = encryptedHint + " (this ckpt web was started without them)"
		}
	}
	s.render(w, status, "error", http.StatusText(status), struct {
		Status int
		Msg    string
	}{status, msg})
}

// parsePages parses each page's template with the layout.
func parsePages() (map[string]*template.Template, error) {
	layout, err := template.New("").Funcs(webFuncs).ParseFS(webFiles, "web/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(webFiles, "web/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "web/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(webFiles, n)
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}
