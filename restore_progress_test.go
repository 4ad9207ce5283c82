package dlqdump_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// poisonDecoder fails to decode payloads starting with "poison".
type poisonDecoder struct{}

func (poisonDecoder) Decode(b []byte) (any, error) {
	if strings.HasPrefix(string(b), "poison") {
		return nil, errors.New("poisoned payload")
	}
	return string(b), nil
}

// counts returns how often each item was delivered.
func counts(items []string) map[string]int {
	m := map[string]int{}
	for _, it := range items {
		m[it]++
	}
	return m
}

// quarantinedPayloads reads the payloads of every quarantined segment in dir.
func quarantinedPayloads(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	for _, d := range readDir(t, filepath.Join(dir, fs.QuarantineDir)) {
		out = append(out, d.Payload)
	}
	return out
}

// flakyFinish is an fs.Reader whose first removal of a ready segment fails
// after taking effect... or without: fail says which.
type flakyFinish struct {
	*fs.Reader
	tookEffect bool
	failed     atomic.Bool
}

func (f *flakyFinish) Delete(ctx context.Context, area sink.Area, name string) error {
	if area == sink.AreaReady && f.failed.CompareAndSwap(false, true) {
		if f.tookEffect {
			if err := f.Reader.Delete(ctx, area, name); err != nil {
				return err
			}
		}
		return errors.New("injected: the answer to Delete was lost")
	}
	return f.Reader.Delete(ctx, area, name)
}

// Issue 12, defect 1 (third case): one transient failure completing a
// segment must neither deliver the segment again nor write its quarantine
// twice.
func TestTransientCompleteFailureRepeatsNothing(t *testing.T) {
	for _, tookEffect := range []bool{false, true} {
		t.Run(fmt.Sprintf("tookEffect=%v", tookEffect), func(t *testing.T) {
			dir := t.TempDir()
			items := append([]string{"poison-0"}, itemsN("ok", 3000)...)
			dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 4 * dlqdump.Kilobyte}, items)
			rd := &flakyFinish{Reader: &fs.Reader{Directory: dir}, tookEffect: tookEffect}
			dst := &dest{}
			r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst, Decoder: poisonDecoder{}})
			// Finishing is retried: the pass absorbs one failure.
			for range 2 {
				if err := r.Restore(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if !rd.failed.Load() {
				t.Fatal("the failure was not injected")
			}
			got := counts(dst.got())
			for _, it := range items[1:] {
				if got[it] != 1 {
					t.Fatalf("%s delivered %d times", it, got[it])
				}
			}
			if q := quarantinedPayloads(t, dir); !slices.Equal(q, []string{"poison-0"}) {
				t.Fatalf("quarantine holds %q, want the poisoned record once", q)
			}
			if n := len(segmentsIn(t, dir)); n != 0 {
				t.Fatalf("%d segments left", n)
			}
		})
	}
}

// cancelAt is a destination that cancels a context when it accepts its n-th
// item, and from then on refuses with the context's error, as an HTTP
// destination does.
type cancelAt struct {
	dest
	n      int
	seen   atomic.Int64
	cancel context.CancelFunc
	ctx    context.Context
}

func (c *cancelAt) Enqueue(x any) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	if err := c.dest.Enqueue(x); err != nil {
		return err
	}
	if int(c.seen.Add(1)) == c.n {
		c.cancel()
	}
	return nil
}

// Issue 12, defect 2: a pass stopped by its context records where it
// stopped; the next pass delivers nothing twice, and a destination answering
// with the context's error is not a refusal (nothing quarantined), even with
// MaxAttempts 1.
func TestCancelledPassRepeatsNothing(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("c", 10000)
	dumpItems(t, dir, dlqdump.Config{Capacity: 64 * dlqdump.Kilobyte, BlockSize: 4 * dlqdump.Kilobyte}, items)
	var all []string
	for _, stopAt := range []int{1, 777, 2500, 6001} {
		ctx, cancel := context.WithCancel(t.Context())
		dst := &cancelAt{n: stopAt, cancel: cancel, ctx: ctx}
		r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, MaxAttempts: 1})
		if _, err := r.Run(ctx, dlqdump.RunOptions{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("pass cancelled at %d: %v", stopAt, err)
		}
		cancel()
		all = append(all, dst.got()...)
	}
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst, MaxAttempts: 1})
	if err := r.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	all = append(all, dst.got()...)
	got := counts(all)
	for _, it := range items {
		if got[it] != 1 {
			t.Fatalf("%s delivered %d times (%d deliveries for %d records)", it, got[it], len(all), len(items))
		}
	}
	if q := quarantinedPayloads(t, dir); len(q) != 0 {
		t.Fatalf("%d records quarantined by a cancellation", len(q))
	}
}

// blockingDest accepts items until closed is set, then blocks every Enqueue
// until release is closed.
type blockingDest struct {
	dest
	started chan struct{}
	release chan struct{}
	once    atomic.Bool
}

func (b *blockingDest) Enqueue(x any) error {
	if b.once.CompareAndSwap(false, true) {
		close(b.started)
	}
	<-b.release
	return b.dest.Enqueue(x)
}

// Issue 12, defect 3: two restorers with the same Owner (the service's name
// on every replica) never take each other's live claims.
func TestSameOwnerRestorersNeverShareASegment(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("o", 3000)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, items) // one segment
	if n := len(segmentsIn(t, dir)); n != 1 {
		t.Fatalf("%d segments, want 1", n)
	}
	a := &blockingDest{started: make(chan struct{}), release: make(chan struct{})}
	ra := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: a, Owner: "orders", Lease: 200 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- ra.Restore(t.Context()) }()
	<-a.started // A holds the segment and is delivering its first record
	b := &dest{}
	rb := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: b, Owner: "orders", Lease: 200 * time.Millisecond})
	// B passes several times over more than a lease while A renews.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if err := rb.Restore(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(b.got()); n != 0 {
			t.Fatalf("the second restorer with the same owner delivered %d records of a live claim", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(a.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := counts(a.got())
	for _, it := range items {
		if got[it] != 1 {
			t.Fatalf("%s delivered %d times", it, got[it])
		}
	}
}

// writeProgress stores a claim record with the given progress for a segment,
// as a restorer that released it would.
func writeProgress(t *testing.T, rd *fs.Reader, name, progress string) {
	t.Helper()
	rec := fmt.Sprintf(`{"v":2,"owner":"earlier","rev":1,"progress":%s}`, progress)
	if _, err := rd.WriteRecord(t.Context(), name, []byte(rec), ""); err != nil {
		t.Fatal(err)
	}
}

// Issue 12, defect 4: a checkpoint the segment does not have (stale or
// damaged record) keeps the segment: it is quarantined with the reason,
// never completed and deleted.
func TestCheckpointOutsideTheSegmentKeepsIt(t *testing.T) {
	for _, progress := range []string{
		`{"offset":64,"seq":999999,"delivered":5}`,
		`{"offset":999999,"seq":3,"delivered":5}`,
		`{"offset":65,"seq":0}`,
		`{"offset":64,"seq":0,"aside":[{"o":64,"f":100000,"t":100001,"q":true}],"reasons":["x"]}`,
	} {
		dir := t.TempDir()
		items := itemsN("p", 500)
		dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, items)
		rd := &fs.Reader{Directory: dir}
		name := filepath.Base(segmentsIn(t, dir)[0])
		writeProgress(t, rd, name, progress)
		dst := &dest{}
		r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst})
		if err := r.Restore(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(dst.got()); n != 0 {
			t.Fatalf("progress %s: %d records delivered", progress, n)
		}
		q, err := os.ReadFile(filepath.Join(dir, fs.QuarantineDir, name+".reason"))
		if err != nil {
			t.Fatalf("progress %s: the segment is not in quarantine: %v", progress, err)
		}
		if !strings.Contains(string(q), "stale or damaged") && !strings.Contains(string(q), "progress") && !strings.Contains(string(q), "checkpoint") {
			t.Fatalf("progress %s: reason %q", progress, q)
		}
		if got := readSegment(t, filepath.Join(dir, fs.QuarantineDir, name)); len(got) != len(items) {
			t.Fatalf("quarantined segment holds %d records", len(got))
		}
	}
}

// corruptBlock flips a byte in the stored bytes of the block at index i of
// the segment at path.
func corruptBlock(t *testing.T, path string, i int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	r, err := segment.NewReader(f, st.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := r.Footer().Blocks[i]
	off := b.Offset + segment.BlockHeaderSize + 3
	var one [1]byte
	if _, err := f.ReadAt(one[:], off); err != nil {
		t.Fatal(err)
	}
	one[0] ^= 0xff
	if _, err := f.WriteAt(one[:], off); err != nil {
		t.Fatal(err)
	}
}

// Issue 12, defects 5 and 6: a damaged segment has its intact records
// delivered and is quarantined; releasing it and restoring again delivers
// none of them twice (and finishes it); a dry run before each pass says what
// the pass does.
func TestDamagedSegmentReleasedFeedsNothingTwice(t *testing.T) {
	dir := t.TempDir()
	items := itemsN("d", 3000)
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 4 * dlqdump.Kilobyte}, items)
	path := segmentsIn(t, dir)[0]
	name := filepath.Base(path)
	corruptBlock(t, path, 3)
	rd := &fs.Reader{Directory: dir}
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst})
	dry, err := r.Run(t.Context(), dlqdump.RunOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delivered := len(dst.got())
	if delivered == 0 || delivered >= len(items) {
		t.Fatalf("%d of %d delivered from a segment with one damaged block", delivered, len(items))
	}
	if dry.Delivered != rep.Delivered || dry.QuarantinedSegments != rep.QuarantinedSegments || dry.DamagedBlocks != rep.DamagedBlocks {
		t.Fatalf("dry run said %+v, the pass did %+v", dry, rep)
	}
	if err := rd.Move(t.Context(), name, sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
		t.Fatal(err)
	}
	dry, err = r.Run(t.Context(), dlqdump.RunOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err = r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(dst.got()); n != delivered {
		t.Fatalf("released and restored again: %d more records delivered", n-delivered)
	}
	// Nothing was left to deliver: the released segment is finished, not
	// quarantined again (issue 20, defect 6).
	if dry.Delivered != 0 || rep.Delivered != 0 || rep.Segments != 1 || dry.Segments != 1 || rep.QuarantinedSegments != 0 {
		t.Fatalf("second round: dry run %+v, pass %+v", dry, rep)
	}
}

// Issue 12, defect 6: a dry run honours checkpoints: after a pass stopped by
// its limit, it counts exactly what is left.
func TestDryRunHonoursCheckpoints(t *testing.T) {
	dir := t.TempDir()
	items := append(itemsN("x", 4000), "poison-1", "poison-2")
	items = append(items, itemsN("y", 1000)...)
	dumpItems(t, dir, dlqdump.Config{Capacity: 64 * dlqdump.Kilobyte, BlockSize: 4 * dlqdump.Kilobyte}, items)
	rd := &fs.Reader{Directory: dir}
	dst := &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst, Decoder: poisonDecoder{}})
	for _, limit := range []uint64{1, 1234, 1000} {
		if _, err := r.Run(t.Context(), dlqdump.RunOptions{Limit: limit}); err != nil {
			t.Fatal(err)
		}
		left := len(items) - 2 - len(dst.got())
		dry, err := r.Run(t.Context(), dlqdump.RunOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if int(dry.Delivered) != left || dry.Quarantined != 2 {
			t.Fatalf("after a pass limited to %d: dry run counts %d to deliver and %d to quarantine, %d are left", limit, dry.Delivered, dry.Quarantined, left)
		}
	}
	if err := r.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := counts(dst.got())
	for _, it := range items {
		if want := map[bool]int{true: 0, false: 1}[strings.HasPrefix(it, "poison")]; got[it] != want {
			t.Fatalf("%s delivered %d times", it, got[it])
		}
	}
}

// fullDest is a destination whose Rate stays above any AllowRate.
type fullDest struct{ dest }

func (*fullDest) Rate() float32 { return 1 }

// Issue 12, defect 7: the status (Stats and the gauges) follows the store
// while the destination is full and no pass gets anywhere.
func TestStatusFollowsTheStoreWhileTheDestinationIsFull(t *testing.T) {
	dir := t.TempDir()
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, itemsN("a", 10))
	rd := &fs.Reader{Directory: dir}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: &fullDest{}, CheckInterval: 20 * time.Millisecond, AllowRate: 0.5})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func(dlqdump.RestorerStats) bool) {
		t.Helper()
		for start := time.Now(); !ok(r.Stats()); time.Sleep(5 * time.Millisecond) {
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%s: stats %+v", what, r.Stats())
			}
		}
	}
	waitFor("the first segment ready and claimed", func(s dlqdump.RestorerStats) bool { return s.Ready == 1 && s.Claimed == 1 })
	for i := range 20 {
		dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte}, itemsN(fmt.Sprint("more", i), 3))
	}
	waitFor("21 segments ready while the destination is full", func(s dlqdump.RestorerStats) bool { return s.Ready == 21 })
	old := r.Stats().OldestReady
	waitFor("the oldest ready age growing", func(s dlqdump.RestorerStats) bool { return s.OldestReady > old })
}
