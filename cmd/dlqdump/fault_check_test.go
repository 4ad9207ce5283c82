//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// What the fault scenarios check, read from the store directly (not
// through the command under test).

// stored is a record found in a segment file.
type stored struct {
	payload string
	block   string // "NAME#i": the block holding it
}

// readRecords returns the intact records of a segment file, in order, with
// the block each is in.
func readRecords(t *testing.T, path, name string) []stored {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	sr, err := segment.NewReader(f, st.Size(), &segment.ReaderOptions{Name: name})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []stored
	var b segment.Block
	for i := 0; ; i++ {
		err := sr.ReadBlock(&b)
		if err == io.EOF {
			return out
		}
		var ce *segment.CorruptError
		if errors.As(err, &ce) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for j := range b.Len() {
			rec := b.Record(j)
			out = append(out, stored{string(rec.Payload), fmt.Sprintf("%s#%d", name, b.Info().FirstSeq)})
		}
	}
}

// pending returns, by payload, how many times each record is in an area of
// a dump directory and not yet handled by a restore: a segment's records
// from its restore progress on (and those it set aside before), as its
// claim record says.
func pending(t *testing.T, dir string, area sink.Area) map[string]int {
	t.Helper()
	ctx := context.Background()
	rd := &fs.Reader{Directory: dir}
	out := map[string]int{}
	for si, err := range rd.List(ctx, area) {
		if err != nil {
			t.Fatal(err)
		}
		var prog *claims.Progress
		if b, _, err := rd.ReadRecord(ctx, si.Name); err == nil && area != sink.AreaArchive {
			rec, ok := claims.Parse(b)
			if !ok {
				t.Fatalf("the record of %s is damaged: %s", si.Name, b)
			}
			p, err := claims.ParseProgress(rec.Progress)
			if err != nil {
				t.Fatalf("the progress of %s: %v", si.Name, err)
			}
			prog = &p
		}
		f, err := os.Open(segPath(dir, area, si.Name))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		sr, err := segment.NewReader(f, st.Size(), nil)
		if err != nil {
			f.Close()
			t.Fatal(err)
		}
		for {
			rec, err := sr.Next()
			if err == io.EOF {
				break
			}
			var ce *segment.CorruptError
			if errors.As(err, &ce) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if prog != nil && (prog.Done || rec.Seq < prog.Seq) && !aside(prog, rec.Seq) {
				continue
			}
			out[string(rec.Payload)]++
		}
		f.Close()
	}
	return out
}

func aside(p *claims.Progress, seq uint64) bool {
	for _, a := range p.Aside {
		if a.Has(seq) {
			return true
		}
	}
	return false
}

// checkRestored checks the outcome of a restore interrupted once and run
// again: every record of universe (payload -> block) is delivered, in
// quarantine or still ready; no record in quarantine was delivered; the
// records delivered twice are in one block of each segment (the segments in
// flight deliver at once), none more than twice.
func checkRestored(t *testing.T, dir string, universe map[string]string, delivered map[string]int) {
	t.Helper()
	quar := pending(t, dir, sink.AreaQuarantine)
	ready := pending(t, dir, sink.AreaReady)
	twice := map[string]bool{}
	for p, blk := range universe {
		n := delivered[p]
		switch {
		case n == 0 && quar[p] == 0 && ready[p] == 0:
			t.Errorf("record %q (%s) is lost: not delivered, not in quarantine, not ready", p, blk)
		case n > 0 && quar[p] > 0:
			t.Errorf("record %q (%s) was delivered and is in quarantine too", p, blk)
		case n > 0 && ready[p] > 0:
			t.Errorf("record %q (%s) was delivered and is still ready", p, blk)
		case n > 2:
			t.Errorf("record %q (%s) was delivered %d times", p, blk, n)
		case n == 2:
			twice[blk] = true
		}
	}
	for p := range delivered {
		if _, ok := universe[p]; !ok {
			t.Errorf("delivered %q, which was not dumped", p)
		}
	}
	bySegment := map[string][]string{} // the blocks delivered twice, by segment
	for b := range twice {
		seg, _, _ := strings.Cut(b, "#")
		bySegment[seg] = append(bySegment[seg], b)
	}
	for _, blocks := range bySegment {
		if len(blocks) > 1 {
			sort.Strings(blocks)
			t.Errorf("records of %d blocks of one segment delivered twice after one interruption: %s", len(blocks), strings.Join(blocks, ", "))
		}
	}
	if len(bySegment) > dlqdump.DefaultSegmentsInFlight {
		t.Errorf("records of %d segments delivered twice after one interruption, more than the %d in flight", len(bySegment), dlqdump.DefaultSegmentsInFlight)
	}
}

// checkSameSegment checks that a segment file has the given bytes.
func checkSameSegment(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s: %d bytes, not the %d of the original", path, len(got), len(want))
	}
}

// readRecordOf returns the record of a segment in a dump directory, nil if
// none.
func readRecordOf(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, _, err := (&fs.Reader{Directory: dir}).ReadRecord(context.Background(), name)
	if errors.Is(err, sink.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkCarried checks that the record of a segment in dir has the state and
// the progress of want, released.
func checkCarried(t *testing.T, dir, name string, want claims.Record) {
	t.Helper()
	b := readRecordOf(t, dir, name)
	if b == nil {
		t.Errorf("%s has no record in %s: its restore progress was not carried", name, dir)
		return
	}
	got, ok := claims.Parse(b)
	switch {
	case !ok:
		t.Errorf("the record of %s in %s is damaged: %s", name, dir, b)
	case got.Held():
		t.Errorf("the record of %s in %s is held by %q", name, dir, got.Owner)
	case got.State != want.State || !sameJSON(got.Progress, want.Progress):
		t.Errorf("the record of %s in %s: state %q, progress %s; want state %q, progress %s", name, dir, got.State, got.Progress, want.State, want.Progress)
	}
}
