package s3_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/sink"
)

func record(rng *rand.Rand, i int) string {
	b := make([]byte, 24)
	for j := range b {
		b[j] = byte(rng.Uint32())
	}
	return fmt.Sprintf("record-%06d-%s", i, hex.EncodeToString(b))
}

// Records dumped through a Queue while a quarter of the S3 requests fail
// (500, 503 SlowDown, connection resets before and after the server acted,
// timeouts whose request lands late) all arrive exactly once, and no segment
// is stored twice under two names.
func TestQueueFaults(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		p := newProxy(t, e.srv.Endpoint)
		p.setFaults(0.25, 800*time.Millisecond)
		// The client's own retries are off so that every fault reaches the
		// Writer's retry and idempotency logic.
		client := e.clientFor(p.URL(), func(o *awss3.Options) { o.RetryMaxAttempts = 1 })
		w := &s3.Writer{Client: client, Bucket: e.bucket, Prefix: e.prefix,
			Retry:      s3.Retry{MaxAttempts: 3, BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond, AttemptTimeout: 500 * time.Millisecond},
			SpoolLimit: 64 * dlqdump.Kilobyte, SpoolWait: 100 * time.Millisecond}
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 4 * dlqdump.Kilobyte, BlockSize: 2 * dlqdump.Kilobyte,
			FlushInterval: 20 * time.Millisecond, MaxPending: dlqdump.Megabyte, EnqueueTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const n = 6000
		want := make([]string, n)
		for i := range want {
			want[i] = record(rng, i)
			if err := q.Enqueue(want[i]); err != nil {
				t.Fatalf("Enqueue %d: %v", i, err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		segments := q.Stats().Segments
		injected := p.injectedCount()
		p.setFaults(0, 0)
		total := 0
		for _, c := range injected {
			total += c
		}
		t.Logf("%d records in %d segments; faults injected: %v", n, segments, injected)
		if total < 10 || injected[faultResetAfter]+injected[faultDelay] == 0 {
			t.Fatalf("only %v faults injected; the test wants more", injected)
		}
		rb := readArea(t, &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix}, sink.AreaReady)
		rb.wantExactlyOnce(t, want)
		if uint64(len(rb.names)) != segments || len(e.keys(t)) != len(rb.names) {
			t.Fatalf("%d segments published, %d stored, %d keys", segments, len(rb.names), len(e.keys(t)))
		}
	})
}

// While S3 is unreachable the dump goes on into the spool and the Queue's
// memory: Backlog and Rate rise, Enqueue meets backpressure instead of
// losing anything, and when S3 is back every accepted record is stored
// exactly once.
func TestQueueOutage(t *testing.T) {
	forEachServer(t, func(t *testing.T, e *env) {
		p := newProxy(t, e.srv.Endpoint)
		w := &s3.Writer{Client: e.clientFor(p.URL()), Bucket: e.bucket, Prefix: e.prefix,
			Retry:      s3.Retry{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond, MaxDelay: 100 * time.Millisecond, AttemptTimeout: time.Second},
			SpoolLimit: 32 * dlqdump.Kilobyte, SpoolWait: 50 * time.Millisecond}
		const maxPending = 128 * dlqdump.Kilobyte
		q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: w, Capacity: 8 * dlqdump.Kilobyte, BlockSize: 2 * dlqdump.Kilobyte,
			FlushInterval: 10 * time.Millisecond, MaxPending: maxPending, EnqueueTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx := testCtx(t, 2*time.Minute)
		rng := rand.New(rand.NewPCG(3, 4))
		var accepted []string
		refused := 0
		enqueue := func(i int) {
			r := record(rng, i)
			switch err := q.Enqueue(r); {
			case err == nil:
				accepted = append(accepted, r)
			case errors.Is(err, dlqdump.ErrBackpressure):
				refused++
			default:
				t.Fatalf("Enqueue: %v", err)
			}
		}
		i := 0
		for ; i < 300; i++ {
			enqueue(i)
		}
		if err := q.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		before := len(e.keys(t))
		rate0 := q.Rate()

		p.stop()
		var maxRate float32
		var maxBacklog int64
		// Dump until backpressure and the upload failures show, for at
		// most 20s.
		end := time.Now().Add(20 * time.Second)
		for time.Now().Before(end) && (refused < 50 || w.Stats().LastError == nil) {
			enqueue(i)
			i++
			maxRate = max(maxRate, q.Rate())
			maxBacklog = max(maxBacklog, w.Backlog())
			time.Sleep(100 * time.Microsecond)
		}
		if got := len(e.keys(t)); got != before {
			t.Fatalf("%d objects appeared while S3 was unreachable", got-before)
		}
		t.Logf("outage: %d accepted, %d refused by backpressure, Rate %.2f -> %.2f, max Backlog %d, last upload error: %v",
			len(accepted), refused, rate0, maxRate, maxBacklog, w.Stats().LastError)
		if maxBacklog == 0 {
			t.Fatal("Backlog stayed 0 during the outage")
		}
		if maxRate < 0.5 || maxRate <= rate0 {
			t.Fatalf("Rate rose from %.2f to only %.2f during the outage", rate0, maxRate)
		}
		if refused == 0 {
			t.Fatal("no backpressure during the outage")
		}
		if w.Stats().LastError == nil {
			t.Fatal("no upload error reported during the outage")
		}

		p.start()
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		closeWriter(t, w)
		if b := w.Backlog(); b != 0 {
			t.Fatalf("Backlog = %d after the spool drained", b)
		}
		readArea(t, &s3.Reader{Client: e.client, Bucket: e.bucket, Prefix: e.prefix}, sink.AreaReady).wantExactlyOnce(t, accepted)
	})
}
