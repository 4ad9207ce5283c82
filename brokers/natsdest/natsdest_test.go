package natsdest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	"github.com/dlqdump/dlqdump/brokers/natsdest"
)

func TestParseURL(t *testing.T) {
	server, subject, err := natsdest.ParseURL("nats://u:p@127.0.0.1:4222/orders.redrive")
	if err != nil || server != "nats://u:p@127.0.0.1:4222" || subject != "orders.redrive" {
		t.Fatalf("ParseURL: %q %q %v", server, subject, err)
	}
	for _, c := range []struct{ url, says string }{
		{"nats://127.0.0.1:4222", "no SUBJECT"},
		{"nats://127.0.0.1:4222/", "no SUBJECT"},
		{"nats:///orders", "no HOST:PORT"},
		{"http://127.0.0.1:4222/orders", "scheme"},
		{"nats://127.0.0.1:4222/orders.*", "wildcard"},
		{"nats://127.0.0.1:4222/orders.>", "wildcard"},
		{"nats://127.0.0.1:4222/a/b", "slash"},
		{"nats://127.0.0.1:4222/a..b", "empty token"},
		{"nats://127.0.0.1:4222/a?x=1", "query"},
		{"nats://u:secret@127.0.0.1:4222/", "no SUBJECT"},
	} {
		_, _, err := natsdest.ParseURL(c.url)
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), natsdest.Form) {
			t.Errorf("ParseURL(%q): %v; want an error saying %q and the form", c.url, err, c.says)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q): the error shows the password: %v", c.url, err)
		}
	}
}

// startNATS starts a server with a stream REDRIVE on subject orders.redrive.
func startNATS(t *testing.T, maxMsgSize int32) *brokertest.NATS {
	t.Helper()
	srv, err := brokertest.StartNATS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := srv.Stream(&nats.StreamConfig{Name: "REDRIVE", Subjects: []string{"orders.redrive"}, MaxMsgSize: maxMsgSize}); err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestRestoreIntoJetStream(t *testing.T) {
	srv := startNATS(t, 0)
	dir := t.TempDir()
	const n = 2000
	if err := brokertest.Dump(dir, n, 4*dlqdump.Kilobyte, dlqdump.Headers{dlqdump.HeaderSource: "orders"}); err != nil {
		t.Fatal(err)
	}
	ids, _, err := brokertest.RecordIDs(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := brokertest.Open(t, srv.URL()+"/orders.redrive")
	rep, err := brokertest.Restore(dir, d, 8)
	if err != nil || rep.Delivered != n {
		t.Fatalf("Run: %v; %+v", err, rep)
	}
	msgs, err := srv.ReadStream("REDRIVE")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != n {
		t.Fatalf("the stream holds %d messages, want %d", len(msgs), n)
	}
	seen := map[string]bool{}
	for _, m := range msgs {
		seen[string(m.Data)] = true
		h := m.Headers
		if h[dlqdump.HeaderReason] != "failed" || h[dlqdump.HeaderSource] != "orders" || h[dlqdump.HeaderReplays] != "1" {
			t.Fatalf("headers %v", h)
		}
		id := h["_watermill_message_uuid"]
		if id == "" || h[nats.MsgIdHdr] != id {
			t.Fatalf("message UUID %q, Nats-Msg-Id %q: want both the same", id, h[nats.MsgIdHdr])
		}
		if want := ids[string(m.Data)]; id != want || h[dlqdump.HeaderRecordID] != want {
			t.Fatalf("%s: message UUID %q, record-id header %q; want the record's ID %q", m.Data, id, h[dlqdump.HeaderRecordID], want)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records, want %d", len(seen), n)
	}
}

// A server that is down, or a subject no stream captures, is the
// destination being unavailable: the pass stops, nothing is quarantined,
// and the next pass once it is back delivers every record.
func TestJetStreamUnavailable(t *testing.T) {
	for _, c := range []struct {
		name    string
		outage  func(*brokertest.NATS)
		restore func(*testing.T, *brokertest.NATS)
	}{
		{"server down", func(s *brokertest.NATS) { s.Stop() }, func(t *testing.T, s *brokertest.NATS) {
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
		}},
		{"no stream", func(*brokertest.NATS) {}, func(t *testing.T, s *brokertest.NATS) {
			if err := s.Stream(&nats.StreamConfig{Name: "LATE", Subjects: []string{"late.redrive"}}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := startNATS(t, 0)
			subject, stream := "orders.redrive", "REDRIVE"
			if c.name == "no stream" {
				subject, stream = "late.redrive", "LATE"
			}
			dir := t.TempDir()
			const n = 300
			if err := brokertest.Dump(dir, n, 0, nil); err != nil {
				t.Fatal(err)
			}
			d := brokertest.Open(t, srv.URL()+"/"+subject)
			c.outage(srv)
			rep, err := brokertest.Restore(dir, d, 4)
			if !errors.Is(err, dlqdump.ErrUnavailable) || rep.Delivered != 0 || rep.Quarantined != 0 {
				t.Fatalf("Run while unavailable: %v; %+v; want ErrUnavailable, nothing delivered or quarantined", err, rep)
			}
			if q := brokertest.Quarantined(dir); len(q) != 0 {
				t.Fatalf("quarantined: %v", q)
			}
			c.restore(t, srv)
			// The client reconnects in the background: the passes
			// stop, leaving every record, until it did.
			rep, err = brokertest.RestoreUntilAvailable(dir, d, 4)
			if err != nil || rep.Delivered != n {
				t.Fatalf("Run once back: %v; %+v", err, rep)
			}
			msgs, err := srv.ReadStream(stream)
			if err != nil || len(msgs) != n {
				t.Fatalf("the stream holds %d messages (%v), want %d", len(msgs), err, n)
			}
		})
	}
}

// A message larger than the stream takes is refused: that record is
// quarantined, the others delivered.
func TestJetStreamRefusesTooLarge(t *testing.T) {
	srv := startNATS(t, 512)
	dir := t.TempDir()
	if err := brokertest.Dump(dir, 10, 0, dlqdump.Headers{"pad": strings.Repeat("x", 600)}); err != nil {
		t.Fatal(err)
	}
	d := brokertest.Open(t, srv.URL()+"/orders.redrive")
	rep, err := brokertest.Restore(dir, d, 1)
	if err != nil || rep.Quarantined != 10 || rep.Delivered != 0 {
		t.Fatalf("Run: %v; %+v; want the 10 records quarantined", err, rep)
	}
	if !natsdest.Refused(&nats.APIError{ErrorCode: 10054}) || natsdest.Refused(nats.ErrTimeout) || natsdest.Refused(nats.ErrNoStreamResponse) {
		t.Fatal("Refused tells the wrong errors apart")
	}
}
