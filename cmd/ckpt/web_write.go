package main

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"

	"github.com/google/uuid"

	"github.com/pgcheckpoint/pgcheckpoint/engine"
	"github.com/pgcheckpoint/pgcheckpoint/internal/termsafe"
)

// Writes in ckpt web: each has a confirmation page (GET /confirm), which
// says what will happen and holds a form that POSTs to /do/ACTION with the
// form token and confirm=yes. The POST is refused unless the server was
// started with --allow-writes, the request comes from the server's own
// pages (Origin, Sec-Fetch-Site) and carries the form token.

// webAction is one kind of write.
type webAction struct {
	title  string
	fields []string // the form's fields, from the confirmation page's query
	// explain says, on the confirmation page, what the write does.
	explain func(s *webServer, r *http.Request, q url.Values) (string, error)
	// do writes and says what it did; next is the page to go on to.
	do func(s *webServer, r *http.Request, q url.Values) (done, next string, err error)
}

var webActions = map[string]webAction{
	"rewind": {
		title: "Rewind", fields: []string{"id"},
		explain: func(s *webServer, r *http.Request, q url.Values) (string, error) {
			cp, err := s.checkpointArg(r, q.Get("id"))
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Make step %d (%s) the head of thread %s. Nothing is deleted: the next checkpoint builds on this one, and the checkpoints after it stay readable (a later rewind can return to them).",
				cp.Step, cp.ID, termsafe.Line(cp.ThreadID)), nil
		},
		do: func(s *webServer, r *http.Request, q url.Values) (string, string, error) {
			id, err := uuid.Parse(q.Get("id"))
			if err != nil {
				return "", "", badRequest("not a checkpoint id")
			}
			res, err := s.eng.Rewind(r.Context(), id)
			if err != nil {
				return "", "", err
			}
			return fmt.Sprintf("Thread %s rewound %d step(s) to step %d. Nothing was deleted.", termsafe.Line(res.ThreadID), res.StepsBack, res.Checkpoint.Step),
				threadHref(res.ThreadID, id), nil
		},
	},
	"branch": {
		title: "Branch", fields: []string{"id", "name"},
		explain: func(s *webServer, r *http.Request, q url.Values) (string, error) {
			cp, err := s.checkpointArg(r, q.Get("id"))
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Fork a new thread from step %d (%s) of thread %s. Its first checkpoint has this one's content; the thread %s is not changed.",
				cp.Step, cp.ID, termsafe.Line(cp.ThreadID), termsafe.Line(cp.ThreadID)), nil
		},
		do: func(s *webServer, r *http.Request, q url.Values) (string, string, error) {
			id, err := uuid.Parse(q.Get("id"))
			if err != nil {
				return "", "", badRequest("not a checkpoint id")
			}
			res, err := s.eng.Branch(r.Context(), id, q.Get("name"))
			if err != nil {
				return "", "", err
			}
			return fmt.Sprintf("Branch %s created; its first checkpoint is step %d.", termsafe.Line(res.ThreadID), res.Step),
				threadHref(res.ThreadID, res.CheckpointID), nil
		},
	},
	"merge": {
		title: "Merge", fields: []string{"branch", "into", "ns"},
		explain: func(s *webServer, r *http.Request, q url.Values) (string, error) {
			return fmt.Sprintf("Write a checkpoint on thread %s (namespace %q) with the content of the head of branch %s, with both heads as parents. The branch is not changed.",
				termsafe.Line(q.Get("into")), termsafe.Line(q.Get("ns")), termsafe.Line(q.Get("branch"))), nil
		},
		do: func(s *webServer, r *http.Request, q url.Values) (string, string, error) {
			res, err := s.eng.MergeBranchIn(r.Context(), q.Get("branch"), q.Get("into"), q.Get("ns"))
			if err != nil {
				return "", "", err
			}
			return fmt.Sprintf("Merged: step %d of thread %s.", res.Step, termsafe.Line(res.ThreadID)), threadHref(res.ThreadID, res.CheckpointID), nil
		},
	},
	"delete": {
		title: "Delete a thread", fields: []string{"thread"},
		explain: func(s *webServer, r *http.Request, q url.Values) (string, error) {
			v, err := s.retention(r.Context(), q.Get("thread"), "")
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Delete thread %s: its %d checkpoint(s), every namespace, with their pending writes. This cannot be undone (ckpt export keeps a copy). Its branches are threads of their own and stay.",
				v.Shown, v.Count), nil
		},
		do: func(s *webServer, r *http.Request, q url.Values) (string, string, error) {
			res, err := deleteThread(r.Context(), s.eng, q.Get("thread"), false)
			if err != nil {
				return "", "", err
			}
			return fmt.Sprintf("Thread %s deleted: %d checkpoint(s).", termsafe.Line(q.Get("thread")), res.Deleted), "./", nil
		},
	},
	"prune": {
		title: "Apply a retention policy", fields: []string{"thread", "policy"},
		explain: func(s *webServer, r *http.Request, q url.Values) (string, error) {
			v, err := s.retention(r.Context(), q.Get("thread"), q.Get("policy"))
			if err != nil {
				return "", err
			}
			if v.Err != "" {
				return "", badRequest("%s", v.Err)
			}
			return fmt.Sprintf("Apply %s to thread %s: as the preview shows now, %d of its %d checkpoint(s) go, with their pending writes. This cannot be undone.",
				v.Policy, v.Shown, v.Deleted, v.Count), nil
		},
		do: func(s *webServer, r *http.Request, q url.Values) (string, string, error) {
			p, err := engine.ParsePolicy(q.Get("policy"))
			if err != nil {
				return "", "", badRequest("%s", termsafe.Text(err.Error()))
			}
			if err := threadExists(r.Context(), s.eng, q.Get("thread")); err != nil {
				return "", "", err
			}
			res, err := s.eng.PruneThreads(r.Context(), p, q.Get("thread"))
			if err != nil {
				return "", "", err
			}
			return fmt.Sprintf("%s applied to thread %s: %d checkpoint(s) deleted.", p.String(), termsafe.Line(q.Get("thread")), res.Deleted),
				threadHref(q.Get("thread"), uuid.Nil), nil
		},
	},
}

// threadHref links to a thread's page, at a checkpoint if one is given.
func threadHref(thread string, at uuid.UUID) string {
	v := url.Values{"id": {thread}}
	if at != uuid.Nil {
		v.Set("at", at.String())
	}
	return "thread?" + v.Encode()
}

func (s *webServer) checkpointArg(r *http.Request, arg string) (*engine.Checkpoint, error) {
	id, err := uuid.Parse(arg)
	if err != nil {
		return nil, badRequest("not a checkpoint id")
	}
	return s.eng.Get(r.Context(), id)
}

// formField is a hidden field of a confirmation form.
type formField struct {
	Name, Value string
}

type confirmView struct {
	Action, Title, Explain string
	Fields                 []formField
	NeedName               bool
}

// confirmPage says what a write will do, and holds its form when writes
// are allowed.
func (s *webServer) confirmPage(r *http.Request) (string, string, any, error) {
	q := r.URL.Query()
	name := q.Get("action")
	a, ok := webActions[name]
	if !ok {
		return "", "", nil, badRequest("unknown action")
	}
	explain, err := a.explain(s, r, q)
	if err != nil {
		return "", "", nil, err
	}
	v := confirmView{Action: name, Title: a.title, Explain: explain}
	for _, f := range a.fields {
		if name == "branch" && f == "name" {
			v.NeedName = true
			continue
		}
		v.Fields = append(v.Fields, formField{f, q.Get(f)})
	}
	return "confirm", a.title, v, nil
}

// write serves POST /do/ACTION (see above).
func (s *webServer) write(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.renderError(w, webError{http.StatusMethodNotAllowed, "a write is a POST from its confirmation page"})
		return
	}
	if !s.allowWrites {
		s.renderError(w, webError{http.StatusForbidden, "read-only: ckpt web changes nothing unless started with --allow-writes"})
		return
	}
	if !s.sameOrigin(r) {
		s.renderError(w, webError{http.StatusForbidden, "a write must come from this server's own pages (Origin)"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.renderError(w, badRequest("unreadable form"))
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
		s.renderError(w, webError{http.StatusForbidden, "a write must come from this server's own pages (form token)"})
		return
	}
	a, ok := webActions[r.PathValue("action")]
	if !ok {
		s.renderError(w, webError{http.StatusNotFound, "unknown action"})
		return
	}
	if r.PostForm.Get("confirm") != "yes" {
		s.renderError(w, badRequest("not confirmed: writes go through their confirmation page"))
		return
	}
	done, next, err := a.do(s, r, r.PostForm)
	if err != nil {
		s.renderError(w, err)
		return
	}
	s.render(w, http.StatusOK, "done", "Done", struct{ Done, Next string }{done, next})
}
