package inspect_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/fs"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/sink"
)

// dlqdump quarantine release and the console release through
// inspect.Release: like a quarantine restore pass (TestReleaseCompletesADecidedQuarantine),
// it settles the segment's record first. Before, it moved the segment
// whatever its record said: a segment whose record a restorer held,
// finishing its move to quarantine, went to the ready area, and the next
// claim finished the decided move, taking it back to quarantine (the
// release silently undone).
func TestReleaseSettlesTheRecordFirst(t *testing.T) {
	ctx := t.Context()
	path := func(a sink.Area, n string) string { return a.String() + "/" + n }
	write := func(t *testing.T, rd *fs.Reader, name string, rec *claims.Record) {
		t.Helper()
		sw, err := rd.Create(ctx, sink.AreaQuarantine, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Write([]byte("segment bytes")); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			return
		}
		b, _ := json.Marshal(rec)
		if _, err := rd.WriteRecord(ctx, name, b, ""); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	const lease = 150 * time.Millisecond
	ms := lease.Milliseconds()
	for _, tc := range []struct {
		what    string
		rec     *claims.Record
		refused string // "" if released
		state   claims.State
	}{
		{what: "no record"},
		{what: "quarantined by its holder", rec: &claims.Record{V: claims.Version, Rev: 3, State: claims.StateQuarantined, Written: now}, state: claims.StateQuarantined},
		// Released once its holder is seen gone: the record stays, for
		// the restorer that takes the segment over.
		{what: "held", rec: &claims.Record{V: claims.Version, Owner: "restorer-7", Token: "t", Rev: 4, LeaseMS: ms, Written: now}},
		{what: "a decided move to quarantine, unfinished", rec: &claims.Record{V: claims.Version, Owner: "taker", Token: "stale", Rev: 5, LeaseMS: ms,
			State: claims.StateFinishing, To: &claims.Destination{Area: sink.AreaQuarantine, Reason: "damaged"}, Written: now}, state: claims.StateQuarantined},
		{what: "a decided delete", rec: &claims.Record{V: claims.Version, Owner: "taker", Token: "stale", Rev: 5, LeaseMS: ms,
			State: claims.StateFinishing, To: &claims.Destination{Delete: true}, Written: now}, refused: `"taker" decided to`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			rd := &fs.Reader{Directory: t.TempDir()}
			const name = "20261129T060000.000000000Z-0123456789abcdef.dlq"
			write(t, rd, name, tc.rec)
			c, err := claims.NewClaimer(rd, "cli", lease, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = inspect.Release(ctx, rd, c, name, path)
			if tc.rec != nil && tc.rec.Held() {
				// A holder is live until seen unchanged for its
				// lease: refused, then settled as its record says.
				if err == nil || !strings.Contains(err.Error(), "a restorer holds its claim") {
					t.Fatalf("a held record, first seen: %v", err)
				}
				for deadline := time.Now().Add(30 * time.Second); err != nil && strings.Contains(err.Error(), "a restorer holds its claim"); {
					if time.Now().After(deadline) {
						t.Fatalf("still refused after 30s: %v", err)
					}
					time.Sleep(lease / 3)
					err = inspect.Release(ctx, rd, c, name, path)
				}
			}
			area := sink.AreaReady
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || !errors.Is(err, claims.ErrClaimed)):
				t.Fatalf("got %v, want an ErrClaimed saying %q", err, tc.refused)
			case tc.refused != "":
				area = sink.AreaQuarantine
			}
			f, err := rd.Open(ctx, area, name)
			if err != nil {
				t.Fatalf("the segment is not in %s: %v", area, err)
			}
			f.Close()
			if tc.state == "" {
				return
			}
			data, _, err := rd.ReadRecord(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if rec, ok := claims.Parse(data); !ok || rec.State != tc.state || rec.Held() {
				t.Fatalf("its record: %s, want %q and not held", data, tc.state)
			}
		})
	}
}
