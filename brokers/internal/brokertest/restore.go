package brokertest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/destination"
	"github.com/dlqdump/dlqdump/fs"
)

// Restore makes one pass of a Restorer over the dump directory into dest,
// as the CLI configures one (envelopes, the retries with a short
// back-off), and returns its report.
func Restore(dir string, dest interface{ Enqueue(any) error }, concurrency int) (dlqdump.Report, error) {
	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, Queue: dest,
		DeliverEnvelope: true, Concurrency: concurrency,
		MaxAttempts: 2, RetryBase: time.Millisecond, RetryMax: 10 * time.Millisecond,
	})
	if err != nil {
		return dlqdump.Report{}, err
	}
	defer r.Close()
	return r.Run(context.Background(), dlqdump.RunOptions{})
}

// Quarantined returns the names of the files in the dump directory's
// quarantine area.
func Quarantined(dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, fs.QuarantineDir, "*.dlq"))
	return names
}

// RestoreUntilAvailable makes passes as Restore does until one does not
// stop for the destination being unavailable (at most 600, 50ms apart, as a
// Restorer's CheckInterval would), and returns the report of the passes
// together.
func RestoreUntilAvailable(dir string, dest interface{ Enqueue(any) error }, concurrency int) (dlqdump.Report, error) {
	var sum dlqdump.Report
	for range 600 {
		rep, err := Restore(dir, dest, concurrency)
		sum.Delivered += rep.Delivered
		sum.Quarantined += rep.Quarantined
		sum.Retried += rep.Retried
		if !errors.Is(err, dlqdump.ErrUnavailable) {
			return sum, err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return sum, fmt.Errorf("brokertest: the destination was unavailable for 600 passes")
}

// Open opens the destination of url through package destination's
// registry, as the CLI does, with a 5s timeout; it is closed when t ends.
func Open(t testing.TB, url string) destination.Destination {
	t.Helper()
	d, err := destination.Open(context.Background(), url, &destination.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
