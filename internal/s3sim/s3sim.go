// Package s3sim models one S3 prefix in process, as a sink.Reader, for
// simulating fleets of restorers at a scale no server on this machine can
// serve: a call of its Reader costs the requests an s3.Reader makes for it
// (TestCalibration checks the counts against an s3.Reader on gofakes3), each
// waiting a round trip, and requests beyond S3's request rates per prefix
// (by default 3,500 PUT/COPY/POST/DELETE and 5,500 GET/HEAD per second) are
// answered SlowDown and retried as an s3.Reader retries them (exponential
// backoff with full jitter from 100ms, five attempts). It stores bytes in
// memory and lists a page in the time of a page, whatever the number of
// segments.
package s3sim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/dlqdump/dlqdump/internal/backoff"
	"github.com/dlqdump/dlqdump/sink"
)

// S3's request rates per prefix, and the size of a listing's page.
const (
	WriteRate = 3500 // PUT, COPY, POST, DELETE per second
	ReadRate  = 5500 // GET, HEAD per second
	pageSize  = 1000
)

// The retries of a request S3 slowed down, as s3.Retry's defaults.
const (
	maxAttempts = 5
	retryBase   = 100 * time.Millisecond
	retryMax    = 10 * time.Second
)

// ErrSlowDown is the error of a request slowed down maxAttempts times.
var ErrSlowDown = errors.New("s3sim: SlowDown: Please reduce your request rate")

// Options say how distant the prefix is and how many requests it takes.
type Options struct {
	// RTT is the round trip of every request. Default 0.
	RTT time.Duration
	// WriteRate and ReadRate are the requests per second the prefix takes
	// (PUT, COPY, POST, DELETE; GET, HEAD and LIST). Negative: no limit.
	// Default WriteRate and ReadRate.
	WriteRate, ReadRate float64
}

// Store is a simulated S3 prefix. It implements sink.Reader with the optional
// interfaces an s3.Reader implements. Create it with New.
type Store struct {
	rtt           time.Duration
	writes, reads *rate.Limiter // nil: no limit

	mu      sync.Mutex
	ready   []string // sorted names, some no longer in objs[AreaReady]
	dead    int      // names in ready no longer there
	objs    [4]map[string]object
	records map[string]record
	rev     uint64

	counts    sync.Map // op -> *atomic.Int64
	slowdowns atomic.Int64
}

type object struct {
	data   []byte
	reason string
	at     time.Time
}

type record struct {
	data    []byte
	version string
}

// New returns an empty prefix.
func New(o Options) *Store {
	s := &Store{rtt: o.RTT, records: map[string]record{}}
	for i := range s.objs {
		s.objs[i] = map[string]object{}
	}
	limit := func(r, def float64) *rate.Limiter {
		if r == 0 {
			r = def
		}
		if r < 0 {
			return nil
		}
		return rate.NewLimiter(rate.Limit(r), max(1, int(r))) // a second of burst
	}
	s.writes, s.reads = limit(o.WriteRate, WriteRate), limit(o.ReadRate, ReadRate)
	return s
}

var (
	_ sink.Reader     = (*Store)(nil)
	_ sink.NameLister = (*Store)(nil)
	_ sink.NameSeeker = (*Store)(nil)
	_ sink.Prober     = (*Store)(nil)
	_ sink.Discarder  = (*Store)(nil)
)

// Put stores a ready segment without a request (seeding). Names must be put
// in order for the listing to stay cheap; any order works.
func (s *Store) Put(name string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addLocked(sink.AreaReady, name, object{data: data, at: time.Now()})
}

// Counts returns the requests made by operation ("GetObject", "PutObject",
// ...), SlowDowns included, and the SlowDowns.
func (s *Store) Counts() (map[string]int64, int64) {
	m := map[string]int64{}
	s.counts.Range(func(k, v any) bool {
		m[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return m, s.slowdowns.Load()
}

// Ready returns how many segments are ready.
func (s *Store) Ready() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objs[sink.AreaReady])
}

// request makes one request of op: it waits a round trip and, when the
// prefix's rate for its class is exceeded, is slowed down and retried.
func (s *Store) request(ctx context.Context, op string) error {
	lim := s.reads
	switch op {
	case "PutObject", "CopyObject", "DeleteObject", "DeleteObjects":
		lim = s.writes
	}
	for attempt := 1; ; attempt++ {
		if s.rtt > 0 {
			if err := backoff.Sleep(ctx, s.rtt); err != nil {
				return err
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		s.count(op)
		if lim == nil || lim.Allow() {
			return nil
		}
		s.slowdowns.Add(1)
		if attempt >= maxAttempts {
			return fmt.Errorf("%w (%s, %d attempts)", ErrSlowDown, op, attempt)
		}
		if err := backoff.Sleep(ctx, backoff.FullJitter(retryBase, retryMax, attempt)); err != nil {
			return err
		}
	}
}

func (s *Store) count(op string) {
	c, ok := s.counts.Load(op)
	if !ok {
		c, _ = s.counts.LoadOrStore(op, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

// addLocked stores an object in an area.
func (s *Store) addLocked(a sink.Area, name string, o object) {
	m := s.objs[a]
	if _, ok := m[name]; !ok && a == sink.AreaReady {
		if n := len(s.ready); n == 0 || s.ready[n-1] < name {
			s.ready = append(s.ready, name)
		} else if i := sort.SearchStrings(s.ready, name); i == n || s.ready[i] != name {
			s.ready = append(s.ready, "")
			copy(s.ready[i+1:], s.ready[i:])
			s.ready[i] = name
		} else {
			s.dead-- // back where it was
		}
	}
	m[name] = o
}

// removeLocked removes an object from an area.
func (s *Store) removeLocked(a sink.Area, name string) {
	if _, ok := s.objs[a][name]; !ok {
		return
	}
	delete(s.objs[a], name)
	if a != sink.AreaReady {
		return
	}
	s.dead++
	if s.dead > 1024 && s.dead > len(s.ready)/2 {
		live := s.ready[:0]
		for _, n := range s.ready {
			if _, ok := s.objs[sink.AreaReady][n]; ok {
				live = append(live, n)
			}
		}
		clear(s.ready[len(live):])
		s.ready, s.dead = live, 0
	}
}

// page returns up to pageSize names of an area after after, and whether
// there may be more.
func (s *Store) page(a sink.Area, after string) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if a == sink.AreaReady {
		i := sort.SearchStrings(s.ready, after)
		for ; i < len(s.ready) && len(out) < pageSize; i++ {
			n := s.ready[i]
			if _, ok := s.objs[a][n]; ok && n > after {
				out = append(out, n)
			}
		}
		return out, i < len(s.ready)
	}
	for n := range s.objs[a] {
		if n > after {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	if len(out) > pageSize {
		return out[:pageSize], true
	}
	return out, false
}

func notFound(a sink.Area, name string) error {
	return fmt.Errorf("%w: %s segment %s", sink.ErrNotFound, a, name)
}
