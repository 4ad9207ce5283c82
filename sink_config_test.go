package dlqdump_test

import (
	"errors"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

// Issue 20: NewQueue with an fs.Writer without a Directory said
// "dlqdump: sink failure: recover unfinished segments: dlqdump: invalid
// config: fs.Writer.Directory: required": a misconfigured sink is not a
// failing one. The error is the config error, naming the field, once.
func TestNewQueueSinkConfigError(t *testing.T) {
	_, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{}})
	if !errors.Is(err, dlqdump.ErrConfig) || errors.Is(err, dlqdump.ErrSink) {
		t.Fatalf("NewQueue: %v; want ErrConfig, not ErrSink", err)
	}
	if msg := err.Error(); msg != "dlqdump: invalid config: fs.Writer.Directory: required" {
		t.Fatalf("NewQueue: %q", msg)
	}
}
