package claims

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/dlqdump/dlqdump/internal/memsink"
)

// landing is a store that writes a request into the record from outside
// just before the holder's next write of it, once.
type landing struct {
	*memsink.Store
	request string
	armed   bool
}

func (l *landing) WriteRecord(ctx context.Context, name string, data []byte, ifVersion string) (string, error) {
	if l.armed {
		l.armed = false
		cur, version, err := l.Store.ReadRecord(ctx, name)
		if err != nil {
			return "", err
		}
		rec, _ := Parse(cur)
		rec.Control = l.request
		rec.Rev++
		if _, err := l.Store.WriteRecord(ctx, name, rec.marshal(), version); err != nil {
			return "", err
		}
	}
	return l.Store.WriteRecord(ctx, name, data, ifVersion)
}

// ReleaseDecided decides what it writes on the request stored now: one
// that lands just before the release is decided on (again), whether the
// holder knew of a request before or not; a request it knew of and acts on
// is cleared, one withdrawn since is not brought back.
func TestReleaseDecidedOnTheRequestStoredNow(t *testing.T) {
	for _, tc := range []struct {
		name          string
		known, landed string // the request the holder knew of; the one stored just before its write
		want          string // progress written
	}{
		{"a request lands", "", "pause", "paused"},
		{"a request is withdrawn", "pause", "", "running"},
		{"a request is replaced", "pause", "cancel", "cancelled"},
		{"none", "", "", "running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, clk := setup(t)
			ctx := t.Context()
			l := &landing{Store: st}
			c := newClaimer(t, l, "a", clk)
			cl, err := c.Claim(ctx, "a.dlq")
			if err != nil {
				t.Fatal(err)
			}
			if tc.known != "" {
				l.request, l.armed = tc.known, true
				if err := cl.Save(ctx, nil); err != nil {
					t.Fatal(err)
				}
				if cl.Control() != tc.known {
					t.Fatalf("the holder knows of %q, want %q", cl.Control(), tc.known)
				}
			}
			l.request, l.armed = tc.landed, true
			var asked []string
			err = cl.ReleaseDecided(ctx, func(control string) (json.RawMessage, string) {
				asked = append(asked, control)
				state := map[string]string{"": "running", "pause": "paused", "cancel": "cancelled"}[control]
				return json.RawMessage(`"` + state + `"`), ""
			})
			if err != nil {
				t.Fatal(err)
			}
			data, _, err := st.ReadRecord(ctx, "a.dlq")
			if err != nil {
				t.Fatal(err)
			}
			rec, _ := Parse(data)
			if string(rec.Progress) != `"`+tc.want+`"` || rec.Control != "" || rec.Held() {
				t.Fatalf("decided on %q: wrote %s, request %q, held %v; want %q, none, released", asked, rec.Progress, rec.Control, rec.Held(), tc.want)
			}
		})
	}
}
