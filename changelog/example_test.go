package changelog_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/fs"
)

// A program that changes a store (here, pausing a job) says so in its
// change log, and anyone reads it back.
func Example() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	l, err := changelog.Open(&fs.Reader{Directory: dir})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := l.Append(ctx, changelog.Entry{Actor: "billing-worker@app-1", Via: "billing", Action: changelog.ActionJobPause,
		Scope: "job redrive-42", Reason: "destination overloaded"}); err != nil {
		log.Fatal(err)
	}
	for e, err := range l.Newest(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Seq, e.Actor, e.What(), "-", e.Reason)
	}
	v, err := l.Verify(ctx, changelog.VerifyOptions{})
	fmt.Println(v.Entries, "entries verified, broken:", err != nil)
	// Output:
	// 1 billing-worker@app-1 job.pause job redrive-42 - destination overloaded
	// 1 entries verified, broken: false
}
