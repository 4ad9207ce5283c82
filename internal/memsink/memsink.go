// Package memsink is a sink kept in memory, for tests: a sink.Writer and a
// sink.Reader over the same maps. It follows the contracts of package sink
// exactly (create-if-absent, move-if-absent, compare-and-swap records), so
// the protocols above the sinks can be tested without a disk or a server.
package memsink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Store is an in-memory sink. The zero value is not usable; call New.
type Store struct {
	mu      sync.Mutex
	areas   [4]map[string]*object
	records map[string]record
	tables  map[string]*table
	rev     uint64
}

type object struct {
	data     []byte
	reason   string
	modified time.Time
}

type record struct {
	data    []byte
	version string
}

var _ sink.Reader = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	s := &Store{records: map[string]record{}, tables: map[string]*table{}}
	for i := range s.areas {
		s.areas[i] = map[string]*object{}
	}
	return s
}

func (s *Store) area(a sink.Area) (map[string]*object, error) {
	if !a.Stored() {
		return nil, fmt.Errorf("memsink: unknown area %v", a)
	}
	return s.areas[a], nil
}

func notFound(a sink.Area, name string) error {
	return fmt.Errorf("%w: %s segment %s", sink.ErrNotFound, a, name)
}

// Put stores a segment directly, replacing any; for test setup.
func (s *Store) Put(a sink.Area, name string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.areas[a][name] = &object{data: slices.Clone(data), modified: time.Now()}
}

// Get returns a segment's bytes, or nil.
func (s *Store) Get(a sink.Area, name string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.areas[a][name]; o != nil {
		return slices.Clone(o.data)
	}
	return nil
}

// Names returns the names in an area, sorted.
func (s *Store) Names(a sink.Area) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.areas[a]))
	for n := range s.areas[a] {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Writer returns a sink.Writer publishing ready segments into the store.
func (s *Store) Writer() sink.Writer { return writer{s} }

type writer struct{ s *Store }

func (w writer) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	return w.s.Create(ctx, sink.AreaReady, name)
}

// Create starts a segment in an area.
func (s *Store) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	if _, err := s.area(area); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &segWriter{s: s, area: area, name: name}, nil
}

type segWriter struct {
	s         *Store
	area      sink.Area
	name      string
	buf       []byte
	committed bool
	aborted   bool
}

func (w *segWriter) Write(p []byte) (int, error) {
	if w.committed || w.aborted {
		return 0, fmt.Errorf("memsink: write to %s after Commit or Abort", w.name)
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *segWriter) Sync() error { return nil }

func (w *segWriter) Truncate(size int64) error {
	if size < 0 || size > int64(len(w.buf)) {
		return fmt.Errorf("memsink: truncate %s to %d: it has %d bytes", w.name, size, len(w.buf))
	}
	w.buf = w.buf[:size]
	return nil
}

func (w *segWriter) Commit(ctx context.Context) error {
	if w.committed {
		return nil
	}
	if w.aborted {
		return fmt.Errorf("memsink: commit %s after Abort", w.name)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	m := w.s.areas[w.area]
	if o, ok := m[w.name]; ok {
		return fmt.Errorf("%w: %s segment %s (%d bytes)", sink.ErrExist, w.area, w.name, len(o.data))
	}
	m[w.name] = &object{data: w.buf, modified: time.Now()}
	w.committed = true
	return nil
}

func (w *segWriter) Abort() error {
	w.aborted = true
	w.buf = nil
	return nil
}

// List lists an area oldest first.
func (s *Store) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	return func(yield func(sink.Info, error) bool) {
		s.mu.Lock()
		m, err := s.area(area)
		if err == nil {
			err = ctx.Err()
		}
		var infos []sink.Info
		if err == nil {
			for n, o := range m {
				infos = append(infos, sink.Info{Name: n, Area: area, Size: int64(len(o.data)), Modified: o.modified, Reason: o.reason})
			}
		}
		s.mu.Unlock()
		if err != nil {
			yield(sink.Info{}, err)
			return
		}
		slices.SortFunc(infos, func(a, b sink.Info) int { return cmpString(a.Name, b.Name) })
		for _, si := range infos {
			if !yield(si, nil) {
				return
			}
		}
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Open opens a segment.
func (s *Store) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.area(area)
	if err != nil {
		return nil, err
	}
	o := m[name]
	if o == nil {
		return nil, notFound(area, name)
	}
	return file{bytes.NewReader(o.data)}, nil
}

type file struct{ *bytes.Reader }

func (f file) Close() error { return nil }

var _ io.ReaderAt = file{}

// Move moves a segment unless the destination has one of that name.
func (s *Store) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	return s.move(ctx, from, name, to, name, reason)
}

// Unstage moves a staged segment into an area under its own name.
func (s *Store) Unstage(ctx context.Context, staged, name string, to sink.Area, reason string) error {
	if to == sink.AreaStaging {
		return fmt.Errorf("memsink: unstage %s into the staging area", staged)
	}
	return s.move(ctx, sink.AreaStaging, staged, to, name, reason)
}

func (s *Store) move(ctx context.Context, from sink.Area, name string, to sink.Area, newName, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	src, err := s.area(from)
	if err != nil {
		return err
	}
	dst, err := s.area(to)
	if err != nil {
		return err
	}
	o := src[name]
	if o == nil {
		return notFound(from, name)
	}
	if from == to && name == newName {
		if to == sink.AreaQuarantine {
			o.reason = reason
		}
		return nil
	}
	if d, ok := dst[newName]; ok {
		if !bytes.Equal(d.data, o.data) {
			return fmt.Errorf("%w: %s segment %s", sink.ErrExist, to, newName)
		}
	}
	delete(src, name)
	moved := &object{data: o.data, modified: time.Now()}
	if to == sink.AreaQuarantine {
		moved.reason = reason
	}
	dst[newName] = moved
	return nil
}

// Delete removes a segment.
func (s *Store) Delete(ctx context.Context, area sink.Area, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.area(area)
	if err != nil {
		return err
	}
	if _, ok := m[name]; !ok {
		return notFound(area, name)
	}
	delete(m, name)
	return nil
}

// ReadRecord returns a record and its version.
func (s *Store) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	return s.readRecord(ctx, s.records, name)
}

// WriteRecord stores a record by compare-and-swap.
func (s *Store) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	return s.writeRecord(ctx, s.records, name, data, ifVersion)
}

// DeleteRecord removes a record by compare-and-swap.
func (s *Store) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	return s.deleteRecord(ctx, s.records, name, ifVersion)
}

// RecordNames lists the names with a record, sorted.
func (s *Store) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return s.recordNames(ctx, s.records)
}

// Table returns a table of records (sink.Tables).
func (s *Store) Table(name string) (sink.Records, error) {
	if err := sink.CheckTableName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tables[name]
	if t == nil {
		t = &table{s: s, m: map[string]record{}}
		s.tables[name] = t
	}
	return t, nil
}

// table is a table of records of a Store, under the Store's lock.
type table struct {
	s       *Store
	m       map[string]record
	changes uint64 // records added or removed (sink.Stamper)
}

// Stamp counts the records added and removed (sink.Stamper).
func (t *table) Stamp(ctx context.Context) (string, error) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return strconv.FormatUint(t.changes, 10), ctx.Err()
}

func (t *table) ReadRecord(ctx context.Context, key string) ([]byte, string, error) {
	if err := sink.CheckKey(key); err != nil {
		return nil, "", err
	}
	return t.s.readRecord(ctx, t.m, key)
}

func (t *table) WriteRecord(ctx context.Context, key string, data []byte, ifVersion string) (string, error) {
	if err := sink.CheckKey(key); err != nil {
		return "", err
	}
	v, err := t.s.writeRecord(ctx, t.m, key, data, ifVersion)
	if err == nil && ifVersion == "" {
		t.s.mu.Lock()
		t.changes++
		t.s.mu.Unlock()
	}
	return v, err
}

func (t *table) DeleteRecord(ctx context.Context, key, ifVersion string) error {
	if err := sink.CheckKey(key); err != nil {
		return err
	}
	err := t.s.deleteRecord(ctx, t.m, key, ifVersion)
	if err == nil {
		t.s.mu.Lock()
		t.changes++
		t.s.mu.Unlock()
	}
	return err
}

func (t *table) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return t.s.recordNames(ctx, t.m)
}

func (s *Store) readRecord(ctx context.Context, m map[string]record, name string) ([]byte, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := m[name]
	if !ok {
		return nil, "", fmt.Errorf("%w: record %s", sink.ErrNotFound, name)
	}
	return slices.Clone(r.data), r.version, nil
}

func (s *Store) writeRecord(ctx context.Context, m map[string]record, name string, data []byte, ifVersion string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if len(data) > sink.MaxRecordSize {
		return "", fmt.Errorf("memsink: record %s: %d bytes, more than %d", name, len(data), sink.MaxRecordSize)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := m[name]
	if ifVersion == "" && ok || ifVersion != "" && (!ok || r.version != ifVersion) {
		return "", fmt.Errorf("%w: record %s", sink.ErrConflict, name)
	}
	s.rev++
	v := strconv.FormatUint(s.rev, 10)
	m[name] = record{data: slices.Clone(data), version: v}
	return v, nil
}

func (s *Store) deleteRecord(ctx context.Context, m map[string]record, name, ifVersion string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := m[name]
	if !ok {
		return fmt.Errorf("%w: record %s", sink.ErrNotFound, name)
	}
	if r.version != ifVersion {
		return fmt.Errorf("%w: record %s", sink.ErrConflict, name)
	}
	delete(m, name)
	return nil
}

func (s *Store) recordNames(ctx context.Context, m map[string]record) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := ctx.Err(); err != nil {
			yield("", err)
			return
		}
		s.mu.Lock()
		names := make([]string, 0, len(m))
		for n := range m {
			names = append(names, n)
		}
		s.mu.Unlock()
		slices.Sort(names)
		for _, n := range names {
			if !yield(n, nil) {
				return
			}
		}
	}
}
