package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
)

// state is where a task is in its life.
type state uint8

// Task states. queued, running, done, failed, dumped and restored are the
// seed's task surface plus the dump; quarantined is set when the Restorer
// moved the task's record aside (found by scanning quarantine segments).
const (
	stQueued      state = iota // in the queue, or waiting for a retry
	stRunning                  // a worker has it
	stDone                     // processed
	stFailed                   // lost: retries exhausted and the dump refused it
	stDumped                   // in the dump (reason: leak, failed, deadline, shutdown)
	stRestored                 // put back into the queue by the Restorer
	stQuarantined              // moved aside by the Restorer; kept, not retried
	numStates
)

var stateNames = [numStates]string{"queued", "running", "done", "failed", "dumped", "restored", "quarantined"}

func (s state) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Dump reasons stored in the "reason" header.
const (
	reasonLeak     = "leak"     // the queue was full
	reasonFailed   = "failed"   // every attempt failed
	reasonDeadline = "deadline" // waited in the queue past its deadline
	reasonShutdown = "shutdown" // a retry was pending when the queue closed
)

var reasons = []string{reasonLeak, reasonFailed, reasonDeadline, reasonShutdown}

// transition is one entry of a task's history.
type transition struct {
	At    time.Time `json:"at"`
	State string    `json:"state"`
	Note  string    `json:"note,omitempty"`
}

const maxHistory = 32

// task is the demo's queue item. The koykov queue hands only the item to its
// DLQ, so the item is a pointer that records its own state (attempts, last
// error, deadline) and implements dlqdump.HeaderCarrier: the dumper stores
// why it was dead-lettered beside it.
type task struct {
	ID         string
	Payload    string
	MaxRetries int
	api        bool // submitted by POST /enqueue: never evicted from the store

	st *store

	mu       sync.Mutex
	state    state
	attempts int // processing attempts in total
	tries    int // attempts since it last entered the queue from outside
	lastErr  string
	deadline time.Time // when the current stay in the queue expires (zero: none)
	final    bool      // retries exhausted: the next dead letter is "failed"
	reason   string    // why it was last dumped
	replays  int       // restored-and-dumped-again count (dlqdump.HeaderReplays)
	dumps    int
	restores int
	created  time.Time
	updated  time.Time
	history  []transition
	dropped  int // history entries dropped
}

var _ dlqdump.HeaderCarrier = (*task)(nil)

func newTask(id, payload string, maxRetries int) *task {
	now := time.Now()
	return &task{ID: id, Payload: payload, MaxRetries: maxRetries, created: now, updated: now}
}

// setLocked moves the task to s and records it in the history.
func (t *task) setLocked(s state, note string) {
	old := t.state
	t.state = s
	t.updated = time.Now()
	if t.st != nil && old != s {
		t.st.counts[old].Add(-1)
		t.st.counts[s].Add(1)
	}
	if len(t.history) >= maxHistory {
		copy(t.history, t.history[1:])
		t.history = t.history[:len(t.history)-1]
		t.dropped++
	}
	t.history = append(t.history, transition{At: t.updated, State: s.String(), Note: note})
}

// DLQHeaders returns the headers the dumper stores beside the task.
func (t *task) DLQHeaders() dlqdump.Headers {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := dlqdump.Headers{
		dlqdump.HeaderReason:   t.reason,
		dlqdump.HeaderAttempts: strconv.Itoa(t.attempts),
	}
	if t.lastErr != "" {
		h[dlqdump.HeaderError] = t.lastErr
	}
	if t.replays > 0 {
		h[dlqdump.HeaderReplays] = strconv.Itoa(t.replays)
	}
	return h
}

// SetDLQHeaders is called by the Restorer with the headers the task was
// stored with, the replay count raised.
func (t *task) SetDLQHeaders(h dlqdump.Headers) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n, err := strconv.Atoi(h[dlqdump.HeaderReplays]); err == nil {
		t.replays = n
	}
	if t.attempts == 0 { // a task from an earlier run
		if n, err := strconv.Atoi(h[dlqdump.HeaderAttempts]); err == nil {
			t.attempts = n
		}
		t.lastErr = h[dlqdump.HeaderError]
		t.reason = h[dlqdump.HeaderReason]
	}
}

// taskView is the JSON of GET /tasks/{id}.
type taskView struct {
	ID         string       `json:"id"`
	Status     string       `json:"status"`
	Reason     string       `json:"reason,omitempty"`
	Attempts   int          `json:"attempts"`
	MaxRetries int          `json:"max_retries"`
	LastError  string       `json:"last_error,omitempty"`
	Dumps      int          `json:"dumps"`
	Restores   int          `json:"restores"`
	Replays    int          `json:"replays"`
	Created    time.Time    `json:"created"`
	Updated    time.Time    `json:"updated"`
	History    []transition `json:"history"`
	Dropped    int          `json:"history_dropped,omitempty"`
}

func (t *task) view() taskView {
	t.mu.Lock()
	defer t.mu.Unlock()
	return taskView{
		ID: t.ID, Status: t.state.String(), Reason: t.reason, Attempts: t.attempts, MaxRetries: t.MaxRetries,
		LastError: t.lastErr, Dumps: t.dumps, Restores: t.restores, Replays: t.replays,
		Created: t.created, Updated: t.updated, History: append([]transition(nil), t.history...), Dropped: t.dropped,
	}
}

func (t *task) status() state {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state
}

// record is what the dump stores of a task: enough to run it again.
type record struct {
	ID         string `json:"id"`
	Payload    string `json:"payload"`
	MaxRetries int    `json:"max_retries"`
	API        bool   `json:"api,omitempty"`
}

// taskCodec is the dumper's Encoder and the Restorer's Decoder. Decoding
// returns the task the store already holds under the record's id, so a
// restored task keeps its identity (and GET /tasks/{id} its history); a
// record from an earlier run becomes a new task in the store.
type taskCodec struct{ st *store }

var (
	_ dlqdump.Encoder = taskCodec{}
	_ dlqdump.Decoder = taskCodec{}
)

func (taskCodec) Encode(dst []byte, x any) ([]byte, error) {
	t, ok := x.(*task)
	if !ok {
		return dst, fmt.Errorf("demo codec: cannot encode %T", x)
	}
	b, err := json.Marshal(record{ID: t.ID, Payload: t.Payload, MaxRetries: t.MaxRetries, API: t.api})
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

func (c taskCodec) Decode(p []byte) (any, error) {
	var r record
	if err := json.Unmarshal(p, &r); err != nil {
		return nil, fmt.Errorf("demo codec: %w", err)
	}
	if r.ID == "" {
		return nil, errors.New("demo codec: record without id")
	}
	return c.st.adopt(r), nil
}

// store holds the tasks by id. Finished producer tasks are forgotten once
// more than keepDone of them finished later; tasks submitted over HTTP are
// kept for the life of the process.
type store struct {
	mu       sync.RWMutex
	tasks    map[string]*task
	doneRing []string
	ringPos  int
	ringLen  int
	counts   [numStates]atomic.Int64
	adopted  atomic.Uint64 // tasks found in the dump that this process did not create
	evicted  atomic.Int64  // done tasks forgotten (counted in counts[stDone] no more)
}

func newStore(keepDone int) *store {
	if keepDone < 1 {
		keepDone = 1
	}
	return &store{tasks: map[string]*task{}, doneRing: make([]string, keepDone)}
}

var errDuplicate = errors.New("duplicate id")

// add registers a new task in state queued.
func (s *store) add(t *task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[t.ID]; ok {
		return errDuplicate
	}
	t.st = s
	t.state = stQueued
	s.counts[stQueued].Add(1)
	t.history = append(t.history, transition{At: t.created, State: stQueued.String(), Note: "accepted"})
	s.tasks[t.ID] = t
	return nil
}

// remove forgets a task that was not accepted after all.
func (s *store) remove(t *task) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tasks[t.ID] == t {
		delete(s.tasks, t.ID)
		t.mu.Lock()
		s.counts[t.state].Add(-1)
		t.st = nil
		t.mu.Unlock()
	}
}

func (s *store) get(id string) *task {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tasks[id]
}

// adopt returns the task with the record's id, creating it (in state dumped)
// if the store does not know it.
func (s *store) adopt(r record) *task {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tasks[r.ID]; ok {
		return t
	}
	t := newTask(r.ID, r.Payload, r.MaxRetries)
	t.api = r.API
	t.st = s
	t.state = stDumped
	s.counts[stDumped].Add(1)
	t.history = append(t.history, transition{At: t.created, State: stDumped.String(), Note: "found in the dump"})
	s.tasks[r.ID] = t
	s.adopted.Add(1)
	return t
}

// finished notes that a producer task is done; the oldest such task beyond
// keepDone is forgotten.
func (s *store) finished(t *task) {
	if t.api {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ringLen == len(s.doneRing) {
		old := s.doneRing[s.ringPos]
		if ot, ok := s.tasks[old]; ok && !ot.api {
			ot.mu.Lock()
			if ot.state == stDone {
				delete(s.tasks, old)
				s.counts[stDone].Add(-1)
				s.evicted.Add(1)
				ot.st = nil
			}
			ot.mu.Unlock()
		}
	} else {
		s.ringLen++
	}
	s.doneRing[s.ringPos] = t.ID
	s.ringPos = (s.ringPos + 1) % len(s.doneRing)
}

// stateCounts returns how many tasks the store holds in each state (done
// tasks that were forgotten are not counted).
func (s *store) stateCounts() map[string]int64 {
	m := make(map[string]int64, numStates)
	for i := range numStates {
		m[state(i).String()] = s.counts[i].Load()
	}
	return m
}

// inFlight counts tasks that are still moving: queued, running, restored.
func (s *store) inFlight() int64 {
	return s.counts[stQueued].Load() + s.counts[stRunning].Load() + s.counts[stRestored].Load()
}
