package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/console"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/errcorpus"
)

// BenchmarkErrorGroups: the error groups page over errcorpus written 40
// times (491,200 records in 40 segments, one per six hours),
// read cold (a new console: every segment read and counted) and warm (the
// same console again: the segments' counts kept, merged).
//
//	go test -run '^$' -bench BenchmarkErrorGroups -benchtime 3x ./console
func BenchmarkErrorGroups(b *testing.B) {
	dir := b.TempDir()
	rd := &fs.Reader{Directory: dir}
	const copies = 40
	for i := range copies {
		start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 6 * time.Hour)
		if _, err := errcorpus.Write(context.Background(), rd, start, 6*time.Hour, 20_000); err != nil {
			b.Fatal(err)
		}
	}
	records := float64(copies * errcorpus.Total())
	get := func(b *testing.B, h http.Handler) {
		srv, _ := serveHandler(b, h)
		var out struct {
			Records  uint64 `json:"records"`
			Complete bool   `json:"complete"`
		}
		if code := getJSON(b, srv, "errors", nil, &out); code != http.StatusOK || !out.Complete || out.Records != uint64(records) {
			b.Fatalf("%d: %+v", code, out)
		}
	}
	newConsole := func(b *testing.B) http.Handler {
		h, err := console.New(&console.Options{Reader: rd, SearchBudget: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			get(b, newConsole(b))
		}
		b.ReportMetric(records*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("warm", func(b *testing.B) {
		h := newConsole(b)
		get(b, h)
		b.ResetTimer()
		for b.Loop() {
			get(b, h)
		}
		b.ReportMetric(records*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// serveHandler serves h under /dlq/.
func serveHandler(t testing.TB, h http.Handler) (*httptest.Server, http.Handler) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/dlq/", http.StripPrefix("/dlq", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, h
}
