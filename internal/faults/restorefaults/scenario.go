package restorefaults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// The scenario's data: three segments of small blocks.
const (
	recordsA, recordsB, recordsC = 400, 240, 160
	blockSize                    = 2 << 10
	poison                       = "poison"  // does not decode
	refused                      = "refused" // the destination always refuses it
)

// Seed writes the scenario's segments into dir and returns every record
// and the largest number of records in a block.
func Seed(dir string) (items []string, maxBlock int, err error) {
	base := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	segs := []struct {
		n      int
		reason func(i int) string
	}{
		{recordsA, func(int) string { return "failed" }},
		{recordsB, func(i int) string { return []string{"failed", "leak"}[i%2] }},
		{recordsC, func(int) string { return "leak" }},
	}
	w := &fs.Writer{Directory: dir}
	for s, sg := range segs {
		created := base.Add(time.Duration(s) * time.Minute)
		id := segment.NewID(created)
		sw, err := w.Create(context.Background(), segment.FileName(created, id))
		if err != nil {
			return nil, 0, err
		}
		sw2, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, &segment.WriterOptions{BlockSize: blockSize})
		if err != nil {
			return nil, 0, err
		}
		for i := range sg.n {
			it := fmt.Sprintf("%c%04d-%s", 'a'+s, i, strings.Repeat("x", i%23))
			switch {
			case s == 0 && i == 150:
				it = poison + "-a150"
			case s == 1 && i == 100:
				it = refused + "-b100"
			}
			if err := sw2.Add(created.Add(time.Duration(i)*time.Millisecond), map[string]string{dlqdump.HeaderReason: sg.reason(i)}, []byte(it)); err != nil {
				return nil, 0, err
			}
			items = append(items, it)
		}
		if err := sw2.Close(); err != nil {
			return nil, 0, err
		}
		if err := sw.Commit(context.Background()); err != nil {
			return nil, 0, err
		}
	}
	maxBlock, err = largestBlock(dir)
	return items, maxBlock, err
}

func largestBlock(dir string) (int, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+segment.Ext))
	if err != nil {
		return 0, err
	}
	m := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, err
		}
		st, _ := f.Stat()
		r, err := segment.NewReader(f, st.Size(), nil)
		if err != nil {
			f.Close()
			return 0, err
		}
		for _, b := range r.Footer().Blocks {
			m = max(m, int(b.Count))
		}
		f.Close()
	}
	return m, nil
}

// decoder decodes records as strings and fails on poisoned ones.
type decoder struct{}

func (decoder) Decode(b []byte) (any, error) {
	if strings.HasPrefix(string(b), poison) {
		return nil, errors.New("poisoned record")
	}
	return string(b), nil
}

// destination collects what it accepts; it always refuses refused records,
// and calls onAccept after each accepted one.
type destination struct {
	mu       sync.Mutex
	got      []string
	onAccept func(n int)
}

var errRefused = errors.New("the destination refuses this record")

func (d *destination) Enqueue(x any) error {
	s := x.(string)
	if strings.HasPrefix(s, refused) {
		return errRefused
	}
	d.mu.Lock()
	d.got = append(d.got, s)
	n := len(d.got)
	d.mu.Unlock()
	if d.onAccept != nil {
		d.onAccept(n)
	}
	return nil
}

func (d *destination) items() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.got...)
}

// metrics counts what restorers report.
type metrics struct {
	dlqdump.NopMetrics
	restored, quarantined atomic.Int64
	blocks                *[]int // when set, the deliveries so far at each Restore
}

func (m *metrics) Restore(records, _ int) {
	n := m.restored.Add(int64(records))
	if m.blocks != nil {
		*m.blocks = append(*m.blocks, int(n))
	}
}
func (m *metrics) Quarantine(_ string, records int) { m.quarantined.Add(int64(records)) }

// config returns the restorers' config over rd.
func config(rd sink.Reader, dst *destination, mw *metrics) *dlqdump.Config {
	return &dlqdump.Config{
		Reader:        rd,
		Decoder:       decoder{},
		Queue:         dst,
		MetricsWriter: mw,
		Archive:       true,
		MaxAttempts:   2,
		RetryBase:     time.Millisecond,
		RetryMax:      time.Millisecond,
		Lease:         claimsLease,
		Owner:         "restorefaults",
	}
}

// claimsLease is the lease of the scenario's restorers: a claim left by a
// run that failed or died is taken over that long after it is first seen.
const claimsLease = 150 * time.Millisecond

// passes runs the scenario's two passes: filtered on reason=failed, then
// every record. It returns the first error.
func passes(ctx context.Context, r *dlqdump.Restorer) error {
	_, err1 := r.Run(ctx, dlqdump.RunOptions{Where: dlqdump.Headers{dlqdump.HeaderReason: "failed"}})
	_, err2 := r.Run(ctx, dlqdump.RunOptions{})
	return errors.Join(err1, err2)
}
