package console

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
	"github.com/dlqdump/dlqdump/transform"
)

// The preview of a transform: before a restore job with a jq program is
// created ("Restore this selection…"), the page shows what the program
// does to the first records of the selection, as a unified diff of each
// record's JSON, and the error of each it would quarantine. It changes
// nothing, and reads for at most the search budget.

// previewJSON is GET api/preview.
type previewJSON struct {
	Selection string       `json:"selection"`
	Changes   []changeJSON `json:"changes"`
	Looked    int          `json:"looked"`    // records of the selection the program ran on
	Unchanged int          `json:"unchanged"` // of those, the records it did not change
	Complete  bool         `json:"complete"`  // the selection holds no more records
	Errors    []string     `json:"errors,omitempty"`
}

type changeJSON struct {
	ID    string `json:"id"`
	Diff  string `json:"diff,omitempty"`
	Error string `json:"error,omitempty"` // the record would be quarantined with it
}

// badJQ is the answer to a program that does not compile: where.
type badJQ struct {
	Error  string `json:"error"`
	Column int    `json:"column,omitempty"`
	Caret  string `json:"caret,omitempty"`
}

// maxPreview bounds n.
const maxPreview = 20

// handlePreview answers GET api/preview: the parameters of a search, jq=
// the program, keep=1 to keep the payloads' layout (transform.Options.
// KeepLayout, as the job would), n= how many records changed or refused to
// show (default 3, at most 20). Only who may create a job (an operator) runs a program
// here: it may take a second and the memory it wants per record.
func (h *Handler) handlePreview(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q, err := h.parseQuery(v)
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	jq, err := transform.CompileJQ(v.Get("jq"), &transform.Options{KeepLayout: v.Get("keep") == "1"})
	if err != nil {
		b := badJQ{Error: err.Error()}
		var je *transform.Error
		if errors.As(err, &je) {
			b.Column, b.Caret = je.Column(), je.Caret()
		}
		writeJSON(w, http.StatusBadRequest, b)
		return
	}
	n := 3
	if s := v.Get("n"); s != "" {
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > maxPreview {
			writeError(w, http.StatusBadRequest, "n %q: want 1 to %d", s, maxPreview)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	deadline := time.Now().Add(h.o.SearchBudget)
	out := previewJSON{Selection: q.sel.String(), Changes: []changeJSON{}}
	claims, err := h.claims(ctx)
	if err != nil {
		out.Errors = append(out.Errors, err.Error())
	}
	errEnough := errors.New("enough")
	stopped := false
	for _, area := range q.areas {
		for si, err := range h.list(ctx, area) {
			if err != nil {
				out.Errors = append(out.Errors, "list "+area.String()+": "+err.Error())
				break
			}
			if q.segments != nil && !q.segments[si.Name] {
				continue
			}
			if len(out.Changes) >= n || time.Now().After(deadline) {
				stopped = true
				break
			}
			cv := claims[si.Name]
			_, err := h.walker.Walk(ctx, si, inspect.WalkOpts{Select: q.sel, Done: cv}, func(hdr *segment.Header, b *segment.Block) error {
				seg := inspect.SegmentOf(si, hdr)
				for i := range b.Len() {
					rec := b.Record(i)
					if cv.Skip(rec.Seq) || !q.sel.Match(seg, &rec) {
						continue
					}
					if len(out.Changes) >= n || time.Now().After(deadline) {
						return errEnough
					}
					out.Looked++
					before := replayOf(hdr, &rec)
					after := replayOf(hdr, &rec)
					if err := jq.Transform(ctx, after); err != nil {
						out.Changes = append(out.Changes, changeJSON{ID: before.ID.String(), Error: "transform: " + err.Error()})
						continue
					}
					d := transform.Diff(before, after)
					if d == "" {
						out.Unchanged++
						continue
					}
					out.Changes = append(out.Changes, changeJSON{ID: before.ID.String(), Diff: d})
				}
				return nil
			}, func(err error) { out.Errors = append(out.Errors, err.Error()) })
			if errors.Is(err, errEnough) {
				stopped = true
				break
			}
			if err != nil && !errors.Is(err, sink.ErrNotFound) {
				out.Errors = append(out.Errors, err.Error())
			}
		}
		if stopped {
			break
		}
	}
	out.Complete = !stopped
	writeJSON(w, http.StatusOK, out)
}

// replayOf returns a record as a Transform sees it: its stored headers but
// the ID's, a copy of its payload.
func replayOf(hdr *segment.Header, rec *segment.Record) *dlqdump.Replay {
	h := dlqdump.Headers(rec.Headers.Map())
	if h == nil {
		h = dlqdump.Headers{}
	}
	delete(h, dlqdump.HeaderRecordID)
	return &dlqdump.Replay{ID: hdr.RecordID(rec), Time: time.Unix(0, rec.Time).UTC(), Payload: slices.Clone(rec.Payload), Headers: maps.Clone(h)}
}
