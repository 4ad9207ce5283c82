package dlqdump

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Refusals count the Enqueue calls that returned an error and stored
// nothing, by why. A caller that drops Enqueue's error loses the item: a
// koykov queue does, for every item it hands its DLQ, so for items dumped
// from a koykov queue these counts (and the MetricsWriter's Fail events
// and the log) are the only trace.
type Refusals struct {
	// Closed counts the calls made after Close or Shutdown began
	// (ErrClosed): something still feeding the Queue, such as the workers
	// of a koykov queue that was not drained first (see Queue.CloseAfter).
	// Counted in the MetricsWriter as Fail("closed"); the first one is
	// logged.
	Closed uint64
	// Encode counts the items the Encoder could not encode (ErrEncode),
	// such as a struct given to encoder.Builtin. Fail("encode"); the first
	// one of each type is logged with its type.
	Encode uint64
	// TooLarge counts the items whose encoding exceeds
	// segment.MaxRecordSize (ErrTooLarge). Fail("too_large"); the first one
	// of each type is logged.
	TooLarge uint64
	// Backpressure counts the calls that found MaxPending full for
	// EnqueueTimeout (ErrBackpressure). Fail("backpressure"); not logged
	// (Rate and the pending bytes show it).
	Backpressure uint64
}

// Total returns the number of refused calls.
func (r Refusals) Total() uint64 { return r.Closed + r.Encode + r.TooLarge + r.Backpressure }

// refusal kinds: the index into refusals.n and the MetricsWriter's reason.
type refusal int

const (
	refusedClosed refusal = iota
	refusedEncode
	refusedTooLarge
	refusedBackpressure
	refusalKinds
)

var refusalReasons = [refusalKinds]string{"closed", "encode", "too_large", "backpressure"}

// loggedTypesMax bounds the item types whose first refusal is logged.
const loggedTypesMax = 64

// refusals counts and logs what Enqueue refused.
type refusals struct {
	n    [refusalKinds]atomic.Uint64
	last atomic.Pointer[error]

	closedLogged atomic.Bool
	mu           sync.Mutex
	logged       map[string]bool // "kind type" already logged
}

// refuse counts a refused Enqueue of item, logs it when it is the first of
// its kind (and, for encoding, of its type), and returns err.
func (q *Queue) refuse(kind refusal, item any, err error) error {
	rf := &q.refused
	rf.n[kind].Add(1)
	rf.last.Store(&err)
	q.mw.Fail(refusalReasons[kind])
	switch kind {
	case refusedClosed:
		if rf.closedLogged.CompareAndSwap(false, true) {
			q.log.Warn("Enqueue after Close: the item is not in the dump (is a queue still feeding it? close that queue first, e.g. with Queue.CloseAfter); later refusals are counted in Stats().Refused.Closed, not logged",
				slog.String("type", fmt.Sprintf("%T", item)))
		}
	case refusedEncode, refusedTooLarge:
		typ := fmt.Sprintf("%T", item)
		if rf.firstOfType(kind, typ) {
			q.log.Error("an item was refused and is not in the dump; later refusals of its type are counted in Stats().Refused, not logged",
				slog.String("reason", refusalReasons[kind]), slog.String("type", typ), slog.Any("error", err))
		}
	}
	return err
}

// firstOfType reports whether this is the first refusal of kind for typ,
// among the first loggedTypesMax.
func (rf *refusals) firstOfType(kind refusal, typ string) bool {
	key := refusalReasons[kind] + " " + typ
	rf.mu.Lock()
	defer rf.mu.Unlock()
	if rf.logged[key] || len(rf.logged) >= loggedTypesMax {
		return false
	}
	if rf.logged == nil {
		rf.logged = map[string]bool{}
	}
	rf.logged[key] = true
	return true
}

// counts returns the refusals so far.
func (rf *refusals) counts() Refusals {
	return Refusals{
		Closed:       rf.n[refusedClosed].Load(),
		Encode:       rf.n[refusedEncode].Load(),
		TooLarge:     rf.n[refusedTooLarge].Load(),
		Backpressure: rf.n[refusedBackpressure].Load(),
	}
}
