package prometheus_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/dlqdump/dlqdump"
	dlqprom "github.com/dlqdump/dlqdump/metrics/prometheus"
)

// Example registers the Writer of the queue "orders" on a registry of its
// own. In a program the registry is then served with
// promhttp.HandlerFor(reg, promhttp.HandlerOpts{}) and the Writer set as
// Config.MetricsWriter; here its events are sent by hand.
func Example() {
	reg := prometheus.NewRegistry()
	mw, err := dlqprom.New(reg, "orders")
	if err != nil {
		fmt.Println(err)
		return
	}
	var _ dlqdump.MetricsWriter = mw // cfg.MetricsWriter = mw

	mw.Dump(512)
	mw.Dump(256)
	mw.Flush(dlqdump.FlushSize, 2, 700, 4*time.Millisecond)
	mw.Fail("write")

	out, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain,
		dlqprom.MetricDumpedRecords, dlqprom.MetricDumpedBytes, dlqprom.MetricFailures)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(out))
	// Output:
	// # HELP dlqdump_dumped_bytes_total Encoded bytes of the records accepted by the queue.
	// # TYPE dlqdump_dumped_bytes_total counter
	// dlqdump_dumped_bytes_total{queue="orders"} 768
	// # HELP dlqdump_dumped_records_total Records accepted by the queue to be dumped.
	// # TYPE dlqdump_dumped_records_total counter
	// dlqdump_dumped_records_total{queue="orders"} 2
	// # HELP dlqdump_failures_total Failed operations, by reason.
	// # TYPE dlqdump_failures_total counter
	// dlqdump_failures_total{queue="orders",reason="backpressure"} 0
	// dlqdump_failures_total{queue="orders",reason="closed"} 0
	// dlqdump_failures_total{queue="orders",reason="corrupt"} 0
	// dlqdump_failures_total{queue="orders",reason="encode"} 0
	// dlqdump_failures_total{queue="orders",reason="gone"} 0
	// dlqdump_failures_total{queue="orders",reason="moved_away"} 0
	// dlqdump_failures_total{queue="orders",reason="no_key"} 0
	// dlqdump_failures_total{queue="orders",reason="not_a_copy"} 0
	// dlqdump_failures_total{queue="orders",reason="not_durable"} 0
	// dlqdump_failures_total{queue="orders",reason="recover"} 0
	// dlqdump_failures_total{queue="orders",reason="shutdown"} 0
	// dlqdump_failures_total{queue="orders",reason="too_large"} 0
	// dlqdump_failures_total{queue="orders",reason="unauthenticated_progress"} 0
	// dlqdump_failures_total{queue="orders",reason="version_deleted"} 0
	// dlqdump_failures_total{queue="orders",reason="write"} 1
}

// ExampleNew shows two Writers on one registry: a second New for the same
// queue reuses the collectors of the first, and another queue name gets
// series of its own.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	a, _ := dlqprom.New(reg, "orders")
	b, err := dlqprom.New(reg, "orders")
	fmt.Println("same queue again:", err)
	c, _ := dlqprom.New(reg, "payments")

	a.Restore(1, 10)
	b.Restore(1, 10)
	c.Restore(1, 10)

	out, _ := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain, dlqprom.MetricRestoredRecords)
	fmt.Print(string(out))
	// Output:
	// same queue again: <nil>
	// # HELP dlqdump_restored_records_total Records delivered to the destination.
	// # TYPE dlqdump_restored_records_total counter
	// dlqdump_restored_records_total{queue="orders"} 2
	// dlqdump_restored_records_total{queue="payments"} 1
}
