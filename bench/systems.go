package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	diskqueue "github.com/nsqio/go-diskqueue"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	dfs "github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/s3"
)

// Systems measured.
const (
	sysDLQ        = "dlqdump-fs"         // Queue -> fs.Writer, buffered
	sysDLQDurable = "dlqdump-fs-durable" // Queue -> fs.Writer, Durable, many producers
	sysDLQS3      = "dlqdump-s3"         // Queue -> s3.Writer (versitygw), buffered
	sysDQ         = "diskqueue"          // go-diskqueue, fsync on a timer
	sysDQSync     = "diskqueue-sync1"    // go-diskqueue, SyncEvery 1, many producers
	sysZstd       = "zstd"               // zstd EncodeAll / DecodeAll, one core
)

// Configuration of go-diskqueue.
const (
	// dqSyncEveryBuffered: never by count; go-diskqueue still fsyncs on its
	// timer (dqSyncTimeout), when it starts a new file and on Close, which
	// is about what the buffered Queue does (it syncs each segment it
	// publishes). NSQ's own default is 2500 messages and 2s.
	dqSyncEveryBuffered = 1 << 40
	dqSyncTimeout       = 2 * time.Second
	dqMaxMsgSize        = 64 << 20
	dqName              = "bench"
)

var sysLabel = map[string]string{
	sysDLQ:        "dlqdump Queue → fs, buffered",
	sysDLQDurable: "dlqdump Queue → fs, Durable",
	sysDLQS3:      "dlqdump Queue → S3 (versitygw), buffered",
	sysDQ:         "go-diskqueue, fsync every 2 s",
	sysDQSync:     "go-diskqueue, SyncEvery 1",
	sysZstd:       "zstd, 1 core (ceiling)",
}

var restoreLabel = map[string]string{
	sysDLQ:   "dlqdump Restorer ← fs",
	sysDLQS3: "dlqdump Restorer ← S3 (versitygw)",
	sysDQ:    "go-diskqueue ReadChan drained",
	sysZstd:  "zstd DecodeAll, 1 core (ceiling)",
}

func isDLQ(sys string) bool { return strings.HasPrefix(sys, "dlqdump") }

// dlqQueue starts a Queue for the system, and returns what to call after
// Queue.Close (the S3 Writer's Close, which waits for the uploads).
func dlqQueue(s *spec, ds *dataSet, dir, prefix string) (*dlqdump.Queue, func() error, error) {
	cfg := &dlqdump.Config{
		Capacity:       dlqdump.MemorySize(s.Capacity),
		Durable:        s.System == sysDLQDurable,
		EnqueueTimeout: time.Minute,
		Encoder:        ds.encoder(),
	}
	var after func() error
	if s.System == sysDLQS3 {
		w := &s3.Writer{Client: s.S3.Client(), Bucket: s.S3.Bucket, Prefix: prefix}
		cfg.Writer = w
		after = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			return w.Close(ctx)
		}
	} else {
		cfg.Writer = &dfs.Writer{Directory: dir}
	}
	q, err := dlqdump.NewQueue(cfg)
	return q, after, err
}

func dlqProducer(q *dlqdump.Queue, ds *dataSet) func() producerFunc {
	return func() producerFunc {
		return func(i int) error { return q.Enqueue(ds.item(i)) }
	}
}

func openDiskQueue(s *spec, dir string) (diskqueue.Interface, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	every := int64(dqSyncEveryBuffered)
	if s.System == sysDQSync {
		every = 1
	}
	return diskqueue.New(dqName, dir, s.Capacity, 0, dqMaxMsgSize, every, dqSyncTimeout, dqLog), nil
}

func dqLog(lvl diskqueue.LogLevel, f string, args ...any) {
	if lvl >= diskqueue.WARN {
		fmt.Fprintf(os.Stderr, "diskqueue %s: %s\n", lvl, fmt.Sprintf(f, args...))
	}
}

func dqProducer(dq diskqueue.Interface, ds *dataSet) func() producerFunc {
	return func() producerFunc {
		var scratch []byte
		return func(i int) error {
			b, err := ds.bytes(i, &scratch)
			if err != nil {
				return err
			}
			return dq.Put(b)
		}
	}
}

// openProducer opens s.System on dir (or S3 prefix) and returns its producer
// factory and what closes it, flushing everything written.
func openProducer(s *spec, ds *dataSet, dir, prefix string) (func() producerFunc, func() error, error) {
	switch {
	case isDLQ(s.System):
		q, after, err := dlqQueue(s, ds, dir, prefix)
		if err != nil {
			return nil, nil, err
		}
		return dlqProducer(q, ds), func() error {
			if err := q.Close(); err != nil {
				return err
			}
			if after != nil {
				return after()
			}
			return nil
		}, nil
	case s.System == sysDQ || s.System == sysDQSync:
		dq, err := openDiskQueue(s, dir)
		if err != nil {
			return nil, nil, err
		}
		return dqProducer(dq, ds), dq.Close, nil
	}
	return nil, nil, fmt.Errorf("unknown system %q", s.System)
}

// childDump measures sustained dumping: items/s, bytes stored, peak RSS. It
// leaves what it wrote for childRestore.
func childDump(s *spec, ds *dataSet) (*result, error) {
	var res result
	res.BaseRSS = startPhase()
	newProducer, finish, err := openProducer(s, ds, s.Dir, s.Prefix)
	if err != nil {
		return nil, fmt.Errorf("dump: %w", err)
	}
	n, d, err := sustained(newProducer, finish, s.N, s.Window, s.Producers)
	if err != nil {
		return nil, err
	}
	res.PeakRSS = peakRSS()
	res.Items, res.Payload, res.Elapsed = n, ds.payload(n), d
	if s.System == sysDLQS3 {
		res.Disk, res.Files, err = s3Usage(s)
	} else {
		res.Disk, res.Files, err = dirUsage(s.Dir)
	}
	return &res, err
}

// nopQueue is a restore destination that accepts everything.
type nopQueue struct{ n *atomic.Int64 }

func (q nopQueue) Enqueue(any) error { q.n.Add(1); return nil }

// childRestore measures reading back the s.N items childDump wrote.
func childRestore(s *spec, ds *dataSet) (*result, error) {
	var res result
	switch {
	case isDLQ(s.System):
		var rd dlqdump.Reader = &dfs.Reader{Directory: s.Dir}
		if s.System == sysDLQS3 {
			rd = &s3.Reader{Client: s.S3.Client(), Bucket: s.S3.Bucket, Prefix: s.Prefix}
		}
		var delivered atomic.Int64
		res.BaseRSS = startPhase()
		start := time.Now()
		r, err := dlqdump.NewRestorer(&dlqdump.Config{
			Reader:  rd,
			Decoder: decoder.Fallthrough{},
			Queue:   nopQueue{&delivered},
		})
		if err != nil {
			return nil, err
		}
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
		if err != nil {
			return nil, err
		}
		if err := r.Close(); err != nil {
			return nil, err
		}
		res.Elapsed = time.Since(start)
		res.PeakRSS = peakRSS()
		if rep.Delivered != uint64(s.N) || delivered.Load() != int64(s.N) {
			return nil, fmt.Errorf("restored %d (%d delivered) of %d records", rep.Delivered, delivered.Load(), s.N)
		}
		res.Files = rep.Segments
	case s.System == sysDQ || s.System == sysDQSync:
		res.BaseRSS = startPhase()
		start := time.Now()
		dq, err := openDiskQueue(s, s.Dir)
		if err != nil {
			return nil, err
		}
		if depth := dq.Depth(); depth != int64(s.N) {
			return nil, fmt.Errorf("diskqueue holds %d messages, want %d", depth, s.N)
		}
		ch := dq.ReadChan()
		var sink int
		for range s.N {
			sink += len(<-ch)
		}
		if err := dq.Close(); err != nil {
			return nil, err
		}
		res.Elapsed = time.Since(start)
		res.PeakRSS = peakRSS()
		if want := ds.payload(s.N); int64(sink) != want {
			return nil, fmt.Errorf("read %d bytes, want %d", sink, want)
		}
	default:
		return nil, fmt.Errorf("restore: unknown system %q", s.System)
	}
	res.Items, res.Payload = s.N, ds.payload(s.N)
	return &res, nil
}

// childLatency measures Enqueue latency at fractions of the system's
// sustained rate, each on a fresh instance.
func childLatency(s *spec, ds *dataSet) (*result, error) {
	var res result
	for _, frac := range s.Fracs {
		dir := filepath.Join(s.Dir, fmt.Sprintf("lat-%.0f", frac*100))
		prefix := fmt.Sprintf("%slat-%.0f/", s.Prefix, frac*100)
		newProducer, finish, err := openProducer(s, ds, dir, prefix)
		if err != nil {
			return nil, fmt.Errorf("latency: %w", err)
		}
		target := s.Rate * frac
		lat, achieved, err := paced(newProducer, target, s.Producers, s.LatDur)
		if ferr := finish(); err == nil {
			err = ferr
		}
		if err != nil {
			return nil, err
		}
		res.Latency = append(res.Latency, latPointOf(frac, target, achieved, lat))
		if s.System == sysDLQS3 {
			if err := s3Clean(s, prefix); err != nil {
				return nil, err
			}
		} else if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	return &res, nil
}

// dirUsage returns the bytes of the regular files under dir and how many data
// files (segments, diskqueue files) there are.
func dirUsage(dir string) (int64, int, error) {
	var total int64
	var files int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		name := d.Name()
		if strings.HasSuffix(name, ".dlq") || strings.HasSuffix(name, ".dat") && !strings.Contains(name, ".meta.") {
			files++
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return total, files, err
}
