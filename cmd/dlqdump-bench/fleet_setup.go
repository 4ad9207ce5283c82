package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// dumpInto dumps o.n records of the pool into a Queue of the default
// settings (Capacity o.capacity) writing into w, from GOMAXPROCS producers,
// and returns the time until Close returned: everything stored.
func dumpInto(w sink.Writer, o *options, pool [][]byte) (time.Duration, error) {
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: o.capacity, EnqueueTimeout: time.Minute})
	if err != nil {
		return 0, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	start := time.Now()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(o.n) {
					return
				}
				if err := q.Enqueue(pool[i%int64(len(pool))]); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := q.Close(); err != nil {
		return 0, err
	}
	d := time.Since(start)
	if e := first.Load(); e != nil {
		return 0, *e
	}
	return d, nil
}

// smallTemplate dumps o.smallRecords records into a temporary directory in
// segments of Capacity o.smallCapacity, the segments every store restores,
// and returns the directory and the records.
func smallTemplate(o *options, pool [][]byte) (string, int, error) {
	dir, err := os.MkdirTemp("", "dlqdump-bench-small-")
	if err != nil {
		return "", 0, err
	}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: o.smallCapacity, EnqueueTimeout: time.Minute})
	if err != nil {
		return "", 0, err
	}
	for i := range o.smallRecords {
		if err := q.Enqueue(pool[i%len(pool)]); err != nil {
			return "", 0, err
		}
	}
	return dir, o.smallRecords, q.Close()
}

// seedStore copies the segments of dir into rd's ready area, 8 at a time,
// and returns how many.
func seedStore(rd sink.Reader, dir string) (int, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+segment.Ext))
	if err != nil {
		return 0, err
	}
	if r, ok := rd.(*fs.Reader); ok {
		if err := os.MkdirAll(r.Directory, 0o750); err != nil {
			return 0, err
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan string)
	)
	for range 8 {
		wg.Go(func() {
			for p := range next {
				if err := copyInto(rd, p); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, p := range paths {
		next <- p
	}
	close(next)
	wg.Wait()
	return len(paths), errors.Join(errs...)
}

func copyInto(rd sink.Reader, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	ctx := context.Background()
	sw, err := rd.Create(ctx, sink.AreaReady, filepath.Base(path))
	if err != nil {
		return err
	}
	if _, err := sw.Write(b); err != nil {
		_ = sw.Abort()
		return err
	}
	return sw.Commit(ctx)
}

// drainWith restores a store with n Restorers of the default settings (and
// one Owner, as replicas of a service), each with a Reader of its own, each
// making passes until nothing is left and no other holds a segment, as
// replicas draining a backlog do. It checks that every one of the records
// was delivered once and returns how long it took.
func drainWith(reader func() sink.Reader, n, records, segments int) (time.Duration, error) {
	var delivered atomic.Int64
	rs := make([]*dlqdump.Restorer, n)
	for i := range rs {
		r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: reader(), Decoder: decoder.Fallthrough{}, Queue: nopQueue{&delivered}, Owner: "bench"})
		if err != nil {
			return 0, err
		}
		defer r.Close()
		rs[i] = r
	}
	var (
		wg    sync.WaitGroup
		first atomic.Pointer[error]
		done  atomic.Int64
	)
	start := time.Now()
	for _, r := range rs {
		wg.Go(func() {
			for {
				rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
				done.Add(int64(rep.Segments))
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				if rep.Claimed == 0 && r.Stats().Ready == 0 {
					return
				}
				// Segments are held by the others: look again soon.
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	if e := first.Load(); e != nil {
		return d, *e
	}
	if got := delivered.Load(); got != int64(records) || done.Load() != int64(segments) {
		return d, fmt.Errorf("%d restorers delivered %d of %d records and completed %d of %d segments", n, got, records, done.Load(), segments)
	}
	return d, nil
}

// blocksOf returns the blocks of a ready segment, from its footer.
func blocksOf(ctx context.Context, rd sink.Reader, name string) (int, error) {
	f, err := rd.Open(ctx, sink.AreaReady, name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: name})
	if err != nil {
		return 0, err
	}
	if ft := sr.Footer(); ft != nil {
		return len(ft.Blocks), nil
	}
	n := 0
	for {
		if _, err := sr.NextBlock(); err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
		n++
	}
}
