package console

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
)

// Per-record actions. Replay creates a restore job over the records' IDs,
// due now: a runner that serves the destination delivers them within its
// poll interval, under the segments' claims like any job, and the job's
// page follows it. Discard runs a pass of a Restorer here over the IDs
// (RunOptions.Discard): each segment holding one is claimed, the records are
// copied into a quarantine segment with who and why, and the rest of the
// segment stays ready.

// actBody is the body of POST api/replay and api/discard: records by ID,
// or a selection, or both (ANDed).
type actBody struct {
	IDs         []string `json:"ids"`
	Select      string   `json:"select"`
	Destination string   `json:"destination"` // replay
	Reason      string   `json:"reason"`
}

// maxActIDs bounds the IDs of one action (a selection takes more).
const maxActIDs = 1000

// selection returns what the body selects, and the scope to log.
func (b *actBody) selection() (*selection.Selection, string, error) {
	if len(b.IDs) == 0 && strings.TrimSpace(b.Select) == "" {
		return nil, "", fmt.Errorf("%w: give ids or a selection", dlqdump.ErrConfig)
	}
	if len(b.IDs) > maxActIDs {
		return nil, "", fmt.Errorf("%w: %d ids, at most %d (select them instead)", dlqdump.ErrConfig, len(b.IDs), maxActIDs)
	}
	ids := make([]segment.RecordID, len(b.IDs))
	for i, s := range b.IDs {
		id, err := dlqdump.ParseRecordID(s)
		if err != nil {
			return nil, "", fmt.Errorf("%w: id %q: %v", dlqdump.ErrConfig, s, err)
		}
		ids[i] = id
	}
	sel, err := selection.Parse(b.Select, nil)
	if err != nil {
		return nil, "", err
	}
	sel = selection.And(selection.IDs(ids...), sel)
	scope := "select " + sel.String()
	if len(b.IDs) > 0 && strings.TrimSpace(b.Select) == "" {
		scope = "records " + strings.Join(b.IDs, ", ")
	}
	return sel, scope, nil
}

// handleReplay creates a job that replays the records now.
func (h *Handler) handleReplay(w http.ResponseWriter, r *http.Request) {
	if h.jobs == nil {
		writeError(w, http.StatusNotFound, "this store keeps no restore jobs, which replay the records")
		return
	}
	var b actBody
	if err := decodeBody(r, &b); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	sel, scope, err := b.selection()
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	var rnd [3]byte
	_, _ = rand.Read(rnd[:])
	spec := jobs.Spec{ID: "replay-" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(rnd[:]), Select: sel.String(), Destination: b.Destination}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	j, err := h.jobs.Create(ctx, spec)
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	dest := b.Destination
	if dest == "" {
		dest = "the default destination"
	}
	h.record(r, change{action: changelog.ActionReplay, scope: scope, reason: b.Reason,
		result: "job " + j.ID + " created: it delivers to " + dest + " as soon as a runner serving it takes it"})
	writeJSON(w, http.StatusCreated, jobJSON{Job: j})
}

// refusing is the destination of the console's discard passes, which
// deliver nothing.
type refusing struct{}

func (refusing) Enqueue(any) error { return errors.New("the console's discard delivers nothing") }

// handleDiscard sets the records aside into the quarantine with who and
// why.
func (h *Handler) handleDiscard(w http.ResponseWriter, r *http.Request) {
	var b actBody
	if err := decodeBody(r, &b); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if strings.TrimSpace(b.Reason) == "" {
		writeError(w, http.StatusBadRequest, "a reason is required: it is kept with each record discarded")
		return
	}
	sel, scope, err := b.selection()
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	p := principalOf(r)
	cfg := &dlqdump.Config{Reader: h.rd, Decoder: decoder.Fallthrough{}, Queue: refusing{}, Owner: h.owner, Lease: 30 * time.Second, Logger: h.log,
		VersionCompatible: func(_, _ dlqdump.Version) bool { return true }}
	if k, ok := h.o.Keys.(interface{ Identities() []envelope.Identity }); ok {
		cfg.Encryption = &dlqdump.Encryption{Identities: k.Identities()}
	}
	rs, err := dlqdump.NewRestorer(cfg)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Minute)
	defer cancel()
	why := "by " + p.Name + ": " + b.Reason
	rep, err := rs.Run(ctx, dlqdump.RunOptions{Select: sel, Discard: why})
	out := struct {
		Discarded uint64 `json:"discarded"`
		Reason    string `json:"reason"`
		Error     string `json:"error,omitempty"`
	}{Discarded: rep.Quarantined, Reason: "discarded: " + why}
	if err != nil {
		out.Error = err.Error()
	}
	if rep.Quarantined > 0 {
		if lerr := h.record(r, change{action: changelog.ActionDiscard, scope: scope, reason: b.Reason,
			result: fmt.Sprintf("discarded %d record(s) into the quarantine", rep.Quarantined), err: err}); lerr != nil && out.Error == "" {
			out.Error = "discarded, but not written to the change log: " + lerr.Error()
		}
	}
	switch {
	case err != nil:
		writeJSON(w, statusOf(err), out)
	case rep.Quarantined == 0:
		out.Error = "no ready record is selected: nothing was discarded"
		writeJSON(w, http.StatusNotFound, out)
	default:
		writeJSON(w, http.StatusOK, out)
	}
}
