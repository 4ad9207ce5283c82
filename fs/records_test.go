package fs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
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

// Offsets of the record file format (record_slots.go), part of the format.
const (
	headerSize = 32
	slot0      = 4 << 10
	slot1      = slot0 + 68<<10
)

// A record is the file DIR/.claims/NAME.claim: a header, then the record in
// one of two slots. An empty file, or a temporary one left by a crash, is no
// record; a file written by an older version (the record alone, or its own
// slots) is read, and its first write makes its successor.
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
	if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte("DLQ2")) || len(b) < slot0 ||
		!bytes.HasPrefix(b[slot0:], []byte("DLQR")) || !bytes.HasSuffix(b, []byte(`{"v":2}`)) {
		t.Fatalf("record file holds %q... (%v), want a header and slot 0 holding the record", b[:min(len(b), 8)], err)
	}
	// A temporary file left by a crashed write.
	if err := os.WriteFile(filepath.Join(dir, fs.ClaimsDir, "."+other+".claim.1234.tmp"), []byte("half"), 0o640); err != nil {
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
	if _, err := rd.WriteRecord(ctx, legacy, []byte(`{"old":1,"x":1}`), "0123"); !errors.Is(err, sink.ErrConflict) {
		t.Fatalf("WriteRecord at another version over a record written whole = %v, want ErrConflict", err)
	}
	if _, err := rd.WriteRecord(ctx, legacy, []byte(`{"new":2}`), lv); err != nil {
		t.Fatal(err)
	}
	if b, _, err := rd.ReadRecord(ctx, legacy); err != nil || string(b) != `{"new":2}` {
		t.Fatalf("ReadRecord after replacing a record written whole = %q, %v", b, err)
	}
	if b, err := os.ReadFile(lpath); err != nil || string(b) != `{"old":1}` {
		t.Fatalf("the older version's file was written to: %q, %v", b, err)
	}
	if left := hidden(t, filepath.Join(dir, fs.ClaimsDir)); len(left) != 1 {
		t.Fatalf("temporary files among the records: %q, want only the one left by a crash", left)
	}
	// Removing a record removes its files, the older version's too.
	_, vl, err := rd.ReadRecord(ctx, legacy)
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.DeleteRecord(ctx, legacy, vl); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, fs.ClaimsDir, legacy+"*")); len(left) != 0 {
		t.Fatalf("files of a removed record left: %q", left)
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
	if _, err := f.WriteAt([]byte("XX"), slot0+20); err != nil {
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
	// Everything damaged (zeroed by a power cut, bit rot): the file's bytes
	// are the record, which the claim protocol finds damaged and takes over;
	// a write at their version goes on in a successor.
	junk := append(bytes.Repeat([]byte{0}, 70000), "DLQRjunk"...)
	if err := os.WriteFile(path, junk, 0o640); err != nil {
		t.Fatal(err)
	}
	b, vj, err := rd.ReadRecord(ctx, name)
	if err != nil || !bytes.Equal(b, junk[:sink.MaxRecordSize]) {
		t.Fatalf("ReadRecord of a damaged record file = %d bytes, %v; want its first %d bytes", len(b), err, sink.MaxRecordSize)
	}
	if _, err := rd.WriteRecord(ctx, name, []byte(`{"v":5}`), vj); err != nil {
		t.Fatalf("WriteRecord over a damaged record: %v", err)
	}
	if b, _, err := rd.ReadRecord(ctx, name); err != nil || string(b) != `{"v":5}` {
		t.Fatalf("ReadRecord after replacing a damaged record = %q, %v", b, err)
	}
}

// slotBytes returns a slot as the format lays it out.
func slotBytes(seq uint64, data []byte) []byte {
	b := append([]byte("DLQR"), binary.LittleEndian.AppendUint64(nil, seq)...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	crc := crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), b[4:16])
	crc = crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), data)
	b = binary.LittleEndian.AppendUint32(b, crc)
	return append(b, data...)
}

// Records of every size up to sink.MaxRecordSize are written in place;
// files of the older versions' slots are read, records larger than their
// slot whole in slot 0; a record whose sequence number reached its end goes
// on in a successor; an older version's record that starts with the slot
// magic is still its bytes.
func TestRecordSlotEdges(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	name := newName()
	claims := filepath.Join(dir, fs.ClaimsDir)
	big := func(c byte) []byte { return bytes.Repeat([]byte{c}, sink.MaxRecordSize) }
	v, err := rd.WriteRecord(ctx, name, []byte("small"), "")
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range [][]byte{big('a'), []byte("small again"), big('b'), big('c'), []byte("last")} {
		if v, err = rd.WriteRecord(ctx, name, data, v); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if b, got, err := rd.ReadRecord(ctx, name); err != nil || !bytes.Equal(b, data) || got != v {
			t.Fatalf("write %d: ReadRecord = %d bytes (%q...), %v", i, len(b), b[:min(len(b), 8)], err)
		}
	}
	if files, _ := os.ReadDir(claims); len(files) != 1 {
		t.Fatalf("records directory holds %v, want the one file written in place", files)
	}
	// The older versions' slots: slot 1 at 16 KiB, a record larger than
	// a slot whole in slot 0.
	for _, tc := range []struct {
		file []byte
		want string
	}{
		{append(append(slotBytes(7, []byte("seven")), make([]byte, 16<<10-25)...), slotBytes(8, []byte("eight"))...), "eight"},
		{append(append(slotBytes(9, []byte("nine")), make([]byte, 16<<10-24)...), slotBytes(8, []byte("eight"))...), "nine"},
		{slotBytes(3, bytes.Repeat([]byte("w"), 20<<10)), strings.Repeat("w", 20<<10)},
		// An older version's record that happens to start with the magic.
		{[]byte("DLQR is how this record starts"), "DLQR is how this record starts"},
	} {
		n := newName()
		if err := os.WriteFile(filepath.Join(claims, n+".claim"), tc.file, 0o640); err != nil {
			t.Fatal(err)
		}
		b, lv, err := rd.ReadRecord(ctx, n)
		if err != nil || string(b) != tc.want {
			t.Fatalf("ReadRecord of an older version's file = %.20q, %v; want %.20q", b, err, tc.want)
		}
		if _, err := rd.WriteRecord(ctx, n, []byte("converted"), lv); err != nil {
			t.Fatal(err)
		}
		if b, _, err := rd.ReadRecord(ctx, n); err != nil || string(b) != "converted" {
			t.Fatalf("ReadRecord after writing over an older version's file = %q, %v", b, err)
		}
	}
	// A sequence number at its end: the next write goes on in a successor.
	n := newName()
	header := append([]byte("DLQ2\x00\x00\x00\x00"), bytes.Repeat([]byte{0x5a}, 16)...)
	header = binary.LittleEndian.AppendUint32(header, crc32.Checksum(header, crc32.MakeTable(crc32.Castagnoli)))
	file := append(append(header, make([]byte, slot0-len(header))...), slotBytes(math.MaxUint64, []byte("wrap"))...)
	if err := os.WriteFile(filepath.Join(claims, n+".claim"), file, 0o640); err != nil {
		t.Fatal(err)
	}
	b, vw, err := rd.ReadRecord(ctx, n)
	if err != nil || string(b) != "wrap" {
		t.Fatalf("ReadRecord of a slot at the last sequence number = %q, %v", b, err)
	}
	if _, err := rd.WriteRecord(ctx, n, []byte("after"), vw); err != nil {
		t.Fatal(err)
	}
	if b, _, err := rd.ReadRecord(ctx, n); err != nil || string(b) != "after" {
		t.Fatalf("ReadRecord after the last sequence number = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(claims, n+".claim@"+strings.Repeat("5a", 16))); err != nil {
		t.Fatalf("no successor: %v", err)
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

// A record file with no whole slot (zeroed by a power cut, bit rot) is a
// damaged record: a restorer takes it over after the lease, as it does any
// record it cannot parse, and replaces it. (It failed every claim forever
// while such a file was an error.)
func TestDamagedRecordFileIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	rd := &fs.Reader{Directory: dir}
	ctx := t.Context()
	name := newName()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	v := ""
	for i := range 2 { // slot 0, slot 1
		var err error
		if v, err = rd.WriteRecord(ctx, name, []byte(fmt.Sprintf(`{"rev":%d}`, i)), v); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, fs.ClaimsDir, name+".claim")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, st.Size()), 0o640); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c, err := claims.NewClaimer(rd, "b", 30*time.Second, &claims.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Claim(ctx, name)
	if err == nil {
		t.Fatal("a damaged record was claimed before its lease ran out")
	}
	now = now.Add(time.Hour)
	cl, err := c.Claim(ctx, name)
	if err != nil {
		t.Fatalf("Claim of a damaged record after its lease: %v", err)
	}
	if err := cl.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
