package fs

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/sink"
)

// Writers (each with its own Reader, so their own locks) break each other's
// locks at the least contention (breakAfter 0): records are still changed
// by compare-and-swap. Every write reported successful is kept (the final
// revision counts at least all of them), a write reported unsure counts at
// most once, readers see whole records whose revision never goes back, and
// removing the record removes all its files.
func TestRecordBrokenLocksLoseNothing(t *testing.T) {
	defer func(b, s time.Duration) { breakAfter, sealWait = b, s }(breakAfter, sealWait)
	breakAfter, sealWait = 0, time.Minute
	// Writers dawdle now and then while they hold a lock, so that others
	// break it and read before they write.
	defer SetTestHookLocked(nil)
	SetTestHookLocked(func() {
		if mrand.IntN(4) == 0 {
			time.Sleep(time.Duration(mrand.IntN(300)) * time.Microsecond)
		}
	})
	const writers, writes = 4, 40
	dir := t.TempDir()
	name := newSegment(t, dir)
	ctx := t.Context()
	var (
		wg, readWG     sync.WaitGroup
		mu             sync.Mutex
		successes, uns int
		done           = make(chan struct{})
		errs           = make(chan error, writers+1)
	)
	parse := func(b []byte) (int, error) {
		var rev, w int
		if _, err := fmt.Sscanf(string(b), "rev=%d w=%d", &rev, &w); err != nil {
			return 0, fmt.Errorf("record %q: %v", b, err)
		}
		return rev, nil
	}
	for w := range writers {
		wg.Go(func() {
			rd := &Reader{Directory: dir}
			for ok := 0; ok < writes; {
				data, version, err := rd.ReadRecord(ctx, name)
				rev := 0
				switch {
				case errors.Is(err, sink.ErrNotFound):
					version = ""
				case err != nil:
					errs <- err
					return
				default:
					if rev, err = parse(data); err != nil {
						errs <- err
						return
					}
				}
				_, err = rd.WriteRecord(ctx, name, fmt.Appendf(nil, "rev=%d w=%d", rev+1, w), version)
				switch {
				case err == nil:
					ok++
					mu.Lock()
					successes++
					mu.Unlock()
				case errors.Is(err, errUnsure):
					ok++
					mu.Lock()
					uns++
					mu.Unlock()
				case !errors.Is(err, sink.ErrConflict):
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	readWG.Go(func() {
		rd := &Reader{Directory: dir}
		last := 0
		for {
			select {
			case <-done:
				return
			default:
			}
			data, _, err := rd.ReadRecord(ctx, name)
			if errors.Is(err, sink.ErrNotFound) && last == 0 {
				continue
			}
			if err != nil {
				errs <- fmt.Errorf("reader: %w", err)
				return
			}
			rev, err := parse(data)
			if err != nil {
				errs <- fmt.Errorf("reader: %w", err)
				return
			}
			if rev < last {
				errs <- fmt.Errorf("reader saw rev %d after rev %d", rev, last)
				return
			}
			last = rev
		}
	})
	wg.Wait()
	close(done)
	readWG.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	rd := &Reader{Directory: dir}
	data, v, err := rd.ReadRecord(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := parse(data)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, ClaimsDir, name+recordSuffix+"*"))
	t.Logf("%d writes reported successful, %d unsure; final revision %d; %d files", successes, uns, rev, len(files))
	if rev < successes || rev > successes+uns {
		t.Fatalf("final revision %d: %d writes reported successful, %d unsure: a write was lost, or counted twice", rev, successes, uns)
	}
	if err := rd.DeleteRecord(ctx, name, v); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(filepath.Join(dir, ClaimsDir))
	for _, e := range left {
		if strings.HasPrefix(e.Name(), name) {
			t.Errorf("left after the record was removed: %s", e.Name())
		}
	}
}
