package dumpfaults

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump"
)

// Sink is where a scenario dumps.
type Sink uint8

// Sinks.
const (
	// FS is an fs.Writer directory.
	FS Sink = iota + 1
	// S3Memory is an s3.Writer whose spool is in memory.
	S3Memory
	// S3SpoolDir is an s3.Writer with a SpoolDir.
	S3SpoolDir
)

// String returns "fs", "s3-memory" or "s3-spooldir".
func (s Sink) String() string {
	switch s {
	case FS:
		return "fs"
	case S3Memory:
		return "s3-memory"
	case S3SpoolDir:
		return "s3-spooldir"
	}
	return "Sink(" + strconv.Itoa(int(s)) + ")"
}

// IsS3 reports whether the sink is an s3.Writer.
func (s Sink) IsS3() bool { return s == S3Memory || s == S3SpoolDir }

// Scenario is a fixed dump: Records records enqueued one after the other, a
// Queue.Flush after FlushAt of them, then Queue.Close. The segment geometry
// is small so that a few dozen records make several blocks and segments; the
// flush timer is off, so every run makes the same calls.
type Scenario struct {
	// Name is SINK/MODE, e.g. "fs/durable".
	Name string
	// Sink is where the segments go.
	Sink Sink
	// Durable is Config.Durable.
	Durable bool
	// Multipart uploads every S3 segment in parts (a multipart upload of
	// one part) instead of with one PutObject.
	Multipart bool
	// Records is how many records the scenario enqueues.
	Records int
	// FlushAt is after how many records Queue.Flush is called; 0: never.
	FlushAt int
}

// Scenarios returns the dump scenarios, in a fixed order.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "fs/buffered", Sink: FS, Records: 90, FlushAt: 40},
		{Name: "fs/durable", Sink: FS, Durable: true, Records: 28, FlushAt: 8},
		{Name: "s3-memory/buffered", Sink: S3Memory, Records: 90, FlushAt: 40},
		{Name: "s3-memory/buffered-multipart", Sink: S3Memory, Multipart: true, Records: 50, FlushAt: 20},
		{Name: "s3-spooldir/buffered", Sink: S3SpoolDir, Records: 90, FlushAt: 40},
		{Name: "s3-spooldir/durable", Sink: S3SpoolDir, Durable: true, Records: 24, FlushAt: 8},
		{Name: "s3-spooldir/durable-multipart", Sink: S3SpoolDir, Durable: true, Multipart: true, Records: 16, FlushAt: 6},
	}
}

// ScenarioNamed returns the scenario called name.
func ScenarioNamed(name string) (Scenario, error) {
	var names []string
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc, nil
		}
		names = append(names, sc.Name)
	}
	return Scenario{}, fmt.Errorf("dumpfaults: no scenario %q (have %s)", name, strings.Join(names, ", "))
}

// FlushStores reports whether a successful Queue.Flush makes the records
// before it survive a crash. It does on every sink: the Queue publishes the
// segment and waits for the Writer's Flush (sink.Flusher), which for an S3
// Writer means uploaded.
func (sc Scenario) FlushStores() bool { return true }

// config returns the Queue's config for the scenario.
func (sc Scenario) config(w dlqdump.Writer) *dlqdump.Config {
	return &dlqdump.Config{
		Writer:         w,
		Capacity:       4 * dlqdump.Kilobyte,
		BlockSize:      dlqdump.Kilobyte,
		FlushInterval:  time.Hour, // only size, Flush and Close seal
		Durable:        sc.Durable,
		EnqueueTimeout: 10 * time.Minute, // never under load; a stuck sink is ended by the run
	}
}

// recordPrefix starts every payload; the record's number follows it.
const recordPrefix = "rec-"

// payload returns record i: "rec-NNNNN|" and 150 letters from a generator
// seeded with i, so that blocks compress to sizes that are the same in every
// run.
func payload(i int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	var b strings.Builder
	fmt.Fprintf(&b, "%s%05d|", recordPrefix, i)
	const letters = "abcdefghijklmnopqrstuvwxyz     "
	for range 150 {
		b.WriteByte(letters[rng.IntN(len(letters))])
	}
	return b.String()
}

// recordIndex returns the number of the record whose payload is p, or -1
// when p is not a payload of the scenario with n records.
func recordIndex(p string, n int) int {
	head, _, ok := strings.Cut(p, "|")
	if !ok || !strings.HasPrefix(head, recordPrefix) {
		return -1
	}
	i, err := strconv.Atoi(head[len(recordPrefix):])
	if err != nil || i < 0 || i >= n || payload(i) != p {
		return -1
	}
	return i
}
