package dlqdump_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
)

// failMetrics counts MetricsWriter.Fail by reason.
type failMetrics struct {
	dlqdump.NopMetrics
	mu    sync.Mutex
	fails map[string]int
}

func (m *failMetrics) Fail(reason string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fails == nil {
		m.fails = map[string]int{}
	}
	m.fails[reason]++
}

func (m *failMetrics) count(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fails[reason]
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// order is a struct item, as a user's queue holds.
type order struct {
	ID     string
	Amount int
}

// Issue 20, defect 1: koykov drops the error its DLQ returns, so an Enqueue
// refused after Close was lost without a trace. It is counted where a user
// looks (Stats, the MetricsWriter) and logged once.
func TestEnqueueAfterCloseIsCounted(t *testing.T) {
	mw, logs := &failMetrics{}, &syncBuffer{}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: t.TempDir()},
		MetricsWriter: mw, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue("before"); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := q.Enqueue("late"); !errors.Is(err, dlqdump.ErrClosed) {
			t.Fatalf("Enqueue after Close = %v, want ErrClosed", err)
		}
	}
	if n := mw.count("closed"); n != 3 {
		t.Errorf("MetricsWriter.Fail(\"closed\") called %d times, want 3", n)
	}
	if n := strings.Count(logs.String(), "Enqueue after Close"); n != 1 {
		t.Errorf("%d log lines about an Enqueue after Close, want 1:\n%s", n, logs)
	}
	st := q.Stats()
	if st.Records != 1 || st.Refused != (dlqdump.Refusals{Closed: 3}) || st.Refused.Total() != 3 || !errors.Is(st.LastRefusal, dlqdump.ErrClosed) {
		t.Errorf("Stats = %+v, want 1 record, 3 refused as closed", st)
	}
}

// Issue 20, defect 2: an item the Encoder cannot encode (a struct given to
// encoder.Builtin) was refused with an error koykov throws away; Stats said
// nothing and nothing was logged. It is counted and logged with its type.
func TestEncodeRefusalIsCounted(t *testing.T) {
	mw, logs := &failMetrics{}, &syncBuffer{}
	q, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: t.TempDir()},
		MetricsWriter: mw, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for range 2 {
		if err := q.Enqueue(order{ID: "o-1"}); !errors.Is(err, dlqdump.ErrEncode) {
			t.Fatalf("Enqueue(order) = %v, want ErrEncode", err)
		}
	}
	if err := q.Enqueue(&order{ID: "o-2"}); !errors.Is(err, dlqdump.ErrEncode) {
		t.Fatalf("Enqueue(*order) = %v, want ErrEncode", err)
	}
	if n := mw.count("encode"); n != 3 {
		t.Errorf("MetricsWriter.Fail(\"encode\") called %d times, want 3", n)
	}
	out := logs.String()
	if n := strings.Count(out, "type=dlqdump_test.order "); n != 1 {
		t.Errorf("%d log lines name dlqdump_test.order, want 1 (the first of its type):\n%s", n, out)
	}
	if n := strings.Count(out, "type=*dlqdump_test.order "); n != 1 {
		t.Errorf("%d log lines name *dlqdump_test.order, want 1:\n%s", n, out)
	}
	st := q.Stats()
	if st.Records != 0 || st.Refused != (dlqdump.Refusals{Encode: 3}) || !errors.Is(st.LastRefusal, dlqdump.ErrEncode) ||
		!strings.Contains(st.LastRefusal.Error(), "*dlqdump_test.order") {
		t.Errorf("Stats = %+v, want 3 refused for their encoding, the last naming *dlqdump_test.order", st)
	}
}
