package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// diskFull dumps into a directory that runs out of space: a small tmpfs when
// this process may mount one, else a sink that fails with ENOSPC past a byte
// budget. Enqueue must report the error clearly (backpressure naming the
// cause), nothing half-written may be published, and once space returns
// every accepted record must be published.
func diskFull(*options) []result {
	base, _ := os.MkdirTemp("", "dlqdump-full-")
	defer os.RemoveAll(base)
	dir := filepath.Join(base, "dump")
	if err := os.Mkdir(dir, 0o750); err != nil {
		return []result{{section: "disk full", figures: err.Error()}}
	}
	var w dlqdump.Writer = &fs.Writer{Directory: dir}
	var grow func() error
	how := "tmpfs of 1 MiB"
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).Run(); err == nil {
		defer exec.Command("umount", dir).Run()
		grow = func() error { return exec.Command("mount", "-o", "remount,size=64m", dir).Run() }
	} else {
		how = "injected ENOSPC past 1 MiB (could not mount a tmpfs: " + err.Error() + ")"
		bw := &budgetWriter{Writer: w}
		bw.budget.Store(1 << 20)
		w = bw
		grow = func() error { bw.budget.Store(1 << 40); return nil }
	}
	q, err := dlqdump.NewQueue(&dlqdump.Config{
		Writer: w, Capacity: 64 * dlqdump.Kilobyte, BlockSize: 4 * dlqdump.Kilobyte,
		Codec: dlqdump.NoCompression, MaxPending: 512 * dlqdump.Kilobyte, EnqueueTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		return []result{{section: "disk full", figures: err.Error()}}
	}
	accepted := map[string]bool{}
	var refusal error
	for i := 0; refusal == nil && i < 100_000; i++ {
		id := fmt.Sprintf("full-%06d", i)
		if err := q.Enqueue(id + "|" + strings.Repeat("z", 200)); err != nil {
			refusal = err
			break
		}
		accepted[id] = true
	}
	clear := refusal != nil && errors.Is(refusal, dlqdump.ErrBackpressure) && strings.Contains(refusal.Error(), "no space left on device")
	// Everything published while the disk was full must be whole.
	var broken int
	paths, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
	for _, p := range paths {
		if err := eachRecord(p, func(*segment.Record) {}); err != nil {
			broken++
		}
	}
	publishedFull := len(paths)
	if err := grow(); err != nil {
		return []result{{section: "disk full", figures: "could not give the space back: " + err.Error()}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	closeErr := q.Shutdown(ctx)
	seen := map[string]int{}
	paths, _ = filepath.Glob(filepath.Join(dir, "*.dlq"))
	for _, p := range paths {
		if err := eachRecord(p, func(rec *segment.Record) {
			id, _, _ := strings.Cut(string(rec.Payload), "|")
			seen[id]++
		}); err != nil {
			broken++
		}
	}
	var lost, dups int
	for id := range accepted {
		if seen[id] == 0 {
			lost++
		}
	}
	for _, n := range seen {
		dups += max(n-1, 0)
	}
	left := leftoverFiles(dir)
	msg := "<none>"
	if refusal != nil {
		msg = refusal.Error()
		if len(msg) > 160 {
			msg = msg[:160] + "..."
		}
	}
	return []result{{
		section: "disk full",
		figures: fmt.Sprintf("%d accepted before the disk filled, %d segments published while full, %d damaged, after space returned: %d lost, %d duplicated, %d temp files left, close: %v",
			len(accepted), publishedFull, broken, lost, dups, len(left), closeErr),
		bound: "a clear refusal, 0 damaged, 0 lost, 0 duplicated, 0 left",
		ok:    clear && broken == 0 && lost == 0 && dups == 0 && len(left) == 0 && closeErr == nil,
		note:  how + "; the refusal: " + msg,
	}}
}

// budgetWriter fails segment writes with ENOSPC once its byte budget is spent.
type budgetWriter struct {
	dlqdump.Writer
	used, budget atomic.Int64
}

func (w *budgetWriter) Create(ctx context.Context, name string) (sink.SegmentWriter, error) {
	sw, err := w.Writer.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &budgetSegment{SegmentWriter: sw, w: w}, nil
}

type budgetSegment struct {
	sink.SegmentWriter
	w *budgetWriter
}

func (s *budgetSegment) Write(p []byte) (int, error) {
	if s.w.used.Load()+int64(len(p)) > s.w.budget.Load() {
		return 0, &os.PathError{Op: "write", Path: "segment", Err: syscall.ENOSPC}
	}
	s.w.used.Add(int64(len(p)))
	return s.SegmentWriter.Write(p)
}

func (s *budgetSegment) Close() error {
	if c, ok := s.SegmentWriter.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
