package dlqdump_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
)

// firstIDs returns the IDs of the first n records of the ready segments in
// dir, as dlqdump cat prints them.
func firstIDs(dir string, n int) []string {
	ctx := context.Background()
	rd := &fs.Reader{Directory: dir}
	var ids []string
	for si, err := range rd.List(ctx, dlqdump.AreaReady) {
		if err != nil {
			log.Fatal(err)
		}
		f, err := rd.Open(ctx, dlqdump.AreaReady, si.Name)
		if err != nil {
			log.Fatal(err)
		}
		sr, err := segment.NewReader(f, f.Size(), nil)
		if err != nil {
			log.Fatal(err)
		}
		hdr := sr.Header()
		for len(ids) < n {
			rec, err := sr.Next()
			if err != nil {
				break
			}
			ids = append(ids, dlqdump.RecordIDOf(&hdr, &rec).String())
		}
		f.Close()
	}
	return ids
}

// printer is a destination that prints what it gets.
type printer struct{}

func (printer) Enqueue(x any) error { fmt.Println("delivered", x); return nil }

// Replay one record now and discard two others, by their IDs, and say so in
// the store's change log.
func Example_replayDiscard() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: dlqdump.Megabyte})
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range []string{"ord-7", "ord-8", "ord-8 again", "ord-9"} {
		_ = dump.Enqueue(o)
	}
	if err := dump.Close(); err != nil {
		log.Fatal(err)
	}
	ids := firstIDs(dir, 3)
	ctx := context.Background()
	reader := &fs.Reader{Directory: dir}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: reader, Decoder: decoder.Fallthrough{AsString: true}, Queue: printer{}})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	// README:begin
	// The IDs dlqdump cat, stat --by and the console show.
	replay, _ := dlqdump.ParseRecordID(ids[0])
	dup1, _ := dlqdump.ParseRecordID(ids[1])
	dup2, _ := dlqdump.ParseRecordID(ids[2])
	// Replay one record now: only its block is read, the rest of its
	// segment stays ready, under the segment's claim as any pass.
	if _, err := r.Run(ctx, dlqdump.RunOptions{Select: selection.IDs(replay)}); err != nil {
		log.Fatal(err)
	}
	// Discard two: into the quarantine with who and why, never replayed,
	// never deleted (a release brings them back; retention removes them).
	why := "by billing-worker: duplicates of ord-8, refunded"
	rep, err := r.Run(ctx, dlqdump.RunOptions{Select: selection.IDs(dup1, dup2), Discard: why})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("discarded", rep.Quarantined)
	// Say so in the store's change log, as dlqdump and the console do.
	changes, err := changelog.Open(reader)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := changes.Append(ctx, changelog.Entry{Actor: "billing-worker@app-1", Via: "billing", Action: changelog.ActionDiscard,
		Scope: "records " + dup1.String() + ", " + dup2.String(), Reason: "duplicates of ord-8, refunded"}); err != nil {
		log.Fatal(err)
	}
	// README:end
	if _, err := r.Run(ctx, dlqdump.RunOptions{}); err != nil {
		log.Fatal(err)
	}
	v, err := changes.Verify(ctx, changelog.VerifyOptions{})
	fmt.Println("change log entries:", v.Entries, err)
	// Output:
	// delivered ord-7
	// discarded 2
	// delivered ord-9
	// change log entries: 1 <nil>
}
