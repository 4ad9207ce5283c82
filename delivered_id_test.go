package dlqdump_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

// carrierDecoder decodes payloads into *carrier items.
type carrierDecoder struct{}

func (carrierDecoder) Decode(b []byte) (any, error) { return &carrier{s: string(b)}, nil }

// A HeaderCarrier the Restorer delivers gets the record's ID in its
// headers (HeaderRecordID): the ID read from the segment, with the other
// headers it was dumped with, and replays raised.
func TestHeaderCarrierGetsRecordID(t *testing.T) {
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 8 * dlqdump.Kilobyte, BlockSize: dlqdump.Kilobyte})
	for i := range 300 {
		if err := q.Enqueue(&carrier{s: fmt.Sprintf("item %03d", i), h: dlqdump.Headers{dlqdump.HeaderReason: "failed"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+segment.Ext))
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		sr, err := segment.NewReader(f, st.Size(), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := sr.Header()
		for {
			rec, err := sr.Next()
			if err != nil {
				break
			}
			want[string(rec.Payload)] = dlqdump.RecordIDOf(&h, &rec).String()
		}
		f.Close()
	}
	var mu sync.Mutex
	got := map[string]dlqdump.Headers{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: carrierDecoder{}, Queue: queueFunc(func(x any) error {
		c := x.(*carrier)
		mu.Lock()
		defer mu.Unlock()
		got[c.s] = c.h
		return nil
	})})
	if err := r.Restore(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 300 || len(want) != 300 || len(paths) == 0 {
		t.Fatalf("%d delivered, %d stored in %d segments", len(got), len(want), len(paths))
	}
	for s, h := range got {
		if h[dlqdump.HeaderRecordID] != want[s] || h[dlqdump.HeaderReason] != "failed" || h[dlqdump.HeaderReplays] != "1" {
			t.Fatalf("%s delivered with headers %v, its ID is %s", s, h, want[s])
		}
	}
}
