package dlqdump_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
)

// newTracing returns an SDK TracerProvider sampling every span into an
// in-memory exporter.
func newTracing(t testing.TB) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// dumpTraced dumps n orders, each dead-lettered inside a span of its own
// (tracestate "vendor=v1"), and returns those spans' contexts by payload.
func dumpTraced(t testing.TB, dir string, tp trace.TracerProvider, n int) map[string]trace.SpanContext {
	t.Helper()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}})
	ts, _ := trace.ParseTraceState("vendor=v1")
	origins := map[string]trace.SpanContext{}
	for i := range n {
		ctx, span := tp.Tracer("app").Start(context.Background(), "process order")
		sc := span.SpanContext().WithTraceState(ts)
		ctx = trace.ContextWithSpanContext(ctx, sc)
		item := fmt.Sprintf("order-%d", i)
		if err := q.Enqueue(dlqdump.WithTrace(ctx, &dlqdump.Envelope{Item: item, Headers: dlqdump.Headers{dlqdump.HeaderReason: "failed"}})); err != nil {
			t.Fatal(err)
		}
		span.End()
		origins[item] = sc
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return origins
}

// A replay's span is a child of the pass's context, linked to the span that
// dead-lettered the record, and the destination receives the replay span's
// context in the W3C headers; without a TracerProvider, the original's.
func TestReplaySpanLinksToTheOriginal(t *testing.T) {
	const n = 50
	for _, traced := range []bool{true, false} {
		t.Run(fmt.Sprintf("traced=%v", traced), func(t *testing.T) {
			tp, exp := newTracing(t)
			dir := t.TempDir()
			origins := dumpTraced(t, dir, tp, n)
			exp.Reset()

			var mu sync.Mutex
			got := map[string]dlqdump.Headers{}
			cfg := &dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, DeliverEnvelope: true, Concurrency: 4,
				Queue: queueFunc(func(x any) error {
					env := x.(*dlqdump.Envelope)
					mu.Lock()
					got[string(env.Item.([]byte))] = env.Headers
					mu.Unlock()
					return nil
				})}
			if traced {
				cfg.TracerProvider = tp
			}
			r, err := dlqdump.NewRestorer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, job := tp.Tracer("ops").Start(context.Background(), "redrive job")
			rep, err := r.Run(ctx, dlqdump.RunOptions{})
			job.End()
			if err != nil || rep.Delivered != n {
				t.Fatalf("Run: %v; %+v", err, rep)
			}
			spans := exp.GetSpans()
			if !traced {
				if len(spans) != 1 { // the job's alone
					t.Fatalf("%d spans without a TracerProvider, want only the job's", len(spans))
				}
				for item, h := range got {
					if want := traceparent(origins[item]); h[dlqdump.HeaderTraceParent] != want || h[dlqdump.HeaderTraceState] != "vendor=v1" {
						t.Fatalf("%s delivered with traceparent %q tracestate %q; want the original's %q", item, h[dlqdump.HeaderTraceParent], h[dlqdump.HeaderTraceState], want)
					}
				}
				return
			}
			replays := map[trace.SpanID]tracetest.SpanStub{}
			for _, s := range spans {
				if s.Name == "dlqdump.replay" {
					replays[s.SpanContext.SpanID()] = s
				}
			}
			if len(replays) != n {
				t.Fatalf("%d replay spans, want %d", len(replays), n)
			}
			for item, h := range got {
				var delivered trace.SpanContext
				delivered = trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(h)))
				s, ok := replays[delivered.SpanID()]
				if !ok {
					t.Fatalf("%s delivered with traceparent %q: no replay span has that ID", item, h[dlqdump.HeaderTraceParent])
				}
				if s.Parent.SpanID() != job.SpanContext().SpanID() || s.SpanContext.TraceID() != job.SpanContext().TraceID() {
					t.Fatalf("%s: the replay span's parent is %v, want the job's span %v", item, s.Parent, job.SpanContext())
				}
				if s.SpanKind != trace.SpanKindProducer {
					t.Errorf("%s: span kind %v", item, s.SpanKind)
				}
				if len(s.Links) != 1 || !s.Links[0].SpanContext.Equal(origins[item].WithRemote(true)) {
					t.Fatalf("%s: the replay span links %v, want the original %v", item, s.Links, origins[item])
				}
				if h[dlqdump.HeaderTraceState] != "" {
					t.Fatalf("%s: the original's tracestate %q delivered with the replay's traceparent", item, h[dlqdump.HeaderTraceState])
				}
				attrs := map[string]string{}
				for _, kv := range s.Attributes {
					attrs[string(kv.Key)] = kv.Value.Emit()
				}
				if attrs["dlqdump.reason"] != "failed" || attrs["dlqdump.replays"] != "1" {
					t.Fatalf("%s: attributes %v", item, attrs)
				}
			}
		})
	}
}

// A delivery that fails ends its span with the error; each record's span
// covers its attempts.
func TestReplaySpanOfAFailedDelivery(t *testing.T) {
	tp, exp := newTracing(t)
	dir := t.TempDir()
	dumpTraced(t, dir, tp, 1)
	exp.Reset()
	var calls atomic.Int32
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, DeliverEnvelope: true,
		TracerProvider: tp, MaxAttempts: 3, RetryBase: 1, RetryMax: 2,
		Queue: queueFunc(func(any) error { calls.Add(1); return fmt.Errorf("no such order") })})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
	if err != nil || rep.Quarantined != 1 {
		t.Fatalf("Run: %v; %+v", err, rep)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Status.Code.String() != "Error" || len(spans[0].Events) != 1 {
		t.Fatalf("spans %+v; want one replay span with the error", spans)
	}
	for _, kv := range spans[0].Attributes {
		if kv.Key == "dlqdump.retries" && kv.Value.AsInt64() != 2 {
			t.Fatalf("dlqdump.retries %d, want 2", kv.Value.AsInt64())
		}
	}
}

func TestWithTrace(t *testing.T) {
	// No span: the item as it is, in an envelope.
	env := dlqdump.WithTrace(context.Background(), "x")
	if env.Item != "x" || len(env.Headers) != 0 {
		t.Fatalf("without a span: %+v", env)
	}
	tp, _ := newTracing(t)
	ctx, span := tp.Tracer("app").Start(context.Background(), "work")
	defer span.End()
	orig := &dlqdump.Envelope{Item: "y", Headers: dlqdump.Headers{"reason": "leak", dlqdump.HeaderTraceState: "stale=1"}}
	env = dlqdump.WithTrace(ctx, orig)
	if env.Item != "y" || env.Headers["reason"] != "leak" || env.Headers[dlqdump.HeaderTraceParent] != traceparent(span.SpanContext()) {
		t.Fatalf("WithTrace: %+v", env)
	}
	if _, ok := env.Headers[dlqdump.HeaderTraceState]; ok {
		t.Fatalf("a stale tracestate kept: %+v", env.Headers)
	}
	if len(orig.Headers) != 2 || orig.Headers[dlqdump.HeaderTraceParent] != "" {
		t.Fatalf("WithTrace changed its argument: %+v", orig.Headers)
	}
}

// traceparent returns the W3C traceparent of sc.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// BenchmarkReplayTracing restores records that carry a traceparent: without
// a TracerProvider (the cost of tracing is nil: compare "off" with
// "untraced", records with a header of the same size under another name),
// with OpenTelemetry's no-op provider, and with the
// SDK sampling nothing or every span (into a no-op exporter).
func BenchmarkReplayTracing(b *testing.B) {
	tp, _ := newTracing(b)
	sdkNever := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	sdkAll := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())))
	for _, c := range []struct {
		name   string
		traced bool
		tp     trace.TracerProvider
	}{
		{"untraced", false, nil},
		{"off", true, nil},
		{"noop", true, noop.NewTracerProvider()},
		{"sdk-never", true, sdkNever},
		{"sdk-always", true, sdkAll},
	} {
		b.Run(c.name, func(b *testing.B) {
			const n = 20000
			b.ReportAllocs()
			var restored int
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				q := newQueue(b, dlqdump.Config{Writer: &fs.Writer{Directory: dir}})
				ctx, span := tp.Tracer("app").Start(context.Background(), "process")
				if !c.traced {
					ctx = context.Background()
				}
				for i := range n {
					item := dlqdump.WithTrace(ctx, fmt.Sprintf(`{"order":%d,"customer":"c-%d"}`, i, i%97))
					if !c.traced {
						// A header of a traceparent's size, under
						// another name.
						item.Headers = dlqdump.Headers{"notatrace__": traceparent(span.SpanContext())}
					}
					if err := q.Enqueue(item); err != nil {
						b.Fatal(err)
					}
				}
				span.End()
				if err := q.Close(); err != nil {
					b.Fatal(err)
				}
				r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, DeliverEnvelope: true,
					TracerProvider: c.tp, Queue: queueFunc(func(any) error { return nil })})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
				b.StopTimer()
				if err != nil || rep.Delivered != n {
					b.Fatalf("Run: %v; %+v", err, rep)
				}
				restored += n
				r.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(restored)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
