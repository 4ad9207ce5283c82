package fs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// tornRecord returns record rev written by writer w: a header saying so and
// its length, then rev's byte repeated, of a size that changes with rev from
// a few bytes to about sink.MaxRecordSize, so that a record read while
// another is written would show a mix or a cut.
func tornRecord(rev, w int) []byte {
	n := (rev * 7919) % (sink.MaxRecordSize - 64)
	b := fmt.Appendf(nil, "rev=%d w=%d n=%d\n", rev, w, n)
	return append(b, bytes.Repeat([]byte{byte(rev)}, n)...)
}

// parseRecord checks a record made by tornRecord and returns its rev.
func parseRecord(b []byte) (int, error) {
	var rev, w, n int
	head, body, ok := bytes.Cut(b, []byte("\n"))
	if !ok {
		return 0, fmt.Errorf("no header in %d bytes %.40q", len(b), b)
	}
	if _, err := fmt.Sscanf(string(head), "rev=%d w=%d n=%d", &rev, &w, &n); err != nil {
		return 0, fmt.Errorf("header %q: %v", head, err)
	}
	if len(body) != n || bytes.Count(body, []byte{byte(rev)}) != n {
		return 0, fmt.Errorf("record rev %d: body of %d bytes is not %d bytes of %d: torn", rev, len(body), n, byte(rev))
	}
	return rev, nil
}

// Records are replaced whole: readers racing compare-and-swap writers (each
// with its own Reader, so its own lock and files) only ever see complete
// records, never going back, and no write is lost.
func TestRecordsReplacedWhole(t *testing.T) {
	const writers, writes, readers = 4, 60, 2
	dir := t.TempDir()
	name := newName()
	ctx := t.Context()
	var (
		wg   sync.WaitGroup
		done = make(chan struct{})
		errs = make(chan error, writers+readers)
	)
	for w := range writers {
		wg.Go(func() {
			rd := &fs.Reader{Directory: dir}
			conflicts := 0
			for ok := 0; ok < writes; {
				data, version, err := rd.ReadRecord(ctx, name)
				rev := 0
				switch {
				case errors.Is(err, sink.ErrNotFound):
					version = ""
				case err != nil:
					errs <- err
					return
				default:
					if rev, err = parseRecord(data); err != nil {
						errs <- fmt.Errorf("writer %d read: %w", w, err)
						return
					}
				}
				_, err = rd.WriteRecord(ctx, name, tornRecord(rev+1, w), version)
				switch {
				case err == nil:
					ok++
				case errors.Is(err, sink.ErrConflict):
					conflicts++
				default:
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
			t.Logf("writer %d: %d writes, %d conflicts", w, writes, conflicts)
		})
	}
	var readWG sync.WaitGroup
	for r := range readers {
		readWG.Go(func() {
			rd := &fs.Reader{Directory: dir}
			last, reads := 0, 0
			for {
				select {
				case <-done:
					t.Logf("reader %d: %d reads", r, reads)
					return
				default:
				}
				data, _, err := rd.ReadRecord(ctx, name)
				if errors.Is(err, sink.ErrNotFound) && last == 0 {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				rev, err := parseRecord(data)
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				if rev < last {
					errs <- fmt.Errorf("reader %d saw rev %d after rev %d", r, rev, last)
					return
				}
				last = rev
				reads++
			}
		})
	}
	wg.Wait()
	close(done)
	readWG.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	data, _, err := (&fs.Reader{Directory: dir}).ReadRecord(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if rev, err := parseRecord(data); err != nil || rev != writers*writes {
		t.Fatalf("final record rev %d (%v), want %d: a write was lost", rev, err, writers*writes)
	}
	if left := hidden(t, filepath.Join(dir, fs.ClaimsDir)); len(left) != 0 {
		t.Fatalf("temporary files left among the records: %q", left)
	}
}

// A record is the file DIR/.claims/NAME.claim holding it in one of two
// slots. An empty file, or a temporary one left by a crash, is no record; a
// file holding the record itself (as an older version wrote it) is read, and
// replaced whole by the first write.
func TestRecordFiles(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	name, other, legacy := newName(), newName(), newName()
	v, err := rd.WriteRecord(ctx, name, []byte(`{"v":2}`), "")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fs.ClaimsDir, name+".claim")
	if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte("DLQR")) || !bytes.HasSuffix(b, []byte(`{"v":2}`)) {
		t.Fatalf("record file holds %q (%v), want slot 0 holding the record", b, err)
	}
	// A temporary file left by a crashed write.
	if err := os.WriteFile(filepath.Join(dir, fs.ClaimsDir, "."+other+".claim.tmp"), []byte("half"), 0o640); err != nil {
		t.Fatal(err)
	}
	// An empty record file (as an older version could leave).
	empty := filepath.Join(dir, fs.ClaimsDir, other+".claim")
	if err := os.WriteFile(empty, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := rd.ReadRecord(ctx, other); !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("ReadRecord of an empty record file = %v, want ErrNotFound", err)
	}
	vo, err := rd.WriteRecord(ctx, other, []byte("new"), "")
	if err != nil {
		t.Fatalf("WriteRecord(if absent) over an empty record file: %v", err)
	}
	if b, v, err := rd.ReadRecord(ctx, other); err != nil || string(b) != "new" || v != vo {
		t.Fatalf("ReadRecord = %q, %q, %v; want new at %q", b, v, err, vo)
	}
	v, err = rd.WriteRecord(ctx, name, []byte(`{"v":3}`), v)
	if err != nil {
		t.Fatal(err)
	}
	if b, got, err := rd.ReadRecord(ctx, name); err != nil || string(b) != `{"v":3}` || got != v {
		t.Fatalf("ReadRecord after a write = %q, %q, %v", b, got, err)
	}
	// A record file written whole by an older version.
	lpath := filepath.Join(dir, fs.ClaimsDir, legacy+".claim")
	if err := os.WriteFile(lpath, []byte(`{"old":1}`), 0o640); err != nil {
		t.Fatal(err)
	}
	b, lv, err := rd.ReadRecord(ctx, legacy)
	if err != nil || string(b) != `{"old":1}` {
		t.Fatalf("ReadRecord of a record written whole = %q, %v", b, err)
	}
	if _, err := rd.WriteRecord(ctx, legacy, []byte(`{"new":2}`), lv); err != nil {
		t.Fatal(err)
	}
	if b, _, err := rd.ReadRecord(ctx, legacy); err != nil || string(b) != `{"new":2}` {
		t.Fatalf("ReadRecord after replacing a record written whole = %q, %v", b, err)
	}
	if left := hidden(t, filepath.Join(dir, fs.ClaimsDir)); len(left) != 0 {
		t.Fatalf("temporary files left among the records: %q", left)
	}
}

// A write torn by a crash (or a full disk) damages only the slot it wrote:
// the record is the one before it, and the next write succeeds on it.
func TestRecordTornWriteKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	name := newName()
	path := filepath.Join(dir, fs.ClaimsDir, name+".claim")
	v := ""
	for i := 1; i <= 3; i++ { // slot 0, slot 1, slot 0
		var err error
		if v, err = rd.WriteRecord(ctx, name, []byte(fmt.Sprintf(`{"v":%d}`, i)), v); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Tear slot 0 (v3): its data half written.
	if _, err := f.WriteAt([]byte("XX"), 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, v2, err := rd.ReadRecord(ctx, name)
	if err != nil || string(b) != `{"v":2}` {
		t.Fatalf("ReadRecord with the newest slot torn = %q, %v; want the record before it", b, err)
	}
	if _, err := rd.WriteRecord(ctx, name, []byte(`{"v":3}`), v); !errors.Is(err, sink.ErrConflict) {
		t.Fatalf("WriteRecord at the torn version = %v, want ErrConflict", err)
	}
	if _, err := rd.WriteRecord(ctx, name, []byte(`{"v":4}`), v2); err != nil {
		t.Fatal(err)
	}
	if b, _, err := rd.ReadRecord(ctx, name); err != nil || string(b) != `{"v":4}` {
		t.Fatalf("ReadRecord after writing over a torn slot = %q, %v", b, err)
	}
	// Slot 1 cut short (a write that extended the file, torn): slot 0 holds v4.
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	if b, _, err := rd.ReadRecord(ctx, name); err != nil || string(b) != `{"v":4}` {
		t.Fatalf("ReadRecord with slot 1 cut short = %q, %v", b, err)
	}
	// Both slots damaged: an error naming the file, never a record.
	if err := os.WriteFile(path, append(bytes.Repeat([]byte{0}, 70000), "DLQRjunk"...), 0o640); err != nil {
		t.Fatal(err)
	}
	if b, _, err := rd.ReadRecord(ctx, name); err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("ReadRecord of a damaged record file = %q, %v; want an error naming it", b, err)
	}
}

// BenchmarkWriteRecord replaces a claim record of a few hundred bytes, as a
// restore's checkpoint after every block does.
func BenchmarkWriteRecord(b *testing.B) {
	rd := &fs.Reader{Directory: b.TempDir()}
	ctx := b.Context()
	name := newName()
	data := bytes.Repeat([]byte("p"), 400)
	v, err := rd.WriteRecord(ctx, name, data, "")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		data[0] = byte(i)
		if v, err = rd.WriteRecord(ctx, name, data, v); err != nil {
			b.Fatal(err)
		}
	}
}
