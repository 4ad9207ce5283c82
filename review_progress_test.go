package dlqdump_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// writeSegment writes one sealed segment of n small records into dir, record
// i carrying the header reason=reason(i), with blocks of blockSize raw bytes;
// it returns the payloads.
func writeSegment(t testing.TB, dir string, created time.Time, n, blockSize int, reason func(i int) string) []string {
	t.Helper()
	id := segment.NewID(created)
	w := &fs.Writer{Directory: dir}
	sw, err := w.Create(context.Background(), segment.FileName(created, id))
	if err != nil {
		t.Fatal(err)
	}
	sg, err := segment.NewWriter(sw, segment.Header{Codec: segment.CodecZstd, Created: created, ID: id}, &segment.WriterOptions{BlockSize: blockSize})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]string, n)
	for i := range n {
		items[i] = strconv.FormatInt(int64(i), 36)
		if err := sg.Add(created, map[string]string{dlqdump.HeaderReason: reason(i)}, []byte(items[i])); err != nil {
			t.Fatal(err)
		}
	}
	if err := sg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sw.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return items
}

// countingDest counts deliveries per item, cheaply.
type countingDest struct {
	mu sync.Mutex
	n  map[string]int
	k  int
}

func (d *countingDest) Enqueue(x any) error {
	d.mu.Lock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[x.(string)]++
	d.k++
	d.mu.Unlock()
	return nil
}

func (d *countingDest) twice() (dups, total int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.n {
		if c > 1 {
			dups += c - 1
		}
	}
	return dups, d.k
}

// A filtered pass over a segment whose records alternate between the
// selected and the unselected (Where reason=failed on failed/leak records:
// the restorefaults scenario's segment B, at scale) sets aside one masked run
// per block. Progress.Full looks only at the number of runs (256), but the
// masks grow the record past sink.MaxRecordSize (64 KiB) after ~45 blocks of
// 256 KiB: the checkpoint is refused, the pass fails, the claim is released
// at the last checkpoint that fit, and every later pass delivers the same
// block again and fails at the same place: the segment never finishes, and
// each pass adds a block of duplicates, without any crash.
func TestReviewMaskedAsideOverflowsTheRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: writes and restores 420,000 records")
	}
	// Its own directory and records: it runs beside the enumerations and
	// the other parallel tests.
	t.Parallel()
	dir := t.TempDir()
	items := writeSegment(t, dir, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), 420_000, segment.DefaultBlockSize,
		func(i int) string { return []string{"failed", "leak"}[i%2] })
	dst := &countingDest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst})
	where := dlqdump.RunOptions{Where: dlqdump.Headers{dlqdump.HeaderReason: "failed"}}
	var errs []error
	for range 3 {
		_, err := r.Run(t.Context(), where)
		errs = append(errs, err)
	}
	dups, total := dst.twice()
	if dups > 0 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("three filtered passes, no fault injected: %d of %d deliveries were duplicates; errors: %v", dups, total, errs)
	}
	if total != len(items)/2 {
		t.Fatalf("%d delivered, want the %d selected", total, len(items)/2)
	}
}

// sideFault is an fs.Reader on which, once a segment is claimed, every later
// write of that segment's record fails (and the claim stays as the claim
// wrote it, held): the state a restorer killed right after publishing a side
// segment leaves when no checkpoint was written since its claim (with
// CheckpointInterval set, a restorer writes its progress only with its
// renewals, every Lease/3). Side segments' records (Reserve) are written.
type sideFault struct {
	*fs.Reader
	mu        sync.Mutex
	parent    string // the claimed segment
	published bool
}

type commitHook struct {
	sink.SegmentWriter
	f *sideFault
}

func (c commitHook) Commit(ctx context.Context) error {
	err := c.SegmentWriter.Commit(ctx)
	if err == nil {
		c.f.mu.Lock()
		c.f.published = true
		c.f.mu.Unlock()
	}
	return err
}

func (f *sideFault) Create(ctx context.Context, area sink.Area, name string) (sink.SegmentWriter, error) {
	sw, err := f.Reader.Create(ctx, area, name)
	if err != nil {
		return nil, err
	}
	return commitHook{sw, f}, nil
}

func (f *sideFault) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	f.mu.Lock()
	dead := f.parent == name
	f.mu.Unlock()
	if dead {
		return "", errors.New("injected: the restorer is gone")
	}
	v, err := f.Reader.WriteRecord(ctx, name, data, ifVersion)
	if err == nil && ifVersion == "" && !strings.Contains(string(data), `"pending"`) {
		f.mu.Lock()
		f.parent = name // the claim
		f.mu.Unlock()
	}
	return v, err
}

func (f *sideFault) DeleteRecord(ctx context.Context, name, ifVersion string) error {
	f.mu.Lock()
	dead := f.parent == name
	f.mu.Unlock()
	if dead {
		return errors.New("injected: the restorer is gone")
	}
	return f.Reader.DeleteRecord(ctx, name, ifVersion)
}

// With CheckpointInterval set (as advised for S3), a block's progress is
// only kept in memory (Keeper.SetProgress) until the next renewal; when
// Aside becomes full, writeSides names and publishes the remainder from that
// unsaved Aside, and saves only then. A restorer that dies in between leaves
// a published remainder that no saved progress names. The restorer taking
// the claim over cannot find it: resuming without the filter (or with
// another one, or with a destination refusing other records) it delivers the
// records the remainder holds, and once the parent is done the remainder is
// restored too. The design asks side segments to be committed under a name
// derived from a progress that is saved before they are published, so that
// a re-run finds them.
func TestReviewSideSegmentNamedFromUnsavedProgress(t *testing.T) {
	dir := t.TempDir()
	// About 400 blocks of 25 records; every other record has reason=leak.
	writeSegment(t, dir, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), 10_000, 512,
		func(i int) string { return []string{"failed", "leak"}[i%2] })
	dst := &countingDest{}
	fa := &sideFault{Reader: &fs.Reader{Directory: dir}}
	const lease = time.Second
	ra := newRestorer(t, dlqdump.Config{Reader: fa, Queue: dst, Owner: "a", Lease: lease, CheckpointInterval: time.Hour})
	_, err := ra.Run(t.Context(), dlqdump.RunOptions{Where: dlqdump.Headers{dlqdump.HeaderReason: "failed"}})
	fa.mu.Lock()
	published := fa.published
	fa.mu.Unlock()
	// Fixed: the runs are saved before their side segment is published,
	// so the restorer's death (every record write failing) now comes
	// before it; either way nothing may be delivered twice.
	t.Logf("filtered pass, its restorer gone (a side segment published: %v): %v", published, err)
	// Another restorer takes the claim over after the lease and restores
	// everything.
	rb := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Owner: "b", Lease: lease})
	deadline := time.Now().Add(20 * lease)
	for {
		rep, err := rb.Run(t.Context(), dlqdump.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Claimed == 0 && len(segmentsIn(t, dir)) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done after %s: %d segments left", 20*lease, len(segmentsIn(t, dir)))
		}
		time.Sleep(lease / 5)
	}
	dst.mu.Lock()
	leaks, leakDups := 0, 0
	for it, c := range dst.n {
		if n, _ := strconv.ParseInt(it, 36, 64); n%2 == 1 {
			leaks++
			leakDups += c - 1
		}
	}
	dst.mu.Unlock()
	if leakDups > 25 {
		t.Fatalf("%d of the %d records the filtered pass set aside (and never delivered) were delivered twice", leakDups, leaks)
	}
}

// reviewFlakyRead is an fs.Reader whose segments fail one read at or after an
// offset (a transient I/O error: an S3 GET that failed its retries).
type reviewFlakyRead struct {
	*fs.Reader
	armed func(off int64) bool
	fired atomic.Bool
}

type reviewFlakyFile struct {
	sink.File
	r *reviewFlakyRead
}

func (f reviewFlakyFile) ReadAt(p []byte, off int64) (int, error) {
	if f.r.armed(off) && f.r.fired.CompareAndSwap(false, true) {
		return 0, errors.New("injected: transient read error")
	}
	return f.File.ReadAt(p, off)
}

func (f *reviewFlakyRead) Open(ctx context.Context, area sink.Area, name string) (sink.File, error) {
	file, err := f.Reader.Open(ctx, area, name)
	if err != nil || area != sink.AreaReady {
		return file, err
	}
	return reviewFlakyFile{file, f}, nil
}

// With CheckpointInterval set, the Keeper holds the latest progress in
// memory and writes it with the next renewal. A pass that fails for any
// reason other than cancellation (here one transient read error) releases
// the claim with Claim.Release, which writes the last progress *written*,
// not the latest one: every record delivered since is delivered again by the
// next pass, although no process died (stop() saves the latest progress
// first; release() does not).
func TestReviewFailedPassReleasesStaleProgress(t *testing.T) {
	dir := t.TempDir()
	writeSegment(t, dir, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), 400_000, 512,
		func(int) string { return "failed" })
	dst := &countingDest{}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.dlq"))
	st, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	// A read of a block half way into the segment fails (not the footer's,
	// read when the segment is opened, before any delivery: with blocks
	// this small, the footer's index is a fifth of the segment). Reading
	// runs ahead of delivering by at most segment.DefaultReadAhead (4 MiB)
	// of blocks, so the first ~2 MiB of records (~80,000) were delivered
	// by then, whatever the machine's speed.
	fr := &reviewFlakyRead{Reader: &fs.Reader{Directory: dir}, armed: func(off int64) bool {
		_, n := dst.twice()
		return n > 0 && off >= st.Size()/2
	}}
	r := newRestorer(t, dlqdump.Config{Reader: fr, Queue: dst, CheckpointInterval: time.Hour})
	err = r.Restore(t.Context())
	t.Logf("first pass: %v", err)
	if err == nil || !fr.fired.Load() {
		t.Fatalf("the injected read error was not reported (%v, fired %v)", err, fr.fired.Load())
	}
	_, first := dst.twice()
	if err := r.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	dups, total := dst.twice()
	t.Logf("first pass delivered %d; in all %d, %d twice", first, total, dups)
	if dups > 25 {
		t.Fatalf("one transient read error, no crash: %d records delivered twice (%d delivered before it, %d in all)", dups, first, total)
	}
}

// checkProgress validates the position and the runs set aside, but not Done:
// a stale or damaged record saying done at the start of the segment passes
// (position 0/0 is "the start"), the pass skips reading, and the segment is
// completed and deleted with none of its records delivered: issue 12 defect
// 4's outcome through another field.
func TestReviewDoneAtTheStartDeletesTheSegment(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("p", 500)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, items)
	rd := &fs.Reader{Directory: dir}
	name := filepath.Base(segmentsIn(t, dir)[0])
	writeProgress(t, rd, name, `{"offset":0,"seq":0,"delivered":0,"done":true}`)
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst})
	if err := r.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	kept := len(segmentsIn(t, dir)) + len(quarantinedPayloads(t, dir))
	archived := len(readDir(t, filepath.Join(dir, fs.ArchiveDir)))
	if n := len(dst.got()); n != len(items) && kept+archived == 0 {
		t.Fatalf("a record saying done at the start: %d of %d records delivered, and the segment is gone", n, len(items))
	}
}

// ParseProgress and checkAside check each run on its own: runs that overlap
// (a damaged or hostile record) pass, and copyRuns copies their records
// once per run, so a record lands in quarantine twice (and is delivered
// twice once released). Nor are the runs' count and the reasons' count
// bounded (MaxAside, MaxReasons), so a 64 KiB record can make a pass
// decode one large block thousands of times.
func TestReviewOverlappingRunsQuarantineARecordTwice(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("p", 500)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, items)
	rd := &fs.Reader{Directory: dir}
	name := filepath.Base(segmentsIn(t, dir)[0])
	writeProgress(t, rd, name, `{"offset":64,"seq":10,"delivered":9,"quarantined":1,`+
		`"aside":[{"o":64,"f":3,"t":4,"q":true},{"o":64,"f":3,"t":4,"q":true}],"reasons":["x"]}`)
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: &dest{}})
	if err := r.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	q := quarantinedPayloads(t, dir)
	if c := counts(q); c[items[3]] > 1 {
		t.Fatalf("quarantine holds %s %d times (%q)", items[3], c[items[3]], q)
	}
}

// oddDecoder fails to decode records whose payload (base 36) is odd.
type oddDecoder struct{}

func (oddDecoder) Decode(b []byte) (any, error) {
	if n, _ := strconv.ParseInt(string(b), 36, 64); n%2 == 1 {
		return nil, errors.New("undecodable")
	}
	return string(b), nil
}

// The same overflow without a filter: a segment where every other record
// does not decode (a schema change half-way through the producers) sets
// aside one masked quarantine run per block, and the plain Restore a started
// Restorer runs every CheckInterval fails at the same block every pass,
// delivering it again each time.
func TestReviewMaskedQuarantineOverflowsTheRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: writes and restores 420,000 records")
	}
	dir := t.TempDir()
	items := writeSegment(t, dir, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), 420_000, segment.DefaultBlockSize,
		func(int) string { return "failed" })
	dst := &countingDest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Decoder: oddDecoder{}})
	var errs []error
	for range 3 {
		errs = append(errs, r.Restore(t.Context()))
	}
	dups, total := dst.twice()
	if dups > 0 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("three passes, no fault injected: %d of %d deliveries were duplicates; errors: %v", dups, total, errs)
	}
	if total != len(items)/2 {
		t.Fatalf("%d delivered, want the %d decodable", total, len(items)/2)
	}
}

// Progress.Full is looked at after each block, so the runs one block adds
// must fit in the record whatever was there before. A masked run spans at
// most 65,536 records (an 8 KiB mask, about 11 KB in JSON), but a block
// holds as many records as its BlockSize allows: a 16 MiB block (Config
// accepts up to 64 MiB) of small records, every other one undecodable, adds
// nine such runs at once, past sink.MaxRecordSize, and the block's
// checkpoint is refused at every pass.
func TestReviewOneLargeBlockOverflowsTheRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: writes and restores 600,000 records")
	}
	// Its own directory and records: it runs beside the enumerations and
	// the other parallel tests.
	t.Parallel()
	dir := t.TempDir()
	items := writeSegment(t, dir, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC), 600_000, 16<<20,
		func(int) string { return "failed" })
	dst := &countingDest{}
	// A Restorer reads blocks of 16 MiB when its MaxRecordSize allows them
	// (the default, 8 MiB, quarantines the segment at such a block).
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, Decoder: oddDecoder{}, MaxRecordSize: 16 * dlqdump.Megabyte})
	var errs []error
	for range 2 {
		errs = append(errs, r.Restore(t.Context()))
	}
	dups, total := dst.twice()
	if dups > 0 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("two passes, no fault injected: %d of %d deliveries were duplicates; errors: %v", dups, total, errs)
	}
	if total != len(items)/2 {
		t.Fatalf("%d delivered, want the %d decodable", total, len(items)/2)
	}
}
