package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump/s3/s3test"
)

// Every measurement runs in a child process (this binary re-executed with
// -child SPEC), so that each system's peak RSS (VmHWM) is its own.

// spec is what a child measures.
type spec struct {
	Mode      string         `json:"mode"`   // dump, restore, latency, zstd, scale-items, scale-segments
	System    string         `json:"system"` // see the sys* constants
	DataSet   string         `json:"dataset"`
	N         int            `json:"n"`                // items (dump: at most; restore: exactly)
	Window    time.Duration  `json:"window,omitempty"` // dump: stop taking items after this long (0: no bound)
	Producers int            `json:"producers"`
	Dir       string         `json:"dir"`
	Capacity  int64          `json:"capacity"`
	Rate      float64        `json:"rate,omitempty"` // latency: the system's sustained items/s
	Fracs     []float64      `json:"fracs,omitempty"`
	LatDur    time.Duration  `json:"lat_dur,omitempty"`
	S3        *s3test.Server `json:"s3,omitempty"`
	Prefix    string         `json:"prefix,omitempty"`
	Segments  int            `json:"segments,omitempty"` // scale-segments: segments in the directory
	Repeat    int            `json:"repeat,omitempty"`
	Live      bool           `json:"live,omitempty"` // keep N items alive in the heap, as a service keeps its data
}

// result is what a child reports.
type result struct {
	System   string        `json:"system"`
	DataSet  string        `json:"dataset"`
	Items    int           `json:"items"`
	Payload  int64         `json:"payload"` // item bytes
	Elapsed  time.Duration `json:"elapsed"`
	Disk     int64         `json:"disk,omitempty"` // bytes stored
	Files    int           `json:"files,omitempty"`
	PeakRSS  int64         `json:"peak_rss"`
	BaseRSS  int64         `json:"base_rss"` // RSS before the measured phase (data generated)
	Latency  []latPoint    `json:"latency,omitempty"`
	Restore  *result       `json:"restore,omitempty"` // zstd: the decode phase
	Segments *segPoint     `json:"segments,omitempty"`
	ScaleN   *itemsPoint   `json:"scale_n,omitempty"`
	Note     string        `json:"note,omitempty"`
}

func (r *result) rate() float64 {
	if r == nil || r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Items) / r.Elapsed.Seconds()
}

func (r *result) mbps() float64 {
	if r == nil || r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Payload) / r.Elapsed.Seconds() / 1e6
}

type latPoint struct {
	Frac     float64       `json:"frac"`
	Target   float64       `json:"target"`
	Achieved float64       `json:"achieved"`
	Count    int           `json:"count"`
	P50      time.Duration `json:"p50"`
	P99      time.Duration `json:"p99"`
	P999     time.Duration `json:"p999"`
	Max      time.Duration `json:"max"`
}

// segPoint is one point of the segments-in-a-directory curve.
type segPoint struct {
	Segments     int           `json:"segments"`
	List         time.Duration `json:"list"`    // one full listing
	Claim        time.Duration `json:"claim"`   // one Claim + Release, mean
	Restore      time.Duration `json:"restore"` // one segment restored (claim, read, deliver, complete), mean
	Claimed      int           `json:"claimed"`
	Restored     int           `json:"restored"`
	Records      int           `json:"records"` // per segment
	SegmentBytes int64         `json:"segment_bytes"`
}

// itemsPoint is one point of the items curve.
type itemsPoint struct {
	N        int           `json:"n"`
	Dump     time.Duration `json:"dump"`    // per run, median
	Restore  time.Duration `json:"restore"` // per run, median
	Repeat   int           `json:"repeat"`
	Segments int           `json:"segments"`
	// PeakRSS of the result is the dump's; this is the restore's.
	RestoreRSS int64 `json:"restore_rss"`
}

func runChild(arg string) {
	var s spec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		fatal(fmt.Errorf("-child: %w", err))
	}
	res, err := child(&s)
	if err != nil {
		fatal(fmt.Errorf("%s %s %s: %w", s.Mode, s.System, s.DataSet, err))
	}
	res.System, res.DataSet = s.System, s.DataSet
	b, _ := json.Marshal(res)
	os.Stdout.Write(append(b, '\n'))
}

func child(s *spec) (*result, error) {
	var ds *dataSet
	if s.DataSet != "" {
		var err error
		if ds, err = newDataSet(s.DataSet); err != nil {
			return nil, err
		}
	}
	var live [][]byte
	if s.Live && ds != nil {
		live = liveHeap(ds, s.N)
	}
	defer runtime.KeepAlive(live)
	switch s.Mode {
	case "dump":
		return childDump(s, ds)
	case "restore":
		return childRestore(s, ds)
	case "latency":
		return childLatency(s, ds)
	case "zstd":
		return childZstd(s, ds)
	case "scale-items":
		return childScaleItems(s, ds)
	case "scale-segments":
		return childScaleSegments(s, ds)
	}
	return nil, fmt.Errorf("unknown mode %q", s.Mode)
}

// spawn runs a child and returns its result.
func spawn(s *spec) (*result, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	arg, _ := json.Marshal(s)
	cmd := exec.Command(self, "-child", string(arg))
	cmd.Stderr = os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("child %s %s %s: %w", s.Mode, s.System, s.DataSet, err)
	}
	line := bytes.TrimSpace(out.Bytes())
	if i := bytes.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	var r result
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("child %s %s %s: bad output %q: %w", s.Mode, s.System, s.DataSet, line, err)
	}
	return &r, nil
}

// startPhase collects garbage, returns the current RSS and restarts the peak
// RSS measurement, so the peak read by peakRSS is the phase's.
func startPhase() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	return procStatus("VmRSS:")
}

// peakRSS returns the peak resident set (VmHWM) since startPhase.
func peakRSS() int64 { return procStatus("VmHWM:") }

func procStatus(key string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return -1
}

// liveHeap returns n items of ds, each in memory of its own: the data a
// service keeps alive while it dumps and restores, which the garbage
// collector marks in every cycle. Every system measured carries the same.
func liveHeap(ds *dataSet, n int) [][]byte {
	live := make([][]byte, n)
	var scratch []byte
	for i := range live {
		b, err := ds.bytes(i, &scratch)
		if err != nil {
			fatal(err)
		}
		live[i] = append([]byte(nil), b...)
	}
	return live
}
