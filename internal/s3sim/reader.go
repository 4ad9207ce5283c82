package s3sim

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// The methods of sink.Reader, each costing the requests an s3.Reader makes
// for it.

// List lists an area page by page: a ListObjects per page, and, for the
// quarantine area, a HeadObject per segment (its reason).
func (s *Store) List(ctx context.Context, area sink.Area) iter.Seq2[sink.Info, error] {
	return func(yield func(sink.Info, error) bool) {
		for name, err := range s.NamesAfter(ctx, area, "") {
			if err != nil {
				yield(sink.Info{}, err)
				return
			}
			if area == sink.AreaQuarantine {
				if err := s.request(ctx, "HeadObject"); err != nil {
					yield(sink.Info{}, err)
					return
				}
			}
			s.mu.Lock()
			o, ok := s.objs[area][name]
			s.mu.Unlock()
			if ok && !yield(sink.Info{Name: name, Area: area, Size: int64(len(o.data)), Modified: o.at, Reason: o.reason}, nil) {
				return
			}
		}
	}
}

// Names lists an area's names: a ListObjects per page.
func (s *Store) Names(ctx context.Context, area sink.Area) iter.Seq2[string, error] {
	return s.NamesAfter(ctx, area, "")
}

// NamesAfter lists an area's names after after: a ListObjects per page.
func (s *Store) NamesAfter(ctx context.Context, area sink.Area, after string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for {
			if err := s.request(ctx, "ListObjects"); err != nil {
				yield("", err)
				return
			}
			names, more := s.page(area, after)
			for _, n := range names {
				if !yield(n, nil) {
					return
				}
			}
			if !more || len(names) == 0 {
				return
			}
			after = names[len(names)-1]
		}
	}
}

// Open opens a segment: a GetObject (the simulated segments are smaller
// than a read chunk).
func (s *Store) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	if err := s.request(ctx, "GetObject"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	o, ok := s.objs[area][name]
	s.mu.Unlock()
	if !ok {
		return nil, notFound(area, name)
	}
	return file{bytes.NewReader(o.data)}, nil
}

type file struct{ *bytes.Reader }

func (f file) Close() error { return nil }

// Exists is a HeadObject.
func (s *Store) Exists(ctx context.Context, area sink.Area, name string) (bool, error) {
	if err := s.request(ctx, "HeadObject"); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.objs[area][name]
	return ok, nil
}

// Discard is a DeleteObject, or a DeleteObjects for several.
func (s *Store) Discard(ctx context.Context, area sink.Area, names ...string) error {
	op := "DeleteObjects"
	if len(names) == 1 {
		op = "DeleteObject"
	}
	if err := s.request(ctx, op); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.removeLocked(area, n)
	}
	return nil
}

// Delete is a HeadObject and a DeleteObject.
func (s *Store) Delete(ctx context.Context, area sink.Area, name string) error {
	if ok, err := s.Exists(ctx, area, name); err != nil || !ok {
		if err == nil {
			err = notFound(area, name)
		}
		return err
	}
	return s.Discard(ctx, area, name)
}

// Move is a HeadObject of the segment and of its destination, a CopyObject
// and a DeleteObject.
func (s *Store) Move(ctx context.Context, name string, from, to sink.Area, reason string) error {
	return s.move(ctx, from, name, to, name, reason)
}

// Unstage moves a staged segment as Move does.
func (s *Store) Unstage(ctx context.Context, staged, name string, to sink.Area, reason string) error {
	return s.move(ctx, sink.AreaStaging, staged, to, name, reason)
}

func (s *Store) move(ctx context.Context, from sink.Area, name string, to sink.Area, newName, reason string) error {
	for _, op := range []string{"HeadObject", "HeadObject", "CopyObject"} {
		if err := s.request(ctx, op); err != nil {
			return err
		}
	}
	s.mu.Lock()
	o, ok := s.objs[from][name]
	if !ok {
		s.mu.Unlock()
		return notFound(from, name)
	}
	if there, ok := s.objs[to][newName]; ok && !bytes.Equal(there.data, o.data) {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s segment %s", sink.ErrExist, to, newName)
	}
	if to != sink.AreaQuarantine {
		reason = ""
	}
	s.addLocked(to, newName, object{data: o.data, reason: reason, at: time.Now()})
	s.mu.Unlock()
	if err := s.request(ctx, "DeleteObject"); err != nil {
		return err
	}
	s.mu.Lock()
	s.removeLocked(from, name)
	s.mu.Unlock()
	return nil
}

// Create starts a segment, stored by a PutObject at Commit.
func (s *Store) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	return &segWriter{s: s, area: area, name: name}, nil
}

type segWriter struct {
	s    *Store
	area sink.Area
	name string
	buf  []byte
	done bool
}

func (w *segWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	return len(p), nil
}

func (w *segWriter) Sync() error { return nil }

func (w *segWriter) Truncate(size int64) error {
	if size < 0 || size > int64(len(w.buf)) {
		return fmt.Errorf("s3sim: truncate %s to %d bytes: it has %d", w.name, size, len(w.buf))
	}
	w.buf = w.buf[:size]
	return nil
}

func (w *segWriter) Commit(ctx context.Context) error {
	if w.done {
		return nil
	}
	if err := w.s.request(ctx, "PutObject"); err != nil {
		return err
	}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if o, ok := w.s.objs[w.area][w.name]; ok && !bytes.Equal(o.data, w.buf) {
		return fmt.Errorf("%w: %s segment %s", sink.ErrExist, w.area, w.name)
	}
	w.s.addLocked(w.area, w.name, object{data: slices.Clone(w.buf), at: time.Now()})
	w.done = true
	return nil
}

func (w *segWriter) Abort() error {
	w.buf = nil
	return nil
}

// ReadRecord is a GetObject.
func (s *Store) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	if err := s.request(ctx, "GetObject"); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[name]
	if !ok {
		return nil, "", fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
	}
	return slices.Clone(r.data), r.version, nil
}

// WriteRecord is a conditional PutObject.
func (s *Store) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	if err := s.request(ctx, "PutObject"); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[name]
	if ifVersion == "" && ok || ifVersion != "" && (!ok || r.version != ifVersion) {
		return "", fmt.Errorf("%w: record of %s", sink.ErrConflict, name)
	}
	s.rev++
	v := strconv.FormatUint(s.rev, 10)
	s.records[name] = record{data: slices.Clone(data), version: v}
	return v, nil
}

// DeleteRecord is a HeadObject and a conditional DeleteObject.
func (s *Store) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	if err := s.request(ctx, "HeadObject"); err != nil {
		return err
	}
	s.mu.Lock()
	_, ok := s.records[name]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: record of %s", sink.ErrNotFound, name)
	}
	if err := s.request(ctx, "DeleteObject"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.records[name]
	switch {
	case !ok:
		return nil // gone meanwhile: S3's DELETE of a missing key succeeds
	case r.version != ifVersion:
		return fmt.Errorf("%w: record of %s", sink.ErrConflict, name)
	}
	delete(s.records, name)
	return nil
}

// RecordNames lists the records: a ListObjects per page.
func (s *Store) RecordNames(ctx context.Context) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if err := s.request(ctx, "ListObjects"); err != nil {
			yield("", err)
			return
		}
		s.mu.Lock()
		names := make([]string, 0, len(s.records))
		for n := range s.records {
			names = append(names, n)
		}
		s.mu.Unlock()
		slices.Sort(names)
		for i, n := range names {
			if i > 0 && i%pageSize == 0 {
				if err := s.request(ctx, "ListObjects"); err != nil {
					yield("", err)
					return
				}
			}
			if !yield(n, nil) {
				return
			}
		}
	}
}
