package sinktest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump"
)

// memStore is a sink in memory: the reference the suite is checked against,
// and, with a fault, a broken sink the suite must reject.
type memStore struct {
	fault string // see faults in sinktest_test.go; "" for none

	mu     sync.Mutex
	areas  [3]map[string]*memSeg
	claims map[string]*memClaim
}

type memSeg struct {
	data     []byte
	modified time.Time
	reason   string
}

type memClaim struct {
	owner, token string
	expires      time.Time
	cp           dlqdump.Checkpoint
}

func newMemStore(fault string) *memStore {
	m := &memStore{fault: fault, claims: map[string]*memClaim{}}
	for i := range m.areas {
		m.areas[i] = map[string]*memSeg{}
	}
	return m
}

func notFound(a dlqdump.Area, name string) error {
	return fmt.Errorf("%w: %s segment %s", dlqdump.ErrNotFound, a, name)
}

// memWriter is the Writer side of a memStore.
type memWriter struct{ m *memStore }

func (w memWriter) Create(ctx context.Context, name string) (dlqdump.SegmentWriter, error) {
	return w.m.Create(ctx, dlqdump.AreaReady, name)
}

func (m *memStore) Create(_ context.Context, area dlqdump.Area, name string) (dlqdump.SegmentWriter, error) {
	return &memSegWriter{m: m, area: area, name: name}, nil
}

type memSegWriter struct {
	m    *memStore
	area dlqdump.Area
	name string
	buf  []byte
}

func (w *memSegWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if w.m.fault == "visible-before-commit" {
		w.commit()
	}
	return len(p), nil
}

func (w *memSegWriter) Sync() error { return nil }

func (w *memSegWriter) Truncate(size int64) error {
	if w.m.fault != "ignore-truncate" {
		w.buf = w.buf[:size]
	}
	return nil
}

func (w *memSegWriter) commit() {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	w.m.areas[w.area][w.name] = &memSeg{data: slices.Clone(w.buf), modified: time.Now()}
}

func (w *memSegWriter) Commit(context.Context) error { w.commit(); return nil }
func (w *memSegWriter) Abort() error                 { return nil }

func (m *memStore) List(_ context.Context, area dlqdump.Area) iter.Seq2[dlqdump.SegmentInfo, error] {
	return func(yield func(dlqdump.SegmentInfo, error) bool) {
		m.mu.Lock()
		var infos []dlqdump.SegmentInfo
		for name, s := range m.areas[area] {
			si := dlqdump.SegmentInfo{Name: name, Area: area, Size: int64(len(s.data)), Modified: s.modified, Reason: s.reason}
			if c := m.claims[name]; c != nil && area == dlqdump.AreaReady {
				si.Claim = &dlqdump.ClaimInfo{Owner: c.owner, Expires: c.expires, Checkpoint: c.cp}
			}
			infos = append(infos, si)
		}
		m.mu.Unlock()
		slices.SortFunc(infos, func(a, b dlqdump.SegmentInfo) int {
			if m.fault == "list-newest-first" {
				a, b = b, a
			}
			switch {
			case a.Name < b.Name:
				return -1
			case a.Name > b.Name:
				return 1
			}
			return 0
		})
		for _, si := range infos {
			if !yield(si, nil) {
				return
			}
		}
	}
}

func (m *memStore) Open(_ context.Context, area dlqdump.Area, name string) (dlqdump.SegmentFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.areas[area][name]
	if s == nil {
		return nil, notFound(area, name)
	}
	return memFile{s.data}, nil
}

type memFile struct{ b []byte }

func (f memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
func (f memFile) Size() int64  { return int64(len(f.b)) }
func (f memFile) Close() error { return nil }

func (m *memStore) Claim(_ context.Context, name, owner string, lease time.Duration) (dlqdump.Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.areas[dlqdump.AreaReady][name] == nil {
		delete(m.claims, name)
		return nil, notFound(dlqdump.AreaReady, name)
	}
	old := m.claims[name]
	if old != nil && old.owner != owner && time.Now().Before(old.expires) && m.fault != "no-exclusion" {
		return nil, fmt.Errorf("%w: %s by %s", dlqdump.ErrClaimed, name, old.owner)
	}
	c := &memClaim{owner: owner, token: rand.Text(), expires: time.Now().Add(lease)}
	if old != nil && m.fault != "takeover-loses-checkpoint" {
		c.cp = old.cp
	}
	m.claims[name] = c
	return &memClaimRef{m: m, name: name, lease: lease, mine: *c}, nil
}

func (m *memStore) Move(_ context.Context, name string, from, to dlqdump.Area, reason string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.areas[from][name]
	if s == nil {
		return notFound(from, name)
	}
	if from == to {
		return nil
	}
	if c := m.claims[name]; from == dlqdump.AreaReady && c != nil && time.Now().Before(c.expires) && m.fault != "move-ignores-claims" {
		return fmt.Errorf("%w: %s", dlqdump.ErrClaimed, name)
	}
	if from == dlqdump.AreaReady {
		delete(m.claims, name)
	}
	delete(m.areas[from], name)
	if to == dlqdump.AreaQuarantine {
		s.reason = reason
	} else if m.fault != "reason-sticks" {
		s.reason = ""
	}
	m.areas[to][name] = s
	return nil
}

func (m *memStore) Delete(_ context.Context, area dlqdump.Area, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.areas[area][name] == nil {
		return notFound(area, name)
	}
	delete(m.areas[area], name)
	if area == dlqdump.AreaReady {
		delete(m.claims, name)
	}
	return nil
}

// memClaimRef is a claim taken on a memStore.
type memClaimRef struct {
	m     *memStore
	name  string
	lease time.Duration
	mine  memClaim // as taken
	ended bool
}

func (c *memClaimRef) Name() string                   { return c.name }
func (c *memClaimRef) Checkpoint() dlqdump.Checkpoint { return c.mine.cp }

// own returns the store's claim if it is still this one; c.m.mu is held.
func (c *memClaimRef) own() (*memClaim, error) {
	if c.ended && c.m.fault != "usable-after-end" {
		return nil, fmt.Errorf("claim on %s ended: %w", c.name, dlqdump.ErrClosed)
	}
	cur := c.m.claims[c.name]
	if cur == nil || cur.owner != c.mine.owner || cur.token != c.mine.token && c.m.fault != "owner-only" {
		return nil, fmt.Errorf("%w: %s", dlqdump.ErrLeaseLost, c.name)
	}
	return cur, nil
}

func (c *memClaimRef) Renew(_ context.Context, cp dlqdump.Checkpoint) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	cur, err := c.own()
	if err != nil {
		return err
	}
	cur.expires, cur.cp = time.Now().Add(c.lease), cp
	return nil
}

func (c *memClaimRef) Release(context.Context) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	cur, err := c.own()
	if err != nil {
		return err
	}
	cur.expires, cur.token = time.Time{}, ""
	c.ended = true
	return nil
}

func (c *memClaimRef) Complete(_ context.Context, archive bool) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if _, err := c.own(); err != nil {
		return err
	}
	s := c.m.areas[dlqdump.AreaReady][c.name]
	if s == nil {
		return notFound(dlqdump.AreaReady, c.name)
	}
	delete(c.m.areas[dlqdump.AreaReady], c.name)
	if archive {
		c.m.areas[dlqdump.AreaArchive][c.name] = s
	}
	delete(c.m.claims, c.name)
	c.ended = true
	return nil
}

func (c *memClaimRef) Quarantine(_ context.Context, reason string) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if _, err := c.own(); err != nil {
		return err
	}
	s := c.m.areas[dlqdump.AreaReady][c.name]
	if s == nil {
		return notFound(dlqdump.AreaReady, c.name)
	}
	delete(c.m.areas[dlqdump.AreaReady], c.name)
	if c.m.fault != "quarantine-drops-reason" {
		s.reason = reason
	}
	c.m.areas[dlqdump.AreaQuarantine][c.name] = s
	delete(c.m.claims, c.name)
	c.ended = true
	return nil
}
