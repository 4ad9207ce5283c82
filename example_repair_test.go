package dlqdump_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/decoder"
	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/transform"
)

// Fix dead letters on their way back: a jq program (or a Go function)
// changes each record before it is delivered; a dry run shows what it does
// as a unified diff; a record it fails on goes to quarantine with the
// error. The stored records never change.
func Example_transform() {
	dir, _ := os.MkdirTemp("", "dlq")
	defer os.RemoveAll(dir)
	dump, err := dlqdump.NewQueue(&dlqdump.Config{Capacity: dlqdump.Megabyte, Writer: &fs.Writer{Directory: dir}})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range []string{`{"id":1,"email":"Ann@Example.COM"}`, `{"id":2,"email":"BOB@example.com"}`, `{"id":3}`} {
		_ = dump.Enqueue(dlqdump.Envelope{Item: []byte(p), Headers: dlqdump.Headers{dlqdump.HeaderError: "invalid e-mail address"}})
	}
	if err := dump.Close(); err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	r, err := dlqdump.NewRestorer(&dlqdump.Config{Reader: &fs.Reader{Directory: dir}, Decoder: decoder.Fallthrough{}, DeliverEnvelope: true,
		Queue: queueFunc(func(x any) error {
			env := x.(*dlqdump.Envelope)
			mu.Lock()
			defer mu.Unlock()
			got = append(got, fmt.Sprintf("%s %s", env.Item, env.Headers["fixed-by"]))
			return nil
		})})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	// README:begin
	jq, err := transform.CompileJQ(`.payload.email |= ascii_downcase`, nil)
	if err != nil {
		log.Fatal(err) // names the column: bad jq program: at column 20 ("ascii_downcas"): function not defined
	}
	// What it would do, changing nothing: the first change as a unified diff.
	rep, err := r.Run(ctx, dlqdump.RunOptions{DryRun: true, Transform: jq.Transform, Sample: 1})
	if err != nil {
		log.Fatal(err)
	}
	diff := transform.Diff(&rep.Changes[0].Before, &rep.Changes[0].After)
	// Then for real, here in a Go Transform that refuses what it cannot fix:
	// that record goes to quarantine with the reason, as it was stored.
	rep, err = r.Run(ctx, dlqdump.RunOptions{Transform: func(ctx context.Context, rec *dlqdump.Replay) error {
		if !bytes.Contains(rec.Payload, []byte(`"email":`)) {
			return errors.New("no e-mail address: fix it by hand")
		}
		rec.Headers["fixed-by"] = "incident-42"
		return jq.Transform(ctx, rec)
	}})
	// README:end
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(diff[strings.Index(diff, "@@"):]) // after the lines naming the record
	fmt.Println(strings.Join(got, "\n"))
	fmt.Println("quarantined:", rep.Quarantined, rep.ByReason)
	// Output:
	// @@ -3,7 +3,7 @@
	//      "error": "invalid e-mail address"
	//    },
	//    "payload": {
	// -    "email": "Ann@Example.COM",
	// +    "email": "ann@example.com",
	//      "id": 1
	//    }
	//  }
	// {"email":"ann@example.com","id":1} incident-42
	// {"email":"bob@example.com","id":2} incident-42
	// quarantined: 1 map[:2]
}
