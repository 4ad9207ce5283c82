package dlqdump_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
)

func readAllDir(t *testing.T, dir string) []string {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
	sort.Strings(names)
	var out []string
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		r, err := segment.NewReader(f, st.Size(), &segment.ReaderOptions{Name: n})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Sealed() {
			t.Fatalf("%s unsealed: %v", n, r.FooterError())
		}
		for {
			rec, err := r.Next()
			if err == io.EOF {
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

func TestQuickQueue(t *testing.T) {
	for _, durable := range []bool{false, true} {
		dir := t.TempDir()
		q, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: 64 * dlqdump.Kilobyte, Writer: &fs.Writer{Directory: dir}, Durable: durable, FlushInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20000 {
			if err := q.Enqueue(fmt.Sprintf("item-%06d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != dlqdump.ErrClosed {
			t.Fatal(err)
		}
		got := readAllDir(t, dir)
		if len(got) != 20000 {
			t.Fatalf("got %d", len(got))
		}
		for i, g := range got {
			if g != fmt.Sprintf("item-%06d", i) {
				t.Fatalf("%d: %s", i, g)
			}
		}
		names, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
		t.Logf("durable=%v segments=%d", durable, len(names))
	}
}
