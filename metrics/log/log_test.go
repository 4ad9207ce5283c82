package log

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
)

// decode parses the JSON lines of buf, dropping the time.
func decode(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("bad line %q: %v", line, err)
		}
		delete(m, slog.TimeKey)
		out = append(out, m)
	}
	return out
}

func TestLevelsAndFields(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	w := New(slog.New(h).With("queue", "orders"))

	w.Dump(100)
	w.Flush(dlqdump.FlushSize, 3, 4096, 1500*time.Millisecond)
	w.Pending(777)
	w.Restore(1, 60)
	w.Retry()
	w.Quarantine("damaged", 2)
	w.Fail("write")
	w.Source(4, 0, 0, 90*time.Second)

	got := decode(t, &buf)
	want := []map[string]any{
		{"level": "DEBUG", "msg": MsgDump, "queue": "orders", "size": 100.0},
		{"level": "INFO", "msg": MsgFlush, "queue": "orders", "reason": "size", "records": 3.0, "size": 4096.0, "took": float64(1500 * time.Millisecond)},
		{"level": "DEBUG", "msg": MsgPending, "queue": "orders", "bytes": 777.0},
		{"level": "DEBUG", "msg": MsgRestore, "queue": "orders", "records": 1.0, "size": 60.0},
		{"level": "DEBUG", "msg": MsgRetry, "queue": "orders"},
		{"level": "INFO", "msg": MsgQuarantine, "queue": "orders", "reason": "damaged", "records": 2.0},
		{"level": "WARN", "msg": MsgFail, "queue": "orders", "reason": "write"},
		{"level": "DEBUG", "msg": MsgSource, "queue": "orders", "ready": 4.0, "claimed": 0.0, "quarantined": 0.0, "oldest": float64(90 * time.Second)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("record %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
}

func TestInfoLevelDropsPerRecordEvents(t *testing.T) {
	var buf bytes.Buffer
	w := New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	w.Dump(1)
	w.Restore(1, 1)
	w.Retry()
	w.Pending(1)
	w.Source(1, 0, 0, time.Second)
	if buf.Len() != 0 {
		t.Fatalf("Debug events logged at Info:\n%s", buf.String())
	}
	w.Flush(dlqdump.FlushClose, 1, 1, 0)
	w.Quarantine("version", 1)
	w.Fail("sync")
	var levels []string
	for _, m := range decode(t, &buf) {
		levels = append(levels, m["level"].(string))
	}
	if want := []string{"INFO", "INFO", "WARN"}; !reflect.DeepEqual(levels, want) {
		t.Fatalf("levels %v, want %v", levels, want)
	}
}

// countingHandler counts the calls a Writer makes and logs nothing.
type countingHandler struct {
	min     slog.Level
	enabled atomic.Int64
	handled atomic.Int64
	ctx     atomic.Value
}

func (h *countingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	h.enabled.Add(1)
	h.ctx.Store(ctx)
	return l >= h.min
}

func (h *countingHandler) Handle(context.Context, slog.Record) error {
	h.handled.Add(1)
	return nil
}

func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func TestDisabledDebugIsCheap(t *testing.T) {
	h := &countingHandler{min: slog.LevelInfo}
	w := New(slog.New(h))
	for name, f := range map[string]func(){
		"Dump":    func() { w.Dump(128) },
		"Restore": func() { w.Restore(1, 128) },
		"Retry":   func() { w.Retry() },
		"Pending": func() { w.Pending(1) },
		"Source":  func() { w.Source(1, 0, 0, time.Second) },
	} {
		h.enabled.Store(0)
		if a := testing.AllocsPerRun(100, f); a != 0 {
			t.Errorf("%s allocates %v times per call with Debug disabled", name, a)
		}
		if n := h.enabled.Load(); n != 101 {
			t.Errorf("%s: Enabled called %d times for 101 calls", name, n)
		}
	}
	if n := h.handled.Load(); n != 0 {
		t.Fatalf("Handle called %d times with Debug disabled", n)
	}
	w.Fail("x")
	if n := h.handled.Load(); n != 1 {
		t.Fatalf("Handle called %d times for an enabled Fail", n)
	}
}

func TestOptions(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	h := &countingHandler{min: slog.LevelInfo}
	w := New(slog.New(h),
		WithRecordLevel(slog.LevelInfo),
		WithStateLevel(slog.LevelInfo),
		WithEventLevel(slog.LevelDebug),
		WithFailLevel(slog.LevelError),
		WithContext(ctx),
		WithContext(nil), // ignored
		nil,              // ignored
	)
	w.Dump(1)
	w.Restore(1, 1)
	w.Retry()
	w.Pending(1)
	w.Source(1, 0, 0, 0)
	w.Fail("x")
	if n := h.handled.Load(); n != 6 {
		t.Fatalf("handled %d records, want 6", n)
	}
	w.Flush(dlqdump.FlushSize, 1, 1, 0)
	w.Quarantine("x", 1)
	if n := h.handled.Load(); n != 6 {
		t.Fatalf("Flush/Quarantine logged below the handler's level")
	}
	if got := h.ctx.Load().(context.Context).Value(key{}); got != "v" {
		t.Fatalf("handler got context value %v", got)
	}
}

func TestNilLoggerUsesDefault(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	defer slog.SetDefault(old)
	New(nil).Fail("commit")
	got := decode(t, &buf)
	if len(got) != 1 || got[0]["reason"] != "commit" {
		t.Fatalf("got %v", got)
	}
}

func BenchmarkDumpDisabled(b *testing.B) {
	w := New(slog.New(slog.DiscardHandler))
	b.ReportAllocs()
	for b.Loop() {
		w.Dump(256)
	}
}

func BenchmarkRestoreDisabled(b *testing.B) {
	w := New(slog.New(slog.NewJSONHandler(bytes.NewBuffer(nil), &slog.HandlerOptions{Level: slog.LevelInfo})))
	b.ReportAllocs()
	for b.Loop() {
		w.Restore(1, 256)
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

func BenchmarkDumpEnabled(b *testing.B) {
	w := New(slog.New(slog.NewJSONHandler(discardWriter{}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	b.ReportAllocs()
	for b.Loop() {
		w.Dump(256)
	}
}
