package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// jobJSON is a job on the page: its record, with its measured rate, an
// estimate of when it ends, and why it waits.
type jobJSON struct {
	jobs.Job
	Rate    float64 `json:"rate,omitempty"`  // records per second lately
	ETA     string  `json:"eta,omitempty"`   // when it should end
	ETAS    float64 `json:"eta_s,omitempty"` // seconds from now
	Waiting string  `json:"waiting,omitempty"`
	// Due is when a runner takes the job next (Job.Due), while it has
	// not ended: a job scheduled later waits until then.
	Due string `json:"due,omitempty"`
}

// jobRates measures how fast running jobs deliver from successive reads of
// their records: a job records its counts at least twice a second with the
// time it did (Job.Progressed, by its runner's clock), so the rate is the
// counts' change over the runner's own times, over a window of up to
// rateWindow.
// The times the console read them would not do: a read just before a
// block's write and one just after it see a block more than the time
// between them delivered (a job at 200/s showed 238/s).
type jobRates struct {
	mu   sync.Mutex
	seen map[string][]rateSample // oldest first
}

type rateSample struct {
	at        time.Time // when the runner wrote the counts
	read      time.Time // when they were read here
	runner    string
	delivered uint64
}

// rateWindow is how far back a job's rate looks.
const rateWindow = 20 * time.Second

func newJobRates() *jobRates { return &jobRates{seen: map[string][]rateSample{}} }

// observe notes a job's progress and returns its rate over the window: 0
// until its runner's writes span a second, and once it wrote nothing for
// the window (stalled, or between the passes of a window).
func (jr *jobRates) observe(j *jobs.Job, now time.Time) float64 {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	if j.State != jobs.Running || j.Progressed.IsZero() {
		delete(jr.seen, j.ID)
		return 0
	}
	n := j.Delivered + j.Quarantined
	ss := jr.seen[j.ID]
	if len(ss) > 0 {
		last := ss[len(ss)-1]
		if j.Runner != last.runner || n < last.delivered || j.Progressed.Before(last.at) {
			ss = nil // another runner or another pass: another clock
		}
	}
	if len(ss) == 0 || j.Progressed.After(ss[len(ss)-1].at) {
		ss = append(ss, rateSample{at: j.Progressed, read: now, runner: j.Runner, delivered: n})
	}
	last := ss[len(ss)-1]
	for len(ss) > 2 && last.at.Sub(ss[1].at) >= rateWindow || len(ss) > 64 {
		ss = ss[1:]
	}
	jr.seen[j.ID] = ss
	first := ss[0]
	if now.Sub(last.read) > rateWindow {
		return 0
	}
	if dt := last.at.Sub(first.at); dt >= time.Second {
		return float64(last.delivered-first.delivered) / dt.Seconds()
	}
	return 0
}

// forget drops the jobs not in ids.
func (jr *jobRates) forget(ids map[string]bool) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	for id := range jr.seen {
		if !ids[id] {
			delete(jr.seen, id)
		}
	}
}

type runnerJSON struct {
	Owner        string   `json:"owner"`
	Destinations []string `json:"destinations"`
	Seen         string   `json:"seen"`
	Live         bool     `json:"live"`
}

// runners returns the runners heard from, as read and as the page shows
// them.
func (h *Handler) runners(ctx context.Context) ([]jobs.RunnerInfo, []runnerJSON) {
	var runners []jobs.RunnerInfo
	out := []runnerJSON{}
	for ri, err := range h.jobs.Runners(ctx) {
		if err != nil {
			continue
		}
		runners = append(runners, ri)
		out = append(out, runnerJSON{Owner: ri.Owner, Destinations: ri.Destinations, Seen: inspect.JSONTime(ri.Seen),
			Live: time.Since(ri.Seen) <= 3*max(ri.Every, time.Second)})
	}
	return runners, out
}

// handleJobs lists the jobs, newest first, and the runners heard from.
func (h *Handler) handleJobs(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Jobs    []jobJSON    `json:"jobs"`
		Runners []runnerJSON `json:"runners"`
		Error   string       `json:"error,omitempty"`
	}{Jobs: []jobJSON{}, Runners: []runnerJSON{}}
	if h.jobs == nil {
		out.Error = "this store keeps no restore jobs"
		writeJSON(w, http.StatusOK, out)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	now := time.Now()
	runners, rj := h.runners(ctx)
	out.Runners = rj
	ids := map[string]bool{}
	for j, err := range h.jobs.List(ctx) {
		if err != nil {
			if j.ID == "" {
				out.Error = err.Error()
				break
			}
			out.Jobs = append(out.Jobs, jobJSON{Job: j, Waiting: "its record cannot be read: " + err.Error()})
			continue
		}
		ids[j.ID] = true
		jj := h.jobOf(&j, runners, now)
		out.Jobs = append(out.Jobs, jj)
	}
	h.rates.forget(ids)
	h.jobHist.forget(ids)
	slices.SortStableFunc(out.Jobs, func(a, b jobJSON) int { return b.Created.Compare(a.Created) })
	writeJSON(w, http.StatusOK, out)
}

// jobOf returns a job as the page shows it: with its rate (measured over
// successive reads, else as its runner measured it), when it should end,
// and why it waits. It notes its counts for its page's history.
func (h *Handler) jobOf(j *jobs.Job, runners []jobs.RunnerInfo, now time.Time) jobJSON {
	h.jobHist.observe(j)
	jj := jobJSON{Job: *j, Rate: h.rates.observe(j, now)}
	if jj.Rate == 0 && j.State == jobs.Running {
		jj.Rate = j.Velocity // as its runner measured it, until reads here span a second
	}
	if j.State == jobs.Running && j.Left > 0 {
		rate := jj.Rate
		if rate <= 0 {
			rate = j.Spec.Rate
		}
		if rate > 0 {
			eta := time.Duration(float64(j.Left) / rate * float64(time.Second))
			jj.ETA, jj.ETAS = inspect.JSONTime(now.Add(eta)), eta.Seconds()
		}
	}
	jj.Waiting = inspect.JobWaitingAmong(j, runners)
	if !j.State.Final() {
		jj.Due = inspect.JSONTime(j.Due())
	}
	return jj
}

// createJob is the body of POST api/jobs: a restore job over a selection.
type createJob struct {
	ID     string            `json:"id"`
	At     time.Time         `json:"at"`
	Rate   float64           `json:"rate"`
	Area   string            `json:"area"`
	Since  time.Time         `json:"since"`
	Until  time.Time         `json:"until"`
	Where  map[string]string `json:"where"`
	Select string            `json:"select"` // an expression (docs/SELECT.md)
	JQ     string            `json:"jq"`     // a jq program (package transform)
	// JQKeepLayout keeps each payload's layout where the program changes
	// fields that are there (jobs.Spec.JQKeepLayout).
	JQKeepLayout bool     `json:"jq_keep_layout"`
	Segments     []string `json:"segments"`
	Limit        uint64   `json:"limit"`
	Destination  string   `json:"destination"`
	Reason       string   `json:"reason"` // for the change log
}

func (h *Handler) handleCreateJob(w http.ResponseWriter, r *http.Request) {
	if h.jobs == nil {
		writeError(w, http.StatusNotFound, "this store keeps no restore jobs")
		return
	}
	var c createJob
	if err := decodeBody(r, &c); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	spec := jobs.Spec{ID: c.ID, At: c.At, Rate: c.Rate, Area: c.Area, Since: c.Since, Until: c.Until, Where: c.Where, Select: c.Select, JQ: c.JQ, JQKeepLayout: c.JQKeepLayout,
		Segments: c.Segments, Limit: c.Limit, Destination: c.Destination}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	j, err := h.jobs.Create(ctx, spec)
	if err != nil {
		h.log.Warn("console: creating a job failed", slog.String("who", principalOf(r).Name), slog.String("spec", spec.Describe()), slog.Any("error", err))
		writeError(w, statusOf(err), "%v", err)
		return
	}
	h.record(r, change{action: changelog.ActionJobCreate, scope: "job " + j.ID, reason: c.Reason,
		result: j.Spec.Describe() + ", due " + j.At.UTC().Format(time.RFC3339)})
	writeJSON(w, http.StatusCreated, jobJSON{Job: j})
}

func (h *Handler) handleControlJob(w http.ResponseWriter, r *http.Request) {
	if h.jobs == nil {
		writeError(w, http.StatusNotFound, "this store keeps no restore jobs")
		return
	}
	id, verb := r.PathValue("id"), r.PathValue("verb")
	ctl := map[string]func(context.Context, string) (jobs.Job, error){"pause": h.jobs.Pause, "resume": h.jobs.Resume, "cancel": h.jobs.Cancel}[verb]
	if ctl == nil {
		writeError(w, http.StatusNotFound, "no such action %q: want pause, resume or cancel", verb)
		return
	}
	var b struct {
		Reason string `json:"reason"`
	}
	if err := decodeBody(r, &b); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	action := "job." + verb
	if before, err := h.jobs.Get(ctx, id); err == nil && verb == "resume" && before.State == jobs.Failed {
		action = changelog.ActionJobRetry
	}
	j, err := ctl(ctx, id)
	if err != nil {
		h.log.Warn("console: "+action+" failed", slog.String("who", principalOf(r).Name), slog.String("job", id), slog.Any("error", err))
		writeError(w, statusOf(err), "%v", err)
		return
	}
	result := string(j.State)
	if j.Request != "" {
		result += ", " + j.Request + " requested"
	}
	h.record(r, change{action: action, scope: "job " + id, reason: b.Reason, result: result})
	writeJSON(w, http.StatusOK, jobJSON{Job: j})
}

// releaseBody is the body of POST api/release: the quarantined segments to
// release, or all of them.
type releaseBody struct {
	Segments []string `json:"segments"`
	All      bool     `json:"all"`
	Reason   string   `json:"reason"` // for the change log
}

func (h *Handler) handleRelease(w http.ResponseWriter, r *http.Request) {
	var b releaseBody
	if err := decodeBody(r, &b); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if b.All == (len(b.Segments) > 0) {
		writeError(w, http.StatusBadRequest, "give segments or all, not both")
		return
	}
	if p := principalOf(r); b.All && p.Role < RoleAdmin {
		writeError(w, http.StatusForbidden, "%s is a %s here; releasing the whole quarantine needs the admin role (release named segments instead)", p.Name, p.Role)
		return
	}
	for _, n := range b.Segments {
		if err := checkName(n); err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Minute)
	defer cancel()
	names := b.Segments
	if b.All {
		for si, err := range h.list(ctx, sink.AreaQuarantine) {
			if err != nil {
				writeError(w, statusOf(err), "list the quarantine: %v", err)
				return
			}
			names = append(names, si.Name)
		}
	}
	out := struct {
		Released []string `json:"released"`
		Failed   []string `json:"failed,omitempty"`
	}{Released: []string{}}
	var errs []error
	for _, name := range names {
		err := inspect.Release(ctx, h.rd, name, func(a sink.Area, n string) string { return a.String() + "/" + n })
		if err != nil {
			errs = append(errs, err)
			out.Failed = append(out.Failed, err.Error())
			continue
		}
		out.Released = append(out.Released, name)
	}
	scope := "quarantined segments " + strings.Join(names, ", ")
	if b.All {
		scope = "every quarantined segment (" + strconv.Itoa(len(names)) + ")"
	} else if len(names) > 5 {
		scope = fmt.Sprintf("quarantined segments %s, …, %s (%d)", strings.Join(names[:3], ", "), names[len(names)-1], len(names))
	}
	if len(out.Released) > 0 { // a refused release changed nothing
		h.record(r, change{action: changelog.ActionRelease, scope: scope, reason: b.Reason,
			result: fmt.Sprintf("released %d of %d", len(out.Released), len(names)), err: errors.Join(errs...)})
	} else if len(errs) > 0 {
		h.log.Warn("console: release failed", slog.String("who", principalOf(r).Name), slog.Any("segments", names), slog.Any("error", errors.Join(errs...)))
	} else {
		h.log.Info("console: release: released 0 of 0 (nothing to release; not a change)", slog.String("who", principalOf(r).Name))
	}
	code := http.StatusOK
	if len(out.Failed) > 0 {
		code = http.StatusConflict
	}
	writeJSON(w, code, out)
}
