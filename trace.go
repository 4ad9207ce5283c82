package dlqdump

import (
	"context"
	"maps"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// W3C Trace Context headers (https://www.w3.org/TR/trace-context/): a record
// dumped with WithTrace carries the context of the span that dead-lettered
// it; a Restorer with Config.TracerProvider delivers the context of its
// replay span in their place.
const (
	// HeaderTraceParent holds the W3C traceparent: version, trace ID,
	// parent span ID and flags, e.g.
	// "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".
	HeaderTraceParent = "traceparent"
	// HeaderTraceState holds the W3C tracestate: vendors' key=value pairs.
	HeaderTraceState = "tracestate"
)

// w3c injects and extracts HeaderTraceParent and HeaderTraceState,
// whatever global propagator the program set (OpenTelemetry's default is
// none).
var w3c propagation.TraceContext

// WithTrace returns item in an *Envelope whose headers carry the W3C trace
// context of the span in ctx (HeaderTraceParent, HeaderTraceState), for a
// program that has a context where it dead-letters an item: koykov's
// Enqueue(x any) takes none, so the context travels in the item.
//
//	if err := process(ctx, order); err != nil {
//		_ = dump.Enqueue(dlqdump.WithTrace(ctx, order))
//	}
//
// An Envelope or *Envelope item keeps its own Item and a copy of its
// headers (item is not changed). Without a valid span context in ctx the
// headers are left as they are.
func WithTrace(ctx context.Context, item any) *Envelope {
	var env Envelope
	switch v := item.(type) {
	case *Envelope:
		if v != nil {
			env = Envelope{Item: v.Item, Headers: maps.Clone(v.Headers)}
		}
	case Envelope:
		env = Envelope{Item: v.Item, Headers: maps.Clone(v.Headers)}
	default:
		env.Item = item
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return &env
	}
	if env.Headers == nil {
		env.Headers = Headers{}
	}
	delete(env.Headers, HeaderTraceState) // the span's own, or none
	w3c.Inject(ctx, propagation.MapCarrier(env.Headers))
	return &env
}

// tracerName is the instrumentation scope of the Restorer's spans.
const tracerName = "github.com/dlqdump/dlqdump"

// replaySpanName is the name of the span of a record's delivery.
const replaySpanName = "dlqdump.replay"

// traceReplay starts the span of delivering item, a child of the pass's ctx
// linked to the span that dead-lettered the record (its HeaderTraceParent),
// and puts the new span's context in the headers delivered in its place.
// The returned end ends the span with the delivery's error and the number
// of retries it took. Items that carry no headers (neither an *Envelope nor
// a HeaderCarrier) get a span without link, and deliver nothing of it.
func (r *Restorer) traceReplay(ctx context.Context, item any) (end func(err error, retries uint64)) {
	var h Headers
	carrier, isCarrier := item.(HeaderCarrier)
	switch v := item.(type) {
	case *Envelope:
		h = v.Headers
	case HeaderCarrier:
		h = v.DLQHeaders()
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
	if h != nil {
		origin := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.MapCarrier(h)))
		if origin.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: origin}))
		}
		attrs := make([]attribute.KeyValue, 0, 3)
		if id := h[HeaderRecordID]; id != "" {
			attrs = append(attrs, attribute.String("messaging.message.id", id))
		}
		if v := h[HeaderReason]; v != "" {
			attrs = append(attrs, attribute.String("dlqdump.reason", v))
		}
		if n, err := strconv.Atoi(h[HeaderReplays]); err == nil {
			attrs = append(attrs, attribute.Int("dlqdump.replays", n))
		}
		opts = append(opts, trace.WithAttributes(attrs...))
	}
	ctx, span := r.c.tracer.Start(ctx, replaySpanName, opts...)
	if h != nil && span.SpanContext().IsValid() { // a no-op provider's span has none: keep the original's
		delete(h, HeaderTraceState)
		w3c.Inject(ctx, propagation.MapCarrier(h))
		if isCarrier {
			carrier.SetDLQHeaders(h)
		}
	}
	return func(err error, retries uint64) {
		if retries > 0 {
			span.SetAttributes(attribute.Int64("dlqdump.retries", int64(retries)))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
