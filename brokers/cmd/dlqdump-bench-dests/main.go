// Command dlqdump-bench-dests measures how fast dlqdump restore delivers
// into each kind of destination, side by side in one run: stdout (no
// destination: the restore's own cost), an HTTP endpoint, NATS JetStream
// and Kafka. Every destination gets the same dump of realistic dead letters
// (~256 B JSON, package gen) and the same command, the dlqdump built by
// this module (restore --to URL --concurrency C), run as a child process;
// the rounds alternate the destinations, and the range over the rounds is
// printed in records per second.
//
// The servers run in this process on 127.0.0.1: a Go HTTP server that
// reads each POST and answers 204, a nats-server with JetStream (file
// storage, its Go module) and franz-go's kfake, an in-process Kafka of one
// broker. kfake is not Kafka: its figure measures the client's path (the
// Watermill publisher over Sarama, acks=all, idempotent) into a fast
// protocol peer, not a broker's disk. On a machine shared with other work
// the figures are indicative only.
//
//	cd brokers
//	go run ./cmd/dlqdump-bench-dests -n 50000 -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/brokers/internal/brokertest"
	"github.com/dlqdump/dlqdump/brokers/internal/clibuild"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/gen"
)

func main() {
	n := flag.Int("n", 50000, "records per restore")
	size := flag.Int("size", 256, "payload bytes, about")
	rounds := flag.Int("rounds", 3, "rounds; each restores into every destination once")
	conc := flag.Int("concurrency", 8, "restore --concurrency: deliveries in flight")
	flag.Parse()
	if err := run(*n, *size, *rounds, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "dlqdump-bench-dests:", err)
		os.Exit(1)
	}
}

// dest is a destination measured.
type dest struct {
	name  string
	url   string       // --to; "" for stdout
	count func() int   // records it holds
	reset func() error // empties it between rounds
	rates []float64    // records/s per round
	note  string
}

func run(n, size, rounds, conc int) error {
	tmp, err := os.MkdirTemp("", "bench-dests")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "dlqdump")
	fmt.Fprintln(os.Stderr, "building dlqdump with the brokers' schemes ...")
	if err := clibuild.Build(context.Background(), "", bin); err != nil {
		return err
	}
	payloads := gen.New(1).Events(n, size)

	httpCount, httpURL, stopHTTP, err := startHTTP()
	if err != nil {
		return err
	}
	defer stopHTTP()
	ns, err := brokertest.StartNATS(filepath.Join(tmp, "nats"))
	if err != nil {
		return err
	}
	defer ns.Close()
	k, err := brokertest.StartKafka(filepath.Join(tmp, "kafka"))
	if err != nil {
		return err
	}
	defer k.Close()

	round := 0
	dests := []*dest{
		{name: "stdout (no destination)", count: func() int { return n }, reset: func() error { return nil }},
		{name: "http", url: httpURL, count: func() int { return int(httpCount.Load()) }, reset: func() error { httpCount.Store(0); return nil },
			note: "Go net/http server on 127.0.0.1, 204 per POST"},
		{name: "nats (JetStream)", note: "nats-server v2.15 in process, file storage, PubAck per message",
			reset: func() error {
				return ns.Stream(&nats.StreamConfig{Name: "R" + strconv.Itoa(round), Subjects: []string{"r" + strconv.Itoa(round)}})
			}},
		{name: "kafka (kfake)", note: "kfake in process, acks=all, idempotent producer",
			reset: func() error { return k.CreateTopic("r" + strconv.Itoa(round)) }},
	}
	natsD, kafkaD := dests[2], dests[3]
	natsD.count = func() int {
		msgs, err := ns.ReadStream("R" + strconv.Itoa(round))
		if err != nil {
			return -1
		}
		return len(msgs)
	}
	kafkaD.count = func() int {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		msgs, err := k.ReadAll(ctx, "r"+strconv.Itoa(round))
		if err != nil {
			return -1
		}
		return len(msgs)
	}
	for round = 0; round < rounds; round++ {
		natsD.url = ns.URL() + "/r" + strconv.Itoa(round)
		kafkaD.url = "kafka://" + k.Addr() + "/r" + strconv.Itoa(round)
		// Alternate the order, so that no destination always runs
		// first or last.
		order := slices.Clone(dests)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, d := range order {
			if err := d.reset(); err != nil {
				return fmt.Errorf("%s: %w", d.name, err)
			}
			dir := filepath.Join(tmp, fmt.Sprintf("dump-%d-%s", round, d.name[:4]))
			if err := dump(dir, payloads); err != nil {
				return err
			}
			el, err := restore(bin, dir, d.url, conc)
			if err != nil {
				return fmt.Errorf("%s: %w", d.name, err)
			}
			if got := d.count(); got != n {
				return fmt.Errorf("%s: holds %d records after the restore, want %d", d.name, got, n)
			}
			d.rates = append(d.rates, float64(n)/el.Seconds())
			fmt.Fprintf(os.Stderr, "round %d: %-24s %9.0f records/s\n", round+1, d.name, float64(n)/el.Seconds())
		}
	}
	fmt.Printf("dlqdump restore --concurrency %d, %d records of ~%d B, %d rounds (range of the rounds)\n", conc, n, size, rounds)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "destination\trecords/s\tof stdout's\tdestination here")
	base := slices.Min(dests[0].rates)
	for _, d := range dests {
		lo, hi := slices.Min(d.rates), slices.Max(d.rates)
		fmt.Fprintf(tw, "%s\t%.0f–%.0f\t%.2f–%.2f\t%s\n", d.name, lo, hi, lo/base, hi/base, d.note)
	}
	return tw.Flush()
}

// dump writes the payloads into a dump directory.
func dump(dir string, payloads [][]byte) error {
	q, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: 64 * dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}})
	if err != nil {
		return err
	}
	for _, p := range payloads {
		if err := q.Enqueue(&dlqdump.Envelope{Item: p, Headers: dlqdump.Headers{dlqdump.HeaderReason: "failed", dlqdump.HeaderSource: "orders"}}); err != nil {
			q.Close()
			return err
		}
	}
	return q.Close()
}

// restore runs dlqdump restore and returns how long it took.
func restore(bin, dir, to string, conc int) (time.Duration, error) {
	args := []string{"restore", dir, "--quiet", "--concurrency", strconv.Itoa(conc)}
	if to != "" {
		args = append(args, "--to", to)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = io.Discard
	cmd.Stderr = os.Stderr
	start := time.Now()
	err := cmd.Run()
	return time.Since(start), err
}

// startHTTP starts an endpoint that counts the POSTs it reads.
func startHTTP() (*atomic.Int64, string, func(), error) {
	c := &atomic.Int64{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		c.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "http:", err)
		}
	}()
	return c, "http://" + ln.Addr().String() + "/in", func() { _ = srv.Close() }, nil
}
