package console

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/internal/inspect"
)

// Every change made through the console is written to the store's change log
// (package changelog), shared with the command line and every other
// process on the store, with the principal that made it (Options.Authorize)
// and its role; and logged (Options.Logger). A store that keeps no tables
// keeps no change log: the changes are logged only.

// change is a change made through the console, for the change log.
type change struct {
	action, scope, reason, result string
	err                           error
}

// record writes a change made through the console to the change log and
// the console's log. A failure to append is logged, and returned so the
// page can say so.
func (h *Handler) record(r *http.Request, c change, attrs ...any) error {
	p := principalOf(r)
	attrs = append([]any{slog.String("who", p.Name), slog.String("role", p.Role.String()), slog.String("remote", r.RemoteAddr),
		slog.String("action", c.action), slog.String("scope", c.scope)}, attrs...)
	if c.reason != "" {
		attrs = append(attrs, slog.String("reason", c.reason))
	}
	if c.err != nil {
		h.log.Warn("console: "+c.action+" failed", append(attrs, slog.Any("error", c.err))...)
	} else {
		h.log.Info("console: "+c.action+": "+c.result, attrs...)
	}
	if h.changes == nil {
		return nil
	}
	e := changelog.Entry{Actor: p.Name, Role: p.Role.String(), Via: "console", Action: c.action, Scope: c.scope, Reason: c.reason, Result: c.result}
	if c.err != nil {
		e.Error = c.err.Error()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	if _, err := h.changes.Append(ctx, e); err != nil {
		h.log.Error("console: the change was made, but not written to the change log", append(attrs, slog.Any("error", err))...)
		return err
	}
	return nil
}

// logEntryJSON is a change log entry on the page.
type logEntryJSON struct {
	changelog.Entry
	Time string `json:"time"`
}

// handleLog serves the change log, newest first: n entries (default 100,
// at most 1000) before seq "before", those the filters select (action,
// who, q, since, until; as dlqdump log takes them).
func (h *Handler) handleLog(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Entries []logEntryJSON `json:"entries"`
		More    bool           `json:"more"`
		Error   string         `json:"error,omitempty"`
	}{Entries: []logEntryJSON{}}
	if h.changes == nil {
		out.Error = "this store keeps no change log (its Reader keeps no tables)"
		writeJSON(w, http.StatusOK, out)
		return
	}
	v := r.URL.Query()
	f := changelog.Filter{Actions: slices.DeleteFunc(v["action"], func(s string) bool { return s == "" }), Actor: v.Get("who"), Text: v.Get("q")}
	var err error
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if s := v.Get(t.name); s != "" {
			if *t.to, err = time.Parse(time.RFC3339Nano, s); err != nil {
				writeError(w, http.StatusBadRequest, "%s %q: want an RFC 3339 time", t.name, s)
				return
			}
		}
	}
	n := 100
	if s := v.Get("n"); s != "" {
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "n %q: want 1 to 1000", s)
			return
		}
	}
	var before uint64
	if s := v.Get("before"); s != "" {
		if before, err = strconv.ParseUint(s, 10, 64); err != nil {
			writeError(w, http.StatusBadRequest, "before %q: want an entry's number", s)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	for e, err := range h.changes.Newest(ctx) {
		if err != nil {
			out.Error = err.Error()
			break
		}
		if before > 0 && e.Seq >= before || !f.Match(&e) {
			continue
		}
		if len(out.Entries) == n {
			out.More = true
			break
		}
		out.Entries = append(out.Entries, logEntryJSON{Entry: e, Time: inspect.JSONTime(e.Time)})
	}
	writeJSON(w, http.StatusOK, out)
}

// handleVerify checks the change log's chain (changelog.Log.Verify).
func (h *Handler) handleVerify(w http.ResponseWriter, r *http.Request) {
	if h.changes == nil {
		writeError(w, http.StatusNotFound, "this store keeps no change log")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	v, err := h.changes.Verify(ctx, changelog.VerifyOptions{Anchor: r.URL.Query().Get("anchor")})
	out := struct {
		Entries uint64           `json:"entries"`
		Pages   int              `json:"pages"`
		Head    string           `json:"head,omitempty"`
		Broken  *changelog.Break `json:"broken,omitempty"`
		Error   string           `json:"error,omitempty"`
	}{Entries: v.Entries, Pages: v.Pages, Broken: v.Broken}
	if v.Head.Seq > 0 {
		out.Head = v.Head.String()
	}
	if err != nil && !errors.Is(err, changelog.ErrBroken) {
		out.Error = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}
