// Command bench compares dlqdump with its nearest Go peer, NSQ's
// github.com/nsqio/go-diskqueue, and with plain zstd on one core (the
// ceiling), in one run on the same generated data: dump throughput, restore
// (read-back) throughput, bytes stored, peak RSS, and Enqueue latency at 25%,
// 50% and 90% of each system's sustained load; then shows that the cost per
// item stays flat from 10^4 to 10^7 items and the cost per segment from 10 to
// 10^5 segments in a directory.
//
// It is its own module, so its dependencies (go-diskqueue, gonum/plot) stay
// out of the library's go.mod. Every measurement runs in a child process
// (this binary re-executed with -child), so each system's peak RSS is its own.
//
//	cd bench
//	go run . -smoke                 # a quick pass for CI (well under a minute)
//	go run . -out ../docs           # the full run; writes docs/BENCHMARKS.md and the charts
//	go run . -sink s3               # only dlqdump -> S3 (and the ceiling)
//
// See README.md for the flags.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3/s3test"
)

type options struct {
	smoke        bool
	sink         string
	out          string
	n            int
	bytes        int64
	dataSets     []string
	window       time.Duration
	latDur       time.Duration
	durProducers int
	producers    int
	runs         int
	capacity     dlqdump.MemorySize
	scale        bool
	live         bool
	scaleMax     int
	segMax       int
	dir          string
	jsonPath     string
	render       string
	script       string
}

var latFracs = []float64{0.25, 0.5, 0.9}

func main() {
	var o options
	var child, sets, capacity, maxBytes string
	flag.StringVar(&child, "child", "", "internal: run one measurement described by this JSON spec")
	flag.BoolVar(&o.smoke, "smoke", false, "a small, quick run for CI (overrides the size flags)")
	flag.StringVar(&o.sink, "sink", "all", "dlqdump sinks to measure: fs (with go-diskqueue), s3, or all; s3 needs DLQDUMP_S3_* or versitygw (see -versitygw)")
	flag.StringVar(&o.out, "out", "", "directory to write BENCHMARKS.md, throughput.png and scaling.png into (e.g. ../docs); default: stdout only")
	flag.IntVar(&o.n, "n", 2_000_000, "items per data set, at most")
	flag.StringVar(&maxBytes, "bytes", "512MiB", "payload bytes per data set, at most (so large items are fewer)")
	flag.StringVar(&sets, "datasets", strings.Join(dataSetNames, ","), "data sets: small, typical, proto, large")
	flag.DurationVar(&o.window, "durable-window", 5*time.Second, "how long the durable (fsync per item) dumps run")
	flag.DurationVar(&o.latDur, "latency-duration", 3*time.Second, "how long Enqueue latency is measured at each load")
	flag.IntVar(&o.durProducers, "durable-producers", 64, "producers in the durable runs (their syncs are shared in dlqdump)")
	flag.IntVar(&o.producers, "producers", 0, "producers in the buffered runs (default GOMAXPROCS)")
	flag.IntVar(&o.runs, "runs", 3, "rounds of the throughput measurements; the best of each system is kept")
	flag.StringVar(&capacity, "capacity", "16MiB", "dlqdump segment Capacity, and go-diskqueue maxBytesPerFile")
	flag.BoolVar(&o.live, "live", true, "keep the data set's items alive in the heap of every dump and restore measurement, as a service keeps its data")
	flag.BoolVar(&o.scale, "scale", true, "measure the scaling curves (items, segments in a directory)")
	flag.IntVar(&o.scaleMax, "scale-max", 10_000_000, "largest item count of the items curve (powers of 10 from 10^4)")
	flag.IntVar(&o.segMax, "scale-segments-max", 100_000, "largest segment count of the segments curve (powers of 10 from 10)")
	flag.StringVar(&o.dir, "dir", "", "directory for the data (default: a new temporary directory, removed after)")
	flag.StringVar(&o.jsonPath, "json", "", "also write the raw results as JSON to this file")
	flag.StringVar(&o.render, "render", "", "measure nothing: print (and with -out write) the report of the raw results in this JSON file (from -json)")
	flag.StringVar(&o.script, "versitygw", "", "script installing versitygw when DLQDUMP_S3_* are not set and it is missing (default: scripts/versitygw.sh above the module)")
	flag.Parse()
	if child != "" {
		runChild(child)
		return
	}
	var err error
	if o.capacity, err = dlqdump.ParseMemorySize(capacity); err != nil {
		fatal(fmt.Errorf("-capacity: %w", err))
	}
	mb, err := dlqdump.ParseMemorySize(maxBytes)
	if err != nil {
		fatal(fmt.Errorf("-bytes: %w", err))
	}
	o.bytes = int64(mb)
	o.dataSets = strings.Split(sets, ",")
	for _, s := range o.dataSets {
		if !slices.Contains(dataSetNames, s) {
			fatal(fmt.Errorf("-datasets: unknown data set %q", s))
		}
	}
	if o.smoke {
		o.n, o.bytes = 20_000, 4<<20
		o.window, o.latDur = 300*time.Millisecond, 200*time.Millisecond
		o.scaleMax, o.segMax = 100_000, 1000
		o.runs = 1
	}
	switch o.sink {
	case "fs", "s3", "all":
	default:
		fatal(fmt.Errorf("-sink: want fs, s3 or all, not %q", o.sink))
	}
	if o.producers <= 0 {
		o.producers = readMachine(".").GOMAXPROCS
	}
	if o.render != "" {
		err = render(&o)
	} else {
		err = run(&o)
	}
	if err != nil {
		fatal(err)
	}
}

// command returns how the benchmark was run, without the flags that do not
// change what is measured (-json, -render).
func command() string {
	var args []string
	skip := false
	for _, a := range os.Args[1:] {
		if skip {
			skip = false
			continue
		}
		name := strings.TrimLeft(a, "-")
		if k, _, _ := strings.Cut(name, "="); k == "json" || k == "render" {
			skip = !strings.Contains(name, "=")
			continue
		}
		args = append(args, a)
	}
	return strings.TrimSpace("cd bench && go run . " + strings.Join(args, " "))
}

// render writes the report of saved results.
func render(o *options) error {
	b, err := os.ReadFile(o.render)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", o.render, err)
	}
	o.producers, o.durProducers = rep.Producers, rep.DurProducers
	return rep.write(o)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// report is everything a run measured.
type report struct {
	Command  string        `json:"command"`
	Machine  machine       `json:"machine"`
	Started  time.Time     `json:"started"`
	Took     time.Duration `json:"took"`
	Smoke    bool          `json:"smoke"`
	Sets     []*setResult  `json:"sets"`
	Items    []*result     `json:"scale_items,omitempty"`
	Segs     []*result     `json:"scale_segments,omitempty"`
	Config   []string      `json:"config"`
	Gaps     []string      `json:"gaps,omitempty"`
	S3       string        `json:"s3"` // how S3 was reached, or why not
	Capacity string        `json:"capacity"`
	LoadEnd  string        `json:"load_end"`

	Producers    int `json:"producers"`
	DurProducers int `json:"durable_producers"`
}

type setResult struct {
	Name    string               `json:"name"`
	Desc    string               `json:"desc"`
	Mean    int                  `json:"mean"`
	Dump    map[string]*result   `json:"dump"`
	Restore map[string]*result   `json:"restore"`
	Latency map[string]*result   `json:"latency"`
	Rounds  map[string][]float64 `json:"rounds"` // dump items/s of every round
}

func run(o *options) error {
	start := time.Now()
	base := o.dir
	if base == "" {
		d, err := os.MkdirTemp("", "dlqdump-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		base = d
	} else if err := os.MkdirAll(base, 0o750); err != nil {
		return err
	}
	rep := &report{
		Command:  command(),
		Machine:  readMachine(base),
		Started:  start.UTC(),
		Smoke:    o.smoke,
		Capacity: o.capacity.String(),

		Producers:    o.producers,
		DurProducers: o.durProducers,
	}
	fsOn := o.sink != "s3"
	var s3e *s3test.Server
	if o.sink != "fs" {
		var stop func()
		var err error
		s3e, stop, rep.S3, err = s3Setup(o)
		if err != nil {
			return err
		}
		if stop != nil {
			defer stop()
		}
		if s3e == nil {
			rep.Gaps = append(rep.Gaps, "dlqdump → S3 not measured: "+rep.S3)
		}
	}
	logf("%s; data in %s", rep.Machine.CPU, base)
	runID := fmt.Sprintf("bench-%d", time.Now().UnixNano())

	for _, name := range o.dataSets {
		ds, err := newDataSet(name)
		if err != nil {
			return err
		}
		n := ds.items(o.n, o.bytes)
		sr := &setResult{Name: name, Desc: dataSetDesc[name], Mean: ds.mean,
			Dump: map[string]*result{}, Restore: map[string]*result{}, Latency: map[string]*result{}, Rounds: map[string][]float64{}}
		rep.Sets = append(rep.Sets, sr)
		mk := func(mode, sys string) *spec {
			return &spec{Mode: mode, System: sys, DataSet: name, N: n, Producers: o.producers,
				Dir: filepath.Join(base, name, sys), Capacity: int64(o.capacity), S3: s3e,
				Prefix: fmt.Sprintf("%s/%s/", runID, name), Live: o.live && (mode == "dump" || mode == "restore")}
		}
		logf("%s: %d items of %d B on average", name, n, ds.mean)

		var buffered, durable []string
		if fsOn {
			buffered = append(buffered, sysDLQ, sysDQ)
			durable = append(durable, sysDLQDurable, sysDQSync)
		}
		if s3e != nil {
			buffered = append(buffered, sysDLQS3)
		}

		// Throughput, best of o.runs rounds; each round runs every system
		// once, so a burst of load from other jobs hits them alike.
		for round := range o.runs {
			z, err := spawn(mk("zstd", sysZstd))
			if err != nil {
				return err
			}
			sr.Dump[sysZstd], sr.Restore[sysZstd] = best(sr.Dump[sysZstd], z), best(sr.Restore[sysZstd], z.Restore)
			// Buffered: dump, then restore what was dumped.
			for _, sys := range buffered {
				d, err := spawn(mk("dump", sys))
				if err != nil {
					return err
				}
				rs := mk("restore", sys)
				rs.N = d.Items
				rr, err := spawn(rs)
				if err != nil {
					return err
				}
				if err := os.RemoveAll(rs.Dir); err != nil {
					return err
				}
				if sys == sysDLQS3 {
					if err := s3Clean(rs, rs.Prefix); err != nil {
						return err
					}
				}
				sr.Dump[sys], sr.Restore[sys] = best(sr.Dump[sys], d), best(sr.Restore[sys], rr)
				sr.Rounds[sys] = append(sr.Rounds[sys], d.rate())
				logf("%s, round %d: %s dump %.0f items/s, restore %.0f items/s", name, round+1, sys, d.rate(), rr.rate())
			}
			// Durable: dump for a window with many producers.
			for _, sys := range durable {
				dsp := mk("dump", sys)
				dsp.Window, dsp.Producers = o.window, o.durProducers
				d, err := spawn(dsp)
				if err != nil {
					return err
				}
				if err := os.RemoveAll(dsp.Dir); err != nil {
					return err
				}
				sr.Dump[sys] = best(sr.Dump[sys], d)
				sr.Rounds[sys] = append(sr.Rounds[sys], d.rate())
				logf("%s, round %d: %s dump %.0f items/s", name, round+1, sys, d.rate())
			}
		}

		// Latency at fractions of each system's sustained rate: the median
		// of the rounds, with as many producers as its dump had.
		for _, sys := range slices.Concat(buffered, durable) {
			ls := mk("latency", sys)
			ls.Rate, ls.Fracs, ls.LatDur = medianOf(sr.Rounds[sys]), latFracs, o.latDur
			if slices.Contains(durable, sys) {
				ls.Producers, ls.LatDur = o.durProducers, max(o.latDur, o.window/2)
			}
			ls.Prefix += "latency/"
			var err error
			if sr.Latency[sys], err = spawn(ls); err != nil {
				return err
			}
			l := sr.Latency[sys].Latency
			logf("%s: %s latency at 90%%: p50 %s, p99 %s, p99.9 %s", name, sys, dur(l[len(l)-1].P50), dur(l[len(l)-1].P99), dur(l[len(l)-1].P999))
		}
		_ = os.RemoveAll(filepath.Join(base, name))
	}

	if o.scale && fsOn {
		for n := 10_000; n <= o.scaleMax; n *= 10 {
			s := &spec{Mode: "scale-items", System: sysDLQ, DataSet: "typical", N: n, Producers: o.producers,
				Dir: filepath.Join(base, "scale-items"), Capacity: int64(o.capacity), Repeat: repeatFor(n, o.smoke)}
			r, err := spawn(s)
			if err != nil {
				return err
			}
			rep.Items = append(rep.Items, r)
			logf("scale: %d items: dump %.0f ns/item, restore %.0f ns/item", n, perItem(r.ScaleN.Dump, n), perItem(r.ScaleN.Restore, n))
		}
		for k := 10; k <= o.segMax; k *= 10 {
			s := &spec{Mode: "scale-segments", System: sysDLQ, DataSet: "typical", Segments: k,
				Dir: filepath.Join(base, "scale-segments")}
			r, err := spawn(s)
			if err != nil {
				return err
			}
			rep.Segs = append(rep.Segs, r)
			p := r.Segments
			logf("scale: %d segments: list %.1f µs/segment, claim %.0f µs, restore %.0f µs/segment", k,
				us(p.List)/float64(k), us(p.Claim), us(p.Restore))
		}
	}
	rep.Took = time.Since(start).Round(time.Second)
	rep.LoadEnd = loadAvg()
	rep.Config = configNotes(o)
	if !o.scale || !fsOn {
		rep.Gaps = append(rep.Gaps, "scaling curves not measured in this run (they need -scale and -sink fs or all)")
	}

	if o.jsonPath != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(o.jsonPath, b, 0o644); err != nil {
			return err
		}
	}
	return rep.write(o)
}

// write prints the tables and, with -out, writes the report and the charts.
func (rep *report) write(o *options) error {
	fmt.Print(rep.markdown(o, ""))
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	charts, err := rep.charts(o.out)
	if err != nil {
		return err
	}
	doc := rep.document(o, charts)
	if err := os.WriteFile(filepath.Join(o.out, "BENCHMARKS.md"), []byte(doc), 0o644); err != nil {
		return err
	}
	logf("wrote %s and %s", filepath.Join(o.out, "BENCHMARKS.md"), strings.Join(charts, ", "))
	return nil
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// best returns the faster of two results of the same measurement.
func best(a, b *result) *result {
	if a == nil || b != nil && b.rate() > a.rate() {
		return b
	}
	return a
}

// repeatFor returns how many times the items curve repeats a point: small
// runs are noisy.
func repeatFor(n int, smoke bool) int {
	switch {
	case smoke:
		return 3
	case n <= 10_000:
		return 7
	case n <= 100_000:
		return 5
	case n <= 1_000_000:
		return 3
	}
	return 1
}

// s3Setup finds the S3 server with s3test.Versity: DLQDUMP_S3_* from the
// environment, or a versitygw started here when it is installed (or when
// -sink s3 asks for S3 explicitly: it is then installed first).
func s3Setup(o *options) (*s3test.Server, func(), string, error) {
	srv, stop, err := s3test.Versity(&s3test.Options{Bucket: "dlqdump-bench", Install: o.sink == "s3", Script: o.script})
	switch {
	case errors.Is(err, s3test.ErrNoVersity):
		return nil, nil, "DLQDUMP_S3_ENDPOINT not set and versitygw not installed (run scripts/versitygw.sh install, or -sink s3)", nil
	case err != nil:
		return nil, nil, "", err
	case srv.Dir == "":
		return srv, stop, fmt.Sprintf("S3-compatible server at %s from DLQDUMP_S3_ENDPOINT, bucket %s", srv.Endpoint, srv.Bucket), nil
	}
	logf("started versitygw at %s, data in %s", srv.Endpoint, srv.Dir)
	return srv, stop, "local versitygw (posix backend, same disk) started by the benchmark", nil
}

func configNotes(o *options) []string {
	return []string{
		fmt.Sprintf("dlqdump Queue: Capacity %s, BlockSize 256 KiB, zstd default level, MaxPending 64 MiB, Compressors = GOMAXPROCS; buffered runs use %d producer goroutines, Durable runs %d (their fdatasyncs are shared: group commit).", o.capacity, o.producers, o.durProducers),
		fmt.Sprintf("go-diskqueue v1.1.0: maxBytesPerFile %s, maxMsgSize 64 MiB. Buffered: SyncEvery 2^40 with syncTimeout 2s, so it fsyncs every 2 s, at each new file and on Close (NSQ's default is SyncEvery 2500). \"SyncEvery 1\": it fsyncs the data file and rewrites and fsyncs its metadata file after every message, but Put returns before that sync (the next Put waits for it), and there is no group commit, so its %d producers queue behind one another.", o.capacity, o.durProducers),
		"zstd ceiling: klauspost/compress zstd EncodeAll at the default level with the segment writer's options (window 1 MiB, no CRC, lower memory), one goroutine, on the same items concatenated into 256 KiB blocks (protobuf items pre-marshalled); DecodeAll of up to 256 of those blocks, cycled to the same byte count.",
		"Restore: dlqdump's Restorer (decoder.Fallthrough: each item shares the memory of its block, decoded into new memory per block; checkpoint after every block, on fs and on S3: the default settings) into a destination whose Enqueue only counts. go-diskqueue: the queue reopened and ReadChan drained (each message a new []byte).",
		fmt.Sprintf("Throughput: best of %d rounds, each round running every system once (so a burst of load from other jobs hits them alike). Dump rates include Close: the last segment sealed, synced and published (for S3, every upload done). Durable runs last %s, then everything is closed.", o.runs, o.window),
		fmt.Sprintf("Latency: each Enqueue (go-diskqueue: Put) timed on its own while producers offer items on a fixed schedule (open loop) at 25%%, 50%% and 90%% of that system's sustained rate (the median of its dump rounds), with as many producers as its dump had (%d buffered, %d durable), each offering an equal share; a fresh queue for every load; percentiles over every call in %s per load (durable: at least half the durable window).", o.producers, o.durProducers, o.latDur),
		liveNote(o),
		"Peak RSS: VmHWM of the child process that ran the measurement, reset (clear_refs) after generating the data set; it includes the data set (~8 MiB of items, more in memory for protobuf messages), the live heap when there is one, and the Go runtime.",
	}
}

func liveNote(o *options) string {
	if !o.live {
		return "Live heap: none (-live=false): the processes hold only the generated items."
	}
	return "Live heap: every dump and restore process, of every system (not the zstd ceiling, which measures the codec alone), first copies the N items it handles into memory of their own and keeps them alive (-live), as a service keeps its data: the garbage collector marks them in every cycle, and the heap it grows before collecting is that much larger."
}
