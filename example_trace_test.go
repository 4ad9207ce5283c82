package dlqdump_test

import (
	"context"
	"fmt"
	"log"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
)

// Keep the trace context of a dead letter, and replay it in a span linked
// to the original.
func ExampleWithTrace() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)) // your program's TracerProvider
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}})
	if err != nil {
		log.Fatal(err)
	}
	process := func(ctx context.Context, order string) error { return fmt.Errorf("payment service: 503") }
	ctx, span := tp.Tracer("shop").Start(context.Background(), "handle order")
	order := `{"id":"ord-7"}`
	var delivered dlqdump.Headers
	deliver := queueFunc(func(x any) error { delivered = x.(*dlqdump.Envelope).Headers; return nil })
	// README:begin
	// Where an item is dead-lettered, in the context of its processing:
	if err := process(ctx, order); err != nil {
		// The span's W3C traceparent and tracestate are stored with the record.
		_ = dump.Enqueue(dlqdump.WithTrace(ctx, &dlqdump.Envelope{Item: order, Headers: dlqdump.Headers{dlqdump.HeaderError: err.Error()}}))
	}
	// Where it is replayed:
	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader:          &fs.Reader{Directory: dir},
		Decoder:         decoder.Fallthrough{},
		Queue:           deliver,
		DeliverEnvelope: true,
		TracerProvider:  tp, // each delivery a "dlqdump.replay" span linked to "handle order"; nil: none
	})
	// README:end
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	span.End()
	if err := dump.Close(); err != nil {
		log.Fatal(err)
	}
	if _, err := r.Run(context.Background(), dlqdump.RunOptions{}); err != nil {
		log.Fatal(err)
	}
	for _, s := range exp.GetSpans() {
		if s.Name == "dlqdump.replay" {
			fmt.Println("replay span linked to the original:", len(s.Links) == 1 && s.Links[0].SpanContext.SpanID() == span.SpanContext().SpanID())
			fmt.Println("traceparent delivered is the replay's:", delivered[dlqdump.HeaderTraceParent] == traceparent(s.SpanContext))
		}
	}
	// Output:
	// replay span linked to the original: true
	// traceparent delivered is the replay's: true
}
