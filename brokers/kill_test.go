package brokers_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	_ "github.com/dlqdump/dlqdump/brokers/kafkadest"
	_ "github.com/dlqdump/dlqdump/brokers/natsdest"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/destination"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/childproc"
)

func TestMain(m *testing.M) {
	if os.Getenv("DLQDUMP_TEST_CHILD") == "broker-restorer" {
		os.Exit(brokerRestorer())
	}
	os.Exit(m.Run())
}

// brokerRestorer restores DLQDUMP_DIR into the destination DLQDUMP_URL with
// 4 deliveries in flight, prints the payload of every record the broker
// acknowledged, and SIGKILLs itself right after the DLQDUMP_KILL_AT-th
// acknowledgement (0: never), before the Restorer hears of it.
func brokerRestorer() int {
	killAt, _ := strconv.Atoi(os.Getenv("DLQDUMP_KILL_AT"))
	d, err := destination.Open(context.Background(), os.Getenv("DLQDUMP_URL"), &destination.Options{Timeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	n := 0
	dst := enqueueFunc(func(x any) error {
		if err := d.Enqueue(x); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		out.Write(x.(*dlqdump.Envelope).Item.([]byte))
		out.WriteByte('\n')
		if err := out.Flush(); err != nil {
			return err
		}
		if n++; n == killAt {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	})
	r, err := dlqdump.NewRestorer(&dlqdump.Config{
		Reader: &fs.Reader{Directory: os.Getenv("DLQDUMP_DIR")}, Decoder: decoder.Fallthrough{},
		Queue: dst, DeliverEnvelope: true, Concurrency: 4, Lease: 150 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A killed predecessor's claim is taken over once unchanged for a
	// lease: pass until nothing is claimed by anyone else.
	for {
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "restore:", err)
			return 1
		}
		if rep.Claimed == 0 {
			return 0
		}
		time.Sleep(30 * time.Millisecond)
	}
}

type enqueueFunc func(any) error

func (f enqueueFunc) Enqueue(x any) error { return f(x) }

// runBrokerRestorer runs brokerRestorer and returns the payloads the broker
// acknowledged to it.
func runBrokerRestorer(t *testing.T, dir, url string, killAt int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLQDUMP_TEST_CHILD=broker-restorer", "DLQDUMP_DIR="+dir, "DLQDUMP_URL="+url,
		"DLQDUMP_KILL_AT="+strconv.Itoa(killAt))
	cmd.Stderr = os.Stderr
	childproc.DieWithParent(cmd)
	b, err := cmd.Output()
	killed := false
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			killed = true
		}
	}
	if killAt > 0 && !killed {
		t.Fatalf("the restorer was to be killed at its %d-th acknowledgement: %v", killAt, err)
	}
	if killAt == 0 && err != nil {
		t.Fatalf("restorer: %v", err)
	}
	return strings.Fields(string(b))
}

// The crash bound holds into a broker: a restorer killed right after the
// broker acknowledged a record, before its Restorer knew, delivers again at
// most the records of one block per kill (one segment in flight here), and
// every record reaches the broker with its ID as the message UUID, the same
// ID each time it is delivered. JetStream keeps one copy of each (its
// Nats-Msg-Id deduplication); Kafka keeps every delivery, each with the
// record's ID.
func TestKilledRestorerIntoBroker(t *testing.T) {
	const n = 6000
	kills := []int{1500, 2500}
	for _, c := range []struct {
		name  string
		start func(t *testing.T) (url string, read func() []brokertest.Msg)
		dedup bool
	}{
		{"nats", func(t *testing.T) (string, func() []brokertest.Msg) {
			srv, err := brokertest.StartNATS(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			if err := srv.Stream(&nats.StreamConfig{Name: "REDRIVE", Subjects: []string{"orders.redrive"}}); err != nil {
				t.Fatal(err)
			}
			return srv.URL() + "/orders.redrive", func() []brokertest.Msg {
				msgs, err := srv.ReadStream("REDRIVE")
				if err != nil {
					t.Fatal(err)
				}
				return msgs
			}
		}, true},
		{"kafka", func(t *testing.T) (string, func() []brokertest.Msg) {
			k, err := brokertest.StartKafka(t.TempDir(), "redrive")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(k.Close)
			return "kafka://" + k.Addr() + "/redrive", func() []brokertest.Msg {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				// Every delivery, the twice-delivered ones too: read
				// until the topic's end.
				msgs, err := k.ReadAll(ctx, "redrive")
				if err != nil {
					t.Fatal(err)
				}
				return msgs
			}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := brokertest.Dump(dir, n, 4*dlqdump.Kilobyte, nil); err != nil {
				t.Fatal(err)
			}
			ids, maxBlock, err := brokertest.RecordIDs(dir)
			if err != nil {
				t.Fatal(err)
			}
			url, read := c.start(t)
			acked := map[string]int{}
			for _, k := range kills {
				for _, p := range runBrokerRestorer(t, dir, url, k) {
					acked[p]++
				}
			}
			for _, p := range runBrokerRestorer(t, dir, url, 0) {
				acked[p]++
			}
			twice := 0
			for p := range ids {
				if acked[p] == 0 {
					t.Fatalf("%s never acknowledged", p)
				}
				twice += acked[p] - 1
			}
			bound := len(kills) * maxBlock
			t.Logf("%d kills: %d records acknowledged twice, bound %d (one block of at most %d records per kill)", len(kills), twice, bound, maxBlock)
			if twice > bound {
				t.Fatalf("%d records delivered twice, more than one block per kill (%d)", twice, bound)
			}
			msgs := read()
			byID := map[string]int{}
			for _, m := range msgs {
				id := m.Headers["_watermill_message_uuid"]
				if want := ids[string(m.Data)]; id != want {
					t.Fatalf("%s arrived with the message UUID %q, want its record ID %q", m.Data, id, want)
				}
				byID[id]++
			}
			if len(byID) != n {
				t.Fatalf("%d distinct IDs at the broker, want %d", len(byID), n)
			}
			if c.dedup && len(msgs) != n {
				t.Fatalf("the stream holds %d messages for %d records: JetStream did not deduplicate by the record ID", len(msgs), n)
			}
			// At the broker: the records acknowledged twice, and those
			// in flight at a kill that the broker stored without the
			// restorer hearing of it (at most Concurrency-1 per kill).
			extra := len(msgs) - n
			t.Logf("the broker holds %d messages: %d more than records", len(msgs), extra)
			if !c.dedup && (extra < twice || extra > bound) {
				t.Fatalf("the topic holds %d records for %d: %d more, want from %d (acknowledged twice) to %d (one block per kill)", len(msgs), n, extra, twice, bound)
			}
		})
	}
}
