package console

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/errgroups"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

// The error groups page: the records of the store (or of a selection)
// grouped by the signature of their error header (package errgroups), with
// a sparkline per group and "replay this group", which creates a restore
// job selecting the group ("error like SIGNATURE"). Like the overview's
// charts, each segment is counted once and its counts kept (segments never
// change under a name; the key holds its restore progress, the header and
// the selection), and a request reads for at most the search budget: the
// page asks again until every segment is counted.

// cacheGroups bounds the segments whose error groups the console keeps
// (each up to errgroups.DefaultMaxGroups groups, usually a few).
const cacheGroups = 5000

// errGroups keeps the error groups of segments.
type errGroups struct {
	*lru[*errgroups.Counter]
	scanMu sync.Mutex // one request reads segments at a time
}

func newErrGroups() *errGroups { return &errGroups{lru: newLRU[*errgroups.Counter](cacheGroups)} }

// errorsJSON is GET api/errors.
type errorsJSON struct {
	errgroups.Report
	Selection string   `json:"selection"`
	Scanned   int      `json:"scanned"`
	Of        int      `json:"of"`
	Complete  bool     `json:"complete"`
	Errors    []string `json:"errors,omitempty"`
}

// handleErrors answers GET api/errors: the parameters of a search (select=,
// area=, since=, ...; area defaults to ready), header= (default error),
// top= (default 20) and bars= (default 48).
func (h *Handler) handleErrors(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q, err := h.parseQuery(v)
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	header := v.Get("header")
	if header == "" {
		header = errgroups.DefaultHeader
	}
	top, bars := 20, 48
	for _, p := range []struct {
		name     string
		to       *int
		min, max int
	}{{"top", &top, 1, 200}, {"bars", &bars, 1, 200}} {
		if s := v.Get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < p.min || n > p.max {
				writeError(w, http.StatusBadRequest, "%s %q: want %d to %d", p.name, s, p.min, p.max)
				return
			}
			*p.to = n
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	out := errorsJSON{Selection: q.sel.String()}
	claims, err := h.claims(ctx)
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
	}
	var segs []sink.Info
	for _, area := range q.areas {
		for si, err := range h.list(ctx, area) {
			if err != nil {
				out.Errors = append(out.Errors, "list "+area.String()+": "+err.Error())
				break
			}
			if q.segments == nil || q.segments[si.Name] {
				segs = append(segs, si)
			}
		}
	}
	o := &errgroups.Options{Header: header}
	total := errgroups.New(o)
	out.Of = len(segs)
	var missing []sink.Info
	for _, si := range segs {
		if c, ok := h.groups.get(h.groupsKey(si, claims[si.Name], header, q.sel)); ok {
			total.Merge(c)
			out.Scanned++
		} else {
			missing = append(missing, si)
		}
	}
	if len(missing) > 0 && h.groups.scanMu.TryLock() {
		deadline := time.Now().Add(h.o.SearchBudget)
		for _, si := range missing {
			if time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			cv := claims[si.Name]
			c, err := h.countGroups(ctx, si, cv, q.sel, o)
			if err != nil {
				out.Errors = append(out.Errors, err.Error())
				out.Of-- // gone meanwhile, damaged header, no key: not counted
				continue
			}
			h.groups.put(h.groupsKey(si, cv, header, q.sel), c)
			total.Merge(c)
			out.Scanned++
		}
		h.groups.scanMu.Unlock()
	}
	out.Complete = out.Scanned >= out.Of
	out.Report = total.Report(top, bars)
	writeJSON(w, http.StatusOK, out)
}

// groupsKey names what is kept of segment si counted by header for sel.
func (h *Handler) groupsKey(si sink.Info, cv *inspect.Claim, header string, sel *selection.Selection) segKey {
	k := histKeyOf(si, cv)
	k.prog += "\x00" + header + "\x00" + sel.String()
	return k
}

// countGroups counts the records of a segment that sel selects by error
// group, leaving out those its restore progress cv handled.
func (h *Handler) countGroups(ctx context.Context, si sink.Info, cv *inspect.Claim, sel *selection.Selection, o *errgroups.Options) (*errgroups.Counter, error) {
	c := errgroups.New(o)
	_, err := h.walker.Walk(ctx, si, inspect.WalkOpts{Select: sel, Done: cv}, func(hdr *segment.Header, b *segment.Block) error {
		c.AddBlock(hdr, si.Area, si.Name, b, inspect.Keep(si, hdr, cv, sel))
		return nil
	}, func(error) {})
	if err != nil {
		return nil, err
	}
	c.Compact()
	return c, nil
}
