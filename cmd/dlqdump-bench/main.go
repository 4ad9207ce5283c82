// Command dlqdump-bench measures dlqdump on this machine, with realistic
// generated dead letters, and prints figures beside the ceiling of plain zstd
// measured in the same run on the same data.
//
// Usage:
//
//	go run ./cmd/dlqdump-bench dump    [flags]   # Queue into the fs sink
//	go run ./cmd/dlqdump-bench restore [flags]   # Restorer from the fs sink
//	go run ./cmd/dlqdump-bench all     [flags]
//	go run ./cmd/dlqdump-bench jobs    [flags]   # restore jobs: poll cost, start delay
//	go run ./cmd/dlqdump-bench jobs-floor [flags] # the least a job can cost on S3: its requests alone
//	go run ./cmd/dlqdump-bench jobs-control [flags] # a job's pause, hand-over and start delays, and their S3 cost
//	go run ./cmd/dlqdump-bench fleet   [flags]   # directory, S3 and S3 with latency side by side
//	go run ./cmd/dlqdump-bench fleet-floor [flags] # the least small segments cost on S3: their requests alone
//	go run ./cmd/dlqdump-bench sim     [flags]   # fleets of restorers on a simulated S3 prefix (docs/SCALING.md)
//
// Run with -h for the flags.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/gen"
)

type options struct {
	n         int
	size      int
	codec     string
	dir       string
	capacity  dlqdump.MemorySize
	latency   time.Duration
	poolSize  int
	rounds    int
	live      bool
	cpuprof   string
	smallProf string // fleet: a CPU profile of the last store's small segments
	proxy     string // fleet: http, tcp or both

	// fleet
	rtt           time.Duration
	restorers     int
	smallRecords  int
	smallCapacity dlqdump.MemorySize
	checkpoint    time.Duration

	// sim
	simRestorers      string
	simSegments       int
	simFor            time.Duration
	simFinalSegments  int
	simFinalRestorers int
	simBlocks         int
}

func main() {
	if len(os.Args) < 2 || strings.HasPrefix(os.Args[1], "-") {
		fmt.Fprintln(os.Stderr, "usage: dlqdump-bench dump|restore|all|jobs|jobs-floor|jobs-control|fleet|fleet-floor|sim [flags]")
		os.Exit(2)
	}
	cmd := os.Args[1]
	switch cmd {
	case "jobs", "jobs-floor", "jobs-control", "fleet-floor":
		run := map[string]func([]string) error{"jobs": benchJobs, "jobs-floor": benchJobsFloor, "jobs-control": benchJobsControl, "fleet-floor": benchFleetFloor}[cmd]
		if err := run(os.Args[2:]); err != nil {
			fatal(err)
		}
		return
	}
	var o options
	var capacity, smallCapacity string
	fl := flag.NewFlagSet(cmd, flag.ExitOnError)
	fl.IntVar(&o.n, "n", 2_000_000, "records to dump")
	fl.IntVar(&o.size, "size", 256, "approximate record size in bytes (<= 64: small events)")
	fl.StringVar(&o.codec, "codec", "zstd", "codec: zstd, s2 or none")
	fl.StringVar(&o.dir, "dir", "", "directory for the segments (default: a new temporary directory, removed after)")
	fl.StringVar(&capacity, "capacity", "16MiB", "segment Capacity")
	fl.DurationVar(&o.latency, "latency-duration", 3*time.Second, "how long to measure Enqueue latency at each load")
	fl.IntVar(&o.poolSize, "pool", 65536, "distinct records generated and cycled through")
	fl.IntVar(&o.rounds, "rounds", 3, "restore rounds, each beside the ceiling; the best ratio is reported")
	fl.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the restore rounds to this file")
	fl.StringVar(&o.smallProf, "small-cpuprofile", "", "fleet: write a CPU profile of the last column's small segments (through the latency proxy), last round, to this file")
	fl.BoolVar(&o.live, "live", true, "keep the n records alive in the heap while dumping (they are what is enqueued) and restoring, as a service keeps its data")
	fl.DurationVar(&o.rtt, "rtt", 20*time.Millisecond, "fleet: the round trip a proxy adds to every S3 request, as AWS has; 0: no proxied column")
	fl.StringVar(&o.proxy, "proxy", "both", "fleet: what adds -rtt to every request: http (s3test.Proxy, an HTTP reverse proxy in this process, the S3 +RTT column), tcp (s3test.DelayProxy, a delay line per TCP connection, cheaper in CPU: the S3 +RTT tcp column) or both, side by side")
	fl.IntVar(&o.restorers, "restorers", 4, "fleet: restorers draining the small segments at once")
	fl.IntVar(&o.smallRecords, "small-records", 60_000, "fleet: records dumped into small segments")
	fl.StringVar(&smallCapacity, "small-capacity", "4KiB", "fleet: Capacity of the small segments")
	fl.DurationVar(&o.checkpoint, "checkpoint-interval", 0, "fleet: the restorer's CheckpointInterval (0: the default, a checkpoint per block)")
	fl.StringVar(&o.simRestorers, "sim-restorers", "1,2,5,10,20,50,100", "sim: the fleets' sizes, one run each")
	fl.IntVar(&o.simSegments, "sim-segments", 20000, "sim: segments in the prefix at the start of a run")
	fl.DurationVar(&o.simFor, "sim-for", time.Minute, "sim: the longest a run lasts")
	fl.IntVar(&o.simFinalSegments, "sim-final-segments", 0, "sim: segments for the run of -sim-final-restorers restorers (e.g. 1000000); 0: -sim-segments")
	fl.IntVar(&o.simFinalRestorers, "sim-final-restorers", 100, "sim: the fleet -sim-final-segments is for")
	fl.IntVar(&o.simBlocks, "sim-blocks", 1, "sim: blocks per segment (the fleet benchmark's 4 KiB segments hold 2), 1 to 5")
	_ = fl.Parse(os.Args[2:])
	var err error
	if o.capacity, err = dlqdump.ParseMemorySize(capacity); err != nil {
		fatal(err)
	}
	if o.smallCapacity, err = dlqdump.ParseMemorySize(smallCapacity); err != nil {
		fatal(err)
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "dlqdump-bench-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(d)
		o.dir = d
	}
	if cmd == "sim" {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		err := benchSim(tw, &o)
		tw.Flush()
		if err != nil {
			fatal(err)
		}
		return
	}
	fmt.Printf("dlqdump-bench %s: %d records of ~%d B (generated JSON dead letters), codec %s, GOMAXPROCS=%d, %s/%s\n\n",
		cmd, o.n, o.size, o.codec, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	pool := gen.New(1).Events(o.poolSize, o.size)
	if o.live {
		// The data set, alive: o.n records of their own, so that the
		// garbage collector marks a heap of the size a service holds,
		// and the dump reads records from all over it.
		live := make([][]byte, o.n)
		for i := range live {
			live[i] = append([]byte(nil), pool[i%len(pool)]...)
		}
		pool = live
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	switch cmd {
	case "dump":
		err = benchDump(tw, &o, pool)
	case "restore":
		err = benchRestore(tw, &o, pool)
	case "all":
		if err = benchDump(tw, &o, pool); err == nil {
			err = benchRestore(tw, &o, pool)
		}
	case "fleet":
		err = benchFleet(tw, &o, pool)
	default:
		err = fmt.Errorf("unknown command %q", cmd)
	}
	tw.Flush()
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "dlqdump-bench:", err)
	os.Exit(1)
}

func codecOf(s string) (dlqdump.Codec, error) {
	switch s {
	case "zstd":
		return dlqdump.Zstd, nil
	case "s2":
		return dlqdump.S2, nil
	case "none":
		return dlqdump.NoCompression, nil
	}
	return 0, fmt.Errorf("unknown codec %q", s)
}

// peakRSS returns the process's peak resident set since the last resetPeakRSS.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return -1
}

// resetPeakRSS restarts the peak resident set measurement (Linux).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func mb(bytes float64, d time.Duration) float64 { return bytes / d.Seconds() / 1e6 }

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func dirSize(dir string) (int64, int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	var total int64
	var n int
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".dlq") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return 0, 0, err
		}
		total += info.Size()
		n++
	}
	return total, n, nil
}
