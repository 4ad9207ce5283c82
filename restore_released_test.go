package dlqdump_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/sink"
)

// damagedAndQuarantined dumps items into one segment with a damaged block,
// restores it (its intact records are delivered, the segment quarantined)
// and returns the directory, the segment's name and what was delivered.
func damagedAndQuarantined(t *testing.T, items []string) (dir, name string, dst *dest) {
	t.Helper()
	dir = t.TempDir()
	dumpItems(t, dir, dlqdump.Config{Capacity: 16 * dlqdump.Megabyte, BlockSize: 4 * dlqdump.Kilobyte}, items)
	path := segmentsIn(t, dir)[0]
	corruptBlock(t, path, 3)
	dst = &dest{}
	r := newRestorer(t, dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Queue: dst})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.QuarantinedSegments != 1 || rep.Delivered == 0 {
		t.Fatalf("first pass: %+v", rep)
	}
	return dir, filepath.Base(path), dst
}

// Issue 20, defect 6: a damaged segment quarantined after its intact records
// were delivered, then released (dlqdump quarantine release), was quarantined
// again by every restore ("some records were not delivered", exit 4) though
// nothing was left to deliver: it could never be got rid of. A released
// segment with nothing left is finished (deleted, or archived), with a log
// line naming its damage; the dry run says so too.
func TestReleasedDamagedSegmentIsFinished(t *testing.T) {
	for _, archive := range []bool{false, true} {
		items := itemsN("d", 3000)
		dir, name, dst := damagedAndQuarantined(t, items)
		delivered := len(dst.got())
		rd := &fs.Reader{Directory: dir}
		if err := rd.Move(t.Context(), name, sink.AreaQuarantine, sink.AreaReady, ""); err != nil { // the release
			t.Fatal(err)
		}
		var logs bytes.Buffer
		r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst, Archive: archive, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		dry, err := r.Run(t.Context(), dlqdump.RunOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(dst.got()); n != delivered {
			t.Fatalf("released and restored again: %d more records delivered", n-delivered)
		}
		if rep.Delivered != 0 || rep.QuarantinedSegments != 0 || rep.Quarantined != 0 || rep.Segments != 1 {
			t.Fatalf("archive %v: the pass after the release did %+v, want the segment finished", archive, rep)
		}
		if dry.Segments != rep.Segments || dry.QuarantinedSegments != rep.QuarantinedSegments || dry.Delivered != 0 {
			t.Fatalf("dry run said %+v, the pass did %+v", dry, rep)
		}
		// Issue 30: the dry run says that the damaged block goes with it.
		if dry.ReleasedDamagedBlocks != 1 || rep.ReleasedDamagedBlocks != 1 {
			t.Fatalf("the dry run counted %d damaged blocks finished with the released segment, the pass %d; want 1 and 1", dry.ReleasedDamagedBlocks, rep.ReleasedDamagedBlocks)
		}
		for _, sub := range []string{"", fs.QuarantineDir} {
			if _, err := os.Stat(filepath.Join(dir, sub, name)); !os.IsNotExist(err) {
				t.Fatalf("archive %v: the segment is still in %q: %v", archive, sub, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, fs.ArchiveDir, name)); (err == nil) != archive {
			t.Fatalf("archive %v: in the archive: %v", archive, err)
		}
		if !strings.Contains(logs.String(), "finishing a released segment") || !strings.Contains(logs.String(), "damaged_blocks=1") {
			t.Fatalf("no log line says what was finished:\n%s", logs.String())
		}
		if _, _, err := rd.ReadRecord(t.Context(), name); err == nil {
			t.Fatal("the finished segment's claim record is still there")
		}
	}
}

// A restorer that takes over a damaged segment whose previous holder died
// after recording it done, before quarantining it, still quarantines it: the
// damage was never reported. Only a release finishes it.
func TestDamagedSegmentTakenOverIsStillQuarantined(t *testing.T) {
	items := itemsN("d", 3000)
	dir, name, dst := damagedAndQuarantined(t, items)
	delivered := len(dst.got())
	rd := &fs.Reader{Directory: dir}
	// Make the record what a holder that died before quarantining leaves:
	// its progress done, its state not "quarantined".
	data, version, err := rd.ReadRecord(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec["state"] != "quarantined" {
		t.Fatalf("record of a quarantined segment: %s", data)
	}
	delete(rec, "state")
	data, _ = json.Marshal(rec)
	if _, err := rd.WriteRecord(t.Context(), name, data, version); err != nil {
		t.Fatal(err)
	}
	if err := rd.Move(t.Context(), name, sink.AreaQuarantine, sink.AreaReady, ""); err != nil {
		t.Fatal(err)
	}
	r := newRestorer(t, dlqdump.Config{Reader: rd, Queue: dst})
	rep, err := r.Run(t.Context(), dlqdump.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(dst.got()); n != delivered || rep.QuarantinedSegments != 1 || rep.Segments != 0 {
		t.Fatalf("taken over: %d more delivered, pass %+v; want it quarantined", n-delivered, rep)
	}
}
