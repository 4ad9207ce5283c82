// Package brokertest runs the brokers the tests and the benchmark deliver
// into, in this process: a real NATS server with JetStream (its own Go
// module, github.com/nats-io/nats-server/v2) and a Kafka cluster speaking
// the Kafka protocol (franz-go's kfake). Each can be stopped and started
// again on the same port with what it stored, to make an outage.
package brokertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// NATS is a nats-server with JetStream.
type NATS struct {
	dir  string
	port int

	mu  sync.Mutex
	srv *server.Server
}

// StartNATS starts a NATS server with JetStream storing in dir, on a free
// port of 127.0.0.1.
func StartNATS(dir string) (*NATS, error) {
	n := &NATS{dir: dir, port: -1}
	if err := n.Start(); err != nil {
		return nil, err
	}
	return n, nil
}

// Start starts the server again after Stop, on the same port.
func (n *NATS) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: n.port, JetStream: true, StoreDir: n.dir,
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return fmt.Errorf("brokertest: nats-server not ready in 30s")
	}
	n.srv = s
	n.port = s.Addr().(*net.TCPAddr).Port
	return nil
}

// Stop shuts the server down; its clients see the connection closed and
// reconnect in vain until Start.
func (n *NATS) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// URL is the server's client URL, nats://127.0.0.1:PORT.
func (n *NATS) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

// Stream makes a JetStream stream.
func (n *NATS) Stream(cfg *nats.StreamConfig) error {
	nc, err := nats.Connect(n.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return err
	}
	_, err = js.AddStream(cfg)
	return err
}

// Msg is a message read back from a broker.
type Msg struct {
	Data    []byte
	Headers map[string]string
}

// ReadStream returns every message of the stream, in order.
func (n *NATS) ReadStream(stream string) ([]Msg, error) {
	nc, err := nats.Connect(n.URL())
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return nil, err
	}
	info, err := js.StreamInfo(stream)
	if err != nil {
		return nil, err
	}
	var out []Msg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := js.GetMsg(stream, seq)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", seq, err)
		}
		h := map[string]string{}
		for k, v := range m.Header {
			h[k] = v[0]
		}
		out = append(out, Msg{Data: m.Data, Headers: h})
	}
	return out, nil
}

// Close stops the server.
func (n *NATS) Close() { n.Stop() }

// Kafka is an in-process Kafka cluster (kfake) of one broker.
type Kafka struct {
	dir    string
	topics []string
	port   int

	mu sync.Mutex
	c  *kfake.Cluster
}

// StartKafka starts a cluster persisting in dir, with topics of one
// partition each, on a free port.
func StartKafka(dir string, topics ...string) (*Kafka, error) {
	k := &Kafka{dir: dir, topics: topics}
	if err := k.Start(); err != nil {
		return nil, err
	}
	return k, nil
}

// Start starts the cluster again after Stop, on the same port, with what
// it stored.
func (k *Kafka) Start() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.DataDir(k.dir), kfake.Ports(k.port)}
	if len(k.topics) > 0 {
		opts = append(opts, kfake.SeedTopics(1, k.topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return err
	}
	k.c = c
	_, p, _ := net.SplitHostPort(c.ListenAddrs()[0])
	k.port, _ = strconv.Atoi(p)
	return nil
}

// Stop closes the cluster: its port refuses connections until Start.
func (k *Kafka) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

// Close stops the cluster.
func (k *Kafka) Close() { k.Stop() }

// Addr is the broker's address, 127.0.0.1:PORT.
func (k *Kafka) Addr() string { return "127.0.0.1:" + strconv.Itoa(k.port) }

// ReadTopic returns the first n records of topic (every partition), or
// what there is when ctx ends.
func (k *Kafka) ReadTopic(ctx context.Context, topic string, n int) ([]Msg, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []Msg
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, nil
		}
		if err := fs.Err0(); err != nil {
			return out, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, kv := range r.Headers {
				h[kv.Key] = string(kv.Value)
			}
			out = append(out, Msg{Data: r.Value, Headers: h})
		})
	}
	return out, nil
}

// Dump writes n records, "item-000000", "item-000001", ..., into a dump
// directory in blocks of about blockSize bytes (0: the default), each with
// the header reason=failed and the extra headers given.
func Dump(dir string, n int, blockSize dlqdump.MemorySize, extra dlqdump.Headers) error {
	q, err := dlqdump.NewQueue(&dlqdump.Config{
		Capacity:  64 * dlqdump.Megabyte,
		BlockSize: blockSize,
		Writer:    &fs.Writer{Directory: dir},
	})
	if err != nil {
		return err
	}
	for i := range n {
		h := dlqdump.Headers{dlqdump.HeaderReason: "failed"}
		for k, v := range extra {
			h[k] = v
		}
		if err := q.Enqueue(&dlqdump.Envelope{Item: fmt.Sprintf("item-%06d", i), Headers: h}); err != nil {
			q.Close()
			return err
		}
	}
	return q.Close()
}

// RecordIDs returns the record ID of every record in the dump directory's
// ready segments, by payload, and the largest number of records in one
// block.
func RecordIDs(dir string) (ids map[string]string, maxBlock int, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.dlq"))
	if err != nil {
		return nil, 0, err
	}
	ids = map[string]string{}
	for _, p := range paths {
		if err := func() error {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			r, err := segment.NewReader(f, st.Size(), nil)
			if err != nil {
				return err
			}
			for _, b := range r.Footer().Blocks {
				maxBlock = max(maxBlock, int(b.Count))
			}
			h := r.Header()
			for {
				rec, err := r.Next()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				ids[string(rec.Payload)] = dlqdump.RecordIDOf(&h, &rec).String()
			}
		}(); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", p, err)
		}
	}
	return ids, maxBlock, nil
}

// CreateTopic makes a topic of one partition.
func (k *Kafka) CreateTopic(topic string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.c.CreateTopic(topic, 1, nil)
}

// ReadAll returns every record of topic (of one partition) up to its end
// offset when called.
func (k *Kafka) ReadAll(ctx context.Context, topic string) ([]Msg, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()))
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	cl.Close()
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("brokertest: end offset of %s: %v", topic, end.Err)
	}
	return k.ReadTopic(ctx, topic, int(end.Offset))
}
