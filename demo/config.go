package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dlqdump/dlqdump"
)

// duration is a time.Duration that reads "250ms" from flags and JSON (a
// JSON number is nanoseconds, as in the koykov demo).
type duration time.Duration

func (d duration) D() time.Duration { return time.Duration(d) }

func (d duration) String() string { return time.Duration(d).String() }

func (d *duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return d.Set(s)
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration: want \"250ms\" or nanoseconds, got %s", b)
	}
	*d = duration(n)
	return nil
}

// byteSize is a dlqdump.MemorySize that reads "1MiB" from flags and JSON (a
// JSON number is bytes).
type byteSize dlqdump.MemorySize

func (s byteSize) String() string { return dlqdump.MemorySize(s).String() }

func (s *byteSize) Set(v string) error {
	m, err := dlqdump.ParseMemorySize(v)
	if err != nil {
		return err
	}
	*s = byteSize(m)
	return nil
}

func (s byteSize) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

func (s *byteSize) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		return s.Set(v)
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("size: want \"1MiB\" or bytes, got %s", b)
	}
	*s = byteSize(n)
	return nil
}

// SceneConfig configures one run of the queue, its producers, the dumper and
// the Restorer: the command's flags, or the JSON body of POST /api/v1/init
// (fields left out keep the flags' values). Where the segments go (-dir,
// -s3) is not part of it: the HTTP API cannot choose paths.
type SceneConfig struct {
	// The koykov queue.
	Capacity    int      `json:"capacity"`              // queue capacity, items
	Workers     int      `json:"workers"`               // workers (WorkersMin when WorkersMax is larger)
	WorkersMax  int      `json:"workers_max,omitempty"` // > Workers: a balanced queue
	WorkerDelay duration `json:"worker_delay"`          // time a worker spends on a task
	FailRate    float64  `json:"fail_rate"`             // probability that an attempt fails
	MaxRetries  int      `json:"max_retries"`           // retries after the first attempt (tasks from producers)
	BackoffBase duration `json:"backoff_base"`          // first retry delay bound (full jitter)
	BackoffMax  duration `json:"backoff_max"`           // largest retry delay bound
	Deadline    duration `json:"deadline"`              // longest wait in the queue; 0: none

	// Producers.
	Producers    int     `json:"producers"`     // started at init
	ProducersMax int     `json:"producers_max"` // producer-up stops there
	Rate         float64 `json:"rate"`          // tasks per second per producer
	PayloadSize  int     `json:"payload_size"`  // bytes of generated payload

	// The dumper.
	SegmentSize byteSize `json:"segment_size"` // dlqdump.Config.Capacity
	Flush       duration `json:"flush"`        // dlqdump.Config.FlushInterval
	MaxPending  byteSize `json:"max_pending"`  // dlqdump.Config.MaxPending

	// The Restorer.
	AutoRestore     bool     `json:"auto_restore"`     // run passes in the background (Restorer.Start)
	RestoreInterval duration `json:"restore_interval"` // dlqdump.Config.CheckInterval
	Postpone        duration `json:"postpone"`         // dlqdump.Config.PostponeInterval
	AllowRate       float64  `json:"allow_rate"`       // dlqdump.Config.AllowRate
	RestoreRate     float64  `json:"restore_rate"`     // dlqdump.Config.RateLimit; 0: none
	MaxReplays      int      `json:"max_replays"`      // dlqdump.Config.MaxReplays
}

// defaultSceneConfig is what `go run ./demo` runs: two producers keep four
// workers about half busy (300 of the ~800 tasks a second they take), a
// fifth of the attempts fail, a few tasks exhaust their retries and are
// dumped and restored. The waves (main.go) overflow the queue: a burst of
// eight producers brings 1200 tasks a second.
func defaultSceneConfig() SceneConfig {
	return SceneConfig{
		Capacity:        500,
		Workers:         4,
		WorkerDelay:     duration(5 * time.Millisecond),
		FailRate:        0.2,
		MaxRetries:      2,
		BackoffBase:     duration(10 * time.Millisecond),
		BackoffMax:      duration(500 * time.Millisecond),
		Deadline:        duration(500 * time.Millisecond),
		Producers:       2,
		ProducersMax:    32,
		Rate:            150,
		PayloadSize:     200,
		SegmentSize:     byteSize(dlqdump.Megabyte),
		Flush:           duration(2 * time.Second),
		MaxPending:      byteSize(64 * dlqdump.Megabyte),
		AutoRestore:     true,
		RestoreInterval: duration(time.Second),
		Postpone:        duration(50 * time.Millisecond),
		AllowRate:       0.5,
		MaxReplays:      5,
	}
}

// decodeSceneConfig reads a JSON config over base, rejecting unknown fields.
func decodeSceneConfig(body []byte, base SceneConfig) (SceneConfig, error) {
	c := base
	if err := decodeStrict(body, &c); err != nil {
		return base, err
	}
	return c, c.validate()
}

func (c *SceneConfig) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Capacity >= 1 && c.Capacity <= 10_000_000, "capacity: %d is outside 1..10000000", c.Capacity)
	check(c.Workers >= 1 && c.Workers <= 1024, "workers: %d is outside 1..1024", c.Workers)
	check(c.WorkersMax == 0 || c.WorkersMax >= c.Workers && c.WorkersMax <= 1024, "workers_max: %d is outside workers..1024", c.WorkersMax)
	check(c.WorkerDelay >= 0 && c.WorkerDelay.D() <= time.Minute, "worker_delay: %s is outside 0..1m", c.WorkerDelay)
	check(c.FailRate >= 0 && c.FailRate <= 1, "fail_rate: %v is outside 0..1", c.FailRate)
	check(c.MaxRetries >= 0 && c.MaxRetries <= 100, "max_retries: %d is outside 0..100", c.MaxRetries)
	check(c.BackoffBase > 0 && c.BackoffMax >= c.BackoffBase, "backoff_base/backoff_max: %s/%s: want 0 < base <= max", c.BackoffBase, c.BackoffMax)
	check(c.Deadline == 0 || c.Deadline.D() >= 10*time.Millisecond, "deadline: %s: want 0 (none) or at least 10ms", c.Deadline)
	check(c.ProducersMax >= 0 && c.ProducersMax <= 1024, "producers_max: %d is outside 0..1024", c.ProducersMax)
	check(c.Producers >= 0 && c.Producers <= c.ProducersMax, "producers: %d is outside 0..producers_max (%d)", c.Producers, c.ProducersMax)
	check(c.Rate > 0 && c.Rate <= 1e6, "rate: %v is outside (0, 1e6]", c.Rate)
	check(c.PayloadSize >= 0 && c.PayloadSize <= 1<<20, "payload_size: %d is outside 0..1MiB", c.PayloadSize)
	check(c.SegmentSize >= byteSize(16*dlqdump.Kilobyte), "segment_size: %s is less than 16KiB", c.SegmentSize)
	check(c.Flush.D() >= 10*time.Millisecond, "flush: %s is less than 10ms", c.Flush)
	check(c.MaxPending >= byteSize(dlqdump.Megabyte), "max_pending: %s is less than 1MiB", c.MaxPending)
	check(c.RestoreInterval.D() >= 10*time.Millisecond, "restore_interval: %s is less than 10ms", c.RestoreInterval)
	check(c.Postpone.D() >= time.Millisecond, "postpone: %s is less than 1ms", c.Postpone)
	check(c.AllowRate > 0 && c.AllowRate <= 1, "allow_rate: %v is outside (0, 1]", c.AllowRate)
	check(c.RestoreRate >= 0, "restore_rate: %v is negative", c.RestoreRate)
	check(c.MaxReplays >= -1 && c.MaxReplays <= 1000, "max_replays: %d is outside -1..1000 (-1: no limit)", c.MaxReplays)
	return errors.Join(errs...)
}
