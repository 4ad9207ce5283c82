package log_test

import (
	"log/slog"
	"os"
	"time"

	"github.com/dlqdump/dlqdump"
	dlqlog "github.com/dlqdump/dlqdump/metrics/log"
)

// noTime drops the time from the records so that the output is stable.
func noTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// Example logs the events of the queue "orders" at Info: the per-record
// events, at Debug, are skipped.
func Example() {
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo, ReplaceAttr: noTime})
	mw := dlqlog.New(slog.New(h).With("queue", "orders"))
	var _ dlqdump.MetricsWriter = mw // cfg.MetricsWriter = mw

	mw.Dump(512) // Debug: skipped
	mw.Flush(dlqdump.FlushSize, 2, 700, 4*time.Millisecond)
	mw.Quarantine("damaged", 1)
	mw.Fail("write")
	// Output:
	// level=INFO msg="dlqdump segment flushed" queue=orders reason=size records=2 size=700 took=4ms
	// level=INFO msg="dlqdump records quarantined" queue=orders reason=damaged records=1
	// level=WARN msg="dlqdump operation failed" queue=orders reason=write
}

// ExampleNew logs every event, the per-record ones included, at Debug.
func ExampleNew() {
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: noTime})
	mw := dlqlog.New(slog.New(h))

	mw.Dump(512)
	mw.Pending(512)
	mw.Restore(200, 51200)
	mw.Retry()
	mw.Source(3, 1, 0, 90*time.Second)
	// Output:
	// level=DEBUG msg="dlqdump record dumped" size=512
	// level=DEBUG msg="dlqdump pending bytes" bytes=512
	// level=DEBUG msg="dlqdump record restored" records=200 size=51200
	// level=DEBUG msg="dlqdump record retried"
	// level=DEBUG msg="dlqdump source state" ready=3 claimed=1 quarantined=0 oldest=1m30s
}
