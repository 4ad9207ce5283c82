package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// A record dumped with its W3C trace context (dlqdump.WithTrace) is POSTed
// with it in the traceparent and tracestate headers themselves, where the
// endpoint's tracing looks, not as X-Dlq- headers.
func TestRestoreHTTPKeepsTraceContext(t *testing.T) {
	dir := t.TempDir()
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	writeSegment(t, dir, segSpec{area: sink.AreaReady, created: t0, id: 0x71, version: dlqdump.NewVersion(1, 0, 0, 0), codec: segment.CodecZstd,
		records: []rec{{t0.Add(time.Second), map[string]string{"reason": "failed", dlqdump.HeaderTraceParent: tp, dlqdump.HeaderTraceState: "vendor=v1"}, []byte(`{"order":1}`)}}})
	tg := newTarget(t, func(string, int) int { return http.StatusOK })
	cli(t, 0, "restore", dir, "--to", tg.URL)
	h := tg.headersOf(`{"order":1}`)
	if h.Get("traceparent") != tp || h.Get("tracestate") != "vendor=v1" || h.Get("X-Dlq-Reason") != "failed" {
		t.Fatalf("request headers %v; want traceparent %s, tracestate vendor=v1 and X-Dlq-Reason", h, tp)
	}
	if h.Get("X-Dlq-Traceparent") != "" {
		t.Fatalf("the trace context sent twice: %v", h)
	}
}
