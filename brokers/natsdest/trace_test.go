package natsdest_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
)

// Trace context end to end into a broker: records dead-lettered inside a
// span (dlqdump.WithTrace) are replayed in spans linked to it, and each
// message carries its replay span's context in the W3C traceparent header.
func TestTraceContextIntoJetStream(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	srv := startNATS(t, 0)
	dir := t.TempDir()

	ctx, origin := tp.Tracer("app").Start(context.Background(), "process order")
	traced := dlqdump.WithTrace(ctx, &dlqdump.Envelope{})
	origin.End()
	const n = 20
	if err := brokertest.Dump(dir, n, 0, traced.Headers); err != nil {
		t.Fatal(err)
	}
	exp.Reset()

	d := brokertest.Open(t, srv.URL()+"/orders.redrive")
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{},
		Queue: d, DeliverEnvelope: true, TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if rep, err := r.Run(context.Background(), dlqdump.RunOptions{}); err != nil || rep.Delivered != n {
		t.Fatalf("Run: %v; %+v", err, rep)
	}
	spans := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		spans[s.SpanContext.SpanID()] = s
	}
	msgs, err := srv.ReadStream("REDRIVE")
	if err != nil || len(msgs) != n {
		t.Fatalf("%d messages (%v), want %d", len(msgs), err, n)
	}
	for _, m := range msgs {
		sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(m.Headers)))
		s, ok := spans[sc.SpanID()]
		if !ok || s.Name != "dlqdump.replay" {
			t.Fatalf("message traceparent %q: not a replay span's (spans: %d)", m.Headers["traceparent"], len(spans))
		}
		if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != origin.SpanContext().SpanID() || s.Links[0].SpanContext.TraceID() != origin.SpanContext().TraceID() {
			t.Fatalf("the replay span links %v, want the original span %v", s.Links, origin.SpanContext())
		}
		if s.SpanContext.TraceID() == origin.SpanContext().TraceID() {
			t.Fatalf("the replay continued the original trace instead of linking it")
		}
	}
}
