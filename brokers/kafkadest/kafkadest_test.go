package kafkadest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	"github.com/dlqdump/dlqdump/brokers/kafkadest"
)

func TestParseURL(t *testing.T) {
	addrs, topic, err := kafkadest.ParseURL("kafka://a:9092,b:9093/orders.redrive")
	if err != nil || len(addrs) != 2 || addrs[0] != "a:9092" || addrs[1] != "b:9093" || topic != "orders.redrive" {
		t.Fatalf("ParseURL: %v %q %v", addrs, topic, err)
	}
	for _, c := range []struct{ url, says string }{
		{"kafka://127.0.0.1:9092", "no TOPIC"},
		{"kafka:///orders", "no HOST:PORT"},
		{"kafka://127.0.0.1/orders", "not HOST:PORT"},
		{"kafka://a:1,:2/orders", "not HOST:PORT"},
		{"nats://127.0.0.1:9092/orders", "scheme"},
		{"kafka://127.0.0.1:9092/a/b", "topic"},
		{"kafka://127.0.0.1:9092/" + strings.Repeat("x", 250), "topic"},
		{"kafka://127.0.0.1:9092/..", "topic"},
		{"kafka://u:p@127.0.0.1:9092/t", "credentials"},
		{"kafka://127.0.0.1:9092/t?acks=1", "query"},
	} {
		_, _, err := kafkadest.ParseURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), kafkadest.Form) {
			t.Errorf("ParseURL(%q): %v; want an error saying %q and the form", c.url, err, c.says)
		}
	}
}

func startKafka(t *testing.T, topics ...string) *brokertest.Kafka {
	t.Helper()
	k, err := brokertest.StartKafka(t.TempDir(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

func read(t *testing.T, k *brokertest.Kafka, topic string, n int) []brokertest.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	msgs, err := k.ReadTopic(ctx, topic, n)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestRestoreIntoKafka(t *testing.T) {
	k := startKafka(t, "redrive")
	dir := t.TempDir()
	const n = 2000
	if err := brokertest.Dump(dir, n, 4*dlqdump.Kilobyte, dlqdump.Headers{dlqdump.HeaderSource: "orders"}); err != nil {
		t.Fatal(err)
	}
	ids, _, err := brokertest.RecordIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := brokertest.Open(t, "kafka://"+k.Addr()+"/redrive")
	rep, err := brokertest.Restore(dir, d, 8)
	if err != nil || rep.Delivered != n {
		t.Fatalf("Run: %v; %+v", err, rep)
	}
	msgs := read(t, k, "redrive", n)
	seen := map[string]bool{}
	for _, m := range msgs {
		seen[string(m.Data)] = true
		h := m.Headers
		if h[dlqdump.HeaderReason] != "failed" || h[dlqdump.HeaderSource] != "orders" || h[dlqdump.HeaderReplays] != "1" {
			t.Fatalf("headers %v", h)
		}
		if want := ids[string(m.Data)]; h["_watermill_message_uuid"] != want || h[dlqdump.HeaderRecordID] != want {
			t.Fatalf("%s: message UUID %q, record-id header %q; want the record's ID %q", m.Data, h["_watermill_message_uuid"], h[dlqdump.HeaderRecordID], want)
		}
	}
	if len(msgs) != n || len(seen) != n {
		t.Fatalf("the topic holds %d records, %d distinct; want %d", len(msgs), len(seen), n)
	}
}

// A broker that is down, or a topic that does not exist, is the destination
// being unavailable: the pass stops, nothing is quarantined, and a pass once
// it is back delivers every record.
func TestKafkaUnavailable(t *testing.T) {
	for _, c := range []string{"broker down", "no topic"} {
		t.Run(c, func(t *testing.T) {
			k := startKafka(t, "redrive")
			dir := t.TempDir()
			const n = 300
			if err := brokertest.Dump(dir, n, 0, nil); err != nil {
				t.Fatal(err)
			}
			topic := "redrive"
			if c == "no topic" {
				topic = "late"
			} else {
				k.Stop()
			}
			d := brokertest.Open(t, "kafka://"+k.Addr()+"/"+topic)
			rep, err := brokertest.Restore(dir, d, 1)
			if !errors.Is(err, dlqdump.ErrUnavailable) || rep.Delivered != 0 || rep.Quarantined != 0 {
				t.Fatalf("Run while unavailable: %v; %+v; want ErrUnavailable, nothing delivered or quarantined", err, rep)
			}
			if q := brokertest.Quarantined(dir); len(q) != 0 {
				t.Fatalf("quarantined: %v", q)
			}
			if c == "no topic" {
				if err := k.CreateTopic(topic); err != nil {
					t.Fatal(err)
				}
			} else if err := k.Start(); err != nil {
				t.Fatal(err)
			}
			// Concurrency 1: more than 3 failures in a row open
			// Sarama's circuit breaker of the partition for 10s.
			rep, err = brokertest.RestoreUntilAvailable(dir, d, 1)
			if err != nil || rep.Delivered != n {
				t.Fatalf("Run once back: %v; %+v", err, rep)
			}
			if msgs := read(t, k, topic, n); len(msgs) != n {
				t.Fatalf("the topic holds %d records, want %d", len(msgs), n)
			}
		})
	}
}

// A record larger than the producer takes is refused: quarantined.
func TestKafkaRefusesTooLarge(t *testing.T) {
	k := startKafka(t, "redrive")
	dir := t.TempDir()
	if err := brokertest.Dump(dir, 3, 0, dlqdump.Headers{"pad": strings.Repeat("x", 1100_000)}); err != nil {
		t.Fatal(err)
	}
	d := brokertest.Open(t, "kafka://"+k.Addr()+"/redrive")
	rep, err := brokertest.Restore(dir, d, 1)
	if err != nil || rep.Quarantined != 3 || rep.Delivered != 0 {
		t.Fatalf("Run: %v; %+v; want the 3 records quarantined", err, rep)
	}
	if !kafkadest.Refused(sarama.ErrMessageTooLarge) || kafkadest.Refused(sarama.ConfigurationError("Producer.Idempotent requires ...")) || kafkadest.Refused(sarama.ErrOutOfBrokers) || kafkadest.Refused(sarama.ErrUnknownTopicOrPartition) {
		t.Fatal("Refused tells the wrong errors apart")
	}
}
