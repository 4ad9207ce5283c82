package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/sink"
)

// benchJobsOneStore measures many restore jobs over one store at once
// (issue 28, point 4): -jobs jobs, job K `--where batch=K --rate R` over
// its -batch records of one store whose segments each hold records of two
// batches, run by -runners runners of -restorers Restorers each, all due at
// the same second. It prints a job's duration (from its start to its end)
// at p50, p90 and max against the ideal (-batch / -rate), how late the
// jobs started, the passes in all (a job's Attempts), the records the
// passes left to others (the jobs' Skipped: read and not selected, or in
// blocks not read, which nothing they select can be in), what was read:
// the segments' bytes, as a multiple of the store; and how long passes
// waited for segments other jobs held (their number and the time in all):
// jobs over one segment take turns on it, unless they carve their records
// out of it (dlqdump.RunOptions.Carve, which paced jobs do). -two-slow shows
// that: two jobs at 2 records per second over one segment.
//
//	go run ./cmd/dlqdump-bench jobs one-store -runs 3
//	go run ./cmd/dlqdump-bench jobs one-store -two-slow -runs 3
func benchJobsOneStore(args []string) error {
	fl := flag.NewFlagSet("jobs one-store", flag.ExitOnError)
	nJobs := fl.Int("jobs", 30, "jobs, job K selecting batch=K")
	batch := fl.Int("batch", 400, "records per batch (per job)")
	perSeg := fl.Int("segment-records", 170, "records per segment (less than -batch: a segment holds two batches)")
	rateF := fl.Float64("rate", 200, "each job's Rate, records per second")
	runners := fl.Int("runners", 3, "runners")
	restorers := fl.Int("restorers", 4, "Restorers per runner")
	runs := fl.Int("runs", 1, "runs, each on a store of its own")
	slow := fl.Bool("two-slow", false, "two slow jobs over one segment: -jobs 2 -batch 20 -segment-records 40 -rate 2 -runners 2 -restorers 1 (each job's ideal is 10 s; jobs that take turns on the segment take about the sum)")
	_ = fl.Parse(args)
	if *slow {
		*nJobs, *batch, *perSeg, *rateF, *runners, *restorers = 2, 20, 40, 2, 2, 1
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tjobs\tsegments\tideal\tduration p50\tp90\tmax\tdue to end p50\tp90\tlate p90\tpasses\tmost passes\trecords left\tsegment bytes read\twaits for held segments\t")
	for run := range *runs {
		row, err := benchJobsOneStoreRun(*nJobs, *batch, *perSeg, *rateF, *runners, *restorers)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%d\t%s\n", run+1, row)
	}
	return tw.Flush()
}

// countingReader is an fs.Reader that counts the bytes read from segments.
type countingReader struct {
	*fs.Reader
	n *atomic.Int64
}

func (c countingReader) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	f, err := c.Reader.Open(ctx, area, name)
	if err != nil {
		return nil, err
	}
	return countingFile{File: f, n: c.n}, nil
}

type countingFile struct {
	sink.File
	n *atomic.Int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

func benchJobsOneStoreRun(nJobs, batch, perSeg int, rateF float64, nRunners, nRestorers int) (string, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dlqdump-bench-onestore-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	// The store: record i is of batch i/batch, segment i/perSeg.
	total := nJobs * batch
	rnd := rand.New(rand.NewPCG(1, 2))
	for s := 0; s*perSeg < total; s++ {
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 16 * dlqdump.Megabyte, BlockSize: 16 * dlqdump.Kilobyte})
		if err != nil {
			return "", err
		}
		for i := s * perSeg; i < min(total, (s+1)*perSeg); i++ {
			payload := fmt.Sprintf(`{"id":"%016x","order":%d,"customer":"c-%06d","error":"upstream timeout after %dms","note":"%x"}`,
				rnd.Uint64(), i, rnd.IntN(1e6), rnd.IntN(5000), rnd.Uint64())
			h := dlqdump.Headers{dlqdump.HeaderReason: "failed", "batch": fmt.Sprint(i / batch)}
			if err := q.Enqueue(dlqdump.Envelope{Item: payload, Headers: h}); err != nil {
				return "", err
			}
		}
		if err := q.Close(); err != nil {
			return "", err
		}
	}
	var storeBytes int64
	segments := 0
	for info, err := range (&fs.Reader{Directory: dir}).List(ctx, sink.AreaReady) {
		if err != nil {
			return "", err
		}
		storeBytes += info.Size
		segments++
	}
	read := &atomic.Int64{}
	waits := &waitCounter{}
	rd := countingReader{Reader: &fs.Reader{Directory: dir}, n: read}
	js, err := jobs.Open(rd.Reader)
	if err != nil {
		return "", err
	}
	at := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
	if err := createJobs(ctx, js, nJobs, func(k int) jobs.Spec {
		return jobs.Spec{ID: fmt.Sprintf("batch-%03d", k), At: at, Where: map[string]string{"batch": fmt.Sprint(k)}, Rate: rateF}
	}); err != nil {
		return "", err
	}
	var rns []*jobs.Runner
	for range nRunners {
		var rs []*dlqdump.Restorer
		for range nRestorers {
			r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{AsString: true}, Queue: discard{}, Logger: slog.New(waits)})
			if err != nil {
				return "", err
			}
			defer r.Close()
			rs = append(rs, r)
		}
		rn, err := jobs.NewRunner(js, rs, nil)
		if err != nil {
			return "", err
		}
		if err := rn.Start(); err != nil {
			return "", err
		}
		defer rn.Close()
		rns = append(rns, rn)
	}
	var durs, fromDue, lates []time.Duration
	passes, most := 0, 0
	var left uint64
	for k := range nJobs {
		id := fmt.Sprintf("batch-%03d", k)
		j, err := js.Wait(ctx, id, 20*time.Millisecond)
		if err != nil {
			return "", err
		}
		if j.State != jobs.Completed || j.Delivered != uint64(batch) {
			return "", fmt.Errorf("job %s: %s with %d delivered, want completed with %d", id, j.State, j.Delivered, batch)
		}
		durs = append(durs, j.Finished.Sub(j.Started))
		fromDue = append(fromDue, j.Finished.Sub(j.At))
		lates = append(lates, j.Late())
		passes += j.Attempts
		most = max(most, j.Attempts)
		left += j.Skipped
	}
	for _, rn := range rns {
		_ = rn.Close()
	}
	for _, d := range [][]time.Duration{durs, fromDue, lates} {
		slices.Sort(d)
	}
	q := func(d []time.Duration, p int) string {
		return d[min(len(d)-1, len(d)*p/100)].Round(10 * time.Millisecond).String()
	}
	ideal := time.Duration(float64(batch) / rateF * float64(time.Second))
	return fmt.Sprintf("%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%.1f× the store\t%d, %s\t",
		nJobs, segments, ideal, q(durs, 50), q(durs, 90), q(durs, 100), q(fromDue, 50), q(fromDue, 90), q(lates, 90), passes, most, left,
		float64(read.Load())/float64(storeBytes), waits.n.Load(), time.Duration(waits.d.Load()).Round(10*time.Millisecond)), nil
}

// waitCounter is a slog.Handler that counts the Restorers' waits for
// segments other restorers held, and sums how long they took.
type waitCounter struct {
	n, d atomic.Int64
}

func (w *waitCounter) Enabled(context.Context, slog.Level) bool { return true }

func (w *waitCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "waited for a segment held by another restorer" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "waited" {
			w.n.Add(1)
			w.d.Add(int64(a.Value.Duration()))
		}
		return true
	})
	return nil
}

func (w *waitCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *waitCounter) WithGroup(string) slog.Handler      { return w }
