package jobs_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/memsink"
	"github.com/dlqdump/dlqdump/sink"
)

// ctlDest is a destination for the control tests: its at-th call waits
// until released, and it refuses as unavailable while down. It counts
// every record it accepted.
type ctlDest struct {
	mu      sync.Mutex
	got     map[string]int
	calls   int
	at      int
	reached chan struct{}
	release chan struct{}
	down    atomic.Bool
}

// hold makes the at-th call wait: reached is closed when it does, and it
// goes on once release is closed.
func (d *ctlDest) hold(at int) (reached, release chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at, d.reached, d.release = at, make(chan struct{}), make(chan struct{})
	return d.reached, d.release
}

func (d *ctlDest) Enqueue(x any) error {
	d.mu.Lock()
	d.calls++
	n, at, reached, release := d.calls, d.at, d.reached, d.release
	d.mu.Unlock()
	if n == at {
		close(reached)
		<-release
	}
	if d.down.Load() {
		return fmt.Errorf("%w: the destination is down", dlqdump.ErrUnavailable)
	}
	d.mu.Lock()
	if d.got == nil {
		d.got = map[string]int{}
	}
	d.got[x.(string)]++
	d.mu.Unlock()
	return nil
}

// delivered returns the records accepted, and those accepted more than once.
func (d *ctlDest) delivered() (n, twice int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.got {
		n += c
		twice += c - 1
	}
	return n, twice
}

// distinct returns how many distinct records were accepted.
func (d *ctlDest) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// dumpOneBlock writes n records into st as one segment of one block (n up
// to about 1,500), named on from those of st's segments before.
func dumpOneBlock(t *testing.T, st *memsink.Store, n int) {
	t.Helper()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: st.Writer(), Capacity: dlqdump.Megabyte, BlockSize: 64 * dlqdump.Kilobyte})
	if err != nil {
		t.Fatal(err)
	}
	first := 10000 * len(st.Names(sink.AreaReady))
	for i := range n {
		it := fmt.Sprintf("item-%05d", first+i)
		if err := q.Enqueue(dlqdump.Envelope{Item: it, Headers: dlqdump.Headers{dlqdump.HeaderReason: "failed"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawJob is a job's claim record as the store holds it.
type rawJob struct {
	Rev     uint64 `json:"rev"`
	Owner   string `json:"owner"`
	Token   string `json:"token"`
	Control string `json:"control"`
}

func readRaw(t *testing.T, st *memsink.Store, id string) rawJob {
	t.Helper()
	tb, err := st.Table("jobs")
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := tb.ReadRecord(t.Context(), "j-"+id)
	if err != nil {
		t.Fatal(err)
	}
	var r rawJob
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// heldLease is the lease of a runner whose test holds a delivery and takes
// nothing over (runnerOn): long enough for a loaded machine's renewals.
const heldLease = 10 * time.Second

// waitSeen waits until the runner holding job id wrote its record after
// the request in it was written (at rev): its runner knows of it (and may
// have acted on it already).
func waitSeen(t *testing.T, st *memsink.Store, id string, rev uint64, request string) {
	t.Helper()
	waitFor(t, func() bool { return readRaw(t, st, id).Rev > rev })
}

// seenIn waits, for at most a while, until a write of job id's record
// holding request went through (through the hooks of h, on the runner's
// side): used inside a hook, where waiting for ever would hang the test.
type seenIn struct {
	mu   sync.Mutex
	want string
	seen chan struct{}
}

func (s *seenIn) arm(request string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want, s.seen = request, make(chan struct{})
	return s.seen
}

func (s *seenIn) wrote(table, key string, data []byte, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil || table != "jobs" || err != nil || !strings.Contains(string(data), `"control":"`+s.want+`"`) || !strings.Contains(string(data), `"token"`) {
		return
	}
	close(s.seen)
	s.seen = nil
}

// within waits for ch for at most d (a bound on setting a test up, never
// an assertion).
func within(ch <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

// runtimeStack is runtime.Stack of this goroutine.
var runtimeStack = func(buf []byte) int { return runtime.Stack(buf, false) }
