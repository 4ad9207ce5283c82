package dlqdump_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/transform"
)

// TestTransformRoundTrip: 100,000 records restored through a jq program
// that fixes a field. The dry run changes nothing, counts the records the
// program would refuse and shows the first ones before and after as a
// unified diff; the restore delivers every record fixed, with its ID,
// quarantines those the program fails on with its error and their stored
// payload, and the stored originals (archived) are unchanged.
func TestTransformRoundTrip(t *testing.T) {
	// Its own directory and records: it runs beside the enumerations and
	// the other parallel tests.
	t.Parallel()
	const n, every = 100_000, 1000 // every 1000th record's email is a number: the program fails on it
	dir := t.TempDir()
	q := newQueue(t, dlqdump.Config{Writer: &fs.Writer{Directory: dir}, Capacity: 4 * dlqdump.Megabyte})
	payload := func(i int) string {
		if i%every == 7 {
			return fmt.Sprintf(`{"n":%d,"email":%d}`, i, i)
		}
		return fmt.Sprintf(`{"n":%d,"email":"User%d@EXAMPLE.com"}`, i, i)
	}
	for i := range n {
		if err := q.Enqueue(dlqdump.Envelope{Item: []byte(payload(i)), Headers: dlqdump.Headers{dlqdump.HeaderReason: "failed"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	stored := readDir(t, dir)
	jq, err := transform.CompileJQ(`.payload.email |= ascii_downcase | .headers.fixed = "email"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]*dlqdump.Envelope{}
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, DeliverEnvelope: true,
		Archive: true, Concurrency: 4, Queue: queueFunc(func(x any) error {
			env := x.(*dlqdump.Envelope)
			var v struct{ N int }
			if err := json.Unmarshal(env.Item.([]byte), &v); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			got[fmt.Sprint(v.N)] = env
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	rep, err := r.Run(context.Background(), dlqdump.RunOptions{DryRun: true, Transform: jq.Transform, Sample: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivered != n-n/every || rep.ByReason["quarantine: transform"] != n/every || len(got) != 0 {
		t.Fatalf("dry run: would deliver %d, quarantine %v; delivered %d", rep.Delivered, rep.ByReason, len(got))
	}
	if len(rep.Changes) != 3 {
		t.Fatalf("dry run sample: %d changes, want 3", len(rep.Changes))
	}
	first := rep.Changes[0]
	want := `--- stored ` + first.Before.ID.String() + `
+++ delivered ` + first.Before.ID.String() + `
@@ -1,9 +1,10 @@
 {
   "headers": {
+    "fixed": "email",
     "reason": "failed"
   },
   "payload": {
-    "email": "User0@EXAMPLE.com",
+    "email": "user0@example.com",
     "n": 0
   }
 }
`
	if d := transform.Diff(&first.Before, &first.After); d != want {
		t.Fatalf("the dry run's diff of the first record:\n%s\nwant:\n%s", d, want)
	}
	if again := readDir(t, dir); len(again) != n || again[0].Payload != stored[0].Payload {
		t.Fatalf("the dry run changed the store: %d records", len(again))
	}

	rep, err = r.Run(context.Background(), dlqdump.RunOptions{Transform: jq.Transform})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Delivered != n-n/every || rep.Quarantined != n/every || len(got) != n-n/every {
		t.Fatalf("delivered %d (%d distinct), quarantined %d", rep.Delivered, len(got), rep.Quarantined)
	}
	ids := map[string]bool{}
	for i := range n {
		env := got[fmt.Sprint(i)]
		if i%every == 7 {
			if env != nil {
				t.Fatalf("record %d delivered: %s", i, env.Item)
			}
			continue
		}
		if want := fmt.Sprintf(`{"email":"user%d@example.com","n":%d}`, i, i); string(env.Item.([]byte)) != want {
			t.Fatalf("record %d delivered as %s, want %s", i, env.Item, want)
		}
		id := env.Headers[dlqdump.HeaderRecordID]
		if env.Headers["fixed"] != "email" || env.Headers[dlqdump.HeaderReason] != "failed" || id == "" || ids[id] {
			t.Fatalf("record %d delivered with headers %v", i, env.Headers)
		}
		ids[id] = true
	}
	quar := readDir(t, filepath.Join(dir, fs.QuarantineDir))
	if len(quar) != n/every {
		t.Fatalf("%d records quarantined, want %d", len(quar), n/every)
	}
	for _, d := range quar {
		var v struct{ N int }
		_ = json.Unmarshal([]byte(d.Payload), &v)
		if d.Payload != payload(v.N) || !strings.HasPrefix(d.Headers[dlqdump.HeaderQuarantine], "transform: jq: ascii_downcase cannot be applied to: number") {
			t.Fatalf("quarantined %s with %v", d.Payload, d.Headers)
		}
	}
	archived := readDir(t, filepath.Join(dir, fs.ArchiveDir))
	if len(archived) != n {
		t.Fatalf("%d records archived, want %d", len(archived), n)
	}
	for i, d := range archived {
		if d.Payload != stored[i].Payload {
			t.Fatalf("archived record %d is %s, stored %s", i, d.Payload, stored[i].Payload)
		}
	}
}
