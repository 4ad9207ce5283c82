package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	dfs "github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// childScaleItems dumps s.N items into a fresh directory and restores them,
// s.Repeat times, and reports the median durations: the cost per item as N
// grows.
func childScaleItems(s *spec, ds *dataSet) (*result, error) {
	var dumps, restores []time.Duration
	var res result
	var segs int
	var restoreRSS int64
	for r := range max(s.Repeat, 1) {
		rs := *s
		rs.Dir = filepath.Join(s.Dir, fmt.Sprintf("run-%d", r))
		d, err := childDump(&rs, ds)
		if err != nil {
			return nil, err
		}
		if d.Items != s.N {
			return nil, fmt.Errorf("dumped %d of %d items", d.Items, s.N)
		}
		rr, err := childRestore(&rs, ds)
		if err != nil {
			return nil, err
		}
		if err := os.RemoveAll(rs.Dir); err != nil {
			return nil, err
		}
		dumps = append(dumps, d.Elapsed)
		restores = append(restores, rr.Elapsed)
		res.PeakRSS = max(res.PeakRSS, d.PeakRSS)
		restoreRSS = max(restoreRSS, rr.PeakRSS)
		res.Disk, segs = d.Disk, d.Files
	}
	res.Items, res.Payload = s.N, ds.payload(s.N)
	res.ScaleN = &itemsPoint{N: s.N, Dump: median(dumps), Restore: median(restores), Repeat: len(dumps), Segments: segs, RestoreRSS: restoreRSS}
	return &res, nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// segmentRecords is how many records each segment of the segments curve
// holds.
const segmentRecords = 10

// maxSampled bounds how many segments are claimed, and restored, at each
// point of the segments curve.
const maxSampled = 200

// childScaleSegments fills a directory with s.Segments small segments, then
// times a full listing, Claim+Release of segments spread over the listing,
// and a Restorer pass restoring the oldest of them: the cost per segment as
// the directory grows.
func childScaleSegments(s *spec, ds *dataSet) (*result, error) {
	ctx := context.Background()
	dir := s.Dir
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	names := make([]string, s.Segments)
	var segBytes int64
	comp, err := segment.NewCompressor(segment.CodecZstd, 0)
	if err != nil {
		return nil, err
	}
	var bb segment.BlockBuilder
	var eb segment.EncodedBlock
	var body []byte
	for k := range s.Segments {
		t := base.Add(time.Duration(k) * time.Millisecond)
		id := segment.NewID(t)
		names[k] = segment.FileName(t, id)
		bb.Reset(bb.Raw()[:0])
		for j := range segmentRecords {
			body = append(segment.AppendHeaders(body[:0], nil), ds.raw[(k*segmentRecords+j)%len(ds.raw)]...)
			bb.Add(t.UnixNano(), body)
		}
		comp.Encode(&eb, &bb)
		f, err := os.Create(filepath.Join(dir, names[k]))
		if err != nil {
			return nil, err
		}
		bw := bufio.NewWriter(f)
		w, err := segment.NewWriter(bw, segment.Header{Codec: segment.CodecZstd, Created: t, ID: id}, nil)
		if err != nil {
			return nil, err
		}
		if err := w.WriteBlock(&eb); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		if err := bw.Flush(); err != nil {
			return nil, err
		}
		segBytes = w.Size()
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	if !slices.IsSorted(names) {
		return nil, fmt.Errorf("segment names do not sort by time")
	}
	p := &segPoint{Segments: s.Segments, Records: segmentRecords, SegmentBytes: segBytes}
	rd := &dfs.Reader{Directory: dir}
	var res result
	res.BaseRSS = startPhase()

	// A full listing, best of 3.
	for range 3 {
		start := time.Now()
		n := 0
		for _, err := range rd.List(ctx, sink.AreaReady) {
			if err != nil {
				return nil, err
			}
			n++
		}
		d := time.Since(start)
		if n != s.Segments {
			return nil, fmt.Errorf("listed %d of %d segments", n, s.Segments)
		}
		if p.List == 0 || d < p.List {
			p.List = d
		}
	}

	// Claim and release segments spread over the listing.
	m := min(s.Segments, maxSampled)
	var claimTimes []time.Duration
	claimer, err := claims.NewClaimer(rd, "bench", time.Minute, nil)
	if err != nil {
		return nil, err
	}
	for i := range m {
		start := time.Now()
		c, err := claimer.Claim(ctx, names[i*s.Segments/m])
		if err != nil {
			return nil, err
		}
		if err := c.Release(ctx); err != nil {
			return nil, err
		}
		claimTimes = append(claimTimes, time.Since(start))
	}
	p.Claim = median(claimTimes)
	p.Claimed = m

	// Restore the oldest m segments in one pass, timing each from its Claim
	// to its Complete.
	var delivered atomic.Int64
	tr := &timedReader{Reader: rd}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: tr, Decoder: decoder.Fallthrough{}, Queue: nopQueue{&delivered}})
	if err != nil {
		return nil, err
	}
	rep, err := r.Run(ctx, dlqdump.RunOptions{Limit: uint64(m * segmentRecords)})
	if err != nil {
		return nil, err
	}
	if err := r.Close(); err != nil {
		return nil, err
	}
	if rep.Segments != m || delivered.Load() != int64(m*segmentRecords) {
		return nil, fmt.Errorf("restored %d segments, %d records; want %d, %d", rep.Segments, delivered.Load(), m, m*segmentRecords)
	}
	p.Restored = m
	if len(tr.restores) != m {
		return nil, fmt.Errorf("timed %d segment restores, want %d", len(tr.restores), m)
	}
	p.Restore = median(tr.restores)
	res.PeakRSS = peakRSS()
	res.Segments = p
	return &res, nil
}

// timedReader is an fs.Reader that times each segment restored, from the
// first read of its claim record to its deletion.
type timedReader struct {
	*dfs.Reader
	mu       sync.Mutex
	started  map[string]time.Time
	restores []time.Duration
}

// A segment's restore starts with the first request about its claim (a
// read of its record, or the record's creation) and ends when the segment
// leaves the ready area (Delete: an fs.Reader is no sink.Discarder).
func (t *timedReader) start(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started == nil {
		t.started = map[string]time.Time{}
	}
	if _, ok := t.started[name]; !ok {
		t.started[name] = time.Now()
	}
}

func (t *timedReader) end(area sink.Area, names ...string) {
	if area != sink.AreaReady {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range names {
		if start, ok := t.started[name]; ok {
			t.restores = append(t.restores, time.Since(start))
			delete(t.started, name)
		}
	}
}

func (t *timedReader) ReadRecord(ctx context.Context, name string) ([]byte, string, error) {
	t.start(name)
	return t.Reader.ReadRecord(ctx, name)
}

func (t *timedReader) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	t.start(name)
	return t.Reader.WriteRecord(ctx, name, data, ifVersion)
}

func (t *timedReader) Delete(ctx context.Context, area sink.Area, name string) error {
	err := t.Reader.Delete(ctx, area, name)
	t.end(area, name)
	return err
}
