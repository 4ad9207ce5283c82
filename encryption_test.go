package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/envelope"
	"github.com/dlqdump/dlqdump/envelope/awskms"
	"github.com/dlqdump/dlqdump/envelope/awskms/kmstest"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/s3"
	"github.com/dlqdump/dlqdump/s3/s3test"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// encStore is a store the encryption tests dump into and restore from.
type encStore struct {
	name   string
	writer func() dlqdump.Writer
	reader sink.Reader
}

// encStores returns a directory, a gofakes3 prefix and, when there is one,
// a versitygw prefix.
func encStores(t *testing.T) []encStore {
	t.Helper()
	dir := t.TempDir()
	stores := []encStore{{name: "fs", writer: func() dlqdump.Writer { return &fs.Writer{Directory: dir} }, reader: &fs.Reader{Directory: dir}}}
	add := func(srv *s3test.Server) {
		prefix := s3test.UniquePrefix(t.Name())
		stores = append(stores, encStore{name: srv.Name,
			writer: func() dlqdump.Writer { return &s3.Writer{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix} },
			reader: &s3.Reader{Client: srv.Client(), Bucket: srv.Bucket, Prefix: prefix}})
	}
	fake, stop, err := s3test.NewFake(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	add(fake)
	vgw, stopV, err := s3test.Versity(nil)
	switch {
	case errors.Is(err, s3test.ErrNoVersity):
		t.Log("versitygw: ", err)
	case err != nil:
		t.Fatal(err)
	default:
		t.Cleanup(stopV)
		add(vgw)
	}
	return stores
}

func newIdentity(t testing.TB) *age.X25519Identity {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// dumpEncrypted dumps items into st encrypted for recipients.
func dumpEncrypted(t *testing.T, st encStore, items []string, recipients ...envelope.Recipient) {
	t.Helper()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: st.writer(), Capacity: 8 * dlqdump.Kilobyte, BlockSize: dlqdump.Kilobyte,
		Encryption: &dlqdump.Encryption{Recipients: recipients}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
}

// collector counts what a Restorer delivers.
type collector struct {
	mu  sync.Mutex
	got map[string]int
}

func (c *collector) Enqueue(x any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.got == nil {
		c.got = map[string]int{}
	}
	c.got[x.(string)]++
	return nil
}

func (c *collector) delivered() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for k, v := range c.got {
		m[k] = v
	}
	return m
}

// restoreAll runs a Restorer with identities over st until a pass claims
// nothing, and returns what it delivered. A pass may leave segments it has
// no key for (an error wrapping ErrNoKey).
func restoreAll(t *testing.T, st encStore, enc *dlqdump.Encryption) (map[string]int, *dlqdump.Restorer) {
	t.Helper()
	c := &collector{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st.reader, Decoder: poisonDecoder{}, Queue: c, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
		if err != nil && !errors.Is(err, dlqdump.ErrNoKey) {
			t.Fatal(err)
		}
		if rep.Claimed == 0 {
			return c.delivered(), r
		}
	}
	t.Fatal("restoring does not end")
	return nil, nil
}

// areaNames lists the segments of an area.
func areaNames(t *testing.T, rd sink.Reader, area sink.Area) []string {
	t.Helper()
	var out []string
	for si, err := range rd.List(context.Background(), area) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, si.Name)
	}
	return out
}

// readEncArea reads every record of an area's segments with keys, checking
// each segment is encrypted.
func readEncArea(t *testing.T, rd sink.Reader, area sink.Area, keys segment.KeyUnwrapper) []string {
	t.Helper()
	var out []string
	for _, n := range areaNames(t, rd, area) {
		f, err := rd.Open(context.Background(), area, n)
		if err != nil {
			t.Fatal(err)
		}
		r, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: n, Keys: keys})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Header().Encrypted {
			t.Fatalf("%s segment %s is not encrypted", area, n)
		}
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(rec.Payload))
		}
		f.Close()
	}
	return out
}

func encItems(prefix string, n int) (items []string, good map[string]int) {
	good = map[string]int{}
	for i := range n {
		it := fmt.Sprintf("%s-%05d-%s", prefix, i, strings.Repeat("x", i%40))
		if i%97 == 5 {
			it = "poison-" + it
		} else {
			good[it] = 1
		}
		items = append(items, it)
	}
	return items, good
}

// TestEncryptedRoundTrip dumps encrypted for two recipients into a
// directory, gofakes3 and versitygw, and restores with either identity:
// every record once, those the decoder refuses quarantined in encrypted
// side segments; with an identity that matches nothing, nothing is
// delivered and the segments stay.
func TestEncryptedRoundTrip(t *testing.T) {
	for _, st := range encStores(t) {
		t.Run(st.name, func(t *testing.T) {
			a, b, other := newIdentity(t), newIdentity(t), newIdentity(t)
			items, good := encItems("first", 1500)
			dumpEncrypted(t, st, items, a.Recipient(), b.Recipient())
			ready := areaNames(t, st.reader, sink.AreaReady)
			if len(ready) < 3 {
				t.Fatalf("%d segments, want several", len(ready))
			}
			// Readable with either key, not without.
			for _, id := range []*age.X25519Identity{a, b} {
				if got := readEncArea(t, st.reader, sink.AreaReady, envelope.NewKeyring(id)); len(got) != len(items) {
					t.Fatalf("read %d records with one identity, want %d", len(got), len(items))
				}
			}
			// An identity that matches nothing: nothing delivered, nothing moved.
			got, r := restoreAll(t, st, &dlqdump.Encryption{Identities: []envelope.Identity{other}})
			if len(got) != 0 || len(areaNames(t, st.reader, sink.AreaReady)) != len(ready) || len(areaNames(t, st.reader, sink.AreaQuarantine)) != 0 {
				t.Fatalf("with another identity: delivered %d, ready %v", len(got), areaNames(t, st.reader, sink.AreaReady))
			}
			_ = r
			// No Encryption at all: the same.
			if got, _ := restoreAll(t, st, nil); len(got) != 0 {
				t.Fatalf("without identities: delivered %d", len(got))
			}
			got, _ = restoreAll(t, st, &dlqdump.Encryption{Identities: []envelope.Identity{b}})
			checkDelivered(t, got, good)
			// The records the decoder refused are in encrypted
			// quarantine segments, readable with the keys.
			quar := readEncArea(t, st.reader, sink.AreaQuarantine, envelope.NewKeyring(a))
			if len(quar) != len(items)-len(good) {
				t.Fatalf("quarantined %d records, want %d", len(quar), len(items)-len(good))
			}
			for _, p := range quar {
				if !strings.HasPrefix(p, "poison-") {
					t.Fatalf("quarantined %q", p)
				}
			}
		})
	}
}

func checkDelivered(t *testing.T, got, want map[string]int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("delivered %d items, want %d", len(got), len(want))
	}
	for k, n := range got {
		if want[k] != 1 || n != 1 {
			t.Fatalf("%q delivered %d times (dumped: %v)", k, n, want[k] == 1)
		}
	}
}

// TestEncryptedKMS dumps with a KMS recipient against the fake KMS and
// restores with its identity; while the KMS is down the segments are left
// for a later pass, neither quarantined nor skipped for good.
func TestEncryptedKMS(t *testing.T) {
	srv := kmstest.NewServer("dlq")
	defer srv.Close()
	k := awskms.New(srv.Client())
	dir := t.TempDir()
	st := encStore{name: "fs", writer: func() dlqdump.Writer { return &fs.Writer{Directory: dir} }, reader: &fs.Reader{Directory: dir}}
	items, good := encItems("kms", 300)
	dumpEncrypted(t, st, items, k.Recipient(kmstest.ARN("dlq")))
	srv.SetDown(true)
	c := &collector{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: st.reader, Decoder: poisonDecoder{}, Queue: c,
		Encryption: &dlqdump.Encryption{Identities: []envelope.Identity{&envelope.KMSIdentity{KMS: k, Timeout: time.Second}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), dlqdump.RunOptions{}); err == nil || len(c.delivered()) != 0 {
		t.Fatalf("restore with the KMS down: %v, delivered %d", err, len(c.delivered()))
	}
	if n := len(areaNames(t, st.reader, sink.AreaQuarantine)); n != 0 {
		t.Fatalf("%d segments quarantined while the KMS was down", n)
	}
	srv.SetDown(false)
	for range 50 {
		rep, err := r.Run(context.Background(), dlqdump.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Claimed == 0 {
			break
		}
	}
	checkDelivered(t, c.delivered(), good)
}

// TestRequireEncrypted quarantines a segment that is not encrypted when
// encryption is required, and restores encrypted ones.
func TestRequireEncrypted(t *testing.T) {
	dir := t.TempDir()
	st := encStore{name: "fs", writer: func() dlqdump.Writer { return &fs.Writer{Directory: dir} }, reader: &fs.Reader{Directory: dir}}
	dumpItems(t, dir, dlqdump.Config{}, []string{"plain-1", "plain-2"})
	a := newIdentity(t)
	items, good := encItems("enc", 50)
	dumpEncrypted(t, st, items, a.Recipient())
	got, _ := restoreAll(t, st, &dlqdump.Encryption{Identities: []envelope.Identity{a}, RequireEncrypted: true})
	checkDelivered(t, got, good)
	if q := areaNames(t, st.reader, sink.AreaQuarantine); len(q) != 2 { // the plain one and the poison side segment
		t.Fatalf("quarantine: %v", q)
	}
}

// TestEncryptionConfig checks the Queue's validation.
func TestEncryptionConfig(t *testing.T) {
	_, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: t.TempDir()}, Capacity: dlqdump.Megabyte, Encryption: &dlqdump.Encryption{}})
	if !errors.Is(err, dlqdump.ErrConfig) || !strings.Contains(err.Error(), "Encryption.Recipients") {
		t.Fatalf("no recipients: %v", err)
	}
}

// TestRewrapHandover: dlqdump rewrap saves the copy's name in the original's
// progress before it publishes the copy. A restorer that takes the original
// over finishes it without delivering anything when the copy is published
// (then restores the copy), and restores it when the copy is not there.
func TestRewrapHandover(t *testing.T) {
	for _, published := range []bool{true, false} {
		t.Run(fmt.Sprint("published=", published), func(t *testing.T) {
			dir := t.TempDir()
			st := encStore{name: "fs", writer: func() dlqdump.Writer { return &fs.Writer{Directory: dir} }, reader: &fs.Reader{Directory: dir}}
			a := newIdentity(t)
			items, good := encItems("handover", 40)
			q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: st.writer(), Capacity: dlqdump.Megabyte,
				Encryption: &dlqdump.Encryption{Recipients: []envelope.Recipient{a.Recipient()}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				if err := q.Enqueue(it); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			ready := areaNames(t, st.reader, sink.AreaReady)
			if len(ready) != 1 {
				t.Fatalf("%d segments", len(ready))
			}
			orig := ready[0]
			ctx := context.Background()
			f, err := st.reader.Open(ctx, sink.AreaReady, orig)
			if err != nil {
				t.Fatal(err)
			}
			sr, err := segment.NewReader(f, f.Size(), &segment.ReaderOptions{Name: orig, Keys: envelope.NewKeyring(a)})
			if err != nil {
				t.Fatal(err)
			}
			wrapped, err := envelope.Wrap(context.Background(), sr.DataKey().Key, a.Recipient())
			if err != nil {
				t.Fatal(err)
			}
			id := segment.NewID(sr.Header().Created)
			copyName := segment.FileName(sr.Header().Created, id)
			cl, err := claims.NewClaimer(st.reader, "rewrap", time.Second, nil)
			if err != nil {
				t.Fatal(err)
			}
			c, err := cl.Claim(ctx, orig)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.Reserve(ctx, copyName, orig); err != nil {
				t.Fatal(err)
			}
			p := claims.Progress{Successor: copyName}
			if err := c.Save(ctx, p.Marshal()); err != nil {
				t.Fatal(err)
			}
			if published {
				sw, err := st.reader.Create(ctx, sink.AreaReady, copyName)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := segment.Rewrap(sw, sr, id, sr.Header().Created, wrapped); err != nil {
					t.Fatal(err)
				}
				if err := sw.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			// The rewrap dies here: its claim is released (or expires).
			if err := c.Release(ctx); err != nil {
				t.Fatal(err)
			}
			got, _ := restoreAll(t, st, &dlqdump.Encryption{Identities: []envelope.Identity{a}})
			checkDelivered(t, got, good)
			if r := areaNames(t, st.reader, sink.AreaReady); len(r) != 0 {
				t.Fatalf("left ready: %v", r)
			}
		})
	}
}

// TestSuccessorNotACopy: a progress naming as its copy a segment that is
// not pending on it (a damaged or hostile record) does not make the
// Restorer drop the segment: it is restored, and so is the other one.
func TestSuccessorNotACopy(t *testing.T) {
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{}, []string{"first"})
	dumpItems(t, dir, dlqdump.Config{}, []string{"second"})
	rd := &fs.Reader{Directory: dir}
	ready := areaNames(t, rd, sink.AreaReady)
	ctx := context.Background()
	cl, err := claims.NewClaimer(rd, "hostile", time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cl.Claim(ctx, ready[0])
	if err != nil {
		t.Fatal(err)
	}
	p := claims.Progress{Successor: ready[1]}
	if err := c.Save(ctx, p.Marshal()); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := restoreAll(t, encStore{name: "fs", reader: rd}, nil)
	checkDelivered(t, got, map[string]int{"first": 1, "second": 1})
}

// TestEncryptedKMSDownWhileDumping: while the KMS cannot wrap a new
// segment's key, the Queue keeps the records and retries; once it can, they
// are stored, encrypted, and restored once each.
func TestEncryptedKMSDownWhileDumping(t *testing.T) {
	srv := kmstest.NewServer("dlq")
	defer srv.Close()
	k := awskms.New(srv.Client())
	dir := t.TempDir()
	srv.SetDown(true)
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte, FlushInterval: 10 * time.Millisecond,
		Encryption: &dlqdump.Encryption{Recipients: []envelope.Recipient{&envelope.KMSRecipient{KMS: k, KeyID: kmstest.ARN("dlq"), Timeout: time.Second}}}})
	if err != nil {
		t.Fatal(err)
	}
	items, good := encItems("down", 30)
	for _, it := range items {
		if err := q.Enqueue(it); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the Queue has tried to start a segment and failed.
	for srv.Calls("Encrypt") < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(areaNames(t, &fs.Reader{Directory: dir}, sink.AreaReady)); n != 0 {
		t.Fatalf("%d segments published while the KMS was down", n)
	}
	srv.SetDown(false)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	st := encStore{name: "fs", reader: &fs.Reader{Directory: dir}}
	got, _ := restoreAll(t, st, &dlqdump.Encryption{Identities: []envelope.Identity{k.Identity(kmstest.ARN("dlq"))}})
	checkDelivered(t, got, good)
}
