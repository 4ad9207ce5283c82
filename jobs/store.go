package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/sink"
)

// The jobs of a store are records of its tables (sink.Tables), beside its
// segments, changed only by compare-and-swap. Table "jobs" holds
//
//	j-ID     the job: a claim record (package claims) whose progress is
//	         the Job
//
// table "jobsrunners" the runners' heartbeats,
//
//	r-OWNER  what the runner serves, and when it last said so
//
// and the due markers, d-20261127T030000.000Z-ID (the job is due then),
// are in two tables of their own: "jobsdue" for the jobs due within the
// horizon (an hour) of when the marker was written, "jobslater" for the
// others. Markers sort by time: a runner lists "jobsdue" from the first on
// and stops at the first one due later, and every tenth of the horizon
// moves the markers of "jobslater" that come within it into "jobsdue".
// So a poll costs what is due soon, not what is pending: a hundred
// thousand jobs due tomorrow are read every few minutes, not every second
// (on S3 a poll is one listing request either way; on a directory a
// listing reads the whole directory). A pending job has a marker; a job
// that ends, or is paused, loses it.

// maxSpec bounds a job's spec, encoded, so that its record, progress and
// error included, stays well within sink.MaxRecordSize.
const maxSpec = 16 << 10

// Table is the name of the table of jobs.
const Table = "jobs"

// The tables of the due markers and of the heartbeats.
const (
	dueTable     = "jobsdue"
	laterTable   = "jobslater"
	runnersTable = "jobsrunners"
)

// horizon splits the markers between dueTable and laterTable; the runners
// move them every horizon/promoteEvery.
const (
	horizon      = time.Hour
	promoteEvery = 10
)

const (
	dueKind    = "d-"
	jobKind    = "j-"
	runnerKind = "r-"
	dueLayout  = "20060102T150405.000Z"
)

func jobKey(id string) string { return jobKind + id }

func dueKey(at time.Time, id string) string {
	return dueKind + dueTime(at).Format(dueLayout) + "-" + id
}

// dueTime is a due time as a marker holds it: to the millisecond, UTC.
func dueTime(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// parseDueKey returns the time and job of a due marker's key.
func parseDueKey(key string) (at time.Time, id string, ok bool) {
	rest, ok := strings.CutPrefix(key, dueKind)
	if !ok || len(rest) < len(dueLayout)+2 || rest[len(dueLayout)] != '-' {
		return time.Time{}, "", false
	}
	at, err := time.Parse(dueLayout, rest[:len(dueLayout)])
	if err != nil {
		return time.Time{}, "", false
	}
	return at, rest[len(dueLayout)+1:], true
}

// Errors of the jobs API.
var (
	// ErrNotFound means no job has that ID (it wraps dlqdump.ErrNotFound).
	ErrNotFound = fmt.Errorf("%w: no such job", dlqdump.ErrNotFound)
	// ErrExists means a job of that ID exists with another Spec.
	ErrExists = errors.New("dlqdump: a job of that ID exists with another spec")
	// ErrFinished means the job has ended: it cannot be paused, resumed
	// or cancelled.
	ErrFinished = errors.New("dlqdump: the job has ended")
)

// Store keeps the restore jobs of a dump: create, read and control them
// from any process. It is safe for concurrent use.
type Store struct {
	rd         sink.Reader  // the store the jobs restore
	t          sink.Records // the jobs
	due, later sink.Records // the due markers
	runners    sink.Records // the heartbeats
	now        func() time.Time
	listed     listCache // the jobs List read, when the store lists versions

	createdMu sync.Mutex
	created   chan struct{} // closed, and made anew, when Create made a job
}

// createdNow returns a channel closed when Create next makes a job through
// this Store (a runner sharing it notices the job at once).
func (s *Store) createdNow() <-chan struct{} {
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	return s.created
}

// noteCreated tells the runners sharing this Store that a job was made.
func (s *Store) noteCreated() {
	s.createdMu.Lock()
	defer s.createdMu.Unlock()
	close(s.created)
	s.created = make(chan struct{})
}

// Open returns the jobs of the store rd, which must keep tables
// (sink.Tables: fs.Reader and s3.Reader do).
func Open(rd sink.Reader) (*Store, error) {
	tb, ok := rd.(sink.Tables)
	if !ok {
		return nil, fmt.Errorf("%w: Reader: %T keeps no tables, where restore jobs live", dlqdump.ErrConfig, rd)
	}
	s := &Store{rd: rd, now: time.Now, created: make(chan struct{})}
	for _, t := range []struct {
		name string
		to   *sink.Records
	}{{Table, &s.t}, {dueTable, &s.due}, {laterTable, &s.later}, {runnersTable, &s.runners}} {
		r, err := tb.Table(t.name)
		if err != nil {
			return nil, err
		}
		*t.to = r
	}
	return s, nil
}

// entry is a job as read, with its claim record and version.
type entry struct {
	rec     claims.Record
	job     Job
	version string
}

// read returns the job of id.
func (s *Store) read(ctx context.Context, id string) (*entry, error) {
	data, version, err := s.t.ReadRecord(ctx, jobKey(id))
	if errors.Is(err, sink.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, err
	}
	e := &entry{version: version}
	if err := e.parse(data); err != nil {
		return nil, errJob(id, err)
	}
	return e, nil
}

// errJob says what is wrong with job id's record.
func errJob(id string, err error) error { return fmt.Errorf("dlqdump: job %s: %w", id, err) }

// parse decodes a job record.
func (e *entry) parse(data []byte) error {
	rec, ok := claims.Parse(data)
	if !ok {
		return errors.New("its record is damaged")
	}
	e.rec = rec
	if err := json.Unmarshal(rec.Progress, &e.job); err != nil {
		return fmt.Errorf("its record holds no job: %w", err)
	}
	e.job.Spec.ID = e.job.ID
	e.job.Request = rec.Control
	e.job.Runner = firstNonEmpty(rec.Owner, e.job.Runner)
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// write stores the job of e by compare-and-swap on e's version.
func (s *Store) write(ctx context.Context, e *entry) error {
	p, err := json.Marshal(&e.job)
	if err != nil {
		return err
	}
	e.rec.Progress = p
	e.rec.Rev++
	e.rec.Written = s.now().UTC()
	data, err := json.Marshal(&e.rec)
	if err != nil {
		return err
	}
	v, err := s.t.WriteRecord(ctx, jobKey(e.job.ID), data, e.version)
	if err != nil {
		return err
	}
	e.version = v
	return nil
}

// Create creates a job, due at spec.At (now by default), and returns it. A
// job of that ID with the same spec is returned as it is (a Create retried
// after a lost answer makes no second job), unless it has ended: then it is
// returned with an error wrapping ErrFinished that says how it ended. One
// with another spec is an error wrapping ErrExists. A spec with a bad field
// is an error wrapping dlqdump.ErrConfig that names it.
func (s *Store) Create(ctx context.Context, spec Spec) (Job, error) {
	now := s.now().UTC()
	if err := spec.validate(now); err != nil {
		return Job{}, err
	}
	at := spec.At
	if at.IsZero() {
		at = now.Truncate(time.Second)
	}
	job := Job{ID: spec.ID, State: Pending, At: spec.due(at), Created: now, Spec: spec}
	if b, err := json.Marshal(&job.Spec); err != nil || len(b) > maxSpec {
		return Job{}, fmt.Errorf("%w: job %s: its spec is %d bytes encoded, at most %d (fewer Segments or Where values)", dlqdump.ErrConfig, spec.ID, len(b), maxSpec)
	}
	// The marker first: a record without one would never be run. A
	// marker without a record (a Create that stopped here) is removed by
	// a runner once it has seen it so for a lease.
	if err := s.putMarker(ctx, job.At, job.ID); err != nil {
		return Job{}, err
	}
	e := &entry{rec: claims.Record{V: claims.Version}, job: job}
	err := s.write(ctx, e)
	if errors.Is(err, sink.ErrConflict) {
		// There already, or this very write went through unseen.
		cur, rerr := s.read(ctx, spec.ID)
		if rerr != nil {
			return Job{}, rerr
		}
		if !cur.job.Spec.equal(&spec) {
			return cur.job, fmt.Errorf("%w: %s", ErrExists, spec.ID)
		}
		if cur.job.State.Final() {
			return cur.job, ended(&cur.job)
		}
		return cur.job, s.ensureMarker(ctx, &cur.job)
	}
	if err != nil {
		return Job{}, fmt.Errorf("dlqdump: create job %s: %w", spec.ID, err)
	}
	s.noteCreated()
	// A runner may have removed the marker meanwhile, having seen no
	// record for it: put it back.
	return job, s.ensureMarker(ctx, &job)
}

// ended returns the error wrapping ErrFinished that says how job j ended.
func ended(j *Job) error {
	how := fmt.Sprintf("%d delivered, %d quarantined", j.Delivered, j.Quarantined)
	switch {
	case j.State == Failed && j.Error != "":
		how += ": " + j.Error
	case j.Refused != "":
		how += "; refused " + j.Refused
	}
	return fmt.Errorf("%w: job %s %s at %s (%s)", ErrFinished, j.ID, j.State, j.Finished.Format(time.RFC3339), how)
}

// markers returns the table a marker due at is written to now.
func (s *Store) markers(at time.Time) sink.Records {
	if at.After(s.now().Add(horizon)) {
		return s.later
	}
	return s.due
}

// putMarker writes the due marker of a job, if it is not there.
func (s *Store) putMarker(ctx context.Context, at time.Time, id string) error {
	if err := putKey(ctx, s.markers(at), dueKey(at, id)); err != nil {
		return fmt.Errorf("dlqdump: job %s: write its due marker: %w", id, err)
	}
	return nil
}

// putKey writes an empty record of key, if it is not there.
func putKey(ctx context.Context, t sink.Records, key string) error {
	_, err := t.WriteRecord(ctx, key, []byte(`{}`), "")
	if err == nil || errors.Is(err, sink.ErrConflict) {
		return nil
	}
	return err
}

// ensureMarker puts back the marker of a pending job.
func (s *Store) ensureMarker(ctx context.Context, j *Job) error {
	if j.State != Pending && j.State != Running {
		return nil
	}
	return s.putMarker(ctx, j.Due(), j.ID)
}

// dropMarker removes a due marker from "jobsdue", where the runners found
// it, if it is there. A copy left in "jobslater" (a move that stopped half
// way) comes back into "jobsdue" with the next move, and is removed then.
func (s *Store) dropMarker(ctx context.Context, at time.Time, id string) error {
	return dropKey(ctx, s.due, dueKey(at, id))
}

// dropStale removes a due marker its job's record no longer wants (ended,
// paused, or due at another time), then reads the record again and puts
// the marker back if the record now wants it. Every writer that makes a job
// due puts its marker before the record and again after it, so whichever
// of the two a removal races, the marker of a due job stays: read after the
// removal, the record is the new one, or the writer's second put comes
// after the removal.
func (s *Store) dropStale(ctx context.Context, at time.Time, id string) error {
	if err := s.dropMarker(ctx, at, id); err != nil {
		return err
	}
	return s.restoreMarker(ctx, at, id)
}

// restoreMarker puts back the marker of job id due at, if its record wants
// it.
func (s *Store) restoreMarker(ctx context.Context, at time.Time, id string) error {
	e, err := s.read(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if e.job.Due().Equal(at) {
		return s.ensureMarker(ctx, &e.job)
	}
	return nil
}

// dropMarkers removes a due marker from both tables.
func (s *Store) dropMarkers(ctx context.Context, at time.Time, id string) error {
	return errors.Join(dropKey(ctx, s.later, dueKey(at, id)), dropKey(ctx, s.due, dueKey(at, id)))
}

// dropKey removes the record of key, if it is there: a marker, which every
// version of means the same.
func dropKey(ctx context.Context, t sink.Records, key string) error {
	return sink.DropRecord(ctx, t, key)
}

// promote moves the markers of "jobslater" due until then into "jobsdue"
// (each written there before it is removed here), and returns how many; one
// it cannot move is left for the next time, the others are moved.
func (s *Store) promote(ctx context.Context, until time.Time) (moved int, failed error) {
	for key, err := range s.later.RecordNames(ctx) {
		if err != nil {
			return moved, errors.Join(failed, err)
		}
		at, _, ok := parseDueKey(key)
		if !ok {
			continue
		}
		if at.After(until) {
			break
		}
		if err := putKey(ctx, s.due, key); err != nil {
			failed = errors.Join(failed, fmt.Errorf("%s: %w", key, err))
			continue // the others are moved all the same
		}
		if err := dropKey(ctx, s.later, key); err != nil {
			failed = errors.Join(failed, fmt.Errorf("%s: %w", key, err))
		}
		moved++
	}
	return moved, failed
}

// Get returns the job of id; an unknown ID is an error wrapping
// ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Job, error) {
	if err := checkID(id); err != nil {
		return Job{}, err
	}
	e, err := s.read(ctx, id)
	if err != nil {
		return Job{}, err
	}
	return e.job, nil
}

// Pause pauses a job: a pending one at once; a running one at its next
// record, once the runner holding it learns of the request (its next write
// of the job's record, within RunnerOptions.ProgressInterval), which
// releases it then. The request waits in the record for a runner that
// stopped until one takes the job over. A job that completes before its
// runner learns of the pause stays completed, its record saying so
// (Job.Refused). Pausing a paused job changes nothing; a job that ended is
// an error wrapping ErrFinished.
func (s *Store) Pause(ctx context.Context, id string) (Job, error) {
	return s.control(ctx, id, requestPause)
}

// Cancel cancels a job: a pending or paused one at once, a running one at
// its next record, as Pause does; whichever way its pass ends then (a
// failure, its runner closing, ...) the job is cancelled, unless it had
// completed: then its record says the cancel was refused (Job.Refused). The
// records it did not deliver stay where they are. Cancelling a cancelled job
// changes nothing; one that completed or failed is an error wrapping
// ErrFinished.
func (s *Store) Cancel(ctx context.Context, id string) (Job, error) {
	return s.control(ctx, id, requestCancel)
}

// Resume makes a paused job pending again, due at once, or at its Spec.At
// if that is still to come (or at the next opening of its windows after).
// A failed job is resumed alike, its failures forgotten: it goes on from
// where it failed. Resuming a job that is pending or running withdraws a
// pause not acted on yet, and changes nothing else; one that completed or
// was cancelled is an error wrapping ErrFinished.
func (s *Store) Resume(ctx context.Context, id string) (Job, error) {
	return s.control(ctx, id, "resume")
}

// control applies a pause, cancel or resume by compare-and-swap, again if
// the record changed meanwhile.
func (s *Store) control(ctx context.Context, id, what string) (Job, error) {
	if err := checkID(id); err != nil {
		return Job{}, err
	}
	for range 10 {
		e, err := s.read(ctx, id)
		if err != nil {
			return Job{}, err
		}
		done, err := s.apply(ctx, e, what)
		if errors.Is(err, sink.ErrConflict) {
			continue // changed meanwhile (its runner wrote): again
		}
		if err != nil || done {
			return e.job, err
		}
	}
	return Job{}, fmt.Errorf("dlqdump: job %s: its record keeps changing", id)
}

// apply applies what to the job of e; done is true when nothing was to be
// written.
func (s *Store) apply(ctx context.Context, e *entry, what string) (done bool, err error) {
	j := &e.job
	now := s.now().UTC()
	switch {
	case j.State == Cancelled && what == requestCancel:
		return true, nil
	case j.State == Failed && what == "resume":
		j.Failures, j.FailingSince, j.Finished = 0, time.Time{}, time.Time{}
		j.State = Paused // resumed as a paused job is, below
		fallthrough
	case what == "resume" && j.State == Paused:
		return false, s.resume(ctx, e, now)
	case j.State.Final():
		return true, ended(j)
	case what == "resume":
		if e.rec.Control != requestPause {
			return true, nil
		}
		// A pause not acted on yet: withdrawn.
		e.rec.Control, j.Request = "", ""
		return false, s.write(ctx, e)
	case j.State == Paused && what == requestPause:
		return true, nil
	case e.rec.Held() || j.State == Running:
		// Its runner acts on it at its next record; until a runner
		// holds it again, the request waits in the record.
		if e.rec.Control == what || e.rec.Control == requestCancel {
			return true, nil
		}
		e.rec.Control = what
		j.Request = what
		return false, s.write(ctx, e)
	}
	// Pending or paused, and nobody holds it: at once.
	if what == requestPause {
		j.State = Paused
	} else {
		j.State, j.Finished = Cancelled, now
	}
	e.rec.Control, j.Request = "", ""
	if err := s.write(ctx, e); err != nil {
		return false, err
	}
	if err := s.dropMarkers(ctx, j.Due(), j.ID); err != nil {
		return false, err
	}
	if what == requestPause {
		// Resumed meanwhile, due at the same time: its marker back.
		return false, s.restoreMarker(ctx, j.Due(), j.ID)
	}
	return false, nil
}

// resume makes the paused (or failed) job of e pending, due at once or at
// its Spec.At if that is still to come (or at the next opening of its
// windows after): its marker first, then its record, then its marker
// again, in case a poll that read the paused record removed it meanwhile.
func (s *Store) resume(ctx context.Context, e *entry, now time.Time) error {
	j := &e.job
	at := now.Truncate(time.Second)
	if j.Spec.At.After(at) {
		at = j.Spec.At
	}
	j.State, j.Next, j.Error, j.Request = Pending, dueTime(j.Spec.due(at)), "", ""
	e.rec.Control = ""
	if err := s.putMarker(ctx, j.Due(), j.ID); err != nil {
		return err
	}
	if err := s.write(ctx, e); err != nil {
		return err
	}
	return s.ensureMarker(ctx, j)
}

// Wait returns the job once it has ended (completed, failed or cancelled),
// reading it every poll (default: a second); ctx bounds the wait.
func (s *Store) Wait(ctx context.Context, id string, poll time.Duration) (Job, error) {
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			j, _ := s.Get(context.WithoutCancel(ctx), id)
			return j, ctx.Err()
		case <-t.C:
		}
		j, err := s.Get(ctx, id)
		if err != nil || j.State.Final() {
			return j, err
		}
		t.Reset(poll)
	}
}
