package console

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/jobs"
)

// A job's page: its record (spec, due, created, started, finished, runner,
// passes, last error), what it delivered over time, the runners, and the
// change log's entries about it.

// jobHistory keeps, for each job, its counts each time the console read a
// new one (a job's record holds its counts now, not their history): up to
// histPoints, halved (every other point dropped) when full, so a long job
// keeps its whole span at a coarser grain. It is as old as this console.
type jobHistory struct {
	mu sync.Mutex
	m  map[string][]histPoint
}

// histPoint is a job's counts when its runner wrote them.
type histPoint struct {
	T           string `json:"t"`
	Delivered   uint64 `json:"delivered"`
	Quarantined uint64 `json:"quarantined"`
	at          time.Time
}

const histPoints = 240

func newJobHistory() *jobHistory { return &jobHistory{m: map[string][]histPoint{}} }

// observe notes a job's counts, when they are new.
func (jh *jobHistory) observe(j *jobs.Job) {
	at := j.Progressed
	if at.IsZero() {
		at = j.Finished
	}
	if at.IsZero() {
		return
	}
	jh.mu.Lock()
	defer jh.mu.Unlock()
	ps := jh.m[j.ID]
	if n := len(ps); n > 0 {
		if !at.After(ps[n-1].at) {
			return // seen
		}
		same := func(p histPoint) bool { return p.Delivered == j.Delivered && p.Quarantined == j.Quarantined }
		if n > 1 && same(ps[n-1]) && same(ps[n-2]) {
			ps[n-1].at, ps[n-1].T = at, inspect.JSONTime(at) // no change since: the flat line goes on
			return
		}
	}
	ps = append(ps, histPoint{T: inspect.JSONTime(at), Delivered: j.Delivered, Quarantined: j.Quarantined, at: at})
	if len(ps) > histPoints {
		half := ps[:0]
		for i := range ps {
			if i%2 == 0 || i == len(ps)-1 {
				half = append(half, ps[i])
			}
		}
		ps = half
	}
	jh.m[j.ID] = ps
}

// get returns a job's points, oldest first.
func (jh *jobHistory) get(id string) []histPoint {
	jh.mu.Lock()
	defer jh.mu.Unlock()
	return slices.Clone(jh.m[id])
}

// forget drops the jobs not in ids.
func (jh *jobHistory) forget(ids map[string]bool) {
	jh.mu.Lock()
	defer jh.mu.Unlock()
	for id := range jh.m {
		if !ids[id] {
			delete(jh.m, id)
		}
	}
}

// jobLogScan bounds the change log entries a job's page reads for those
// about it.
const jobLogScan = 2000

// handleJob serves a job's page.
func (h *Handler) handleJob(w http.ResponseWriter, r *http.Request) {
	if h.jobs == nil {
		writeError(w, http.StatusNotFound, "this store keeps no restore jobs")
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	j, err := h.jobs.Get(ctx, id)
	if err != nil {
		writeError(w, statusOf(err), "%v", err)
		return
	}
	now := time.Now()
	out := struct {
		Job     jobJSON        `json:"job"`
		History []histPoint    `json:"history"`
		Runners []runnerJSON   `json:"runners"`
		Log     []logEntryJSON `json:"log"`
		Error   string         `json:"error,omitempty"`
	}{Log: []logEntryJSON{}}
	var runners []jobs.RunnerInfo
	runners, out.Runners = h.runners(ctx)
	out.Job = h.jobOf(&j, runners, now)
	out.History = h.jobHist.get(j.ID)
	if out.History == nil {
		out.History = []histPoint{}
	}
	if h.changes != nil {
		f := changelog.Filter{Text: "job " + j.ID}
		read := 0
		for e, err := range h.changes.Newest(ctx) {
			if err != nil {
				out.Error = "change log: " + err.Error()
				break
			}
			if read++; read > jobLogScan || len(out.Log) == 50 {
				break
			}
			if f.Match(&e) {
				out.Log = append(out.Log, logEntryJSON{Entry: e, Time: inspect.JSONTime(e.Time)})
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
