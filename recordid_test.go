package dlqdump_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// TestRecordIDsUnique dumps a million records through a Queue, in many
// segments written concurrently by the compressors, and reads every record's
// ID back: no two are equal, and each parses back from its String form.
func TestRecordIDsUnique(t *testing.T) {
	// CI's sample; cmd/dlqdump-reliability's "full tests" (DLQDUMP_FULL=1
	// or DLQDUMP_RECORDIDS_FULL=1) dumps 1,000,000 records.
	n := 250_000
	if fullRun("RECORDIDS") {
		n = 1_000_000
	}
	if testing.Short() {
		n = 100_000
	}
	dir := t.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 128 * dlqdump.Kilobyte, Codec: dlqdump.S2,
		MaxPending: 64 * dlqdump.Megabyte})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := q.Enqueue(fmt.Appendf(nil, "record %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	seen := make(map[dlqdump.RecordID]struct{}, n)
	segs := segmentsIn(t, dir)
	for _, path := range segs {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		r, err := segment.NewReader(f, st.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := r.Header()
		for {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			id := dlqdump.RecordIDOf(&h, &rec)
			if _, dup := seen[id]; dup {
				t.Fatalf("%s: record %d has ID %s, as an earlier record", path, rec.Seq, id)
			}
			seen[id] = struct{}{}
			if rec.Seq%9973 == 0 {
				if back, err := dlqdump.ParseRecordID(id.String()); err != nil || back != id {
					t.Fatalf("ParseRecordID(%s) = %s, %v", id, back, err)
				}
			}
		}
		f.Close()
	}
	if len(seen) != n {
		t.Fatalf("%d IDs read, %d records dumped", len(seen), n)
	}
	t.Logf("%d records in %d segments, every ID distinct", n, len(segs))
}

// TestQueueDropsRecordIDHeader: a dead letter dumped again (its headers
// carried through a replay) is a new record, with an ID of its own.
func TestQueueDropsRecordIDHeader(t *testing.T) {
	dir := t.TempDir()
	q, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte})
	if err != nil {
		t.Fatal(err)
	}
	h := dlqdump.Headers{dlqdump.HeaderRecordID: "0123456789abcdef01234567-5", dlqdump.HeaderReason: "failed"}
	if err := q.Enqueue(dlqdump.Envelope{Item: []byte("again"), Headers: h}); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := h[dlqdump.HeaderRecordID]; !ok {
		t.Fatal("Enqueue changed the caller's headers")
	}
	recs := readSegment(t, segmentsIn(t, dir)[0])
	if len(recs) != 1 || recs[0].Headers[dlqdump.HeaderRecordID] != "" || recs[0].Headers[dlqdump.HeaderReason] != "failed" {
		t.Fatalf("dumped %+v", recs)
	}
}

// A record's ID, read from a segment: what dlqdump cat prints and
// --select 'id = ...' takes.
func ExampleRecordIDOf() {
	var buf bytes.Buffer
	w, _ := segment.NewWriter(&buf, segment.Header{ID: segment.ID{0: 1, 4: 0x2c, 15: 0x42}}, nil)
	_ = w.Add(time.Now(), nil, []byte("a dead letter"))
	_ = w.Close()
	r, _ := segment.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), nil)
	h := r.Header()
	rec, _ := r.Next()
	id := dlqdump.RecordIDOf(&h, &rec)
	fmt.Println(id)
	back, err := dlqdump.ParseRecordID(id.String())
	fmt.Println(back == id, err)
	// Output:
	// 2c0000000000000000000042-0
	// true <nil>
}
