package jobs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
	"github.com/dlqdump/dlqdump/transform"
)

// State is where a job is in its life.
type State string

// States. A job is created pending; a runner takes it when it is due and
// runs it (running); it ends completed (every record it selects handled),
// failed (its passes failed without progress for Spec.FailAfter, or its
// record cannot be read) or cancelled. A pending or running job can be
// paused, and a paused or failed one resumed (pending again).
const (
	Pending   State = "pending"
	Running   State = "running"
	Paused    State = "paused"
	Completed State = "completed"
	Failed    State = "failed"
	Cancelled State = "cancelled"
)

// States lists every state, in the order of a job's life.
var States = []State{Pending, Running, Paused, Completed, Failed, Cancelled}

// Final reports whether a job in state s has ended for good.
func (s State) Final() bool { return s == Completed || s == Failed || s == Cancelled }

// ParseState returns the state named s.
func ParseState(s string) (State, error) {
	if slices.Contains(States, State(s)) {
		return State(s), nil
	}
	return "", fmt.Errorf("%w: unknown job state %q (want pending, running, paused, completed, failed or cancelled)", dlqdump.ErrConfig, s)
}

// Spec is what a job restores, where, how fast and when. Its fields mirror
// dlqdump.RunOptions, whose pass runs it.
type Spec struct {
	// ID names the job: 1 to 64 letters, digits, '_' and '-'. Creating a
	// job with an ID that exists, with the same Spec, is no error (a retry
	// after a lost answer creates no second job). Default: a random ID.
	ID string `json:"-"`
	// At is when the job is due, to the second (UTC; a time between two
	// seconds is rounded up to the next): it never starts before. A job
	// due in the past starts at once and says how late.
	// Default (zero): when it is created; a Create retried later with a
	// zero At is the same job.
	At time.Time `json:"at,omitzero"`
	// Windows restrict when the job runs: daily windows "HH:MM-HH:MM"
	// (or HH:MM:SS), in TimeZone; the job starts at At or the next
	// opening after it, stops when its window closes, and goes on at the
	// next opening. Default: any time.
	Windows []string `json:"windows,omitempty"`
	// TimeZone is the IANA name of the Windows' time zone. Default UTC.
	TimeZone string `json:"tz,omitempty"`
	// Since and Until select the records that entered the dump in
	// [Since, Until); zero is unbounded.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// Where selects the records having all these header values.
	Where map[string]string `json:"where,omitempty"`
	// Select selects the records this expression selects (package
	// selection, docs/SELECT.md: headers, payload text, JSON values,
	// record IDs, times, segments), on top of Since, Until and Where: a
	// record must pass them all. Create refuses one that does not parse,
	// with the error naming the part, and keeps it as selection.String
	// prints it, its relative times (now-2h) made absolute then. Default
	// "": every record.
	Select string `json:"select,omitempty"`
	// JQ changes every record on its way to the destination: a jq
	// program (package transform: it sees {"id", "time", "headers",
	// "payload"} and returns it changed). A record it fails on is
	// quarantined with the error; the stored record never changes. Create
	// refuses one that does not compile, with the error naming the
	// column, and the job keeps it as given. Default "": records are
	// delivered as stored.
	JQ string `json:"jq,omitempty"`
	// JQKeepLayout runs JQ with transform.Options.KeepLayout: the payloads
	// the fast path changes keep their stored bytes but for what the
	// program changes (the same JSON value as gojq's, not gojq's bytes:
	// keys sorted, compact), which costs a fraction of writing gojq's
	// bytes. Create refuses it without a JQ. Default false: every payload
	// is written as gojq writes it.
	JQKeepLayout bool `json:"jq_keep_layout,omitempty"`
	// Segments restricts the job to these segments. Default: all.
	Segments []string `json:"segments,omitempty"`
	// Limit ends the job once this many records were delivered or
	// quarantined. Default 0: no limit.
	Limit uint64 `json:"limit,omitempty"`
	// Rate paces the job to this many items per second, on top of the
	// Restorer's own RateLimit (like SQS redrive's velocity). A paced job
	// with a selection over the ready area (not over named Segments)
	// carves (dlqdump.RunOptions.Carve): it copies the records it selects
	// out of each segment it shares into a side segment of their own and
	// lets the segment go, so that other jobs deliver from it meanwhile;
	// that costs a copy of those records. Default 0: the Restorer's pace.
	Rate float64 `json:"rate,omitempty"`
	// Destination names where the job delivers: "" is the runner's
	// Restorer's Queue, another name one of its Config.Destinations. A
	// runner takes only the jobs whose destination it serves.
	Destination string `json:"dest,omitempty"`
	// Area is "ready" (default) or "quarantine": a quarantine job
	// releases the quarantined segments it selects (Segments, or all) and
	// restores them.
	Area string `json:"area,omitempty"`
	// FailAfter is how long the job's passes may fail (the destination
	// down, the store unreachable) without delivering anything before the
	// job fails: it is tried again meanwhile, after a back-off that grows
	// from the runner's RetryBase to 5 minutes. A failed job can be
	// resumed. Default DefaultFailAfter, an hour: long enough for a
	// destination's deploy or a night's outage.
	FailAfter time.Duration `json:"fail_after,omitempty"`
	// MaxAttempts, when positive, also fails the job once this many passes
	// in a row failed without progress, whatever FailAfter says. Default 0:
	// no such bound.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// DefaultFailAfter is the default of Spec.FailAfter.
const DefaultFailAfter = time.Hour

// Job is a job as its record holds it: its Spec, state and progress.
type Job struct {
	ID    string `json:"id"`
	State State  `json:"state"`
	// At is when the job was due: Spec.At (its creation by default), or
	// the first opening of its Windows after it. It does not move.
	At time.Time `json:"at"`
	// Next, when set, is when a runner takes the job next, if not At: a
	// failed pass tried again, its window's next opening, a resume, a
	// hand-over by a runner that stopped. Due returns the one that holds.
	Next     time.Time `json:"next,omitzero"`
	Created  time.Time `json:"created"`
	Started  time.Time `json:"started,omitzero"`
	Finished time.Time `json:"finished,omitzero"`
	// LateMS is how late the job started, in milliseconds after it was
	// due (its first start).
	LateMS int64 `json:"late_ms,omitempty"`
	// Delivered, Quarantined and Skipped count the records the job
	// delivered, set aside for quarantine, and left (not selected) so
	// far; Left estimates those still to handle, from a dry run when a
	// job over the whole store first starts (0 for a job over named
	// segments).
	Delivered   uint64 `json:"delivered"`
	Quarantined uint64 `json:"quarantined"`
	Skipped     uint64 `json:"skipped,omitempty"`
	Left        uint64 `json:"left,omitempty"`
	// Progressed is when the runner last wrote the counts (at least
	// every RunnerOptions.ProgressInterval while the job runs), by its
	// clock: what a reader measures the job's rate over. A pass starts it
	// afresh: zero until it writes counts.
	Progressed time.Time `json:"progressed,omitzero"`
	// Velocity is the records per second the job delivered or set aside
	// lately (over up to 10 s), as its runner measured them; 0 when it
	// does not run.
	Velocity float64 `json:"velocity,omitempty"`
	// Attempts counts the passes that ran it (a start, a takeover, a
	// resume, a window's opening, a retry); Failures those that failed
	// in a row since the last that made progress, the first of them at
	// FailingSince (Spec.FailAfter bounds how long ago); Error is the
	// last failure's error (at most 1 KiB of it).
	Attempts     int       `json:"attempts,omitempty"`
	Failures     int       `json:"failures,omitempty"`
	FailingSince time.Time `json:"failing_since,omitzero"`
	Error        string    `json:"error,omitempty"`
	// Runner is the owner label of the runner holding it, or that last
	// held it.
	Runner string `json:"runner,omitempty"`
	// Request is a pause or cancel asked of the runner holding the job,
	// which it acts on at the next record (within a ProgressInterval of
	// the request), or that waits for a runner to take the job. A job
	// that ended holds none.
	Request string `json:"request,omitempty"`
	// Refused says which request came too late to be acted on, and why:
	// "cancel: the job had completed".
	Refused string `json:"refused,omitempty"`
	// Releasing names the quarantined segments a job over the quarantine
	// released into the ready area and has not finished: a runner that
	// takes the job over restores them first.
	Releasing []string `json:"releasing,omitempty"`
	Spec      Spec     `json:"spec"`
}

// Due returns when a runner takes the job next: Next, or At.
func (j *Job) Due() time.Time {
	if !j.Next.IsZero() {
		return j.Next
	}
	return j.At
}

// Late returns how late the job started.
func (j *Job) Late() time.Duration { return time.Duration(j.LateMS) * time.Millisecond }

// begin makes a pending or running job running by owner, now, and reports
// whether it was running (its runner stopped: taken over).
func (j *Job) begin(owner string, now time.Time) (taken bool) {
	taken = j.State == Running
	if j.Started.IsZero() {
		j.Started = now
		j.LateMS = now.Sub(j.At).Milliseconds()
	}
	j.State, j.Runner, j.Error = Running, owner, ""
	// This pass has written no counts yet: the last pass's time would
	// have a reader measure its first blocks over the time between.
	j.Progressed = time.Time{}
	j.Attempts++
	return taken
}

// Requests of Job.Request.
const (
	requestPause  = "pause"
	requestCancel = "cancel"
)

// validate checks a spec and fills in its defaults; the error names the
// field.
func (s *Spec) validate(now time.Time) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: job %s: %s", dlqdump.ErrConfig, field, fmt.Sprintf(format, args...))
	}
	if s.ID == "" {
		s.ID = newID()
	}
	if err := checkID(s.ID); err != nil {
		return err
	}
	switch {
	case s.Rate < 0:
		return bad("Rate", "%v items/s is negative", s.Rate)
	case s.MaxAttempts < 0:
		return bad("MaxAttempts", "%d is negative", s.MaxAttempts)
	case s.FailAfter < 0:
		return bad("FailAfter", "%s is negative", s.FailAfter)
	case !s.Since.IsZero() && !s.Until.IsZero() && !s.Until.After(s.Since):
		return bad("Until", "%s is not after Since %s", s.Until.Format(time.RFC3339), s.Since.Format(time.RFC3339))
	case s.Area != "" && s.Area != "ready" && s.Area != "quarantine":
		return bad("Area", "%q: want ready or quarantine", s.Area)
	case s.Destination != "" && (len(s.Destination) > 64 || sink.CheckKey(s.Destination) != nil):
		return bad("Destination", "%q: want 1 to 64 letters, digits, '.', '_' or '-'", s.Destination)
	}
	if s.FailAfter == 0 {
		s.FailAfter = DefaultFailAfter
	}
	if !s.At.IsZero() {
		s.At = ceilSecond(s.At.UTC())
	}
	if s.Since.IsZero() != true {
		s.Since = s.Since.UTC()
	}
	if !s.Until.IsZero() {
		s.Until = s.Until.UTC()
	}
	for k := range s.Where {
		if k == "" {
			return bad("Where", "an empty header name")
		}
	}
	if s.Select != "" {
		sel, err := selection.Parse(s.Select, &selection.Options{Now: now})
		if err != nil {
			return fmt.Errorf("%w: job Select: %w", dlqdump.ErrConfig, err)
		}
		s.Select = sel.String()
	}
	if s.JQ != "" {
		if _, err := transform.CompileJQ(s.JQ, nil); err != nil {
			return fmt.Errorf("%w: job JQ: %w", dlqdump.ErrConfig, err)
		}
	} else if s.JQKeepLayout {
		return bad("JQKeepLayout", "is set without a JQ program to run")
	}
	for _, n := range s.Segments {
		if n == "" || strings.ContainsAny(n, `/\`) {
			return bad("Segments", "%q is not a segment name", n)
		}
	}
	if _, err := s.windows(); err != nil {
		return err
	}
	return nil
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); !s.Equal(t) {
		return s.Add(time.Second)
	}
	return t
}

// windows returns the spec's daily windows.
func (s *Spec) windows() ([]dlqdump.Window, error) {
	loc := time.UTC
	if s.TimeZone != "" {
		l, err := time.LoadLocation(s.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("%w: job TimeZone: %q: %v", dlqdump.ErrConfig, s.TimeZone, err)
		}
		loc = l
	}
	var out []dlqdump.Window
	for _, w := range s.Windows {
		start, end, ok := strings.Cut(w, "-")
		if !ok {
			return nil, fmt.Errorf("%w: job Windows: %q: want HH:MM-HH:MM", dlqdump.ErrConfig, w)
		}
		dw, err := dlqdump.DailyWindow(start, end, loc)
		if err != nil {
			return nil, fmt.Errorf("%w: job Windows: %q: %v", dlqdump.ErrConfig, w, errors.Unwrap(err))
		}
		out = append(out, dw)
	}
	return out, nil
}

// due returns when a job of this spec is next due at or after t: t, or the
// next opening of its windows.
func (s *Spec) due(t time.Time) time.Time {
	ws, err := s.windows()
	if err != nil || len(ws) == 0 {
		return t
	}
	open, _ := dlqdump.NextWindow(ws, t)
	return open.UTC()
}

// equal reports whether two specs ask for the same job.
func (s *Spec) equal(o *Spec) bool {
	return s.ID == o.ID && s.At.Equal(o.At) && slices.Equal(s.Windows, o.Windows) && s.TimeZone == o.TimeZone &&
		s.Since.Equal(o.Since) && s.Until.Equal(o.Until) && maps.Equal(s.Where, o.Where) && s.Select == o.Select && s.JQ == o.JQ && s.JQKeepLayout == o.JQKeepLayout &&
		slices.Equal(s.Segments, o.Segments) && s.Limit == o.Limit && s.Rate == o.Rate &&
		s.Destination == o.Destination && s.Area == o.Area && s.MaxAttempts == o.MaxAttempts && s.FailAfter == o.FailAfter
}

// runOptions returns the selection of a pass running the job; a Select
// that does not parse (Create checked it: a record changed since) is an
// error.
func (s *Spec) runOptions() (dlqdump.RunOptions, error) {
	o := dlqdump.RunOptions{Since: s.Since, Until: s.Until, Where: dlqdump.Headers(s.Where), Segments: s.Segments,
		Rate: s.Rate, Destination: s.Destination}
	if s.Area == "quarantine" {
		o.Area = dlqdump.AreaQuarantine
	}
	if s.Select != "" {
		sel, err := selection.Parse(s.Select, nil)
		if err != nil {
			return o, fmt.Errorf("%w: job Select: %w", dlqdump.ErrConfig, err)
		}
		o.Select = sel
	}
	if s.JQ != "" {
		jq, err := transform.CompileJQ(s.JQ, &transform.Options{KeepLayout: s.JQKeepLayout})
		if err != nil {
			return o, fmt.Errorf("%w: job JQ: %w", dlqdump.ErrConfig, err)
		}
		jq.Apply(&o)
	}
	return o, nil
}

// checkID returns an error naming the ID unless it is a job ID.
func checkID(id string) error {
	if len(id) > 64 || sink.CheckKey(id) != nil || strings.Contains(id, ".") {
		return fmt.Errorf("%w: job ID %q: want 1 to 64 letters, digits, '_' or '-'", dlqdump.ErrConfig, id)
	}
	return nil
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "job-" + hex.EncodeToString(b[:])
}
