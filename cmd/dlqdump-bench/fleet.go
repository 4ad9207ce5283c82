package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/childproc"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/sink"
)

// fleetStore is where one column of the fleet benchmark dumps and restores:
// a directory, or an S3 prefix reached directly or through a latency proxy.
type fleetStore struct {
	name    string
	dir     string         // a directory's parent (a new one per use)
	srv     *s3test.Server // the server the clients reach (the proxy's when there is latency)
	direct  *s3test.Server // the server itself, for set-up outside the measurements
	counter *s3test.Counter
	rtt     time.Duration
	seq     int
	profile string // a file for a CPU profile of the small segments' restore
}

func (s *fleetStore) s3() bool { return s.srv != nil }

// place returns a new place (directory or prefix) in the store.
func (s *fleetStore) place(what string) string {
	s.seq++
	if s.s3() {
		return s3test.UniquePrefix(fmt.Sprintf("bench-%s-%d", what, s.seq))
	}
	return filepath.Join(s.dir, fmt.Sprintf("%s-%d", what, s.seq))
}

// client returns a client of the store's server, counting its requests.
func (s *fleetStore) client() *awss3.Client {
	return s.srv.Client(func(o *awss3.Options) { o.HTTPClient = s.counter.Wrap(o.HTTPClient) })
}

// writer returns the Writer a Queue dumps into place with, as a user would
// configure it (the defaults).
func (s *fleetStore) writer(place string) sink.Writer {
	if s.s3() {
		return &s3.Writer{Client: s.client(), Bucket: s.srv.Bucket, Prefix: place}
	}
	return &fs.Writer{Directory: place}
}

// reader returns a Reader of place with the defaults, counted.
func (s *fleetStore) reader(place string) sink.Reader {
	if s.s3() {
		return &s3.Reader{Client: s.client(), Bucket: s.srv.Bucket, Prefix: place}
	}
	return &fs.Reader{Directory: place}
}

// setup returns a Reader of place for preparing and checking a measurement:
// not counted, without latency.
func (s *fleetStore) setup(place string) sink.Reader {
	if s.s3() {
		return &s3.Reader{Client: s.direct.Client(), Bucket: s.direct.Bucket, Prefix: place}
	}
	return &fs.Reader{Directory: place}
}

// fleetFigures are one store's figures of one round.
type fleetFigures struct {
	dump, restore, small float64 // items/s, items/s, segments/s
	// Requests: of the dump per segment stored, of the restore per segment
	// and per block, of the small segments' restore per segment.
	dumpReq, restoreReq, smallReq s3test.Counts
	dumpSegs, restoreSegs, blocks int
	smallSegs                     int
	// CPU of the small segments' restore: this process's (restorers,
	// clients and the latency proxy), the S3 server's (versitygw's, from
	// /proc) and the whole machine's busy time, and how long it took.
	smallCPU, smallServerCPU, smallBusy, smallTook time.Duration
}

// benchFleet measures, side by side in one run, what a fleet on S3 gets
// against a directory with the default settings: dumping o.n records,
// restoring them with one restorer, and restoring many small segments with
// several restorers at once, from a directory, from S3 (versitygw) and from
// S3 through a proxy adding o.rtt to every request (as AWS would: an HTTP
// proxy, a TCP delay line or both, o.proxy); and the requests per segment
// and per block, and the CPU per request of the small segments' restore.
// Medians of o.rounds rounds, each running every store once.
func benchFleet(w io.Writer, o *options, pool [][]byte) error {
	srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-bench"})
	if err != nil {
		return fmt.Errorf("the fleet benchmark needs versitygw: %w", err)
	}
	defer stop()
	stores := []*fleetStore{
		{name: "directory", dir: o.dir},
		{name: "S3", srv: srv, direct: srv, counter: &s3test.Counter{}},
	}
	if o.proxy != "http" && o.proxy != "tcp" && o.proxy != "both" {
		return fmt.Errorf("-proxy %q: http, tcp or both", o.proxy)
	}
	// The latency columns: an HTTP proxy (S3 +RTT, as before) and a TCP
	// delay line (S3 +RTT tcp), which costs this process less CPU.
	for _, kind := range []string{"http", "tcp"} {
		if o.rtt <= 0 || o.proxy != kind && o.proxy != "both" {
			continue
		}
		var target *s3test.Server
		var closer io.Closer
		name := fmt.Sprintf("S3 +%s", o.rtt)
		if kind == "http" {
			p, err := s3test.NewProxy(srv, o.rtt)
			if err != nil {
				return err
			}
			target, closer = p.Server(), p
		} else {
			p, err := s3test.NewDelayProxy(srv, o.rtt)
			if err != nil {
				return err
			}
			target, closer, name = p.Server(), p, name+" tcp"
		}
		defer closer.Close()
		stores = append(stores, &fleetStore{name: name, srv: target, direct: srv, counter: &s3test.Counter{}, rtt: o.rtt})
	}
	small, smallRecords, err := smallTemplate(o, pool)
	if err != nil {
		return err
	}
	defer os.RemoveAll(small)
	if o.cpuprof != "" {
		stop, err := startCPUProfile(o.cpuprof)
		if err != nil {
			return err
		}
		defer stop()
	}
	rounds := make([][]fleetFigures, len(stores))
	for k := range max(o.rounds, 1) {
		for i, s := range stores {
			if o.smallProf != "" && i == len(stores)-1 && k == max(o.rounds, 1)-1 {
				s.profile = o.smallProf
			}
			var f fleetFigures
			if err := fleetRound(o, pool, s, small, smallRecords, &f); err != nil {
				return fmt.Errorf("round %d, %s: %w", k+1, s.name, err)
			}
			fmt.Fprintf(os.Stderr, "round %d, %s: dump %.0f items/s, restore %.0f items/s, small segments %.0f segments/s\n", k+1, s.name, f.dump, f.restore, f.small)
			rounds[i] = append(rounds[i], f)
		}
	}
	fleetReport(w, o, stores, rounds, smallRecords)
	return nil
}

// startCPUProfile starts a CPU profile into path; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// fleetRound measures one store once.
func fleetRound(o *options, pool [][]byte, s *fleetStore, small string, smallRecords int, f *fleetFigures) error {
	place := s.place("dump")
	var before s3test.Counts
	if s.s3() {
		before = s.counter.Counts()
	}
	d, err := dumpInto(s.writer(place), o, pool)
	if err != nil {
		return err
	}
	f.dump = float64(o.n) / d.Seconds()
	if f.dumpSegs, f.blocks, err = countBlocks(s.setup(place)); err != nil {
		return err
	}
	if s.s3() {
		f.dumpReq = s.counter.Counts().Sub(before)
		before = s.counter.Counts()
	}
	rep, d, err := restoreOnce(s.reader(place), o.n, o.checkpoint)
	if err != nil {
		return err
	}
	f.restore = float64(o.n) / d.Seconds()
	f.restoreSegs = rep.Segments
	if s.s3() {
		f.restoreReq = s.counter.Counts().Sub(before)
	}
	place = s.place("small")
	if f.smallSegs, err = seedStore(s.setup(place), small); err != nil {
		return err
	}
	if s.s3() {
		before = s.counter.Counts()
	}
	pid := 0
	if s.s3() {
		pid = s.direct.PID
	}
	if s.profile != "" {
		stop, err := startCPUProfile(s.profile)
		if err != nil {
			return err
		}
		defer stop()
	}
	cpu0, server0, busy0 := processCPU(), childproc.CPU(pid), machineBusy()
	// Labelled, so that -cpuprofile shows this phase alone:
	// go tool pprof -tagfocus 'phase=small S3 +20ms' ...
	pprof.Do(context.Background(), pprof.Labels("phase", "small "+s.name), func(context.Context) {
		d, err = drainWith(func() sink.Reader { return s.reader(place) }, o.restorers, smallRecords, f.smallSegs)
	})
	if err != nil {
		return err
	}
	f.smallCPU, f.smallServerCPU, f.smallBusy, f.smallTook = processCPU()-cpu0, childproc.CPU(pid)-server0, machineBusy()-busy0, d
	f.small = float64(f.smallSegs) / d.Seconds()
	if s.s3() {
		f.smallReq = s.counter.Counts().Sub(before)
	}
	return nil
}

// fleetReport prints the medians, each S3 column beside its ratio to the
// directory's.
func fleetReport(w io.Writer, o *options, stores []*fleetStore, rounds [][]fleetFigures, smallRecords int) {
	med := func(i int, get func(*fleetFigures) float64) float64 {
		v := make([]float64, len(rounds[i]))
		for k := range rounds[i] {
			v[k] = get(&rounds[i][k])
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	last := func(i int) *fleetFigures { return &rounds[i][len(rounds[i])-1] }
	fmt.Fprintf(w, "figure (median of %d rounds)\t", max(o.rounds, 1))
	for i, s := range stores {
		if i == 0 {
			fmt.Fprintf(w, "%s\t", s.name)
			continue
		}
		fmt.Fprintf(w, "%s\t÷ directory\t", s.name)
	}
	fmt.Fprintln(w)
	row := func(label, unit string, get func(*fleetFigures) float64) {
		fmt.Fprintf(w, "%s\t", label)
		dir := med(0, get)
		for i := range stores {
			v := med(i, get)
			if i == 0 {
				fmt.Fprintf(w, "%.0f %s\t", v, unit)
				continue
			}
			fmt.Fprintf(w, "%.0f %s\t%.2f×\t", v, unit, v/dir)
		}
		fmt.Fprintln(w)
	}
	f0 := last(0)
	row(fmt.Sprintf("dump %d records (Capacity %s)", o.n, o.capacity), "items/s", func(f *fleetFigures) float64 { return f.dump })
	row(fmt.Sprintf("restore them, one restorer (%d segments, %d blocks)", f0.dumpSegs, f0.blocks), "items/s", func(f *fleetFigures) float64 { return f.restore })
	row(fmt.Sprintf("%d small segments (Capacity %s, %d records), %d restorers at once", f0.smallSegs, o.smallCapacity, smallRecords, o.restorers),
		"segments/s", func(f *fleetFigures) float64 { return f.small })
	fmt.Fprintln(w)
	fmt.Fprintf(w, "requests (last round)\tstore\tper segment\tby operation\t\n")
	for i, s := range stores {
		if !s.s3() {
			continue
		}
		f := last(i)
		fmt.Fprintf(w, "dump, per segment stored\t%s\t%.2f\t%s\t\n", s.name, per(f.dumpReq.Total(), f.dumpSegs), f.dumpReq.Per(f.dumpSegs))
		fmt.Fprintf(w, "restore, per segment (%d blocks each)\t%s\t%.2f\t%s\t\n", f.blocks/max(f.restoreSegs, 1), s.name, per(f.restoreReq.Total(), f.restoreSegs), f.restoreReq.Per(f.restoreSegs))
		fmt.Fprintf(w, "restore, per block\t%s\t%.2f\t%s\t\n", s.name, per(f.restoreReq.Total(), f.blocks), f.restoreReq.Per(f.blocks))
		fmt.Fprintf(w, "small segments, per segment (%d restorers)\t%s\t%.2f\t%s\t\n", o.restorers, s.name, per(f.smallReq.Total(), f.smallSegs), f.smallReq.Per(f.smallSegs))
	}
	fmt.Fprintf(w, "\nsmall segments' CPU (last round)\tstore\tper request: this process\tversitygw\tmachine\tmachine busy\t\n")
	for i, s := range stores {
		if !s.s3() {
			continue
		}
		f := last(i)
		n := time.Duration(max(f.smallReq.Total(), 1))
		fmt.Fprintf(w, "process: restorers, clients%s\t%s\t%s\t%s\t%s\t%.0f%% of %s × %d cores\t\n", map[bool]string{true: ", proxy"}[s.rtt > 0], s.name,
			(f.smallCPU / n).Round(time.Microsecond), (f.smallServerCPU / n).Round(time.Microsecond), (f.smallBusy / n).Round(time.Microsecond),
			100*f.smallBusy.Seconds()/(f.smallTook.Seconds()*float64(runtime.NumCPU())), f.smallTook.Round(time.Millisecond), runtime.NumCPU())
	}
	fmt.Fprintf(w, "\ncommand: %s\t\n", strings.Join(os.Args, " "))
}

func per(n int64, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// countBlocks returns the segments and blocks ready in rd.
func countBlocks(rd sink.Reader) (segments, blocks int, err error) {
	ctx := context.Background()
	for si, err := range rd.List(ctx, sink.AreaReady) {
		if err != nil {
			return 0, 0, err
		}
		n, err := blocksOf(ctx, rd, si.Name)
		if err != nil {
			return 0, 0, err
		}
		segments++
		blocks += n
	}
	return segments, blocks, nil
}

// restoreOnce restores everything in rd with one Restorer of the default
// settings (but checkpoint, CheckpointInterval) into a destination that
// accepts all, and checks that n records were delivered.
func restoreOnce(rd sink.Reader, n int, checkpoint time.Duration) (dlqdump.Report, time.Duration, error) {
	dst := nopQueue{new(atomic.Int64)}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: rd, Decoder: decoder.Fallthrough{}, Queue: dst, CheckpointInterval: checkpoint})
	if err != nil {
		return dlqdump.Report{}, 0, err
	}
	defer r.Close()
	start := time.Now()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	d := time.Since(start)
	if err != nil {
		return rep, d, err
	}
	if rep.Delivered != uint64(n) || dst.n.Load() != int64(n) {
		return rep, d, fmt.Errorf("restored %d of %d records", dst.n.Load(), n)
	}
	return rep, d, nil
}
