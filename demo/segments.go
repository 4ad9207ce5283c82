package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	dsink "github.com/dlqdump/dlqdump/sink"
)

// segmentRow is a row of the dashboard's segment table.
type segmentRow struct {
	Name     string    `json:"name"`
	Area     string    `json:"area"`
	Size     int64     `json:"size"`
	Records  uint64    `json:"records"`
	Modified time.Time `json:"modified"`
	Claimed  bool      `json:"claimed"`
	Reason   string    `json:"reason,omitempty"`
}

// segmentLister lists the newest segments, reading each one's record count
// from its footer once (segments do not change once published).
type segmentLister struct {
	rd    dlqdump.Reader
	cl    *claims.Claimer // reads claim records, never claims
	mu    sync.Mutex
	cache map[string]uint64

	cmu              sync.Mutex
	countedAt        time.Time
	ready, quarantin int
}

// counts returns how many segments are ready and quarantined, listing the
// store at most once a second.
func (l *segmentLister) counts(ctx context.Context) (ready, quarantined int) {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	if time.Since(l.countedAt) < time.Second {
		return l.ready, l.quarantin
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l.countedAt = time.Now()
	r, q := 0, 0
	for _, err := range l.rd.List(ctx, dsink.AreaReady) {
		if err != nil {
			return l.ready, l.quarantin
		}
		r++
	}
	for _, err := range l.rd.List(ctx, dsink.AreaQuarantine) {
		if err != nil {
			return l.ready, l.quarantin
		}
		q++
	}
	l.ready, l.quarantin = r, q
	return r, q
}

func (l *segmentLister) list(ctx context.Context, n int) ([]segmentRow, error) {
	var rows []segmentRow
	records := map[string]bool{}
	for name, err := range l.rd.RecordNames(ctx) {
		if err != nil {
			return nil, err
		}
		records[name] = true
	}
	for _, area := range []dsink.Area{dsink.AreaReady, dsink.AreaQuarantine} {
		for si, err := range l.rd.List(ctx, area) {
			if err != nil {
				return nil, err
			}
			row := segmentRow{Name: si.Name, Area: area.String(), Size: si.Size, Modified: si.Modified, Reason: si.Reason}
			if area == dsink.AreaReady && records[si.Name] {
				_, row.Claimed, _ = l.cl.Inspect(ctx, si.Name)
			}
			rows = append(rows, row)
		}
	}
	slices.SortFunc(rows, func(a, b segmentRow) int { return -compareStrings(a.Name, b.Name) })
	if len(rows) > n {
		rows = rows[:n]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range rows {
		key := rows[i].Area + "/" + rows[i].Name
		if c, ok := l.cache[key]; ok {
			rows[i].Records = c
			continue
		}
		area, _ := dsink.ParseArea(rows[i].Area)
		if c, ok := footerRecords(ctx, l.rd, area, rows[i].Name); ok {
			l.cache[key] = c
			rows[i].Records = c
		}
	}
	if len(l.cache) > 4096 {
		clear(l.cache)
	}
	return rows, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func footerRecords(ctx context.Context, rd dlqdump.Reader, area dsink.Area, name string) (uint64, bool) {
	f, err := rd.Open(ctx, area, name)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
	if err != nil || sr.Footer() == nil {
		return 0, false
	}
	return sr.Footer().Records, true
}

// quarantineScanner reads new quarantine segments and marks their tasks
// quarantined.
type quarantineScanner struct {
	rd   dlqdump.Reader
	st   *store
	mu   sync.Mutex
	seen map[string]bool
	recs atomic.Uint64 // quarantined records found
}

// catchUp scans when the Restorer quarantined more records than were found:
// the counter moves before the quarantine segment is published.
func (q *quarantineScanner) catchUp(ctx context.Context, quarantined uint64) {
	if quarantined > q.recs.Load() {
		q.scan(ctx)
	}
}

func (q *quarantineScanner) scan(ctx context.Context) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for si, err := range q.rd.List(ctx, dsink.AreaQuarantine) {
		if err != nil {
			return
		}
		if q.seen[si.Name] {
			continue
		}
		f, err := q.rd.Open(ctx, dsink.AreaQuarantine, si.Name)
		if err != nil {
			continue
		}
		sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: si.Name})
		if err != nil {
			f.Close()
			continue
		}
		for {
			rec, err := sr.Next()
			if err != nil {
				break
			}
			q.recs.Add(1)
			why, _ := rec.Headers.Get(dlqdump.HeaderQuarantine)
			var r record
			if json.Unmarshal(rec.Payload, &r) != nil {
				continue
			}
			t := q.st.get(r.ID)
			if t == nil {
				continue
			}
			t.mu.Lock()
			if t.state != stQuarantined && t.state != stDone {
				t.setLocked(stQuarantined, why)
			}
			t.mu.Unlock()
		}
		f.Close()
		q.seen[si.Name] = true
	}
}

// humanBytes formats n as 512B, 1.5KiB, 12MiB.
func humanBytes(n int64) string {
	v, units := float64(n), []string{"B", "KiB", "MiB", "GiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 || v >= 10 {
		return fmt.Sprintf("%.0f%s", v, units[i])
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}
